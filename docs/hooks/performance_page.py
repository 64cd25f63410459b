"""MkDocs hook: the performance page's tables, rendered from the committed benchmark results.

``docs/performance.md`` holds the prose and a ``PERFORMANCE-RESULTS`` marker. The numbers come
from the JSON files that ``python -m benchmarks.block_manager --json ...`` and
``python -m benchmarks.block_manager_v0 --json ...`` write to ``benchmarks/results/`` (one file
per benchmark and vLLM release, listed in :data:`BENCHES`), so the page shows exactly what a run
measured and nothing typed by hand. Every figure is printed from the file as it stands (ratios
included: none is recomputed here).

The long-context scaling benchmark (``python -m benchmarks.scaling --json ...``, files listed in
:data:`SCALING`) gets its own sections: a table of microseconds per call on each side and their
ratio at every context length, the peak memory per pool block, and a plot per operation of time
per call against context length for both sides (inline SVG drawn here from the file's figures).

The files are read through :mod:`benchmarks.report`, the module the benchmarks write them with
(one dataclass per report kind, validated on reading). A results file that is missing, or that
cannot be read as a benchmark report, does not break the build: its section says "not measured
yet", names the defect and gives the command that writes it. Importing this module reads nothing.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmarks.report import BlockManagerReport, ReportError, ScalingReport, Spread
from docs.hooks.page_markers import replace_marker, repo_root
from upstream.releases import V0_RELEASE, V1_RELEASE

PAGE = "performance.md"
MARKER = "PERFORMANCE-RESULTS"
RESULTS_DIR = PurePosixPath("benchmarks/results")
SIDE_NAMES = {"reference": "reference", "vllm": "vLLM"}

log = logging.getLogger("mkdocs.hooks.performance_page")


def rerun_command(vllm: str, module: str, path: PurePosixPath) -> str:
    """The commands (from the repository root) that rerun a benchmark module into ``path``."""
    return (f"E=$(scripts/ensure-env requirements/vllm-{vllm}.txt)\n"
            f'CUDA_VISIBLE_DEVICES="" PYTHONPATH=. $E/bin/python -m {module} --json {path}')


@dataclass(frozen=True)
class Bench:
    """One committed results file: where it lives, what it compares and how to write it again."""

    file: str  # name under RESULTS_DIR
    title: str  # the section heading on the page
    module: str  # the benchmark module that writes it
    vllm: str  # the vLLM release it was measured against
    unit: str  # what the op count counts
    untimed: tuple[str, ...] = ()  # trace entries that are replayed but not timed or counted

    @property
    def path(self) -> PurePosixPath:
        return RESULTS_DIR / self.file

    @property
    def command(self) -> str:
        """The commands (from the repository root) that write this file."""
        return rerun_command(self.vllm, self.module, self.path)


BENCHES = (
    Bench(f"block_manager-vllm-{V1_RELEASE}.json", f"V1 page manager: reference vs vLLM {V1_RELEASE} `KVCacheManager`",
          "benchmarks.block_manager", V1_RELEASE, "ops"),
    Bench(f"block_manager-vllm-{V0_RELEASE}.json", f"V1 page manager: reference vs vLLM {V0_RELEASE} `KVCacheManager`",
          "benchmarks.block_manager", V0_RELEASE, "ops"),
    Bench(f"block_manager_v0-vllm-{V0_RELEASE}.json",
          f"V0 block manager: reference vs vLLM {V0_RELEASE} `SelfAttnBlockSpaceManager`",
          "benchmarks.block_manager_v0", V0_RELEASE, "timed ops", untimed=("step",)),
)


# -- rendering ------------------------------------------------------------------------------------
def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _side(label: str) -> str:
    return SIDE_NAMES.get(label, label)


def _kops(spread: Spread | None) -> str:
    return " / ".join(f"{v / 1e3:.1f}" for v in (spread.min, spread.median, spread.max)) if spread else "—"


def _ratio(spread: Spread | None) -> str:
    return " / ".join(f"{v:.2f}" for v in (spread.min, spread.median, spread.max)) if spread else "—"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in text.splitlines())


def results_table(results: BlockManagerReport, unit: str = "ops") -> str:
    """A Markdown table with one row per trace, in the file's order: ops, each side's kops/s
    (min / median / max over the repeats), and with two sides the reference/vLLM throughput
    ratio (min / median / max of the per-repeat ratios) and the ratio of the two best replays."""
    paired = len(results.sides) == 2
    head = ["trace", unit] + [f"{_side(s)} kops/s<br>min / median / max" for s in results.sides]
    align = ["---", "---:"] + ["---:"] * len(results.sides)
    if paired:
        head += [f"{_side(results.sides[0])} / {_side(results.sides[1])}<br>min / median / max", "best / best"]
        align += ["---:", "---:"]
    head.append("books")
    align.append("---")
    rows = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for t in results.traces:
        cells = [f"`{_cell(t.name)}`", f"{t.num_ops:,}"] + [_kops(t.ops_per_second.get(s)) for s in results.sides]
        if paired:
            best = t.ratio_best_over_best
            cells += [_ratio(t.ratio_reference_over_vllm), "—" if best is None else f"{best:.2f}"]
        cells.append("**differed**" if t.problems else "same on every replay")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def context_line(results: BlockManagerReport, bench: Bench) -> str:
    """What the run found and how it was run, as the file records it."""
    policy = f" Reference policy `{_cell(results.policy)}`;" if results.policy else ""
    return (f"*{_cell(results.found)}.{policy} {results.requests:,} requests per trace, "
            f"{results.repeats} repeats, seed {results.seed}, Python {_cell(results.python)}; "
            f"from `{bench.path}`.*")


def not_measured(bench: Bench, reason: str) -> str:
    """The admonition shown in place of a table when the results file is missing or unreadable."""
    body = (f"{reason[0].upper()}{reason[1:]}. Run, from the repository root:\n\n"
            f"```bash\n{bench.command}\n```\n\nand rebuild the site.")
    return f'!!! warning "Not measured yet"\n{_indent(body)}\n'


def bench_markdown(bench: Bench, root: Path) -> str:
    """One benchmark's section: heading, then its table and context, or why there is none."""
    out = [f"### {bench.title}\n"]
    path = root / bench.path
    if not path.is_file():
        log.info("performance page: %s is missing; the page says 'not measured yet'", bench.path)
        out.append(not_measured(bench, f"there is no results file `{bench.path}`"))
        return "\n".join(out)
    try:
        results = BlockManagerReport.read(path)
    except ReportError as err:
        log.info("performance page: %s", err)
        out.append(not_measured(bench, f"`{bench.path}` cannot be read ({_cell(err)})"))
        return "\n".join(out)
    if not re.search(rf"vLLM {re.escape(bench.vllm)}(?![0-9])", results.found) or len(results.sides) < 2:
        out.append(f'!!! warning "Not a comparison with vLLM {bench.vllm}"\n'
                   + _indent(f"This file records: *{_cell(results.found)}*. Rerun it in the vLLM {bench.vllm} "
                             f"environment:\n\n```bash\n{bench.command}\n```") + "\n")
    out.append(results_table(results, bench.unit) + "\n")
    out.append(context_line(results, bench) + "\n")
    broken = [t for t in results.traces if t.problems]
    if broken:
        lines = "\n".join(f"- `{_cell(t.name)}`: {_cell('; '.join(t.problems))}" for t in broken)
        out.append('!!! failure "Replays disagreed"\n'
                   + _indent("The two sides did not do the same work on these traces, so their figures "
                             "compare nothing:\n\n" + lines) + "\n")
    mixes = "\n".join(
        f"- `{_cell(t.name)}`: " + ", ".join(
            f"{_cell(k)} {v:,}" + (" (untimed, not counted)" if k in bench.untimed else "")
            for k, v in t.counts.items() if v)
        for t in results.traces if t.counts)
    if mixes:
        out.append('??? info "Operations in each trace"\n' + _indent(mixes) + "\n")
    return "\n".join(out)


def results_markdown(root: Path, benches: tuple[Bench, ...] = BENCHES) -> str:
    """Every benchmark's section, in :data:`BENCHES` order."""
    return "\n".join(bench_markdown(bench, root) for bench in benches)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the marker on the performance page with the tables."""
    if page.file.src_uri != PAGE:
        return markdown
    root = repo_root(config)
    return replace_marker(markdown, MARKER, results_markdown(root) + "\n" + scaling_markdown(root) + "\n"
                          + gpu_lane_markdown(root), PAGE)


def gpu_lane_markdown(root: Path) -> str:
    """The GPU lane's kernel benchmark, from its committed report ("never run" without one)."""
    from conformance.gpu import report as gpu_report

    try:
        return gpu_report.performance_markdown(gpu_report.load(root))
    except gpu_report.ReportError as err:
        log.info("performance page: %s", err)
        return f'!!! warning "GPU lane report unreadable"\n    {_cell(err)}\n'



# -- the long-context scaling benchmark -----------------------------------------------------------
@dataclass(frozen=True)
class ScalingBench:
    """One committed scaling results file and the vLLM release it was measured against."""

    file: str
    title: str
    vllm: str

    @property
    def path(self) -> PurePosixPath:
        return RESULTS_DIR / self.file

    @property
    def command(self) -> str:
        return rerun_command(self.vllm, "benchmarks.scaling", self.path)


SCALING = (
    ScalingBench(f"scaling-vllm-{V1_RELEASE}.json", f"Long contexts, V1: reference vs vLLM {V1_RELEASE} `KVCacheManager`",
                 V1_RELEASE),
    ScalingBench(f"scaling-vllm-{V0_RELEASE}.json",
                 f"Long contexts, V0: reference vs vLLM {V0_RELEASE} `SelfAttnBlockSpaceManager`", V0_RELEASE),
)


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n % 1024 == 0 else f"{n:,}"


def scaling_table(results: ScalingReport) -> str:
    """One row per operation and context: calls, microseconds per call on each side, the ratio."""
    paired = len(results.sides) == 2
    head = ["operation", "context", "calls"] + [f"{_side(s)} µs/call" for s in results.sides]
    align = ["---", "---:", "---:"] + ["---:"] * len(results.sides)
    if paired:
        head.append(f"{_side(results.sides[1])} time / {_side(results.sides[0])} time")
        align.append("---:")
    rows = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    names = sorted({name for p in results.contexts for name in p.ops})
    for name in names:
        for p in results.contexts:
            op = p.ops.get(name)
            if op is None:
                continue
            cells = [f"`{_cell(name)}`", _tokens(p.context), f"{op.calls:,}"]
            cells += [f"{op.us[s]:,.1f}" if s in op.us else "—" for s in results.sides]
            if paired:
                ratio = op.ratio_vllm_over_reference
                cells.append("—" if ratio is None else (f"**{ratio:.2f}**" if ratio < 1 else f"{ratio:.2f}"))
            rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def memory_table(results: ScalingReport) -> str:
    head = ["context"] + [f"{_side(s)} bytes per pool block" for s in results.sides]
    rows = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---:"] * len(head)) + " |"]
    for p in results.contexts:
        rows.append("| " + " | ".join([_tokens(p.context)] + [
            f"{p.peak_bytes_per_block[s]:,.0f}" if s in p.peak_bytes_per_block else "—" for s in results.sides]) + " |")
    return "\n".join(rows)


SIDE_STYLES = {"reference": ("#1f77b4", ""), "vllm": ("#d62728", "6 4")}
PLOT_W, PLOT_H, MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 300, 200, 52, 12, 24, 34


def scaling_plot(name: str, results: ScalingReport) -> str:
    """An inline SVG: microseconds per call against context length (both log scales), one line per side."""
    series = {s: [(p.context, p.ops[name].us[s]) for p in results.contexts if name in p.ops and s in p.ops[name].us]
              for s in results.sides}
    values = [v for points in series.values() for _, v in points if v > 0]
    contexts = sorted({c for points in series.values() for c, _ in points})
    if not values or not contexts:
        return ""
    lo_y, hi_y = math.log10(min(values)), math.log10(max(values))
    if hi_y - lo_y < 0.5:
        lo_y, hi_y = lo_y - 0.25, hi_y + 0.25
    lo_x, hi_x = math.log2(contexts[0]) - 0.3, math.log2(contexts[-1]) + 0.3  # points off the frame
    inner_w, inner_h = PLOT_W - MARGIN_L - MARGIN_R, PLOT_H - MARGIN_T - MARGIN_B

    def xy(c: float, v: float) -> tuple[float, float]:
        x = MARGIN_L + (math.log2(c) - lo_x) / (hi_x - lo_x) * inner_w
        y = MARGIN_T + (1 - (math.log10(v) - lo_y) / (hi_y - lo_y)) * inner_h
        return round(x, 1), round(y, 1)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_W}" height="{PLOT_H}" '
             f'viewBox="0 0 {PLOT_W} {PLOT_H}" role="img" aria-label="{_cell(name)}: microseconds per call '
             f'against context length" style="font: 10px sans-serif">',
             f'<text x="{MARGIN_L}" y="14" font-weight="bold">{_cell(name)}</text>',
             f'<rect x="{MARGIN_L}" y="{MARGIN_T}" width="{inner_w}" height="{inner_h}" fill="none" stroke="#999"/>']
    for c in contexts:
        x, _ = xy(c, 10 ** lo_y)
        parts.append(f'<text x="{x}" y="{PLOT_H - MARGIN_B + 13}" text-anchor="middle">{_tokens(c)}</text>')
    for exponent in range(math.floor(lo_y), math.ceil(hi_y) + 1):
        if lo_y <= exponent <= hi_y:
            _, y = xy(contexts[0], 10 ** exponent)
            parts.append(f'<line x1="{MARGIN_L}" x2="{MARGIN_L + inner_w}" y1="{y}" y2="{y}" stroke="#ddd"/>')
            parts.append(f'<text x="{MARGIN_L - 4}" y="{y + 3}" text-anchor="end">{10 ** exponent:g}</text>')
    parts.append(f'<text x="{MARGIN_L + inner_w / 2}" y="{PLOT_H - 4}" text-anchor="middle">context (tokens)</text>')
    parts.append(f'<text x="10" y="{MARGIN_T + inner_h / 2}" transform="rotate(-90 10 {MARGIN_T + inner_h / 2})" '
                 f'text-anchor="middle">µs per call</text>')
    for index, (side, points) in enumerate(series.items()):
        colour, dash = SIDE_STYLES.get(side, ("#555", "2 2"))
        coords = [xy(c, v) for c, v in points if v > 0]
        if not coords:
            continue
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dashed} points="'
                     + " ".join(f"{x},{y}" for x, y in coords) + '"/>')
        parts += [f'<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>' for x, y in coords]
        # The legend sits in the title row, right-aligned, one side after the other.
        parts.append(f'<text x="{PLOT_W - MARGIN_R - 70 * (len(series) - 1 - index)}" y="14" text-anchor="end" '
                     f'fill="{colour}">{"—" if not dash else "- -"} {_cell(_side(side))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def scaling_section(bench: ScalingBench, root: Path) -> str:
    out = [f"### {bench.title}\n"]
    path = root / bench.path
    if not path.is_file():
        log.info("performance page: %s is missing; the page says 'not measured yet'", bench.path)
        out.append(not_measured(bench, f"there is no results file `{bench.path}`"))  # type: ignore[arg-type]  # not_measured reads only the fields a ScalingBench has too
        return "\n".join(out)
    try:
        results = ScalingReport.read(path)
    except ReportError as err:
        log.info("performance page: %s", err)
        out.append(not_measured(bench, f"`{bench.path}` cannot be read ({_cell(err)})"))  # type: ignore[arg-type]  # not_measured reads only the fields a ScalingBench has too
        return "\n".join(out)
    if not re.search(rf"vLLM {re.escape(bench.vllm)}(?![0-9])", results.found) or len(results.sides) < 2:
        out.append(f'!!! warning "Not a comparison with vLLM {bench.vllm}"\n'
                   + _indent(f"This file records: *{_cell(results.found)}*. Rerun it in the vLLM {bench.vllm} "
                             f"environment:\n\n```bash\n{bench.command}\n```") + "\n")
    out.append(f"*{_cell(results.found)}. {results.generation.upper()} managers; {results.seqs} requests of each "
               f"context length, prefilled {results.chunk:,} tokens a step, then sampling {results.decode} tokens "
               f"each ({results.decode - 1} decode steps after the step that ends the prefill), then freed; a pool of {results.pool_blocks:,} blocks; median of {results.repeats} repeats; "
               f"Python {_cell(results.python)}; from `{bench.path}`.*\n")
    names = sorted({name for p in results.contexts for name in p.ops})
    plots = [scaling_plot(name, results) for name in names]
    out.append('<div class="scaling-plots" style="display: flex; flex-wrap: wrap; gap: 8px">'
               + "".join(plots) + "</div>\n")
    out.append(scaling_table(results) + "\n")
    out.append(memory_table(results) + "\n")
    broken = [p for p in results.contexts if p.problems]
    if broken:
        lines = "\n".join(f"- {_tokens(p.context)}: {_cell('; '.join(p.problems))}" for p in broken)
        out.append('!!! failure "Replays disagreed"\n' + _indent(lines) + "\n")
    if results.targets_not_met:
        out.append('!!! note "Targets not met in this run"\n' + _indent(
            "Every operation at least 1.0x vLLM's speed at every size, and no ratio falling as the size grows "
            "(a fall of more than 10% from one size to the next counts):\n\n"
            + "\n".join(f"- {_cell(m)}" for m in results.targets_not_met)) + "\n")
    elif len(results.sides) == 2:
        out.append("Targets met in this run: every operation at least 1.0x vLLM's speed at every size, "
                   "no ratio falling by more than 10% from one size to the next.\n")
    for key, text in results.profiles.items():
        out.append(f'??? info "cProfile of one replay: {_cell(key)}"\n'
                   + _indent("```text\n" + text.strip("\n") + "\n```") + "\n")
    return "\n".join(out)


def scaling_markdown(root: Path, benches: tuple[ScalingBench, ...] = SCALING) -> str:
    """Every scaling section, in :data:`SCALING` order."""
    return "\n".join(scaling_section(bench, root) for bench in benches)
