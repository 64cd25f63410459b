"""The one place that knows which vLLM is installed and how each release differs.

Two kinds of knowledge live here, both keyed by release ranges in one table (:data:`RELEASES`):

* **behaviour**: the name of the reference policy (:class:`reference.blocks.policies.V1Policy`)
  that reproduces a release's V1 page management, and whether the release still ships the V0
  block manager;
* **API**: how the adapters must call a release (:class:`V1Api`, :class:`V0Api`,
  :class:`KernelApi`): constructor arguments, how a request is built, which methods exist and
  what they return. The adapters read these named fields; nothing outside this module compares
  version strings.

A row covers a closed range of releases ``first`` .. ``last`` and lists in ``measured`` the
releases whose environment actually ran ``python -m conformance run`` against it (see
``scripts/version-matrix`` and ``conformance/reports/matrix.json``). A release outside every row
has no known API and no policy: the adapters answer "not applicable" for it, with the reason.

Reading the version never imports vLLM.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from conformance.lockstep import NotApplicable


def installed_vllm_version() -> str | None:
    """The installed vLLM's release, e.g. ``"0.10.2"`` for a ``0.10.2+cu128`` build; None if absent.

    Read from package metadata (vLLM is not imported). The local suffix after ``+`` names a build
    (CUDA/CPU flavour), not a release, so it is dropped.
    """
    try:
        raw = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
    return raw.split("+", 1)[0]


_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?$")


def version_key(version: str) -> tuple[int, int, int, int]:
    """A sortable key for a final release such as ``"0.6.3.post1"``; ValueError for anything else."""
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"not a final vLLM release: {version!r} (expected e.g. 0.10.2 or 0.6.3.post1)")
    major, minor, patch, post = match.groups()
    return int(major), int(minor), int(patch), int(post or 0)


@dataclass(frozen=True)
class V1Api:
    """How the V1 adapter builds and calls a release's ``KVCacheManager``."""

    # Module holding ``sha256`` / ``sha256_cbor``: "vllm.utils.hashing" or "vllm.utils".
    hashing_module: str
    # ``FullAttentionSpec`` / ``SlidingWindowSpec`` take a ``use_mla`` argument.
    spec_use_mla: bool
    # ``KVCacheManager(...)`` takes ``hash_block_size`` (a required argument where present).
    manager_hash_block_size_arg: bool
    # ``KVCacheManager(...)`` takes ``scheduler_block_size`` (required where present).
    manager_scheduler_block_size_arg: bool
    # ``KVCacheManager(...)`` takes ``watermark``.
    manager_watermark_arg: bool
    # ``Request(...)`` takes ``eos_token_id``; False: the EOS id is set through
    # ``SamplingParams.update_from_generation_config({}, eos_token_id=...)``.
    request_eos_argument: bool
    # ``allocate_slots`` takes ``has_scheduled_reqs``.
    allocate_has_scheduled_reqs: bool
    # ``KVCacheManager.evict_blocks(ids)`` exists.
    evict_blocks_method: bool
    # ``BlockPool.cached_block_hash_to_block`` wraps its dict (``._cache``); False: a plain dict.
    cached_map_wrapped: bool
    # The manager hashes blocks itself (before 0.10.1): ``KVCacheManager(caching_hash_algo=...)``
    # with "builtin" or "sha256", the hashes in ``manager.req_to_block_hashes``, and the
    # scheduler's ``free_block_hashes(request)`` after freeing a finished request; requests
    # carry no ``block_hasher``.
    manager_hashes_blocks: bool = False
    # ``kv_cache_utils.init_none_hash(hash_fn)`` exists (from 0.10.0); False: NONE_HASH is set
    # once when kv_cache_utils is imported (v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60).
    none_hash_init_function: bool = True
    # ``Request(...)`` requires ``multi_modal_inputs``, ``multi_modal_hashes`` and
    # ``multi_modal_placeholders`` (v0.9.2 vllm/v1/request.py:23-39).
    request_multimodal_args: bool = False
    # The manager has a KV-cache coordinator (from 0.9.1). False (0.8.x): one group, no
    # coordinator, block lists in and out of get_computed_blocks / allocate_slots; the adapter
    # wraps it (conformance/adapters/vllm_v1_single_group.py).
    manager_has_coordinator: bool = True
    # ``KVCacheConfig(num_blocks, tensors={...}, kv_cache_groups)`` (0.8.x) instead of
    # ``kv_cache_tensors=[...]`` (v0.8.5.post1 vllm/v1/kv_cache_interface.py:142-166).
    kv_config_tensors_dict: bool = False
    # ``Request(...)`` takes ``pooling_params`` and ``cache_salt`` and gives ``arrival_time`` a
    # default; False (0.8.x): neither argument, ``arrival_time`` required
    # (v0.8.5.post1 vllm/v1/request.py:20-32).
    request_pooling_and_salt_args: bool = True


@dataclass(frozen=True)
class V0Api:
    """How the V0 adapter builds a release's ``SelfAttnBlockSpaceManager`` inputs."""

    # ``Sequence(seq_id, inputs=token_inputs(tokens), block_size=...)``: inputs built by
    # ``vllm.inputs.token_inputs``.
    sequence_token_inputs: bool
    # ``SelfAttnBlockSpaceManager.reset_prefix_cache()`` exists (from 0.7.0; 0.6.6.post1's
    # vllm/core/block_manager.py has no such method).
    reset_prefix_cache: bool = True
    # ``SequenceGroup.get_seqs(status)`` filters each sequence by its own status. False (0.6.5 and
    # 0.6.6.post1, v0.6.6.post1 vllm/sequence.py:804-811): it returns every sequence or none,
    # by the *first* sequence's status, so the block manager's own get_seqs calls see a finished
    # member of a group as still running. Those releases split ``n > 1`` into single-sequence
    # groups, so the machine then finishes a group's sequences together, never one alone.
    group_status_per_sequence: bool = True


@dataclass(frozen=True)
class KernelApi:
    """Where a release keeps its Triton attention kernels and how they are called."""

    # Package of ``triton_unified_attention`` / ``chunked_prefill_paged_decode`` /
    # ``triton_reshape_and_cache_flash`` (modules absent from a release are simply not there).
    ops_package: str
    # ``kernel_paged_attention_2d`` masks its K/V loads past the context in a sequence's last
    # block. False: it reads the unwritten tail (scores are masked, but NaN there reaches the
    # output as 0 * NaN), so the harness fills unowned slots with a finite value.
    paged_2d_masks_tail: bool
    # The same for the unified attention kernels (``tile_mask`` on the K/V loads).
    unified_masks_tail: bool
    # ``chunked_prefill_paged_decode``'s module binds ``use_rocm_custom_paged_attention`` when it
    # is imported (``from vllm.platforms.rocm import ...`` at the top, before 0.10); False: the
    # function imports it at call time.
    paged_2d_rocm_check_bound_at_import: bool
    # ``unified_attention`` takes the split-K arguments (``seq_threshold_3D``,
    # ``num_par_softmax_segments`` and the three ``softmax_segm_*`` buffers).
    unified_split_k_args: bool
    # The smallest KV block size the release's kernels can be built with. 16 where the release's
    # pinned Triton (3.2, with torch 2.6: vLLM 0.8.x) asserts that both operands of ``tl.dot``
    # have every dimension >= 16, and kernel_paged_attention_2d's ``tl.dot(Q, K)`` has the block
    # size as its N (chunked_prefill_paged_decode.py:159 at v0.8.5.post1): block size 8 cannot
    # compile there, on a GPU or under the interpreter.
    min_block_size: int = 1
    # ``triton_reshape_and_cache_flash`` also writes the classic head-major 5-D cache (its
    # ``USE_HEAD_MAJOR_LAYOUT`` path, from 0.14.0). False (0.11 .. 0.13): it writes only the flash
    # layout; handed a 5-D cache it takes ``key_cache.shape[1]`` as the block size and writes out of
    # bounds (the interpreter segfaulted at 0.13.0), so classic-layout cases do not exist there.
    cache_write_head_major: bool = True


@dataclass(frozen=True)
class Release:
    """One row of the table: a closed range of releases that behave and are called alike."""

    first: str
    last: str
    # Name of the V1Policy reproducing these releases (None: no policy known yet).
    v1_policy: str | None
    v1_api: V1Api | None
    # None: the release has no V0 block manager (vllm/core/block_manager.py).
    v0_api: V0Api | None
    kernels: KernelApi | None
    # Name of the V0Policy reproducing these releases' V0 block manager (set where v0_api is).
    v0_policy: str | None = None
    # Why these releases have no V1 page manager for the machines (set where v1_api is None and
    # there is no harness gap): "not applicable" then says so instead of "no policy".
    no_v1_because: str | None = None
    # Releases in the range whose environment ran the conformance command.
    measured: tuple[str, ...] = ()
    # Why the V1 machines cannot drive these releases' V1 manager although they have one (a
    # harness gap, reported as a harness error, never as "not applicable"); None: they can.
    v1_harness_gap: str | None = None

    def __post_init__(self) -> None:
        if (self.v0_api is None) != (self.v0_policy is None):
            raise ValueError(f"row {self.first}..{self.last}: v0_api and v0_policy go together")

    def covers(self, version: str) -> bool:
        return version_key(self.first) <= version_key(version) <= version_key(self.last)


def _v1_api(**changes) -> V1Api:
    """The v0.10.2 API with ``changes``: each later row names only what differs."""
    base = dict(hashing_module="vllm.utils", spec_use_mla=True, manager_hash_block_size_arg=False,
                manager_scheduler_block_size_arg=False, manager_watermark_arg=False,
                request_eos_argument=True, allocate_has_scheduled_reqs=False,
                evict_blocks_method=False, cached_map_wrapped=False)
    return V1Api(**{**base, **changes})


# API facts read from each release's sdist (vllm/v1/core/kv_cache_manager.py __init__ and
# allocate_slots, vllm/v1/request.py Request.__init__, vllm/v1/kv_cache_interface.py,
# vllm/utils/hashing.py, vllm/v1/core/block_pool.py BlockHashToBlockMap).
V1_API_0_10 = _v1_api()
V1_API_0_9 = replace(V1_API_0_10, manager_hashes_blocks=True, none_hash_init_function=False,
                     request_multimodal_args=True)
V1_API_0_8 = replace(V1_API_0_9, manager_has_coordinator=False, kv_config_tensors_dict=True,
                     request_pooling_and_salt_args=False)
V1_API_0_11 = _v1_api(hashing_module="vllm.utils.hashing", spec_use_mla=False, cached_map_wrapped=True)
V1_API_0_12 = replace(V1_API_0_11, manager_hash_block_size_arg=True)
V1_API_0_13 = replace(V1_API_0_12, evict_blocks_method=True)
V1_API_0_17 = replace(V1_API_0_13, request_eos_argument=False)
V1_API_0_23 = replace(V1_API_0_17, manager_scheduler_block_size_arg=True)
V1_API_0_24 = replace(V1_API_0_23, manager_watermark_arg=True, allocate_has_scheduled_reqs=True)

# Kernel facts read from each release's sdist (where the three modules are; ``tile_mask`` /
# ``kv_load_mask`` on the K/V loads; ``seq_threshold_3D`` in unified_attention's signature).
KERNELS_0_10 = KernelApi(ops_package="vllm.attention.ops", paged_2d_masks_tail=False,
                         unified_masks_tail=False, unified_split_k_args=False,
                         paged_2d_rocm_check_bound_at_import=False)
# 0.8.5.post1, 0.9.2: chunked_prefill_paged_decode.py:14 imports the ROCm check at module load.
KERNELS_0_9 = replace(KERNELS_0_10, paged_2d_rocm_check_bound_at_import=True)
# 0.8.5.post1: as 0.9.2, built with Triton 3.2 (tl.dot dimensions >= 16).
KERNELS_0_8 = replace(KERNELS_0_9, min_block_size=16)
KERNELS_0_11 = replace(KERNELS_0_10, unified_masks_tail=True, cache_write_head_major=False)
KERNELS_0_13 = replace(KERNELS_0_11, unified_split_k_args=True)
KERNELS_0_14 = replace(KERNELS_0_13, ops_package="vllm.v1.attention.ops", cache_write_head_major=True)
KERNELS_0_25 = replace(KERNELS_0_14, paged_2d_masks_tail=True)

V0_API = V0Api(sequence_token_inputs=True)
V0_API_0_6 = V0Api(sequence_token_inputs=True, reset_prefix_cache=False, group_status_per_sequence=False)

# One row per span of releases whose sources were read (the last patch of each minor series,
# and the first patch where a field changed) and found alike. ``v1_policy`` is the nearest
# policy with the fields the sources show changed; ``measured`` lists the releases whose
# environment ran the conformance command against it (conformance/reports/matrix.json).
# 0.23.0 prepends freed hashless blocks only on the sliding-window manager's paths
# (V1Policy.sliding_window_frees_hashless_to_front).
# Earlier patches of a series share its row where their V1 core, request, KV-cache interface,
# Triton kernels and V0 block manager are byte-identical to the series' latest, or differ only
# where the harness never goes (0.6.5: a docstring; 0.7.2: Sequence.__repr__/items; 0.14.0: the
# encoder cache; 0.17.0: no take_new_block_ids; 0.19.0: an EAGLE-only path), found by diffing
# every patch's sdist or wheel against its series' latest. Two more differ where the harness
# goes and were measured to agree. 0.15.0: the hybrid coordinator's hit search iterates to a
# fixed point where 0.15.1 makes one pass. 0.20.1 (and 0.20.0, whose V1 core differs from
# 0.20.1's only in start-up pool sizing, and its Request in a structured-output argument): a
# sliding-window group's per-request block cap is applied inside allocate_slots, where 0.20.2
# applies it only in can_fit_full_sequence; the cap, cdiv(min(window - 1 +
# max_num_batched_tokens, max_model_len), block_size) + 1, never binds for a manager built with
# the default max_num_batched_tokens = max_model_len, as the adapter builds it
# (v0.20.1 vllm/v1/kv_cache_interface.py:421-441, vllm/v1/core/kv_cache_manager.py:125-126).
# Every other earlier patch is outside the table: its sources differ in a way the harness would
# see.

_BEFORE_BLOCK_POOL = ("its V1 engine (an opt-in alpha before 0.8) has no BlockPool: vllm/v1/core/block_pool.py "
                      "arrives in 0.8.0, where the V1 page manager the machines model begins")

RELEASES: tuple[Release, ...] = (
    # The V0 block manager releases. Before 0.8 there is no V1 BlockPool; 0.8.x's V1 manager has
    # no coordinator (V1_API_0_8, policy v0.8.5); 0.9.2 hashes in the manager (V1_API_0_9, v0.9.2).
    Release("0.6.5", "0.6.6.post1", v1_policy=None, v1_api=None, v0_api=V0_API_0_6, kernels=None,
            v0_policy="v0.6.6.post1", no_v1_because=_BEFORE_BLOCK_POOL),
    Release("0.7.2", "0.7.3", v1_policy=None, v1_api=None, v0_api=V0_API, v0_policy="v0.10.2", kernels=None,
            no_v1_because=_BEFORE_BLOCK_POOL),
    Release("0.8.5", "0.8.5.post1", v1_policy="v0.8.5", v1_api=V1_API_0_8, v0_api=V0_API,
            v0_policy="v0.10.2", kernels=KERNELS_0_8, measured=("0.8.5.post1",)),
    Release("0.9.2", "0.9.2", v1_policy="v0.9.2", v1_api=V1_API_0_9, v0_api=V0_API, v0_policy="v0.10.2",
            kernels=KERNELS_0_9, measured=("0.9.2",)),
    Release("0.10.2", "0.10.2", v1_policy="v0.10.2", v1_api=V1_API_0_10, v0_api=V0_API, v0_policy="v0.10.2",
            kernels=KERNELS_0_10, measured=("0.10.2",)),
    Release("0.11.1", "0.11.2", v1_policy="v0.12.0", v1_api=V1_API_0_11, v0_api=None, kernels=KERNELS_0_11),
    Release("0.12.0", "0.12.0", v1_policy="v0.12.0", v1_api=V1_API_0_12, v0_api=None, kernels=KERNELS_0_11),
    Release("0.13.0", "0.13.0", v1_policy="v0.13.0", v1_api=V1_API_0_13, v0_api=None, kernels=KERNELS_0_13),
    Release("0.14.0", "0.16.0", v1_policy="v0.20.2", v1_api=V1_API_0_13, v0_api=None, kernels=KERNELS_0_14,
            measured=("0.14.1", "0.15.0", "0.15.1", "0.16.0")),
    Release("0.17.0", "0.22.1", v1_policy="v0.20.2", v1_api=V1_API_0_17, v0_api=None, kernels=KERNELS_0_14,
            measured=("0.17.1", "0.18.1", "0.19.1", "0.20.1", "0.20.2", "0.21.0", "0.22.1")),
    Release("0.23.0", "0.23.0", v1_policy="v0.23.0", v1_api=V1_API_0_23, v0_api=None, kernels=KERNELS_0_14),
    Release("0.24.0", "0.24.0", v1_policy="v0.24.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_14),
    Release("0.25.0", "0.26.0", v1_policy="v0.24.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25,
            measured=("0.25.1", "0.26.0")),
    Release("0.27.0", "0.27.1", v1_policy="v0.27.1", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25,
            measured=("0.27.1",)),
    Release("0.28.0", "0.28.0", v1_policy="v0.24.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25,
            measured=("0.28.0",)),
    Release("0.29.0", "0.30.0", v1_policy="v0.29.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25),
    Release("0.31.0", "0.31.0", v1_policy="v0.31.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25),
    Release("0.32.0", "0.32.0", v1_policy="v0.32.0", v1_api=V1_API_0_24, v0_api=None, kernels=KERNELS_0_25,
            measured=("0.32.0",)),
    Release("0.33.0", "0.33.0", v1_policy="v0.33.0", v1_api=V1_API_0_24, v0_api=None,
            kernels=KERNELS_0_25, measured=("0.33.0",)),
)


def release_row(version: str) -> Release | None:
    """The table row covering ``version`` (a release like ``"0.20.2"``), or None."""
    for row in RELEASES:
        if row.covers(version):
            return row
    return None


def installed_release() -> tuple[str, Release]:
    """(installed version, its row); NotApplicable without vLLM or for a release outside the table."""
    version = installed_vllm_version()
    if version is None:
        raise NotApplicable("vLLM is not installed in this environment")
    row = release_row(version)
    if row is None:
        known = ", ".join(f"{r.first}..{r.last}" for r in RELEASES)
        raise NotApplicable(f"vLLM {version} is outside the release table in conformance/versions.py "
                            f"(known ranges: {known})")
    return version, row


class _PolicyNames(Mapping):
    """Release -> V1 policy name, for every release in a row that has a V1 policy."""

    def __getitem__(self, version: str) -> str:
        row = release_row(version)
        if row is None or row.v1_policy is None:
            raise KeyError(version)
        return row.v1_policy

    def __contains__(self, version: object) -> bool:
        try:
            return isinstance(version, str) and release_row(version) is not None and \
                release_row(version).v1_policy is not None
        except ValueError:
            return False

    def __iter__(self):
        return iter(v for r in RELEASES if r.v1_policy for v in r.measured)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# ``V1_POLICY_NAMES["0.33.0"] == "v0.33.0"``; ``"0.20.2" in V1_POLICY_NAMES`` asks the table.
V1_POLICY_NAMES: Mapping[str, str] = _PolicyNames()


class HarnessError(RuntimeError):
    """The installed release has the mechanism, but the harness cannot drive it (the reason)."""


def vllm_import_failed(err: ImportError) -> Exception:
    """What a failed ``import vllm`` means: NotApplicable when vLLM is not installed, a
    HarnessError (a broken environment, not a verdict) when it is installed but does not import."""
    from conformance.lockstep import NotApplicable

    installed = installed_vllm_version()
    if installed is None:
        return NotApplicable(f"vLLM is not installed ({err})")
    return HarnessError(f"vLLM {installed} is installed but does not import: {type(err).__name__}: {err}")


def installed_v0_policy_name() -> str:
    """The reference V0Policy name for the installed vLLM's V0 block manager.

    NotApplicable without vLLM, for a release outside the table, or for one without a V0 block
    manager (after 0.10.2).
    """
    version, row = installed_release()
    if row.v0_policy is None:
        raise NotApplicable(f"vLLM {version} has no V0 block manager "
                            "(vllm/core/block_manager.py was removed after 0.10.2)")
    return row.v0_policy


def installed_v1_policy_name() -> str:
    """The reference policy name for the installed vLLM's V1 manager.

    NotApplicable without vLLM or for a release outside the table; :class:`HarnessError` for a
    release whose V1 manager the harness cannot drive yet (``Release.v1_harness_gap``).
    """
    version, row = installed_release()
    if row.v1_harness_gap is not None:
        raise HarnessError(f"vLLM {version} has a V1 KVCacheManager, but {row.v1_harness_gap}")
    if row.no_v1_because is not None:
        raise NotApplicable(f"vLLM {version}: {row.no_v1_because}")
    if row.v1_policy is None or row.v1_api is None:
        raise NotApplicable(f"vLLM {version} has no V1 reference policy in conformance/versions.py")
    return row.v1_policy


__all__ = [
    "V0Api", "V1Api", "KernelApi", "Release", "RELEASES", "HarnessError", "installed_vllm_version", "installed_release",
    "vllm_import_failed",
    "installed_v1_policy_name", "installed_v0_policy_name", "release_row", "version_key", "V1_POLICY_NAMES",
]
