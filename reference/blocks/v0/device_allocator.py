"""The CPU/GPU allocator pair: one pool per device, disjoint id ranges, and swapping between them.

Page ids are global: the GPU pool owns ``0 .. num_gpu-1`` and the CPU pool ``num_gpu ..
num_gpu+num_cpu-1`` (``v0.10.2 vllm/core/block/cpu_gpu_block_allocator.py:58-63``), so an id alone says
where a page lives. Swapping a sequence moves each of its block views: the source pool releases
the page, the destination pool hands out one (a cache hit may reuse an existing page there), and
the view keeps its tokens and its place in the chain. The returned mapping uses ids counted from
each device's first page, which is what the cache engine indexes.
"""

from __future__ import annotations

from typing import Optional, Union

from reference.blocks.errors import InvalidArgument, UnknownBlock
from reference.blocks.policies import V0_V0_10_2, V0Policy
from reference.blocks.v0.block import Block, NullBlock
from reference.blocks.v0.faults import NullBlockMisuse
from reference.blocks.v0.naive_allocator import NaiveAllocator
from reference.blocks.v0.prefix_caching_allocator import PrefixCachingAllocator
from reference.blocks.v0.status import Device

Allocator = Union[NaiveAllocator, PrefixCachingAllocator]


class DeviceAllocator:
    """Routes every page operation to the pool that owns the page."""

    def __init__(self, num_gpu_blocks: int, num_cpu_blocks: int, block_size: int,
                 enable_caching: bool, policy: V0Policy = V0_V0_10_2) -> None:
        if num_gpu_blocks < 0 or num_cpu_blocks < 0:
            raise InvalidArgument("block counts must not be negative")
        gpu_ids = range(num_gpu_blocks)
        cpu_ids = range(num_gpu_blocks, num_gpu_blocks + num_cpu_blocks)
        if enable_caching:  # the policy decides how pages are hashed and evicted
            self.gpu: Allocator = PrefixCachingAllocator(gpu_ids, block_size, policy)
            self.cpu: Allocator = PrefixCachingAllocator(cpu_ids, block_size, policy)
        else:
            self.gpu = NaiveAllocator(gpu_ids, block_size)
            self.cpu = NaiveAllocator(cpu_ids, block_size)
        self.null_block: Optional[NullBlock] = None
        self.swap_log: dict[int, int] = {}

    def pool(self, device: Device) -> Allocator:
        return self.gpu if device is Device.GPU else self.cpu

    def pool_of(self, block_id: int) -> Allocator:
        if block_id in self.gpu.all_ids:
            return self.gpu
        if block_id in self.cpu.all_ids:
            return self.cpu
        raise UnknownBlock(f"block id {block_id} belongs to no device")

    def allocate_or_get_null_block(self) -> NullBlock:
        """The sliding-window placeholder page, taken from the GPU pool on first use."""
        if self.null_block is None:
            self.null_block = NullBlock(self.gpu.allocate_mutable_block(None))
        return self.null_block

    def allocate_mutable_block(self, prev: Optional[Block], device: Device,
                               extra_hash: Optional[int] = None) -> Block:
        return self.pool(device).allocate_mutable_block(prev, extra_hash)

    def allocate_immutable_blocks(self, prev: Optional[Block], chunks: list[list[int]],
                                  device: Device, extra_hash: Optional[int] = None) -> list[Block]:
        return self.pool(device).allocate_immutable_blocks(prev, chunks, extra_hash)

    def append_token_ids(self, block: Block, token_ids: list[int]) -> None:
        if isinstance(block, NullBlock):
            raise NullBlockMisuse("the null block must not be written")
        self.pool_of(block.block_id).append_token_ids(block, token_ids)  # type: ignore[arg-type]  # None: pool_of refuses it

    def free(self, block: Block) -> None:
        if isinstance(block, NullBlock):
            return  # the null block is never freed (v0.10.2 cpu_gpu_block_allocator.py:202-204)
        if block.block_id is None:
            raise InvalidArgument("the block holds no page")
        self.pool_of(block.block_id).free(block)

    def fork(self, last_block: Block) -> list[Block]:
        if isinstance(last_block, NullBlock) or last_block.block_id is None:
            raise NullBlockMisuse("cannot fork from the null block or an unallocated block")
        return self.pool_of(last_block.block_id).fork(last_block)

    def get_num_free_blocks(self, device: Device) -> int:
        return self.pool(device).get_num_free_blocks()

    def get_num_total_blocks(self, device: Device) -> int:
        return self.pool(device).get_num_total_blocks()

    def get_physical_block_id(self, device: Device, absolute_id: int) -> int:
        return self.pool(device).get_physical_block_id(absolute_id)

    def swap(self, blocks: list[Block], src: Device, dst: Device) -> dict[int, int]:
        """Move block views from ``src`` to ``dst``; return {old absolute id: new absolute id}."""
        if any(isinstance(b, NullBlock) for b in blocks):
            raise NullBlockMisuse("a sequence holding the null block cannot be swapped")
        src_ids = [b.block_id for b in blocks]
        self.pool(src).swap_out(blocks)
        self.pool(dst).swap_in(blocks)
        mapping: dict[int, int] = {}
        for s, d in zip(src_ids, [b.block_id for b in blocks]):
            if s is not None and d is not None:
                self.swap_log[s] = d
                mapping[s] = d
        return mapping

    def get_num_full_blocks_touched(self, blocks: list[Block], device: Device) -> int:
        return self.pool(device).get_num_full_blocks_touched(blocks)

    def clear_copy_on_writes(self) -> list[tuple[int, int]]:
        return self.gpu.cows.collect()  # copy-on-write happens on the GPU only

    def mark_blocks_as_accessed(self, block_ids: list[int], now: float) -> None:
        self.gpu.mark_blocks_as_accessed(block_ids, now)

    def mark_blocks_as_computed(self, block_ids: list[int]) -> None:
        self.gpu.mark_blocks_as_computed(block_ids)

    def get_common_computed_block_ids(self, per_seq_ids: list[list[int]]) -> list[int]:
        return self.gpu.get_common_computed_block_ids(per_seq_ids)

    def find_cached_blocks_prefix(self, block_hashes: list[int]) -> list[int]:
        return self.gpu.find_cached_blocks_prefix(block_hashes)

    def num_cached_blocks_prefix(self, block_hashes: list[int]) -> int:
        return self.gpu.num_cached_blocks_prefix(block_hashes)

    def is_block_computed(self, block_id: int) -> bool:
        """Is the GPU page computed (prefix caching only; vLLM caches on the GPU alone)?"""
        if not isinstance(self.gpu, PrefixCachingAllocator):
            raise InvalidArgument("pages are marked computed only with prefix caching")
        return self.gpu.is_block_computed(block_id)

    def get_prefix_cache_hit_rate(self, device: Device) -> float:
        return self.pool(device).get_prefix_cache_hit_rate()

    def reset_prefix_cache(self, device: Optional[Device] = None) -> bool:
        if device is not None:
            return self.pool(device).reset_prefix_cache()
        # CPU first, then GPU, and a failure skips the rest: vLLM walks its allocator dict in that
        # order with a short-circuiting ``and`` (v0.10.2 cpu_gpu_block_allocator.py:343-350).
        success = True
        for pool in (self.cpu, self.gpu):
            success = success and pool.reset_prefix_cache()
        return success
