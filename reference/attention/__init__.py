"""Paged attention kernels: plain-PyTorch oracles and Triton kernels that must agree with them.

Modules (import the one you need; importing defines Triton kernels but launches nothing):

* ``layouts``     -- the classic (CUDA) and flash (V1) paged KV-cache layouts, token gathers;
* ``validate``    -- host-side argument checks that raise ``ValueError`` naming the argument;
* ``oracle``      -- slow, obviously-correct fp32 reference computations;
* ``cache_write`` -- ``reshape_and_cache`` (classic) and ``reshape_and_cache_flash`` in Triton;
* ``decode``      -- paged decode attention v1 and v2 (partitioned + reduce) in Triton;
* ``varlen``      -- mixed prefill/decode (chunked prefill) paged attention in Triton;
* ``tolerances``  -- per-dtype output tolerances, as vLLM's kernel tests use them.
"""
