"""``python -m conformance``: check the reference against the vLLM installed in this environment.

    python -m conformance run [--examples 200] [--steps 50] [--kernel-examples 25] [--json PATH]
                              [--require PROPERTY ...] [--verbose | --vllm-log PATH] [PROPERTY ...]
    python -m conformance replay TRACE.json [...]
    python -m conformance explore TRACE.json [--out DIR] [--serve [--port N]]
    python -m conformance list

On a CPU-only machine vLLM must be imported with ``CUDA_VISIBLE_DEVICES=""`` and its Triton
kernels need ``TRITON_INTERPRET=1``; this command sets both (before vLLM is imported) unless a
GPU is requested with ``--gpu``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _cpu_environment(gpu: bool) -> None:
    if not gpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        os.environ.setdefault("TRITON_INTERPRET", "1")


def diverged_trace(trace: dict, done: int, diff: str, sides: list[dict] | None) -> dict:
    """The replayed trace up to the op where it diverged, with the message and both sides' states."""
    out = {**trace, "ops": trace["ops"][:done], "divergence": diff}
    if "expect" in trace:
        out["expect"] = trace["expect"][:done]
    if sides is not None:
        out["sides"] = sides
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="use the GPU (do not hide CUDA devices)")
    sub = parser.add_subparsers(dest="cmd")
    run = sub.add_parser("run", help="run properties and write a JSON report")
    run.add_argument("properties", nargs="*", help="property names (default: all)")
    run.add_argument("--examples", type=int, default=200)
    run.add_argument("--steps", type=int, default=50)
    run.add_argument("--kernel-examples", type=int, default=25,
                     help="cases per kernel property (slow on a CPU: Triton interpreter)")
    run.add_argument("--json", type=Path, help="where to write the JSON report")
    run.add_argument("--verbose", action="store_true",
                     help="let vLLM's own log lines through to the terminal (default: to --vllm-log)")
    run.add_argument("--vllm-log", type=Path,
                     help="file for vLLM's own log lines (default: next to --json as NAME.vllm.log, "
                          "else conformance-vllm.log in the system's temporary folder)")
    run.add_argument("--require", action="extend", nargs="+", default=[], metavar="PROPERTY",
                     help="fail the run if one of these properties is not applicable here "
                          "(e.g. because vLLM does not import); default: none")
    rep = sub.add_parser("replay", help="replay saved traces on the reference and vLLM")
    rep.add_argument("traces", nargs="+", type=Path)
    exp = sub.add_parser("explore", help="open a trace in the trace explorer (a page of its own; the "
                         "reference only, no vLLM needed)")
    exp.add_argument("trace", type=Path)
    exp.add_argument("--out", type=Path, help="folder to write index.html into (default: under the temp dir)")
    exp.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1 until Ctrl-C")
    exp.add_argument("--port", type=int, default=0, help="port for --serve (default: a free one)")
    sub.add_parser("list", help="list the registered properties")
    args = parser.parse_args(argv)
    _cpu_environment(args.gpu)

    if args.cmd in (None, "list"):
        from conformance.properties import all_properties

        for prop in all_properties().values():
            print(f"{prop.name:36} {prop.checks}")
        return 0
    if args.cmd == "run":
        if min(args.examples, args.steps, args.kernel_examples) < 1:
            parser.error("--examples, --steps and --kernel-examples must be positive")
        from conformance import report

        log = None
        if not args.verbose:
            import tempfile

            log = args.vllm_log or (args.json.with_suffix(".vllm.log") if args.json else
                                    Path(tempfile.gettempdir()) / "conformance-vllm.log")
        result = report.run(args.properties, args.examples, args.steps, args.kernel_examples,
                            required=args.require, vllm_log_path=log)
        if args.json:
            report.write(result, args.json)
            print(f"report written to {args.json}")
        return 1 if result["summary"]["failed"] else 0
    if args.cmd == "explore":
        from conformance import explore

        return explore.main(args.trace, args.out, args.serve, args.port)
    if args.cmd == "replay":
        from conformance.lockstep import NotApplicable, replay_sides, save_trace
        from conformance.report import FAILURES
        from conformance.trace_file import TraceFileError, load_trace

        status = 0
        for path in args.traces:
            try:
                trace = load_trace(path)
            except TraceFileError as err:
                print(f"{path}: unreadable trace: {err.detail}")
                status = 2
                continue
            try:
                done, diff, sides = replay_sides(trace)
            except NotApplicable as why:
                print(f"{path}: not applicable: {why}")
                continue
            except (ValueError, KeyError) as err:  # a config the systems refuse to be built with
                print(f"{path}: cannot build the systems for this trace: {err}")
                status = 2
                continue
            if diff:
                print(f"{path}: DIVERGED after {done} of {len(trace['ops'])} ops: {diff}")
                saved = save_trace(diverged_trace(trace, done, diff, sides), FAILURES,
                                   f"replay-{path.stem}-{time.strftime('%Y%m%d-%H%M%S')}")
                print(f"    saved with both sides' states to {saved}; explore: python -m conformance explore {saved}")
                status = 1
            else:
                print(f"{path}: identical over {done} ops")
        return status
    return 2


if __name__ == "__main__":
    sys.exit(main())
