"""A from-scratch re-implementation of vLLM's paged KV-cache management and paged attention.

``reference.blocks`` holds the page managers (V1 as in vLLM v0.33.0, with the older V1 behaviour
of v0.10.2 as a named policy, and the classic V0 manager of v0.10.2); ``reference.attention``
holds the kernels (plain-PyTorch oracles and Triton kernels). Nothing here imports vLLM, and
importing any module has no side effects.
"""
