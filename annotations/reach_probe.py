"""Confirm the V0 notes' reachability statuses by running vLLM 0.10.2's engine step on CPU.

The ``- reach:`` statuses of the V0 block-manager notes (``annotations/reach.py``) were derived by
reading the engine and the scheduler. This probe checks them by running: it builds the real V0
``Scheduler`` (which builds the real ``BlockSpaceManager``) from a ``SchedulerConfig`` and a
``CacheConfig`` as the engine does, adds requests through the real ``LLMEngine`` request path
(``_add_processed_request``, so ``n > 1`` goes through ``ParallelSampleSequenceGroup.add_request``)
and runs the real ``LLMEngine.step`` many times: schedule, "execute", apply the outputs with the
real output processor and stop checker, free finished groups, log stats); it also aborts two
requests and calls ``reset_prefix_cache``. Only the model is fake: the engine object is a shell
holding the attributes these methods read (no tokenizer, so no stop strings; no async output
processing, LoRA or pipeline parallelism), and the executor returns one random token per scheduled
sequence (sometimes EOS). A small KV cache forces preemption. :data:`CONFIGS` lists the
configurations: the V0 defaults, prefix caching, swap preemption, both, a sliding window and an
encoder-decoder model.

While it runs, ``sys.settrace`` records the executed lines of ``vllm/core/block_manager.py``,
``vllm/core/block/*.py`` and ``vllm/core/evictor.py``; the lines run while those modules are
imported (``import``, ``class`` and ``def`` statements) are recorded apart. The report
(``annotations/reach-probe-0.10.2.json``) gives, per configuration, the settings it stands for, what
the run did and the executed lines per file; :func:`compare` sets it against the notes.

Run it (the vLLM environment is ``scripts/ensure-env requirements/vllm-0.10.2.txt``)::

    CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $V/bin/python -m annotations.reach_probe

Importing this module needs no vLLM: :func:`compare` and :func:`load_report` are what the tests use.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
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
from upstream.releases import V0_RELEASE

VERSION = V0_RELEASE
REPORT = ANNOTATIONS_ROOT / f"reach-probe-{VERSION}.json"
#: Upstream files whose lines are recorded (a trailing ``/`` is a folder).
TRACED = ("vllm/core/block_manager.py", "vllm/core/evictor.py", "vllm/core/block/")

#: The files whose bytes decide what a per-release summary's run reaches (globs: 0.6.3.post1 names
#: its evictors evictor_v1.py and evictor_v2.py): the block manager, the scheduler, the engine, the
#: output processor and the sequence types. A summary records their sha256.
SUMMARY_FILES = ("vllm/core/block_manager.py", "vllm/core/evictor*.py", "vllm/core/block/*.py",
                 "vllm/core/scheduler.py", "vllm/engine/llm_engine.py",
                 "vllm/engine/output_processor/single_step.py", "vllm/sequence.py")
SUMMARY_COMMAND = 'CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $V/bin/python -m annotations.reach_probe --liveness'

#: The configurations the probe runs: the settings each one stands for, spelled as the notes'
#: ``setting`` statuses spell them, and the engine arguments that make them.
CONFIGS: dict[str, dict] = {
    "default": {
        "settings": ["`VLLM_USE_V1=0`"],
        "enable_prefix_caching": False,
        "preemption_mode": None,
    },
    "prefix_caching": {
        "settings": ["`VLLM_USE_V1=0`", "`enable_prefix_caching=True`"],
        "enable_prefix_caching": True,
        "preemption_mode": None,
    },
    "swap": {
        "settings": ["`VLLM_USE_V1=0`", '`preemption_mode="swap"`'],
        "enable_prefix_caching": False,
        "preemption_mode": "swap",
    },
    "prefix_caching_swap": {
        "settings": ["`VLLM_USE_V1=0`", "`enable_prefix_caching=True`", '`preemption_mode="swap"`'],
        "enable_prefix_caching": True,
        "preemption_mode": "swap",
    },
    # Kinds of model, as the notes name them: the engine takes the window from the model's config
    # (ModelConfig.get_sliding_window into CacheConfig.sliding_window) and builds encoder-decoder
    # inputs for encoder-decoder models.
    "sliding_window": {
        "settings": ["`VLLM_USE_V1=0`", "a sliding-window model"],
        "enable_prefix_caching": False,
        "preemption_mode": None,
        "sliding_window": 256,  # longer than every prompt (SCENARIOS has a shorter one)
    },
    "encoder_decoder": {
        "settings": ["`VLLM_USE_V1=0`", "an encoder-decoder model"],
        "enable_prefix_caching": False,
        "preemption_mode": None,
        "encoder_decoder": True,
    },
}
#: Runs kept for what they show, not compared with the notes: a window shorter than the prompts
#: (``block_manager.can_allocate.sliding_window_cap`` says admission then undercounts the blocks).
SCENARIOS: dict[str, dict] = {
    "sliding_window_shorter_than_prompts": dict(CONFIGS["sliding_window"], sliding_window=64),
}
#: The sizes and workload shared by every configuration (small, so that preemption happens).
WORKLOAD = {
    "block_size": 16,
    "num_gpu_blocks": 48,
    "num_cpu_blocks": 96,
    "max_model_len": 512,  # the worker refuses a KV cache smaller than one max-length sequence
    "max_num_seqs": 256,
    "requests": 60,
    "max_steps": 3000,
    "seed": 0,
    "eos_token_id": 2,
}
#: The step at which the probe calls ``LLMEngine.reset_prefix_cache`` while requests still run.
RESET_STEP = 60


# --------------------------------------------------------------------------- driving vLLM


def _accepted(fn, **kwargs) -> dict:
    """The keyword arguments ``fn`` takes (releases add and drop parameters)."""
    import inspect

    params = inspect.signature(fn).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _required(cls, **fallbacks) -> dict:
    """Values for the parameters of ``cls`` that have no default in this release (``task`` in
    0.6.4-0.6.5, ``max_num_batched_tokens`` before 0.6.6), from ``fallbacks``."""
    import inspect

    params = inspect.signature(cls).parameters
    return {k: v for k, v in fallbacks.items() if k in params and params[k].default is inspect.Parameter.empty}


def _engine(config: dict):
    """An ``LLMEngine`` shell around a real V0 ``Scheduler``: only the model executor is fake."""
    from vllm.config import CacheConfig, SchedulerConfig
    from vllm.engine.llm_engine import LLMEngine, SchedulerContext, SchedulerOutputState
    from vllm.engine.output_processor.interfaces import SequenceGroupOutputProcessor
    from vllm.engine.output_processor.stop_checker import StopChecker
    from vllm.utils import Counter

    w = WORKLOAD
    # What EngineArgs.create_engine_config leaves for the V0 engine with a model of
    # max_model_len <= 32K: no chunked prefill, max_num_seqs 256 (arg_utils._set_default_args_v0).
    # Releases before 0.6.6 take max_num_batched_tokens (None: the config's own default) and,
    # 0.6.4-0.6.5, the task as required arguments.
    scheduler_config = SchedulerConfig(
        **_required(SchedulerConfig, task="generate", max_num_batched_tokens=None),
        max_model_len=w["max_model_len"],
        max_num_seqs=w["max_num_seqs"],
        enable_chunked_prefill=False,
        preemption_mode=config["preemption_mode"],
    )
    cache_config = CacheConfig(
        block_size=w["block_size"],
        gpu_memory_utilization=0.9,
        swap_space=4,
        cache_dtype="auto",
        enable_prefix_caching=config["enable_prefix_caching"],
        sliding_window=config.get("sliding_window"),
    )
    # After profiling, LLMEngine._initialize_kv_caches writes the block counts into the config.
    cache_config.num_gpu_blocks = w["num_gpu_blocks"]
    cache_config.num_cpu_blocks = w["num_cpu_blocks"]

    # Before 0.7.3 the scheduler class is not configurable: vllm.core.scheduler.Scheduler.
    scheduler_cls = _resolve(getattr(scheduler_config, "scheduler_cls", "vllm.core.scheduler.Scheduler"))
    engine = LLMEngine.__new__(LLMEngine)
    engine.scheduler_config = scheduler_config
    engine.cache_config = cache_config
    engine.lora_config = None
    engine.model_config = _ModelConfigShell(w["max_model_len"])
    engine.vllm_config = _VllmConfigShell()
    engine.speculative_config = None
    engine.device_config = _DeviceConfigShell()
    engine.parallel_config = _ParallelConfigShell()
    engine.tokenizer = None
    engine.detokenizer = None
    engine.log_stats = True
    engine.stat_loggers = {}
    engine.tracer = None
    engine.use_cached_outputs = False
    engine.seq_counter = Counter()
    engine.generation_config_fields = {}
    engine.input_preprocessor = _PreprocessorShell(w["eos_token_id"], bool(config.get("encoder_decoder")))
    engine.model_executor = _FakeExecutor(random.Random(w["seed"]), w["eos_token_id"])
    engine.cached_scheduler_outputs = [SchedulerOutputState()]
    engine.scheduler_contexts = [SchedulerContext()]
    engine.async_callbacks = []
    engine.process_request_outputs_callback = None
    engine._skip_scheduling_next_step = False
    engine.seq_id_to_seq_group = {}
    # pipeline_parallel_size 1; no async output processing (a CPU run has none).
    engine.scheduler = [scheduler_cls(scheduler_config, cache_config, None, 1, None)]
    engine.output_processor = SequenceGroupOutputProcessor.create_output_processor(
        scheduler_config, None, engine.scheduler, engine.seq_counter, None,
        stop_checker=StopChecker(scheduler_config.max_model_len, None),
    )
    return engine


def _resolve(qualname):
    if not isinstance(qualname, str):
        return qualname
    import importlib

    module, _, name = qualname.rpartition(".")  # what vllm.utils.resolve_obj_by_qualname does
    return getattr(importlib.import_module(module), name)


class _ModelConfigShell:
    """What the request path and the stats read from ``ModelConfig``."""

    is_multimodal_model = False
    max_logprobs = 20
    # Read by older engines' output path: 0.6.3 (embedding_mode, is_embedding_model), 0.6.4-0.7 (task
    # / runner_type).
    embedding_mode = False
    is_embedding_model = False
    task = "generate"
    runner_type = "generate"

    def __init__(self, max_model_len: int) -> None:
        self.max_model_len = max_model_len


class _VllmConfigShell:
    speculative_config = None


class _ParallelConfigShell:
    pipeline_parallel_size = 1


class _DeviceConfigShell:
    device_type = "cuda"  # the stats path swaps GPU and CPU numbers only for "cpu"


class _PreprocessorShell:
    def __init__(self, eos_token_id: int, encoder_decoder: bool = False) -> None:
        self.eos_token_id = eos_token_id
        self.encoder_decoder = encoder_decoder

    def get_eos_token_id(self, lora_request=None) -> int:
        return self.eos_token_id

    def is_encoder_decoder_model(self) -> bool:  # asked by 0.6.3's input validation
        return self.encoder_decoder


class _FakeExecutor:
    """Stands in for the model: one token per scheduled sequence group, EOS now and then."""

    def __init__(self, rng: random.Random, eos_token_id: int) -> None:
        self.rng = rng
        self.eos_token_id = eos_token_id
        self.calls = 0
        self.swapped_in = 0
        self.swapped_out = 0
        self.copies = 0

    def execute_model(self, execute_model_req):
        from vllm.model_executor.layers.sampler import SamplerOutput
        from vllm.sequence import CompletionSequenceGroupOutput, Logprob, SequenceOutput

        self.calls += 1
        self.swapped_in += len(execute_model_req.blocks_to_swap_in)
        self.swapped_out += len(execute_model_req.blocks_to_swap_out)
        self.copies += len(execute_model_req.blocks_to_copy)
        outputs = []
        for meta in execute_model_req.seq_group_metadata_list:
            samples = []
            for seq_id in meta.seq_data:
                # As the sampler does: a prompt gives best_of (default n) samples of its one sequence
                # (the output processor forks the others off it), a decode step one per sequence. A
                # group of one request with n > 1 exists only before 0.6.4 (ParallelSampleSequenceGroup).
                params = meta.sampling_params
                count = max(params.n, getattr(params, "best_of", None) or 1) if meta.is_prompt else 1
                for _ in range(count):
                    token = self.eos_token_id if self.rng.random() < 0.01 else self.rng.randrange(3, 32000)
                    samples.append(SequenceOutput(seq_id, token, {token: Logprob(0.0)}))
            outputs.append(CompletionSequenceGroupOutput(samples, None))
        return [SamplerOutput(outputs=outputs)]

    def stop_remote_worker_execution_loop(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def _prompts(rng: random.Random, count: int) -> list[list[int]]:
    """Prompts with shared prefixes (a system prompt, repeats) so that prefix caching finds hits."""
    system = [rng.randrange(3, 32000) for _ in range(40)]
    prompts: list[list[int]] = []
    for index in range(count):
        if prompts and index % 7 == 3:
            prompts.append(list(rng.choice(prompts)))  # the same prompt again
            continue
        body = [rng.randrange(3, 32000) for _ in range(rng.randrange(1, 200))]
        prompts.append((system + body) if index % 2 else body)
    return prompts


def _encoder_decoder_inputs(engine, prompt: list[int]) -> dict:
    """The processed inputs of an encoder-decoder request: the prompt feeds the encoder, the decoder
    starts short. Before 0.6.4 they are one flat dict (``encoder_prompt_token_ids`` beside the
    decoder's ``prompt_token_ids``), from 0.6.4 ``{"encoder": ..., "decoder": ...}``."""
    import inspect

    from vllm.inputs import token_inputs

    if "encoder_prompt_token_ids" in inspect.getsource(type(engine)._add_processed_request):
        return dict(token_inputs(prompt[:1]), encoder_prompt_token_ids=list(prompt))
    return {"encoder": token_inputs(prompt), "decoder": token_inputs(prompt[:1])}


def drive(config: dict, trace: bool = True) -> dict:
    """Run one configuration (a :data:`CONFIGS` value); return what ran and what the run did.

    ``trace=False`` records no lines (``executed`` is empty): the per-release summary needs only
    ``run``. A configuration whose engine this release cannot build returns ``not_run`` (the
    innermost vLLM frame of the error) and no numbers.
    """
    from vllm.inputs import token_inputs
    from vllm.sampling_params import SamplingParams

    w = WORKLOAD
    tracer = LineTracer(installed_vllm_root(), TRACED)
    head = {"settings": config["settings"], "engine_args": _engine_args(config)}
    if trace:
        tracer.start()  # the scheduler and its block manager are built inside the trace
    try:
        engine = _engine(config)
    except Exception as err:  # noqa: BLE001 (a release that cannot build the configuration is a finding)
        return {**head, "not_run": "the engine could not be built: " + _where(err, 0).replace(" at step 0", ""),
                "executed": {}}
    finally:
        tracer.stop()
    rng = random.Random(w["seed"] + 1)
    requests = []
    for index, prompt in enumerate(_prompts(rng, w["requests"])):
        n = 3 if index % 5 == 4 else 1
        params = SamplingParams(n=n, max_tokens=rng.randrange(4, 160), seed=index)
        requests.append((f"req-{index}", prompt, params))
    to_abort = {"req-6", "req-17"}  # a client that goes away mid-generation

    stats = {"steps": 0, "preempted": 0, "finished_requests": 0, "aborted": [], "parallel_sample_requests": 0,
             "largest_group_added": 0, "largest_group_seen": 0, "forked_sequences": 0}
    scheduler = engine.scheduler[0]
    fork_seq = scheduler.fork_seq  # the output processor forks a sampled sequence through it

    def counted_fork(parent, child):
        stats["forked_sequences"] += 1
        return fork_seq(parent, child)

    scheduler.fork_seq = counted_fork
    extra = _accepted(engine._add_processed_request, lora_request=None, prompt_adapter_request=None)
    pending = list(requests)
    if trace:
        tracer.start()
    step = 0
    try:
        while step < w["max_steps"] and (pending or engine.has_unfinished_requests()):
            # Requests arrive over time, a few per step, as a server receives them.
            for _ in range(min(len(pending), rng.randrange(0, 4))):
                request_id, prompt, params = pending.pop(0)
                inputs = _encoder_decoder_inputs(engine, prompt) if config.get("encoder_decoder") \
                    else token_inputs(prompt)
                engine._add_processed_request(request_id, inputs, params, arrival_time=float(step), **extra)
                stats["parallel_sample_requests"] += params.n > 1
                stats["largest_group_added"] = max(
                    [stats["largest_group_added"]] + [len(g.seqs) for g in scheduler.waiting])
            if step == 40:
                for request_id in sorted(to_abort):
                    engine.abort_request(request_id)
                    stats["aborted"].append(request_id)
            if step == RESET_STEP:  # LLM.reset_prefix_cache while requests hold blocks (it refuses then)
                stats["reset_prefix_cache_mid_run"] = _reset_prefix_cache(engine)
            outputs = engine.step()
            stats["preempted"] += engine.scheduler_contexts[0].scheduler_outputs.preempted or 0
            stats["finished_requests"] += sum(1 for o in outputs if o.finished)
            stats["largest_group_seen"] = max(
                [stats["largest_group_seen"]] + [len(g.seqs) for q in (scheduler.running, scheduler.swapped)
                                                 for g in q])
            step += 1
        stats["reset_prefix_cache_at_end"] = _reset_prefix_cache(engine)
    except Exception as err:  # noqa: BLE001 (vLLM failing under a setting is a finding, not a probe error)
        stats["error"] = _where(err, step)
    finally:
        tracer.stop()
    stats["steps"] = step
    stats["unfinished_after"] = engine.get_num_unfinished_requests()
    ex = engine.model_executor
    stats.update(model_calls=ex.calls, blocks_swapped_in=ex.swapped_in, blocks_swapped_out=ex.swapped_out,
                 blocks_copied=ex.copies)
    return {**head, "run": stats, "executed": tracer.lines()}


def _reset_prefix_cache(engine) -> bool | str:
    """``LLMEngine.reset_prefix_cache()`` (from 0.7.0); a sentence where the release has none."""
    if not hasattr(engine, "reset_prefix_cache"):
        return "not in this release (LLMEngine has no reset_prefix_cache)"
    return engine.reset_prefix_cache()


def _where(err: BaseException, step: int) -> str:
    """``AssertionError at step 12 in vllm/core/...py L336 (fn)``: the innermost vLLM frame."""
    import traceback

    frames = [f for f in traceback.extract_tb(err.__traceback__) if f"{os.sep}vllm{os.sep}" in f.filename]
    last = frames[-1] if frames else None
    where = ""
    if last:
        rel = last.filename[last.filename.rindex(f"{os.sep}vllm{os.sep}") + 1:].replace(os.sep, "/")
        where = f" in {rel} L{last.lineno} ({last.name})"
    return f"{type(err).__name__}{': ' + str(err) if str(err) else ''} at step {step}{where}"


def _engine_args(config: dict) -> dict:
    w = WORKLOAD
    return {
        "VLLM_USE_V1": "0",
        "enable_prefix_caching": config["enable_prefix_caching"],
        "preemption_mode": config["preemption_mode"],
        "enable_chunked_prefill": False,
        "sliding_window": config.get("sliding_window"),
        "encoder_decoder": bool(config.get("encoder_decoder")),
        "block_size": w["block_size"],
        "num_gpu_blocks": w["num_gpu_blocks"],
        "num_cpu_blocks": w["num_cpu_blocks"],
        "max_model_len": w["max_model_len"],
        "max_num_seqs": w["max_num_seqs"],
        "watermark": 0.01,
    }



def run(out: Path = REPORT) -> dict:
    """Run every configuration and write the report."""
    os.environ["VLLM_USE_V1"] = "0"
    import vllm  # imports no vllm.core module

    root = installed_vllm_root()
    files = sorted(
        str(p.relative_to(root)).replace(os.sep, "/")
        for t in TRACED
        for p in ((root / t).glob("*.py") if t.endswith("/") else [root / t])
    )
    assert not any(m.startswith("vllm.core") for m in sys.modules), "vllm.core was imported before the trace"
    imported = lines_run_at_import(root, TRACED, files, "vllm.engine.llm_engine")
    report = {
        "vllm_version": vllm.__version__,
        "python": sys.version.split()[0],
        "command": 'CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $V/bin/python -m annotations.reach_probe',
        "driver": "real V0 Scheduler and BlockSpaceManager built from SchedulerConfig/CacheConfig; "
                  "requests added by LLMEngine._add_processed_request (n > 1 through "
                  "ParallelSampleSequenceGroup.add_request); LLMEngine.step, abort_request and "
                  "reset_prefix_cache called on an engine shell; only the model executor is fake",
        "workload": WORKLOAD,
        **file_facts(root, files),
        "imported": imported,
        "configs": {name: drive(config) for name, config in CONFIGS.items()},
        "scenarios": {name: {k: v for k, v in drive(config).items() if k != "executed"}
                      for name, config in SCENARIOS.items()},
    }
    write_report(report, out)
    return report


def summary() -> dict:
    """Every configuration's ``run`` (no line trace) in the installed release, and the sha256 of
    :data:`SUMMARY_FILES`: what ``--liveness`` files per release (``annotations.liveness``)."""
    os.environ["VLLM_USE_V1"] = "0"
    import vllm

    root = installed_vllm_root()
    files = sorted({str(p.relative_to(root)).replace(os.sep, "/") for pattern in SUMMARY_FILES
                    for p in root.glob(pattern)})
    sha = {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}
    configs = {}
    for name, config in CONFIGS.items():
        try:
            done = drive(config, trace=False)
        except Exception as err:  # noqa: BLE001 (e.g. an import the release lacks: recorded, not faked)
            done = {"settings": config["settings"], "engine_args": _engine_args(config),
                    "not_run": "the probe could not start: " + _where(err, 0).replace(" at step 0", "")}
        configs[name] = {k: v for k, v in done.items() if k != "executed"}
    return {"vllm_version": vllm.__version__, "python": sys.version.split()[0], "workload": WORKLOAD,
            "sha256": sha, "files_sha256": hashlib.sha256("".join(f"{h}  {f}\n" for f, h in sha.items())
                                                          .encode()).hexdigest(),
            "configs": configs}


def file_liveness(path: Path | None = None, environment: dict | None = None) -> dict:
    """Run :func:`summary` and file it under the installed release in the liveness report."""
    import datetime

    from annotations import liveness
    from conformance.matrix import project_state

    done = summary()
    entry = liveness.make_entry(done, release=done["vllm_version"], command=SUMMARY_COMMAND,
                                project=project_state(Path(__file__).resolve().parents[1]),
                                date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
                                environment=environment)
    liveness.file_entry(entry, path or liveness.REPORT)
    return entry


# --------------------------------------------------------------------------- comparing with the notes


def load_report(path: Path = REPORT) -> dict:
    return read_report(path)


def setting_atoms(setting: str) -> list[str]:
    """The conditions of a ``setting`` status, each without its parenthetical remark.

    Split on " and " outside parentheses: "`A` (or a configuration V1 rejects) and a sliding-window
    model" gives "`A`" and "a sliding-window model". A kind of model is a condition like any other:
    only a configuration that lists it has it.
    """
    parts, depth, current = [], 0, ""
    for token in re.split(r"(\(|\)|\s+and\s+)", setting):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0 and re.fullmatch(r"\s+and\s+", token or ""):
            parts.append(current)
            current = ""
        elif depth == 0 and token:
            current += token
    parts.append(current)
    return [" ".join(part.split()) for part in parts if part.strip()]


def home_configs(need: list[str], configs: dict[str, dict]) -> list[str]:
    """The configurations a note with these conditions should run in: those having every
    condition with the fewest settings (``[]``, a ``default`` note: the default configuration)."""
    fits = {name: len(c["settings"]) for name, c in configs.items() if set(need) <= set(c["settings"])}
    return [name for name, size in fits.items() if size == min(fits.values())]


@dataclass(frozen=True)
class Finding:
    kind: str  # "contradiction", "suspect" or "import-only"
    config: str
    file: str  # upstream path
    note: str
    status: str  # the note's reach, as written
    lines: tuple[int, ...]  # executed lines of the note (empty for "suspect")
    why: str

    def __str__(self) -> str:
        ran = f" ran L{', L'.join(map(str, self.lines))}" if self.lines else ""
        return f"[{self.kind}] {self.config}: {self.file} `{self.note}`{ran}: {self.why}"


def _status_text(reach) -> str:
    return " or ".join(route.status + (f" {route.setting}" if route.setting else "") for route in reach.routes)


#: Kinds of model that a ``models`` route may name and the probe runs, each as the condition its
#: configurations list. Every configuration runs the V0 engine, which those models also get by
#: default when their architecture is V0-only, so the kind is the route's only condition.
MODEL_KINDS = {"encoder-decoder": "an encoder-decoder model", "sliding-window": "a sliding-window model"}


def _route_conditions(route) -> list[str] | None:
    """The conditions a configuration must list for ``route`` to hold there, or ``None`` when the
    probe cannot tell (a ``default`` route, or a ``models`` route naming no kind it runs)."""
    if route.status == "setting":
        return setting_atoms(route.setting)
    if route.status == "models":
        return [atom for word, atom in MODEL_KINDS.items() if word in route.setting] or None
    return None


def _settings_needed(reach) -> list[list[str]]:
    """The conditions of each route, when the probe can tell them for every route; else ``[]``
    (some route the probe cannot run may hold anywhere, so no run contradicts the lines)."""
    needs = [_route_conditions(route) for route in reach.routes]
    return [need for need in needs if need is not None] if all(need is not None for need in needs) else []


def compare(report: dict, files: list[AnnotationFile] | None = None) -> list[Finding]:
    """Set the probe's executed lines against every traced file's notes.

    * **contradiction**: an ``unreached`` note with a line that ran in any configuration, or a
      ``setting`` note with a line that ran in a configuration lacking one of its settings. Lines
      run at import (``def``, class bodies) do not count, nor the test line of an ``if`` whose
      body did not run (the branch was declined, not entered).
    * **suspect**: a note none of whose lines ran in its home configuration (:func:`home_configs`),
      nor at import: the status may be wrong or the probe too weak;
    * **import-only**: a note with functions none of which ran in its home configuration, whose other
      statements (``class``, attributes) ran at import: fine for an interface, suspect otherwise.
    """
    if files is None:
        files = discover()
    traced = {af.upstream: af for af in files if af.version == VERSION and af.upstream in report["sha256"]}
    findings: list[Finding] = []
    for config_name, config in report["configs"].items():
        have = set(config["settings"])
        for upstream, af in sorted(traced.items()):
            entered = entered_lines(report, config_name, upstream)
            # At import a module runs its own statements; a ``def`` line there runs no function.
            defs = set(report["def_headers"].get(upstream, []))
            imported = set(report["imported"].get(upstream, [])) - defs
            for note in af.notes:
                reach = af.reach_of(note)
                if reach is None:
                    continue
                inside = range(note.start, note.end + 1)
                lines = tuple(sorted(n for n in entered if n in inside))
                needs = _settings_needed(reach)
                need = min(needs, key=len) if needs else []  # the route with the fewest settings
                status = _status_text(reach)
                if reach.status == "unreached" and lines:
                    findings.append(Finding("contradiction", config_name, upstream, note.id, status, lines,
                                            "marked unreached but ran"))
                elif needs and lines and not any(set(route) <= have for route in needs):
                    missing = " or ".join(" and ".join(a for a in route if a not in have) for route in needs)
                    findings.append(Finding("contradiction", config_name, upstream, note.id, status, lines,
                                            f"ran without {missing}"))
                elif (reach.status != "unreached" and config_name in home_configs(need, report["configs"])
                      and not any(n in inside for n in entered)):
                    if not any(n in inside for n in imported):
                        findings.append(Finding("suspect", config_name, upstream, note.id, status, (),
                                                "expected to run here; none of its lines ran"))
                    elif any(n in inside for n in defs):
                        findings.append(Finding("import-only", config_name, upstream, note.id, status, (),
                                                "its statements ran at import; none of its functions ran here"))
    return findings


def note_matrix(report: dict, files: list[AnnotationFile] | None = None) -> list[dict]:
    """Per note: its status and, per configuration, the lines that ran (as :func:`compare` counts them)."""
    if files is None:
        files = discover()
    rows = []
    for af in files:
        if af.version != VERSION or af.upstream not in report["sha256"]:
            continue
        imported = set(report["imported"].get(af.upstream, []))
        for note in af.notes:
            reach = af.reach_of(note)
            inside = range(note.start, note.end + 1)
            row = {"file": af.upstream, "note": note.id, "range": note.range_text,
                   "status": _status_text(reach) if reach else "", "at_import": any(n in imported for n in inside)}
            for name in report["configs"]:
                row[name] = sorted(n for n in entered_lines(report, name, af.upstream) if n in inside)
            rows.append(row)
    return rows


def stale_files(report: dict, files: list[AnnotationFile] | None = None) -> list[str]:
    """Traced files whose probed bytes are not the bytes this release's notes were written for."""
    return probe_report.stale_files(report, VERSION, files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m annotations.reach_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--compare-only", action="store_true", help="read the committed report; run nothing")
    parser.add_argument("--out", type=Path, default=REPORT, help="the report to write (or to read with --compare-only)")
    parser.add_argument("--notes", action="store_true", help="also print, per note, where its lines ran")
    parser.add_argument("--liveness", action="store_true",
                        help="in any V0 release: run every configuration without the line trace and file the "
                             "summary in the liveness report (annotations/liveness.py); compare nothing")
    parser.add_argument("--liveness-file", type=Path, default=None, help="the liveness report to file into")
    parser.add_argument("--environment", default=None, help="JSON: how the environment was built (filed as is)")
    args = parser.parse_args(argv)
    if args.liveness:
        entry = file_liveness(args.liveness_file, json.loads(args.environment) if args.environment else None)
        for name, config in entry["configs"].items():
            print(f"{entry['release']} {name}: {config.get('run') or 'not run: ' + config['not_run']}")
        return 0
    report = load_report(args.out) if args.compare_only else run(args.out)
    for name, config in {**report["configs"], **report.get("scenarios", {})}.items():
        print(f"{name}: settings {', '.join(config['settings'])}; run {config['run']}")
    if args.notes:
        for row in note_matrix(report):
            ran = [name for name in report["configs"] if row[name]]
            print(f"{row['file']} `{row['note']}` {row['range']} [{row['status']}]: ran in "
                  f"{', '.join(ran) or 'none'}{' (and at import)' if row['at_import'] else ''}")
    problems = stale_files(report)
    findings = compare(report)
    for line in problems + [str(f) for f in findings]:
        print(line)
    return 1 if problems or any(f.kind == "contradiction" for f in findings) else 0


if __name__ == "__main__":
    raise SystemExit(main())
