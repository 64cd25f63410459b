"""The capacity experiment: how many requests fit, and how much KV memory holds live tokens.

    python -m benchmarks.capacity [--requests 1000] [--workload sharegpt] [--svg-dir DIR] [--json PATH]

A stream of requests (``benchmarks.workload``) is served by a simple iteration-level scheduler on
a fixed KV budget: first come, first served admission; every running request produces one token
per step (its first step also processes its prompt); a finished request frees its memory. When a
paged request cannot get a block, the most recently admitted request is preempted (its blocks
freed, to be recomputed later), which is what vLLM does. The same stream is served under each
scheme of ``benchmarks.capacity_schemes`` and, while the queue is non-empty (the server is
saturated), the simulator averages

* **effective usage**: KV slots holding live token states / all KV slots;
* **concurrency**: requests running at once (mean and maximum);
* **internal fragmentation**: in a reservation scheme, the slots past each request's final length
  (slots it never fills); paged, the unfilled tail of each request's last block, held - live (the
  paper's last-block waste: later tokens fill most of it, so it is not the same quantity as the
  reservation schemes' figure).

The memory budget follows the PagedAttention paper's 13B set-up on an 80 GB GPU: 800 KiB of KV per
token (2 x 40 layers x 5120 hidden x 2 bytes) and the memory left after 26 GB of fp16 weights and
a 10% reserve for activations.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque
from pathlib import Path

from benchmarks.capacity_schemes import PagedScheme, ReservationScheme
from benchmarks.report import CapacityOutcome, CapacityReport
from benchmarks.workload import make_requests

BYTES_PER_TOKEN = 2 * 40 * 5120 * 2  # K and V, 40 layers, hidden 5120, fp16: 819,200 bytes
GPU_BYTES = 80 * 10**9
WEIGHT_BYTES = 26 * 10**9
KV_SLOTS = int((GPU_BYTES * 0.9 - WEIGHT_BYTES) // BYTES_PER_TOKEN)  # ~56,152 token slots
PAPER = {"max": 20.4, "pow2": 26.8, "oracle": 38.2, "paged": 96.3}  # effective usage, %, Fig. 2


def internal_waste(scheme, running, live: int, held: int) -> int:
    """Internal fragmentation of the running requests, in slots: a reservation past each request's
    final length, or, paged, the unfilled tail of each request's last block (held - live; the
    request's next tokens fill most of it, and only in its final block may part of it stay empty)."""
    if isinstance(scheme, PagedScheme):
        return held - live
    return sum(scheme.held[req.rid][1] - req.total_len for req in running)


def serve(requests, scheme, max_len: int) -> CapacityOutcome:
    """Serve ``requests`` under ``scheme``; return the saturated-period averages."""
    queue = deque(requests)
    running: list = []  # in admission order
    generated: dict[int, int] = {}
    usage, reserved, concurrency, frag = [], [], [], []
    preemptions = steps = 0
    while queue or running:
        while queue and scheme.admit(queue[0]):
            req = queue.popleft()
            running.append(req)
            generated[req.rid] = 0
        if not running:
            raise RuntimeError(f"{scheme.name}: request {queue[0].rid} can never be admitted")
        i = 0
        while i < len(running):  # each running request produces one token
            req = running[i]
            if scheme.grow(req, req.prompt_len + generated[req.rid] + 1):
                generated[req.rid] += 1
                i += 1
                continue
            victim = running.pop()  # preempt the latest admitted; recompute it later
            scheme.release(victim)
            generated.pop(victim.rid)
            queue.appendleft(victim)
            preemptions += 1
        steps += 1
        if queue:
            live = sum(r.prompt_len + generated[r.rid] for r in running)
            held = scheme.used()
            usage.append(live / scheme.capacity)
            reserved.append(held / scheme.capacity)
            concurrency.append(len(running))
            frag.append(internal_waste(scheme, running, live, held) / scheme.capacity)
        for req in [r for r in running if generated[r.rid] >= r.output_len]:
            running.remove(req)
            scheme.release(req)
            del generated[req.rid]
    def mean(xs: list[float]) -> float:
        return 100 * statistics.fmean(xs) if xs else 0.0

    return CapacityOutcome(scheme.name, round(mean(usage), 1), round(mean(reserved), 1),
                   round(statistics.fmean(concurrency), 1) if concurrency else 0.0,
                   max(concurrency, default=0), round(mean(frag), 2), preemptions, steps)


def experiment(n: int, workload: str, max_len: int, block_sizes, capacity: int = KV_SLOTS, progress=print):
    """Run every scheme on the same stream; return the outcomes in order."""
    requests = make_requests(n, workload, max_len)
    schemes = [ReservationScheme(name, capacity, max_len) for name in ("max", "pow2", "oracle")]
    schemes += [PagedScheme(capacity, b) for b in block_sizes]
    outcomes = []
    for scheme in schemes:
        t0 = time.perf_counter()
        outcomes.append(serve(requests, scheme, max_len))
        progress(f"  {scheme.name:>10}: {time.perf_counter() - t0:5.1f} s")
    return outcomes


def table(outcomes) -> str:
    head = (f"{'scheme':>10} {'usage %':>8} {'paper %':>8} {'held %':>7} {'mean conc':>9} "
            f"{'max conc':>8} {'int frag %':>10} {'preempt':>7}")
    rows = [head]
    for o in outcomes:
        paper = PAPER.get(o.scheme.split("-")[0])
        rows.append(f"{o.scheme:>10} {o.effective_usage_pct:8.1f} {paper if paper else '':>8} "
                    f"{o.reserved_pct:7.1f} {o.mean_concurrency:9.1f} {o.max_concurrency:8d} "
                    f"{o.internal_fragmentation_pct:10.2f} {o.preemptions:7d}")
    return "\n".join(rows)


def plots(outcomes, directory: Path) -> list[Path]:
    """SVG figures: usage per scheme (with the paper's figures), and fragmentation per block size."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "capacity"  # stable ids: the same data gives the same file
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    names = [o.scheme for o in outcomes]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(names, [o.effective_usage_pct for o in outcomes], color="#4c72b0", label="simulated")
    paper_x = [n for n in names if n.split("-")[0] in PAPER and (not n.startswith("paged") or n == "paged-16")]
    ax.scatter(paper_x, [PAPER[n.split("-")[0]] for n in paper_x], color="#dd8452", zorder=3,
               label="paper (Fig. 2)")
    ax.set_ylabel("KV slots holding live tokens (%)")
    ax.set_ylim(0, 100)
    ax.tick_params(axis="x", rotation=45)
    ax.legend(loc="upper left")
    fig.tight_layout()
    paths.append(directory / "capacity-usage.svg")
    fig.savefig(paths[-1], metadata={"Date": None})
    plt.close(fig)
    paged = [o for o in outcomes if o.scheme.startswith("paged")]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    sizes = [int(o.scheme.split("-")[1]) for o in paged]
    ax.plot(sizes, [o.internal_fragmentation_pct for o in paged], marker="o", label="internal fragmentation %")
    ax.plot(sizes, [o.mean_concurrency for o in paged], marker="s", label="mean concurrent requests")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size (tokens)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    paths.append(directory / "capacity-block-size.svg")
    fig.savefig(paths[-1], metadata={"Date": None})
    plt.close(fig)
    return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.capacity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--workload", default="sharegpt")
    parser.add_argument("--max-len", type=int, default=2048)
    parser.add_argument("--block-sizes", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--svg-dir", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.block_sizes.split(",")]
    print(f"capacity: {args.requests} {args.workload} requests, max length {args.max_len}, "
          f"KV budget {KV_SLOTS} token slots ({BYTES_PER_TOKEN} bytes per token)", flush=True)
    outcomes = experiment(args.requests, args.workload, args.max_len, sizes,
                          progress=lambda s: print(s, flush=True))
    print(table(outcomes))
    by = {o.scheme: o for o in outcomes}
    if "paged-16" in by:
        for name in ("max", "pow2", "oracle"):
            ratio = by["paged-16"].mean_concurrency / max(by[name].mean_concurrency, 1e-9)
            print(f"paged-16 runs {ratio:.1f}x the concurrent requests of {name}")
    if args.svg_dir:
        for path in plots(outcomes, args.svg_dir):
            print(f"wrote {path}")
    if args.json:
        CapacityReport(requests=args.requests, workload=args.workload, max_len=args.max_len, kv_slots=KV_SLOTS,
                       outcomes=list(outcomes)).write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
