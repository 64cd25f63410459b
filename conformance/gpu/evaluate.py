"""The decode-kernel sweep's judgement: rows, the two targets, the table and the summary.
Plain Python over the JSON-able rows that ``measure.py`` returns (no torch): tested anywhere.

Target (a): min(reference Triton v1, v2) <= 1.10 x vLLM's CUDA v2 at every point without a
window. Target (b): the best reference kernel reaches >= 80 % of the measured copy bandwidth at
every large point (batch x context >= 32 x 8192). A point whose kernels disagreed meets neither.
"""

from __future__ import annotations

from conformance.gpu.plan import (
    KERNELS,
    LABELS,
    LARGE_DEFINITION,
    LARGE_TOKENS,
    REFERENCE_DECODE,
    REFERENCE_KERNELS,
    SHORT_DTYPE,
    TARGET_BANDWIDTH_PCT,
    TARGET_RATIO,
    Point,
)


def point_row(point: Point, skipped: str | None = None) -> dict:
    """A point's row before measurement (``skipped``: why it will not run, or None)."""
    return {"dtype": point.dtype, "batch": point.batch, "context": point.context,
            "window": point.window, "kv_cache_bytes": point.kv_cache_bytes,
            "kv_read_bytes": point.kv_read_bytes, "large": point.large, "skipped": skipped,
            "floor_us": None, "kernels": {}, "agreement": None, "ref_best_over_cuda_v2": None}


def _us(row: dict, name: str) -> float | None:
    return row["kernels"].get(name, {}).get("us")


def ratio_to_cuda_v2(row: dict) -> float | None:
    """min(reference v1, reference v2) / vLLM CUDA v2, when all three were timed."""
    cuda = _us(row, "vllm_cuda_v2")
    ours = [t for t in (_us(row, n) for n in REFERENCE_DECODE) if t is not None]
    if cuda is None or len(ours) < len(REFERENCE_DECODE):
        return None
    return min(ours) / cuda


def agrees(row: dict) -> bool:
    return bool(row.get("agreement") and row["agreement"].get("ok"))


def _where(row: dict) -> dict:
    return {k: row[k] for k in ("dtype", "batch", "context", "window")}


def evaluate_targets(rows: list[dict], ops_loaded: bool = True) -> dict:
    """Target (a): best(ref v1, v2) <= 1.10 x CUDA v2 at each point without a window.
    Target (b): best reference kernel >= 80 % of the copy bandwidth at each large point.
    A point whose kernels disagreed does not meet either target."""
    a_rows = [r for r in rows if not r["skipped"] and r["window"] is None]
    a = {"definition": f"min(reference_triton_v1, reference_triton_v2) <= {TARGET_RATIO:.2f} x "
                       "vllm_cuda_v2, at every point without a window",
         "evaluated": 0, "met": 0, "not_met": []}
    if not ops_loaded:
        a["not_evaluated"] = "vLLM's CUDA ops were not loaded"
    else:
        for r in a_rows:
            ratio = r.get("ref_best_over_cuda_v2")
            if ratio is None:
                a["not_met"].append({**_where(r), "ratio": None,
                                     "reason": "a kernel has no timing (error or not run)"})
                a["evaluated"] += 1
                continue
            a["evaluated"] += 1
            cuda = _us(r, "vllm_cuda_v2")
            best = min(_us(r, n) for n in REFERENCE_DECODE)
            if not agrees(r):
                a["not_met"].append({**_where(r), "ratio": ratio,
                                     "reason": "outputs disagree"})
            elif best <= TARGET_RATIO * cuda:
                a["met"] += 1
            else:
                a["not_met"].append({**_where(r), "ratio": ratio,
                                     "reason": f"{ratio:.2f}x CUDA v2"})
    b = {"definition": LARGE_DEFINITION,
         "target": f"best reference kernel >= {TARGET_BANDWIDTH_PCT:g}% of the measured copy "
                   "bandwidth", "evaluated": 0, "met": 0, "points": []}
    for r in rows:
        if r["skipped"] or r["batch"] * r["context"] < LARGE_TOKENS:
            continue
        timed = {n: r["kernels"][n]["pct_bandwidth"] for n in REFERENCE_KERNELS
                 if "pct_bandwidth" in r["kernels"].get(n, {})}
        best = max(timed, key=timed.get) if timed else None
        pct = timed[best] if best else None
        meets = pct is not None and pct >= TARGET_BANDWIDTH_PCT and agrees(r)
        b["points"].append({**_where(r), "best_kernel": best, "pct_bandwidth": pct,
                            "agree": agrees(r), "meets": meets})
        b["evaluated"] += 1
        b["met"] += meets
    skipped = [{**_where(r), "reason": r["skipped"]} for r in rows if r["skipped"]]
    disagreements = [_where(r) for r in rows if not r["skipped"] and not agrees(r)]
    return {"within_10pct_of_cuda_v2": a, "bandwidth_80pct_at_large": b, "skipped": skipped,
            "disagreements": disagreements}


def _cell(row: dict, name: str) -> str:
    cell = row["kernels"].get(name, {})
    if "na" in cell:
        return "n/a (no window support)" if cell["na"] == "no window support" else "not loaded"
    if "error" in cell:
        return "error"
    if "us" not in cell:
        return "-"
    return f"{cell['us']:.1f} ({cell['pct_bandwidth']:.0f}%)"


def _agree_cell(row: dict) -> str:
    agreement = row.get("agreement") or {}
    if agreement.get("ok"):
        return "yes"
    bad = [f"{LABELS.get(n, n)} {c['max_abs_diff']:.2g}"
           for n, c in agreement.get("compared", {}).items() if not c["ok"]]
    return "NO: " + (", ".join(bad) or agreement.get("error", "?"))


def _size(num_bytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.1f} {unit}"
    return f"{num_bytes} B"


TABLE_HEADER = ["dtype", "batch", "context", "window", "KV read", "floor µs",
                *[f"{LABELS[k]} µs (% bw)" for k in KERNELS], "best ref v1/v2 ÷ CUDA v2",
                "agree"]


def format_table(rows: list[dict]) -> str:
    """A Markdown table, one row per point (skipped points included, with the reason)."""
    lines = []
    for r in rows:
        head = [SHORT_DTYPE[r["dtype"]], str(r["batch"]), str(r["context"]),
                "none" if r["window"] is None else str(r["window"]), _size(r["kv_read_bytes"])]
        if r["skipped"]:
            lines.append(head + [r["skipped"]] + ["-"] * (len(KERNELS) + 2))
            continue
        ratio = r.get("ref_best_over_cuda_v2")
        floor = "-" if r["floor_us"] is None else f"{r['floor_us']:.1f}"
        lines.append(head + [floor, *[_cell(r, k) for k in KERNELS],
                             "-" if ratio is None else f"{ratio:.2f}", _agree_cell(r)])
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h)
              for i, h in enumerate(TABLE_HEADER)]

    def fmt(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [fmt(TABLE_HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [fmt(line) for line in lines])


def _name(where: dict) -> str:
    window = "none" if where["window"] is None else where["window"]
    return (f"{SHORT_DTYPE[where['dtype']]} batch={where['batch']} context={where['context']} "
            f"window={window}")


def format_summary(targets: dict) -> str:
    a, b = targets["within_10pct_of_cuda_v2"], targets["bandwidth_80pct_at_large"]
    lines = [f"Target (a), reference Triton decode within 10% of vLLM CUDA v2: {a['definition']}."]
    if "not_evaluated" in a:
        lines.append(f"  not evaluated: {a['not_evaluated']}")
    else:
        lines.append(f"  {a['met']} of {a['evaluated']} points meet it.")
        for miss in a["not_met"]:
            lines.append(f"  not met: {_name(miss)}: {miss['reason']}")
    lines.append(f"Target (b), {b['target']}; {b['definition']}.")
    for p in b["points"]:
        pct = "-" if p["pct_bandwidth"] is None else f"{p['pct_bandwidth']:.0f}%"
        verdict = "meets" if p["meets"] else ("NOT met (outputs disagree)" if not p["agree"]
                                               else "NOT met")
        lines.append(f"  {_name(p)}: {pct} ({LABELS.get(p['best_kernel'], '-')}) {verdict}")
    lines.append(f"  {b['met']} of {b['evaluated']} large points meet it.")
    for s in targets["skipped"]:
        lines.append(f"Not run: {_name(s)}: {s['reason']}")
    if targets["disagreements"]:
        lines.append(f"DISAGREEMENTS at {len(targets['disagreements'])} points (see the agree "
                     "column): their times may not be of the same work.")
    return "\n".join(lines)


def progress_text(row: dict) -> str:
    """One point's progress line: its floor, each kernel's time or error, the agreement."""
    if row["skipped"]:
        return row["skipped"]
    parts = [f"floor {row['floor_us']:.1f} us"]
    parts += [f"{LABELS[k]} {c['us']:.1f} us" for k, c in row["kernels"].items() if "us" in c]
    parts += [f"{LABELS[k]} ERROR {c['error']}" for k, c in row["kernels"].items()
              if "error" in c]
    parts.append("agree" if agrees(row) else "DISAGREE")
    return ", ".join(parts)
