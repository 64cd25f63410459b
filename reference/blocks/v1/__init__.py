"""The V1 page manager of vLLM, re-implemented: block pool, hashing, per-group tables, manager.

Start with :class:`reference.blocks.v1.manager.KVCacheManager`; pick a behaviour policy from
:mod:`reference.blocks.policies`. Nothing here imports vLLM.
"""
