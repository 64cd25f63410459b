"""What the adapters must know to call one vLLM release: named API fields, one record per room.

* :class:`V1Api`: how the V1 adapter builds and calls a release's ``KVCacheManager``;
* :class:`V0Api`: how the V0 adapter builds a release's ``SelfAttnBlockSpaceManager`` inputs;
* :class:`KernelApi`: where a release keeps its Triton attention kernels and how they are called;
* :class:`Mechanisms`: which of the mechanisms the machines model a release ships at all.

Each field says what its values mean. Which value a field has at which release is the change
log's business (:mod:`conformance.changelog`), never written here.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # The manager hashes blocks itself (before 0.10.1): the hashes in
    # ``manager.req_to_block_hashes``, and the scheduler's ``free_block_hashes(request)`` after
    # freeing a finished request; requests carry no ``block_hasher``. Which hash the manager
    # uses is ``caching_hash_algo`` where it takes one (``manager_hash_algo_arg``).
    manager_hashes_blocks: bool
    # ``kv_cache_utils.init_none_hash(hash_fn)`` exists (from 0.10.0); False: NONE_HASH is set
    # once when kv_cache_utils is imported (v0.9.2 vllm/v1/core/kv_cache_utils.py:59-60).
    none_hash_init_function: bool
    # ``Request(...)`` requires ``multi_modal_inputs``, ``multi_modal_hashes`` and
    # ``multi_modal_placeholders`` (v0.9.2 vllm/v1/request.py:23-39).
    request_multimodal_args: bool
    # The manager has a KV-cache coordinator (from 0.9.1). False (0.8.x): one group, no
    # coordinator, block lists in and out of get_computed_blocks / allocate_slots; the adapter
    # wraps it (conformance/adapters/vllm_v1_single_group.py).
    manager_has_coordinator: bool
    # ``KVCacheConfig(num_blocks, tensors={...}, kv_cache_groups)`` (0.8.x) instead of
    # ``kv_cache_tensors=[...]`` (v0.8.5.post1 vllm/v1/kv_cache_interface.py:142-166).
    kv_config_tensors_dict: bool
    # ``Request(...)`` takes ``pooling_params`` and ``cache_salt`` and gives ``arrival_time`` a
    # default; False (0.8.x): neither argument, ``arrival_time`` required
    # (v0.8.5.post1 vllm/v1/request.py:20-32).
    request_pooling_and_salt_args: bool
    # ``KVCacheManager(kv_cache_config, max_model_len, ...)``; False (0.8.0 .. 0.8.2):
    # ``KVCacheManager(block_size, num_gpu_blocks, max_model_len, sliding_window, ...)``
    # (v0.8.2 vllm/v1/core/kv_cache_manager.py:20-29).
    manager_takes_kv_cache_config: bool
    # ``KVCacheManager(...)`` takes ``caching_hash_algo`` ("builtin" or "sha256"; 0.8.3 .. 0.10.0).
    manager_hash_algo_arg: bool
    # ``allocate_slots`` takes ``num_lookahead_tokens`` (from 0.8.4).
    allocate_lookahead_arg: bool
    # ``Request(...)`` requires the prompt text, ``prompt`` (before 0.8.5; the adapter passes None).
    request_prompt_arg: bool
    # vLLM's full-attention hit search indexes ``block_hashes[i]`` for every block up to
    # ``num_tokens - 1`` (0.9.0 and 0.9.0.1) instead of stopping at the end of the request's hash
    # list: with a list shorter than the request's full blocks (possible before 0.10.1,
    # V1Policy.hashes_on_request) the lookup raises IndexError. The machine does not draw such
    # lookups; the reference searches only the hashed blocks.
    #   v0.9.0 vllm/v1/core/single_type_kv_cache_manager.py:234-243
    full_hit_search_indexes_hashes: bool


@dataclass(frozen=True)
class V0Api:
    """How the V0 adapter builds a release's ``SelfAttnBlockSpaceManager`` inputs."""

    # ``Sequence(seq_id, inputs=token_inputs(tokens), block_size=...)``: inputs built by
    # ``vllm.inputs.token_inputs``.
    sequence_token_inputs: bool
    # ``SelfAttnBlockSpaceManager.reset_prefix_cache()`` exists (from 0.7.0; 0.6.6.post1's
    # vllm/core/block_manager.py has no such method).
    reset_prefix_cache: bool
    # ``SequenceGroup.get_seqs(status)`` filters each sequence by its own status. False (0.6.4 to
    # 0.6.6.post1, v0.6.6.post1 vllm/sequence.py:804-811): it returns every sequence or none,
    # by the *first* sequence's status, so the block manager's own get_seqs calls see a finished
    # member of a group as still running. Those releases split ``n > 1`` into single-sequence
    # groups, so the machine then finishes a group's sequences together, never one alone.
    group_status_per_sequence: bool
    # ``SelfAttnBlockSpaceManager.get_num_cached_tokens(seq)`` exists (from 0.6.5), and the
    # machine asks it for every new and forked sequence, as the scheduler does.
    num_cached_tokens: bool


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
    # The smallest KV block size the release's Triton kernels can be built with under the Triton
    # interpreter, where this suite runs them. 16 where the release's pinned Triton (3.2, with
    # torch 2.6: vLLM 0.8.x) asserts that both operands of ``tl.dot`` have every dimension >= 16,
    # and kernel_paged_attention_2d's ``tl.dot(Q, K)`` has the block size as its N
    # (v0.8.5.post1 chunked_prefill_paged_decode.py:159): block size 8 cannot compile there, on a
    # GPU or under the interpreter. Later interpreters accept any size (their ``min_dot_size`` is (1, 1, 1)),
    # but on a GPU the NVIDIA backend still bounds 16-bit dots (Triton 3.4, with vLLM 0.10.2: every
    # dimension >= 16; Triton 3.8, with 0.33.0: the inner one, which is the block size in P @ V),
    # so this field says nothing of GPU builds; the GPU lane uses block size 16.
    min_block_size: int
    # ``triton_reshape_and_cache_flash`` also writes the classic head-major 5-D cache (its
    # ``USE_HEAD_MAJOR_LAYOUT`` path, from 0.14.0). False (0.11 .. 0.13): it writes only the flash
    # layout; handed a 5-D cache it takes ``key_cache.shape[1]`` as the block size and writes out of
    # bounds (the interpreter segfaulted at 0.13.0), so classic-layout cases do not exist there.
    cache_write_head_major: bool
    # ``chunked_prefill_paged_decode`` takes ``max_seq_len`` (from 0.8.3; 0.8.0 .. 0.8.2 have no
    # such parameter, v0.8.2 vllm/attention/ops/chunked_prefill_paged_decode.py:204-221).
    paged_2d_max_seq_len_arg: bool


@dataclass(frozen=True)
class Mechanisms:
    """Which of the modelled mechanisms a release ships."""

    # The classic V0 block manager (vllm/core/block_manager.py and vllm/core/block/*).
    v0_block_manager: bool
    # The V1 page manager the machines model: vllm/v1/core/block_pool.py's BlockPool.
    v1_block_pool: bool
    # vLLM's Triton attention kernels (triton_unified_attention, chunked_prefill_paged_decode).
    triton_kernels: bool
