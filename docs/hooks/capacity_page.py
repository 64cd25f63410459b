"""MkDocs hook: the capacity page's table, rendered from the experiment's committed JSON.

``docs/capacity.md`` holds the prose and a ``CAPACITY-TABLE`` marker; the numbers come from
``docs/assets/capacity/capacity.json``, written by ``python -m benchmarks.capacity --json ...``
together with the SVG figures beside it, so the table cannot disagree with the figures; it is
read through :class:`benchmarks.report.CapacityReport`, the class the experiment writes it with.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.exceptions import PluginError

from benchmarks.report import CapacityReport, ReportError
from docs.hooks.page_markers import replace_marker, repo_root

PAGE = "capacity.md"
MARKER = "CAPACITY-TABLE"
DATA = Path("docs/assets/capacity/capacity.json")
PAPER = {"max": "20.4", "pow2": "26.8", "oracle": "38.2", "paged-16": "96.3"}


def capacity_table(data: CapacityReport) -> str:
    """A Markdown table of every scheme's outcome, with the paper's figure where it has one."""
    rows = ["| scheme | live tokens / KV memory | paper (Fig. 2) | memory held | mean concurrent | max concurrent | internal fragmentation | preemptions |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for o in data.outcomes:
        rows.append(
            f"| {o.scheme} | {o.effective_usage_pct:.1f} % | {PAPER.get(o.scheme, '')} "
            f"{'%' if o.scheme in PAPER else ''} | {o.reserved_pct:.1f} % | {o.mean_concurrency:.1f} | "
            f"{o.max_concurrency} | {o.internal_fragmentation_pct:.2f} % | {o.preemptions} |")
    by = {o.scheme: o for o in data.outcomes}
    if "paged-16" in by:
        ratios = ", ".join(
            f"{by['paged-16'].mean_concurrency / by[n].mean_concurrency:.1f}x {n}"
            for n in ("max", "pow2", "oracle") if n in by)
        rows.append(f"\nWith 16-token blocks, paging runs on average {ratios} as many requests at once.")
    rows.append(f"\n*{data.requests} {data.workload} requests, maximum length {data.max_len}, "
                f"a KV budget of {data.kv_slots:,} token slots.*")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:  # said before the data is read
        replace_marker(markdown, MARKER, "", PAGE)
    try:
        data = CapacityReport.read(repo_root(config) / DATA)
    except ReportError as err:
        raise PluginError(f"{PAGE}: cannot read {DATA}: {err}") from err
    return replace_marker(markdown, MARKER, capacity_table(data), PAGE)
