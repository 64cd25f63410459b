"""Check the V1 notes' reachability statuses by running vLLM 0.33.0's scheduler on CPU.

The ``- reach:`` statuses of the V1 block-manager notes were derived by reading vLLM's code. This
probe checks them by running it. For each kind of model it:

* plans the KV cache from one layer spec per layer as ``EngineCore._initialize_kv_caches`` does
  (``get_global_kv_cache_groups``, ``get_kv_cache_configs``, ``generate_scheduler_kv_cache_config``,
  ``update_kv_cache_capacity``, ``resolve_kv_cache_block_sizes``, ``resolve_cache_hit_alignment_tokens``),
  for each rank's worker, whose memory holds the workload's blocks;
* builds the scheduler class the engine would choose with default settings (``AsyncScheduler``:
  asynchronous scheduling is on by default for generative models), and with it the real
  ``KVCacheManager``, coordinators, single-type managers and block pool;
* drives it the way ``EngineCore.step_with_batch_queue`` does, with two batches in flight.

What it runs, the kinds of model, the settings added to them, the shared workload and the
stand-in checkpoints, is in :mod:`annotations.reach_probe_v1_workload`.

Only the model and the platform are stand-ins. The model is a two-layer Llama configuration (for the
encoder-decoder kind, a two-layer Whisper one, and for the multimodal kind a two-layer Qwen2-Audio one,
each with its feature-extractor settings and a byte-level tokenizer made on the spot, which its
multimodal processor needs), written to a temporary
folder so that ``ModelConfig`` builds offline; the kind of model is carried by the
layer specs, plus ``attention_chunk_size`` in the configuration for the chunked-local kind, which the
engine reads to decide about the hybrid KV-cache manager. The platform is asked whether it supports
the hybrid KV-cache manager, and the probe answers as CUDA does (yes): vLLM's CUDA build reports no
platform on a machine without a GPU.

While it runs, ``sys.settrace`` records the executed lines of the five V1 core files; the lines run
while those modules are imported are recorded apart. The report (``annotations/reach-probe-0.33.0.json``)
gives, per configuration, the kind of model, what the run did and the executed lines per file;
:func:`compare` sets it against the notes. Run it (the vLLM environment is
``scripts/ensure-env requirements/vllm-0.33.0.txt``)::

    CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $V/bin/python -m annotations.reach_probe_v1

Importing this module needs no vLLM: :func:`compare` and :func:`load_report` are what the tests use.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from annotations import probe_report
from annotations.line_trace import LineTracer
from annotations.model import ANNOTATIONS_ROOT, AnnotationFile, discover
from annotations.probe_report import (
    entered_lines,
    file_facts,
    installed_vllm_root,
    lines_run_at_import,
    read_report,
    write_report,
)
from annotations.reach_probe_v1_workload import (
    ABORT_STEPS,
    CONFIGS,
    LLAMA,
    RESET_STEP,
    WORKLOAD,
    clips_in_prompts,
    kind_of,
    prompts_of,
    request_audio,
    sizes_of,
    write_checkpoint,
)
from upstream.releases import V1_RELEASE

VERSION = V1_RELEASE
REPORT = ANNOTATIONS_ROOT / f"reach-probe-{VERSION}.json"
COMMAND = 'CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $V/bin/python -m annotations.reach_probe_v1'
#: The upstream files whose lines are recorded: the annotated V1 core files.
TRACED = (
    "vllm/v1/core/block_pool.py",
    "vllm/v1/core/kv_cache_coordinator.py",
    "vllm/v1/core/kv_cache_manager.py",
    "vllm/v1/core/kv_cache_utils.py",
    "vllm/v1/core/single_type_kv_cache_manager.py",
)

# --------------------------------------------------------------------------- driving vLLM


def _layer_spec(kind: str, cache, num_speculative_tokens: int):
    import torch
    from vllm.v1.kv_cache_interface import (
        ChunkedLocalAttentionSpec,
        CircularBufferSpec,
        CrossAttentionSpec,
        FullAttentionSpec,
        HiddenStateCacheSpec,
        MambaSpec,
        RSWASpec,
        SlidingWindowSpec,
    )

    w = WORKLOAD
    attention = {"block_size": w["block_size"], "num_kv_heads": 2, "head_size": 64, "dtype": torch.float16}
    if kind == "full":
        return FullAttentionSpec(**attention)
    if kind == "sliding_window":
        return SlidingWindowSpec(**attention, sliding_window=w["sliding_window"])
    if kind == "sliding_window_wide":  # twice the head size: twice the page of the layers above
        return SlidingWindowSpec(**{**attention, "head_size": 128}, sliding_window=w["sliding_window"])
    if kind == "draft_full":  # a drafter's layer, as GPUModelRunner.get_kv_cache_spec marks it
        return FullAttentionSpec(**attention, is_draft=True)
    if kind == "hidden_state":  # as ExtractHiddenStatesModel's cache layer builds it: one "head" per
        # auxiliary layer, the hidden size as head size; as in real models, a token's hidden states take
        # more bytes than its K and V in one attention layer (here 1024 against 512)
        return HiddenStateCacheSpec(block_size=cache.block_size, num_kv_heads=2, head_size=LLAMA["hidden_size"],
                                    dtype=torch.float16)
    if kind == "draft_sliding_window":
        return SlidingWindowSpec(**attention, sliding_window=w["sliding_window"], is_draft=True)
    if kind == "rswa":  # as RSWAAttention.get_kv_cache_spec builds it
        return RSWASpec(**attention, rswa_window=w["rswa_window"])
    if kind == "circular_buffer":  # as the DeepSeek-V4.1 compressor's get_kv_cache_spec builds it: one
        # float32 ring of keys per request, 8 rows without speculative tokens; a state of 256 makes its
        # page that of the attention layers
        return CircularBufferSpec(block_size=8, num_kv_heads=1, head_size=256, head_size_v=0, dtype=torch.float32)
    if kind == "cross_attention":  # as a cross-attention layer (Whisper's encoder_attn) declares it
        return CrossAttentionSpec(**attention)
    if kind == "chunked_local":
        return ChunkedLocalAttentionSpec(**attention, attention_chunk_size=w["attention_chunk_size"])
    if kind in ("mamba", "mamba1"):  # as MambaBase.get_kv_cache_spec builds it, the page of an attention
        # layer; Mamba-2 layers add the prefill checkpoints MambaMixer2.get_kv_cache_spec declares
        checkpoints = {"num_prefill_checkpoint_blocks": 1, "prefill_checkpoint_alignment": 1} if kind == "mamba" else {}
        return MambaSpec(block_size=cache.mamba_block_size, shapes=((2, 1024), (2, 1024)),
                         dtypes=(torch.float16, torch.float16), mamba_cache_mode=cache.mamba_cache_mode,
                         num_speculative_blocks=num_speculative_tokens, **checkpoints)
    raise ValueError(f"unknown layer kind {kind!r}")


def _build(config: dict, model_dir: Path):
    """The scheduler the engine core would build for this kind of model, and its request hasher."""
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        KVEventsConfig,
        KVTransferConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )
    from vllm.platforms import current_platform
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_request_block_hasher,
        init_none_hash,
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
        update_kv_cache_capacity,
    )
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs
    from vllm.v1.structured_output import StructuredOutputManager

    type(current_platform).support_hybrid_kv_cache = classmethod(lambda cls: True)  # as CUDA answers
    w = sizes_of(config)
    if "checkpoint" in config:
        write_checkpoint(model_dir, config["checkpoint"])
    else:
        (model_dir / "config.json").write_text(json.dumps({**LLAMA, **config.get("hf_config", {})}))
    # An audio model's multimodal processor needs a tokenizer; the Llama stand-in needs none.
    model = ModelConfig(model=str(model_dir), skip_tokenizer_init="checkpoint" not in config, dtype="float16",
                        max_model_len=w["max_model_len"])
    scheduler = SchedulerConfig(max_num_seqs=w["max_num_seqs"], max_num_batched_tokens=w["max_num_batched_tokens"],
                                max_model_len=w["max_model_len"], enable_chunked_prefill=True,
                                is_encoder_decoder=model.is_encoder_decoder,  # as the engine arguments pass it
                                disable_hybrid_kv_cache_manager=config.get("disable_hybrid_kv_cache_manager"))
    caching = config.get("prefix_caching", True)
    cache = CacheConfig(block_size=w["block_size"], enable_prefix_caching=caching,
                        prefix_match_unit=config.get("prefix_match_unit"),
                        prefix_cache_retention_interval=config.get("retention_interval", 0))
    if "mamba_cache_mode" in config:
        cache.mamba_cache_mode = config["mamba_cache_mode"]
    parallel = ParallelConfig(**config.get("parallel", {}))
    speculative = None
    if config.get("extract_hidden_states"):  # two auxiliary hidden states, those of both layers
        speculative = SpeculativeConfig(method="extract_hidden_states", num_speculative_tokens=1,
                                        draft_model_config={"hf_config": {"eagle_aux_hidden_state_layer_ids": [0, 1]}},
                                        target_model_config=model, target_parallel_config=ParallelConfig())
    if "eagle" in config:  # a one-layer EAGLE drafter proposing two tokens
        draft_dir = model_dir / "drafter"
        draft_dir.mkdir()
        (draft_dir / "config.json").write_text(json.dumps(
            {**LLAMA, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}))
        speculative = SpeculativeConfig(method="eagle", model=str(draft_dir), num_speculative_tokens=2,
                                        disable_lookahead_block_hashes=config["eagle"] == "drop",
                                        target_model_config=model, target_parallel_config=ParallelConfig())
    transfer = (KVTransferConfig(kv_connector=config["kv_connector"], kv_role="kv_both")
                if "kv_connector" in config else None)
    events = KVEventsConfig(enable_kv_cache_events=True, publisher="null") if config.get("kv_events") else None
    vllm_config = VllmConfig(model_config=model, scheduler_config=scheduler, cache_config=cache,
                             parallel_config=parallel, device_config=DeviceConfig(device="cpu"),
                             kv_events_config=events, speculative_config=speculative,
                             kv_transfer_config=transfer)
    if "mamba_cache_mode" in config:  # what the Mamba configuration hook then sets (models/config.py L762-L786)
        cache.mamba_block_size = w["block_size"] if caching else w["max_model_len"]
    register_all_kvcache_specs(vllm_config)
    specs = {f"model.layers.{i}.attn": _layer_spec(kind, cache, vllm_config.num_speculative_tokens) for i, kind in enumerate(config["layers"])}
    # EngineCore._initialize_kv_caches, for workers (one per rank) whose memory holds the workload's blocks
    workers = parallel.world_size
    resolve_kv_cache_layout(vllm_config, [["LBNHC"]] * workers, specs.values())
    global_groups = get_global_kv_cache_groups(vllm_config, [specs] * workers)
    memory = max(spec.page_size_bytes for spec in specs.values()) * len(specs) * w["num_blocks_per_layer"]
    kv_cache_config = generate_scheduler_kv_cache_config(
        get_kv_cache_configs(vllm_config, [specs] * workers, [memory] * workers, global_groups))
    cache.num_gpu_blocks = kv_cache_config.num_blocks
    groups = kv_cache_config.kv_cache_groups
    cache.block_size = min([g.kv_cache_spec.block_size for g in groups if g.kv_cache_spec.prefix_cacheable]
                           or [g.kv_cache_spec.block_size for g in groups])
    update_kv_cache_capacity(vllm_config, kv_cache_config)
    vllm_config.validate_block_size()
    block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, vllm_config)
    kv_cache_config.hash_block_size = hash_block_size
    kv_cache_config.cache_hit_alignment_tokens = resolve_cache_hit_alignment_tokens(
        kv_cache_config, vllm_config, block_size, hash_block_size)
    hash_fn = get_hash_fn_by_name(cache.prefix_caching_hash_algo)
    init_none_hash(hash_fn)
    scheduler_cls = vllm_config.scheduler_config.get_scheduler_cls()
    sched = scheduler_cls(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                          structured_output_manager=StructuredOutputManager(vllm_config), log_stats=True,
                          block_size=block_size, hash_block_size=hash_block_size)
    # The engine core hashes requests only under prefix caching or for a KV connector (core.py L219-L230).
    hasher = (get_request_block_hasher(hash_block_size, hash_fn, vllm_config.num_hash_lookahead_tokens)
              if caching or transfer is not None else None)
    plan = {"scheduler": scheduler_cls.__name__, "groups": [type(g.kv_cache_spec).__name__ for g in kv_cache_config.kv_cache_groups],
            "num_blocks": kv_cache_config.num_blocks, "block_size": block_size, "hash_block_size": hash_block_size,
            "group_block_sizes": [g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups],
            "mamba_cache_mode": cache.mamba_cache_mode if "mamba_cache_mode" in config else None,
            "eagle_groups": [i for i, g in enumerate(kv_cache_config.kv_cache_groups) if g.is_eagle_group],
            "eagle_block_drop": sched.use_eagle_block_drop,
            "hash_lookahead_tokens": vllm_config.num_hash_lookahead_tokens,
            "kv_connector": type(sched.connector).__name__ if sched.connector is not None else None,
            "prefix_cache_retention_interval": cache.prefix_cache_retention_interval,
            "hybrid_kv_cache_manager": not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager,
            "async_scheduling": bool(vllm_config.scheduler_config.async_scheduling),
            "encoder_decoder": bool(sched.is_encoder_decoder),
            "multimodal_inputs": bool(model.supports_multimodal_inputs),
            "chunked_prefill": bool(vllm_config.scheduler_config.enable_chunked_prefill),
            "batches_in_flight": vllm_config.max_concurrent_batches,
            "decode_context_parallel_size": parallel.decode_context_parallel_size}
    return sched, hasher, plan


def drive(config: dict, trace: bool = True) -> dict:
    """Run one configuration; return what it did and (with ``trace``) the executed lines."""
    from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange
    from vllm.sampling_params import SamplingParams
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus

    w = sizes_of(config)
    rng = random.Random(w["seed"])
    tracer = LineTracer(installed_vllm_root(), TRACED) if trace else None
    if tracer:
        tracer.start()  # the managers' and the pool's constructors are traced too
    try:
        with tempfile.TemporaryDirectory() as model_dir:
            sched, hasher, plan = _build(config, Path(model_dir))
    except BaseException:
        if tracer:
            tracer.stop()
        raise
    prompts = prompts_of(rng, w["requests"], w["first_wave"], audio=clips_in_prompts(config))
    counts: collections.Counter = collections.Counter()
    stopped = None
    in_flight: collections.deque = collections.deque()
    step = 0

    def add(i: int) -> None:
        params = SamplingParams(max_tokens=rng.randrange(1, w["max_tokens"]), prompt_logprobs=config.get("prompt_logprobs"))
        params.update_from_generation_config({}, w["eos_token_id"])
        tokens, clips = request_audio(config, i, prompts[i])
        # The engine names an item by the hash of its data; a clip's identifier stands for that hash.
        audio = [MultiModalFeatureSpec(data=None, modality="audio", identifier=identifier,
                                       mm_position=PlaceholderRange(offset=offset, length=length))
                 for identifier, offset, length in clips]
        if audio:
            counts["audio_items"] += len(audio)
        sched.add_request(Request(request_id=f"r{i}", prompt_token_ids=tokens, sampling_params=params,
                                  pooling_params=None, block_hasher=hasher, mm_features=audio or None))

    def finish_oldest() -> None:
        # The model runner answers for every request the batch scheduled, aborted ones included.
        output, sampling = in_flight.pop()
        ids = list(output.num_scheduled_tokens)
        # A request verifying draft tokens gets the bonus token plus the drafts accepted.
        drafts = output.scheduled_spec_decode_tokens
        sampled = [[rng.choice([w["eos_token_id"]] + [7] * 15)
                    for _ in range(1 + rng.randrange(len(drafts.get(r, ())) + 1))] if sampling[r] else []
                   for r in ids]
        outputs = sched.update_from_output(output, ModelRunnerOutput(
            req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=sampled,
            logprobs=None, prompt_logprobs_dict={}, pooler_output=[]))
        counts["outputs"] += 1
        for engine_outputs in outputs.values():
            stats = engine_outputs.scheduler_stats
            if stats is not None and stats.prefix_cache_stats is not None:
                counts["prefix_cache_queries"] += stats.prefix_cache_stats.queries
                counts["prefix_cache_hits"] += stats.prefix_cache_stats.hits

    def abort(step: int) -> None:
        # First the newest running request; then one that waits (preempted, or not yet admitted).
        waiting = [r for r in sched.requests.values()
                   if r.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)]
        victim = (sched.running[-1] if step == ABORT_STEPS[0] and sched.running
                  else waiting[-1] if waiting else sched.running[-1] if sched.running else None)
        if victim is not None:
            counts[f"aborted_{victim.status.name.lower()}"] += 1
            sched.finish_requests([victim.request_id], RequestStatus.FINISHED_ABORTED)

    def reset() -> None:
        # As EngineCore.reset_prefix_cache does between steps, for LLM.reset_prefix_cache().
        counts["prefix_cache_resets" if sched.reset_prefix_cache() else "prefix_cache_resets_refused"] += 1

    try:
        added = 0
        for wave_end in (w["first_wave"], len(prompts)):
            if config.get("reset_prefix_cache") and added:
                reset()
            while step < w["max_steps"] and (added < wave_end or sched.has_requests() or in_flight):
                step += 1
                for _ in range(rng.randrange(0, 3)):
                    if added < wave_end:
                        add(added)
                        added += 1
                if step in ABORT_STEPS:
                    abort(step)
                if step == RESET_STEP and config.get("reset_prefix_cache"):
                    reset()
                # EngineCore.step_with_batch_queue: schedule while the queue has room, and wait for
                # the oldest batch only when it is full or nothing else can be scheduled.
                if sched.has_requests() and len(in_flight) < w["batches_in_flight"]:
                    output = sched.schedule()
                    executed = output.total_num_scheduled_tokens > 0
                    counts["batches" if executed else "empty_batches"] += 1
                    counts["preempted"] += len(output.preempted_req_ids or ())
                    sampling = {r: not sched.requests[r].is_prefill_chunk for r in output.num_scheduled_tokens}
                    in_flight.appendleft((output, sampling))
                    if len(in_flight) < w["batches_in_flight"] and (executed or sched.has_requests()):
                        continue
                if in_flight:
                    finish_oldest()
    except Exception as error:  # a configuration the engine starts but cannot serve stops it here
        if type(error).__name__ != config.get("stops"):
            raise
        stopped = f"{type(error).__name__}: {error}"
    finally:
        if tracer:
            tracer.stop()
    done = {"model": config["model"], "settings": config.get("settings", []), "kind": kind_of(config),
            **({"sizes": config["sizes"]} if "sizes" in config else {}), "plan": plan,
            "run": {"steps": step, "requests": added, "unfinished": sched.get_num_unfinished_requests(),
                    **dict(counts), **({"stopped": stopped} if stopped else {})}}
    if tracer:
        done["executed"] = tracer.lines()
    return done


def run(out: Path = REPORT) -> dict:
    """Run every configuration and write the report."""
    import vllm

    root = installed_vllm_root()
    files = list(TRACED)
    assert not any(m.startswith("vllm.v1.core") for m in sys.modules), "vllm.v1.core was imported before the trace"
    imported = lines_run_at_import(root, TRACED, files, "vllm.v1.core.sched.async_scheduler")
    report = {
        "vllm_version": vllm.__version__,
        "python": sys.version.split()[0],
        "command": COMMAND,
        "driver": "real V1 AsyncScheduler, KVCacheManager, coordinators, single-type managers and block pool, "
                  "planned from per-layer KV-cache specs by the engine core's planner; two batches in "
                  "flight as EngineCore.step_with_batch_queue keeps them; only the model outputs are fake, "
                  "and the platform answers the hybrid KV-cache manager question as CUDA does",
        "workload": WORKLOAD,
        **file_facts(root, files),
        "imported": imported,
        "configs": {name: drive(config) for name, config in CONFIGS.items()},
    }
    write_report(report, out)
    return report


# --------------------------------------------------------------------------- comparing with the notes

#: Findings the notes themselves explain, by (upstream file, note id): the kind, the exact lines
#: that ran (empty for "import-only") and why it is right. Anything else found fails.
EXPLAINED: dict[tuple[str, str], tuple[str, tuple[int, ...], str]] = {
    ("vllm/v1/core/block_pool.py", "block_pool.emit_block_removed_events"): (
        "contradiction", (655, 656),
        "with events off the function returns at its first test on every eviction of a cached block;"
        " the note says so and gives the status of the loop, which builds the events"),
    ("vllm/v1/core/single_type_kv_cache_manager.py", "single_type_kv_cache_manager.base.class"): (
        "import-only", (),
        "the class body runs at import; its property has_positionally_stable_blocks is read only by the"
        " simple CPU-offload connector, as the note says"),
}


def unexplained(findings: list[Finding]) -> list[Finding]:
    """The contradictions and the import-only or suspect ``default`` notes :data:`EXPLAINED` does not cover."""
    return [f for f in findings
            if (f.kind in ("contradiction", "setting-only", "suspect")
                or (f.kind == "import-only" and "default" in f.statuses))
            and EXPLAINED.get((f.file, f.note), (None, None, None))[:2] != (f.kind, f.lines)]


def load_report(path: Path = REPORT) -> dict:
    return read_report(path)


@dataclass(frozen=True)
class Finding:
    kind: str  # "contradiction", "setting-only", "suspect", "import-only" or "unseen"
    file: str  # upstream path
    note: str
    status: str  # the note's reach, as written
    lines: tuple[int, ...]  # executed lines of the note, and where (empty unless a contradiction)
    configs: tuple[str, ...]
    why: str
    statuses: tuple[str, ...] = ()  # the statuses of the note's routes (default, models, setting, unreached)

    def __str__(self) -> str:
        ran = f" ran L{', L'.join(map(str, self.lines))} in {', '.join(self.configs)}" if self.lines else ""
        return f"[{self.kind}] {self.file} `{self.note}`{ran}: {self.why}"


def _statuses(reach) -> set[str]:
    return {route.status for route in reach.routes}


def compare(report: dict, files: list[AnnotationFile] | None = None) -> list[Finding]:
    """Set the probe's executed lines against every traced V1 note.

    A configuration runs default settings, plus the settings it lists (``settings``, spelled as the
    notes' setting routes spell them). So:

    * **contradiction**: a note whose routes are all ``setting`` or ``unreached`` (none ``default``
      nor ``models``) with a line that ran in a configuration none of whose settings its setting
      routes name. Lines run at import do not count (they are recorded apart), nor the header of an
      ``if``, ``while`` or ``for`` whose body did not run.
    * **setting-only**: a note with no ``default`` route whose lines ran in a configuration that adds
      settings, but not in the configuration of the same kind of model with default settings, and none
      of whose setting routes names those settings: its ``models`` routes claim lines that only the
      setting reaches.
    * **suspect**: a note with a ``default`` route none of whose lines ran in any configuration:
      the status may be wrong, or the probe too weak. A note of statements that run at import only
      (imports, class bodies, constants: no function of it) is not one.
    * **import-only**: a note whose statements ran at import but none of whose functions ran: fine
      for an interface, suspect otherwise.
    * **unseen**: a note with a ``models`` route and no ``default`` one, or with a setting route
      naming a setting some configuration makes, none of whose lines ran there: either the probe
      runs none of the models the route names, or the route is wrong. Listed for reading.

    A note with no working line (:func:`annotations.line_trace.working_lines`) is not compared.
    """
    if files is None:
        files = discover()
    traced = {af.upstream: af for af in files if af.version == VERSION and af.upstream in report["sha256"]}
    settings_of = {name: config.get("settings", []) for name, config in report["configs"].items()}
    findings: list[Finding] = []
    for upstream, af in sorted(traced.items()):
        ran_in = {name: entered_lines(report, name, upstream) for name in report["configs"]}
        # At import a module runs its own statements; a ``def`` line there runs no function.
        defs = set(report["def_headers"].get(upstream, []))
        imported = set(report["imported"].get(upstream, [])) - defs
        working = set(report["working"].get(upstream, [])) - defs
        for note in af.notes:
            reach = af.reach_of(note)
            if reach is None:
                continue
            inside = range(note.start, note.end + 1)
            if not any(n in inside for n in working):
                continue  # a signature, a docstring, an abstract body: nothing a run could show
            where = {name: sorted(n for n in lines if n in inside) for name, lines in ran_in.items()}
            statuses = _statuses(reach)
            kinds = tuple(sorted(statuses))
            status = " or ".join(route.status + (f" {route.setting}" if route.setting else "") for route in reach.routes)
            named = [route.setting for route in reach.routes if route.status == "setting"]

            holds = {name: bool(statuses & {"default", "models"})
                     or any(marker in text for marker in settings_of[name] for text in named) for name in where}
            against = tuple(name for name, lines in where.items() if lines and not holds[name])
            if against:
                lines = tuple(sorted({n for name in against for n in where[name]}))
                findings.append(Finding("contradiction", upstream, note.id, status, lines, against,
                                        "no route holds with the configuration's settings, but its lines ran", kinds))
                continue
            kind_of_run = {name: report["configs"][name].get("kind") for name in where}
            enabled = tuple(name for name, lines in where.items()
                            if lines and kind_of_run[name] and not where[kind_of_run[name]] and "default" not in statuses
                            and not any(marker in text for marker in settings_of[name] for text in named))
            if enabled:
                findings.append(Finding("setting-only", upstream, note.id, status,
                                        tuple(sorted({n for name in enabled for n in where[name]})), enabled,
                                        "its lines ran only with a setting none of its setting routes names", kinds))
                continue
            # A note of statements that run at import only (a class body, say) shows nothing in a run.
            only_imported = all(n in imported for n in working if n in inside)
            homes = [name for name in where if settings_of[name] and not statuses & {"default"} and not only_imported
                     and any(marker in text for marker in settings_of[name] for text in named)]
            if homes and not any(where[name] for name in homes):
                findings.append(Finding("unseen", upstream, note.id, status, (), tuple(homes),
                                        "a setting route names a setting the probe makes, but none of its lines ran"
                                        " there", kinds))
            if any(where.values()):
                continue
            if any(n in inside for n in imported):
                if any(n in inside for n in defs) and statuses & {"default", "models"}:
                    findings.append(Finding("import-only", upstream, note.id, status, (), (),
                                            "its statements ran at import; none of its functions ran", kinds))
                continue  # statements that run at import only (imports, class bodies, constants)
            if "default" in statuses:
                findings.append(Finding("suspect", upstream, note.id, status, (), (),
                                        "marked default, but none of its lines ran in any configuration", kinds))
            elif "models" in statuses and not homes:
                findings.append(Finding("unseen", upstream, note.id, status, (), (),
                                        "none of its lines ran in the kinds of model the probe runs", kinds))
    return findings


def note_matrix(report: dict, files: list[AnnotationFile] | None = None) -> list[dict]:
    """Per traced note: its status and the configurations (kinds of model) in which its lines ran."""
    if files is None:
        files = discover()
    rows = []
    for af in files:
        if af.version != VERSION or af.upstream not in report["sha256"]:
            continue
        ran_in = {name: entered_lines(report, name, af.upstream) for name in report["configs"]}
        for note in af.notes:
            reach = af.reach_of(note)
            inside = range(note.start, note.end + 1)
            rows.append({"file": af.upstream, "note": note.id,
                         "status": " or ".join(r.status for r in reach.routes) if reach else "",
                         "configs": [name for name, lines in ran_in.items() if any(n in inside for n in lines)]})
    return rows


def stale_files(report: dict, files: list[AnnotationFile] | None = None) -> list[str]:
    """Traced files whose probed bytes are not the bytes this release's notes were written for."""
    return probe_report.stale_files(report, VERSION, files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m annotations.reach_probe_v1", description=__doc__.split("\n")[0])
    parser.add_argument("--compare-only", action="store_true", help="read the committed report; run nothing")
    parser.add_argument("--out", type=Path, default=REPORT, help="the report to write (or to read with --compare-only)")
    parser.add_argument("--all", action="store_true", help="also print the unseen notes")
    parser.add_argument("--notes", action="store_true", help="also print, per note, the kinds of model that ran it")
    args = parser.parse_args(argv)
    if not args.compare_only:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = load_report(args.out) if args.compare_only else run(args.out)
    for name, config in report["configs"].items():
        print(f"{name}: {config['model']}; plan {config['plan']}; run {config['run']}")
    problems = stale_files(report)
    findings = compare(report)
    failing = unexplained(findings)
    for finding in findings:
        if finding in failing:
            print(finding)
        elif args.all or finding.kind != "unseen":
            print(f"{finding} (explained)" if (finding.file, finding.note) in EXPLAINED else finding)
    if args.notes:
        for row in note_matrix(report):
            print(f"{row['file']} `{row['note']}` [{row['status']}]: ran in {', '.join(row['configs']) or 'none'}")
    for line in problems:
        print(line)
    return 1 if problems or failing else 0


if __name__ == "__main__":
    raise SystemExit(main())
