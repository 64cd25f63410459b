"""Kernel conformance properties: vLLM's kernels and the reference's must compute the same thing.

CPU lane (runs inside both vLLM environments under the Triton interpreter):

* ``kernel.reshape_and_cache_flash`` -- vLLM's Triton cache write (v0.33.0) vs ours vs the oracle;
* ``kernel.unified_attention`` -- vLLM's Triton unified attention vs our varlen kernel vs the oracle;
* ``kernel.paged_attention_2d`` -- vLLM's ``kernel_paged_attention_2d`` vs our decode v1/v2.

GPU lane (needs a CUDA GPU and ``vllm._custom_ops``; see ``conformance/gpu`` for a bare GPU):
``kernel.cuda.paged_attention_v1``, ``kernel.cuda.paged_attention_v2``,
``kernel.cuda.reshape_and_cache``, ``kernel.cuda.reshape_and_cache_flash``.

Importing this module imports neither vLLM nor Triton; a property imports them when it runs,
after :func:`conformance.adapters.vllm_kernels.prepare` has set up the environment.
"""

from __future__ import annotations

from conformance.lockstep import NotApplicable, suppressed_health_checks
from conformance.properties import Property, Result


def _run_hypothesis(strategy_name: str, check_name: str, examples: int, progress) -> Result:
    """Draw ``examples`` cases from a strategy in ``checks`` and run one check on each."""
    from conformance.adapters import vllm_kernels as vk

    vk.prepare()
    vk.installed_version()  # NotApplicable when vLLM is absent
    from conformance.kernels import checks

    strategy = getattr(checks, strategy_name)
    check = getattr(checks, check_name)
    vk.kernels()  # import vLLM once, outside the timed examples
    n, case, err = run_cases(strategy, checks.forced_cases(strategy_name), check, examples, progress)
    if err is not None:
        # A mismatch is an AssertionError from the comparison (its message gives the largest
        # difference and its index); anything else -- including a kernel that left its output
        # untouched -- means the harness could not drive this release's kernel.
        kind = failure_kind(err)
        shown = ", ".join(f"{k}={v}" for k, v in case.items())
        return Result(False, n, 0, f"{kind.replace('_', ' ')} on the shrunk case ({shown}): "
                      f"{type(err).__name__}: {err}"[:3000],
                      {"case": case, "failure": kind})
    return Result(True, n, 0, f"vLLM {vk.kernels().version}: {n} cases agree")


def run_cases(strategy, forced, check, examples: int, progress) -> tuple[int, dict, Exception | None]:
    """``check`` on each forced case, then on ``examples`` cases drawn from ``strategy``.

    Returns (cases run, the last case with its values as strings, the failure or None); one
    failure, shrunk (not an ExceptionGroup of several, which hides the cases). NotApplicable
    passes through. The same health checks as the state machines, for the same reasons (each case
    runs two kernels, on a CPU, inside Hypothesis's generation budget).
    """
    from hypothesis import given, settings

    done: dict = {"n": 0, "last": None}

    @settings(max_examples=examples, deadline=None, database=None, print_blob=False,
              report_multiple_bugs=False, suppress_health_check=suppressed_health_checks())
    @given(case=strategy)
    def drawn(case):
        done["last"] = case
        done["n"] += 1
        if progress:
            progress(done["n"])
        check(case)

    try:
        for case in forced:
            done["last"] = case
            done["n"] += 1
            check(case)
        drawn()
    except NotApplicable:
        raise
    except Exception as err:  # noqa: BLE001 - a mismatch (after shrinking) or a harness error
        return done["n"], {k: str(v) for k, v in (done["last"] or {}).items()}, err
    return done["n"], {}, None


def failure_kind(err: Exception) -> str:
    """"divergence" for a comparison's AssertionError, else "harness_error" (a kernel that left
    its output untouched included: the harness could not drive it)."""
    from conformance.kernels.checks import KernelDidNotRun

    return "divergence" if isinstance(err, AssertionError) and not isinstance(err, KernelDidNotRun) else "harness_error"


def harness_guarded(run):
    """A property run where a HarnessError (vLLM's kernels could not even be imported or
    called) becomes a failed result of kind ``harness_error`` instead of ending the command."""
    import functools

    from conformance.versions import HarnessError

    @functools.wraps(run)
    def guarded(*args, **kwargs) -> Result:
        try:
            return run(*args, **kwargs)
        except HarnessError as err:
            return Result(False, 0, 0, f"harness error (not a verdict on vLLM or the reference): {err}",
                          {"failure": "harness_error"})
    return guarded


@harness_guarded
def run_cache_write(examples: int, steps: int = 0, progress=None) -> Result:
    from conformance.adapters import vllm_kernels as vk

    vk.prepare()
    if vk.kernels().reshape_and_cache_flash is None:
        raise NotApplicable(f"vLLM {vk.kernels().version} has no Triton reshape_and_cache_flash")
    return _run_hypothesis("cache_write_cases", "check_reshape_and_cache_flash", examples,
                           progress)


@harness_guarded
def run_unified(examples: int, steps: int = 0, progress=None) -> Result:
    return _run_hypothesis("flash_attention_case", "check_unified_attention", examples,
                           progress)


@harness_guarded
def run_paged_2d(examples: int, steps: int = 0, progress=None) -> Result:
    return _run_hypothesis("classic_attention_case", "check_paged_attention_2d", examples,
                           progress)


def _cuda_ops(op_name: str):
    import torch

    if not torch.cuda.is_available():
        raise NotApplicable("no CUDA GPU (run conformance/gpu/run.sh on a GPU machine)")
    try:
        from vllm import _custom_ops as ops
    except Exception as err:
        raise NotApplicable(f"vllm._custom_ops is not importable: {err}") from err
    if not hasattr(ops, op_name):
        raise NotApplicable(f"this vLLM's _custom_ops has no {op_name}")
    return ops


def _cuda_property(kind: str):
    def run(examples: int, steps: int = 0, progress=None) -> Result:
        import torch

        from conformance.gpu import cuda_checks as cc

        op = {"v1": "paged_attention_v1", "v2": "paged_attention_v2",
              "classic": "reshape_and_cache", "flash": "reshape_and_cache_flash"}[kind]
        ops = _cuda_ops(op)
        done = 0
        try:
            for seed in range(max(1, examples)):
                for dtype in cc.DTYPES:
                    for head in cc.HEAD_SIZES:
                        for block in cc.BLOCK_SIZES:
                            if kind in ("v1", "v2"):
                                cc.check_paged_attention(ops, kind, dtype, head, block, seed,
                                                         use_alibi=seed % 2 == 1)
                            else:
                                # the flash write both ways: token-major rows, and the flash view of
                                # head-major memory (the kernel's other stride branch)
                                for layout in ("flash", "flash_hnd") if kind == "flash" else (kind,):
                                    cc.check_cache_write(ops, layout, dtype, head, block, seed)
                            done += 1
                            if progress:
                                progress(done)
        except AssertionError as err:
            return Result(False, done, 0, str(err))
        return Result(True, done, 0,
                      f"{done} configurations agree on {torch.cuda.get_device_name()}")
    return run


PROPERTIES = [
    Property(name="kernel.reshape_and_cache_flash",
             checks="vLLM's Triton reshape_and_cache_flash writes the same bits as the reference "
                    "Triton write and the oracle (flash and classic layouts, slot -1 skipped)",
             run=run_cache_write,
             needs="vllm/v1/attention/ops/triton_reshape_and_cache_flash.py (v0.33.0)"),
    Property(name="kernel.unified_attention",
             checks="vLLM's Triton unified_attention output equals the reference varlen kernel "
                    "and the oracle within dtype tolerance (chunked prefill, window, soft cap, "
                    "ALiBi, GQA; for decode-only batches the split-K path too, where the release has "
                    "it: with 4 segments where unified_attention takes the split-K arguments "
                    "(0.13.0 on), with the kernel's own 16 where it picks the path itself (0.9.2 to "
                    "0.12.0, so 0.10.2); 0.9.0 and 0.9.1 have no split-K path)",
             run=run_unified, needs="triton_unified_attention.unified_attention"),
    Property(name="kernel.paged_attention_2d",
             checks="vLLM's kernel_paged_attention_2d (classic layout, via "
                    "chunked_prefill_paged_decode) equals reference decode v1/v2 and the oracle",
             run=run_paged_2d, needs="chunked_prefill_paged_decode.kernel_paged_attention_2d"),
    Property(name="kernel.cuda.paged_attention_v1",
             checks="vLLM's CUDA paged_attention_v1 equals reference Triton v1 and the oracle",
             run=_cuda_property("v1"), needs="a CUDA GPU and vllm._custom_ops.paged_attention_v1"),
    Property(name="kernel.cuda.paged_attention_v2",
             checks="vLLM's CUDA paged_attention_v2 equals reference Triton v2 and the oracle",
             run=_cuda_property("v2"), needs="a CUDA GPU and vllm._custom_ops.paged_attention_v2"),
    Property(name="kernel.cuda.reshape_and_cache",
             checks="vLLM's CUDA reshape_and_cache writes the same bits as the reference",
             run=_cuda_property("classic"),
             needs="a CUDA GPU and vllm._custom_ops.reshape_and_cache"),
    Property(name="kernel.cuda.reshape_and_cache_flash",
             checks="vLLM's CUDA reshape_and_cache_flash writes the same bits as the reference, "
                    "into token-major rows and into the flash view of head-major memory",
             run=_cuda_property("flash"),
             needs="a CUDA GPU and vllm._custom_ops.reshape_and_cache_flash"),
]
