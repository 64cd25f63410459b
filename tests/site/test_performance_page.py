"""The performance page hook: tables come from the committed benchmark JSON, never typed by hand,
and a results file that is missing or broken says "not measured yet" instead of breaking the build."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from benchmarks.report import BlockManagerReport, ReportError, ScalingReport
from docs.hooks import performance_page as perf
from docs.hooks.performance_page import BENCHES, SCALING, results_markdown, scaling_markdown

REPO = Path(__file__).resolve().parents[2]
V1_033, V1_0102, V0_0102 = BENCHES


def spread(low, mid, high):
    return {"min": low, "median": mid, "max": high}


def trace(name, num_ops=1000, problems=(), ref=(100e3, 120e3, 130e3), vllm=(80e3, 90e3, 95e3),
          ratio=(1.21, 1.33, 1.41), best=1.37, count_key="num_ops"):
    entry = {"name": name, count_key: num_ops, "counts": {"schedule": 600, "append": 400, "preempt": 0},
             "problems": list(problems), "cpu_seconds": {}, "wall_seconds": {}, "ops_per_second": {}}
    if ref:
        entry["ops_per_second"]["reference"] = spread(*ref)
    if vllm:
        entry["ops_per_second"]["vllm"] = spread(*vllm)
    if ratio:
        entry["ratio_reference_over_vllm"] = spread(*ratio)
    if best is not None:
        entry["ratio_best_over_best"] = best
    return entry


def report(traces, found="vLLM 0.33.0 installed: reference (policy v0.33.0) vs vLLM", sides=("reference", "vllm"),
           **extra):
    data = {"found": found, "policy": "v0.33.0", "sides": list(sides), "repeats": 7, "requests": 321,
            "seed": 42, "python": "3.11.9", "traces": traces}
    data.update(extra)
    return data


def write(root: Path, bench, data) -> Path:
    path = root / bench.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def section(md: str, bench) -> str:
    """The part of the rendered Markdown that belongs to one benchmark."""
    start = md.index(f"### {bench.title}")
    following = md.find("\n### ", start + 1)
    return md[start:] if following < 0 else md[start:following]


def rows(md: str) -> list[list[str]]:
    """Body rows of the first Markdown table in ``md``, as stripped cells."""
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[2:]]


def test_every_trace_gets_a_row_in_the_files_order(tmp_path):
    """Catches: a table that silently drops a trace (or reorders them), so that a bad result
    disappears from the page."""
    names = ["shared_prefix", "chunked_prefill", "decode_heavy", "churn", "tight_pool", "a_new_one"]
    write(tmp_path, V1_033, report([trace(n, num_ops=1000 + i) for i, n in enumerate(names)]))
    table = rows(section(results_markdown(tmp_path), V1_033))
    assert [r[0] for r in table] == [f"`{n}`" for n in names]
    assert [r[1] for r in table] == [f"{1000 + i:,}" for i in range(len(names))]


def test_printed_figures_are_the_files_figures(tmp_path):
    """Catches: ratios or speeds printed that do not match the JSON (recomputed differently,
    rounded wrongly, the two sides' columns swapped, or min and max exchanged)."""
    write(tmp_path, V1_033, report([trace("t", ref=(101_234, 152_310, 203_456), vllm=(50_049, 75_160, 99_951),
                                          ratio=(0.876, 1.234, 1.987), best=1.5678)]))
    md = section(results_markdown(tmp_path), V1_033)
    (row,) = rows(md)
    assert row[2:6] == ["101.2 / 152.3 / 203.5", "50.0 / 75.2 / 100.0", "0.88 / 1.23 / 1.99", "1.57"]
    header = next(line for line in md.splitlines() if line.startswith("| trace"))
    assert header.index("reference kops/s") < header.index("vLLM kops/s") < header.index("reference / vLLM")


def test_the_benchmarks_own_json_writers_render_as_they_computed(tmp_path):
    """Catches: the page's reader and the benchmarks' JSON writers drifting apart (a renamed key,
    V0's ``num_calls``), which would blank a table or show figures the benchmark never printed."""
    from benchmarks import block_manager as v1
    from benchmarks import block_manager_v0 as v0
    from benchmarks import harness

    result = harness.TraceResult("decode_heavy", 5000, {"schedule": 3000, "append": 2000},
                            seconds={"reference": [0.5, 0.4, 0.45], "vllm": [0.6, 0.55, 0.5]},
                            wall_seconds={"reference": [1.0] * 3, "vllm": [1.0] * 3})
    args = SimpleNamespace(repeats=3, requests=99, seed=5)
    found = "vLLM 0.10.2 installed: reference (policy v0.10.2) vs vLLM"
    write(tmp_path, V1_0102, v1.json_report([result], ["reference", "vllm"], found,
                                            SimpleNamespace(name="v0.10.2"), args).to_json())
    v0_found = "vLLM 0.10.2 installed: reference V0 manager vs SelfAttnBlockSpaceManager"
    result.counts = {"allocate": 10, "step": 77}
    write(tmp_path, V0_0102, v0.json_report([result], ["reference", "vllm"], v0_found, args).to_json())
    md = results_markdown(tmp_path)
    expected_ratio = harness.spread(harness.ratios(result, "reference", "vllm"))
    for bench in (V1_0102, V0_0102):
        (row,) = rows(section(md, bench))
        assert row[:2] == ["`decode_heavy`", "5,000"]
        assert row[4] == " / ".join(f"{expected_ratio[k]:.2f}" for k in ("min", "median", "max"))
        assert row[5] == f"{harness.best_ratio(result, 'reference', 'vllm'):.2f}"
        assert "Not measured" not in section(md, bench) and "Not a comparison" not in section(md, bench)
    v0_md = section(md, V0_0102)
    assert "| trace | timed ops |" in v0_md and "step 77 (untimed, not counted)" in v0_md
    assert "Reference policy `v0.10.2`" in section(md, V1_0102)


def test_context_of_the_run_is_shown(tmp_path):
    """Catches: figures shown without how they were obtained (repeats, requests, seed, Python,
    what vLLM was found), so that two runs of different size look comparable."""
    write(tmp_path, V1_033, report([trace("t")]))
    md = section(results_markdown(tmp_path), V1_033)
    for text in ("vLLM 0.33.0 installed: reference (policy v0.33.0) vs vLLM", "Reference policy `v0.33.0`",
                 "321 requests per trace", "7 repeats", "seed 42", "Python 3.11.9", str(V1_033.path)):
        assert text in md, text


def test_missing_files_say_not_measured_and_give_the_command(tmp_path):
    """Catches: a missing results file breaking the build, or a section that is silently empty
    instead of saying that nothing was measured and how to measure it."""
    md = results_markdown(tmp_path)
    for bench in BENCHES:
        part = section(md, bench)
        assert '!!! warning "Not measured yet"' in part and "|" not in part.replace("\\|", "")
        assert f"-m {bench.module} --json {bench.path}" in part
        assert f"requirements/vllm-{bench.vllm}.txt" in part
        assert f"There is no results file `{bench.path}`" in part


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not readable JSON"),
    ("[]", "top level is not an object"),
    (json.dumps(report([])), "lists no traces"),
    (json.dumps(report([trace("t")], sides=[])), "'sides'"),
    (json.dumps(report([{"name": "t", "counts": {}}])), "neither num_ops nor num_calls"),
    (json.dumps(report([trace("t", ref=(3.0, 2.0, 1.0))])), "out of order"),
    (json.dumps(report([trace("t", best=None) | {"ratio_best_over_best": "fast"}])), "not a finite number"),
    (json.dumps(report([trace("t")])).replace("1.37", "NaN"), "not a finite number"),
    (json.dumps(report([trace("t") | {"ops_per_second": {"gpu": spread(1, 2, 3)}}])), "does not list"),
    (json.dumps(report([trace("t")], repeats="five")), "'repeats'"),
])
def test_unreadable_files_are_named_and_render_as_not_measured(tmp_path, content, problem):
    """Catches: a corrupt or truncated results file either crashing the build or being rendered
    as a plausible-looking but wrong table; the page must say what is wrong and how to rerun."""
    path = write(tmp_path, V1_033, content)
    with pytest.raises(ReportError, match=problem) as err:
        BlockManagerReport.read(path)
    assert path.name in str(err.value)
    part = section(results_markdown(tmp_path), V1_033)
    assert '!!! warning "Not measured yet"' in part and "cannot be read" in part
    assert f"--json {V1_033.path}" in part and "| trace |" not in part


def test_a_trace_whose_replays_differed_is_marked_and_gets_no_ratio(tmp_path):
    """Catches: a trace on which the two sides did different work being shown with a ratio as if
    the comparison meant something, or its problem being hidden."""
    write(tmp_path, V1_033, report([trace("ok"), trace("bad", problems=["vllm diverged at op 7 | oops"],
                                                        vllm=None, ratio=None, best=None)]))
    md = section(results_markdown(tmp_path), V1_033)
    ok, bad = rows(md)
    assert ok[-1] == "same on every replay" and bad[-1] == "**differed**"
    assert bad[3:6] == ["—", "—", "—"]
    assert '!!! failure "Replays disagreed"' in md and "vllm diverged at op 7 \\| oops" in md


def test_a_run_without_the_expected_vllm_is_flagged(tmp_path):
    """Catches: a reference-only run, or a run against another vLLM release, shown under a heading
    that claims a comparison with a particular vLLM."""
    write(tmp_path, V1_033, report([trace("t", vllm=None, ratio=None, best=None)], sides=["reference"],
                                   found="vLLM is absent from this environment: timing the reference alone"))
    write(tmp_path, V1_0102, report([trace("t")]))  # says vLLM 0.33.0, filed as 0.10.2
    md = results_markdown(tmp_path)
    alone = section(md, V1_033)
    assert '!!! warning "Not a comparison with vLLM 0.33.0"' in alone and "timing the reference alone" in alone
    header = next(line for line in alone.splitlines() if line.startswith("| trace"))
    assert "vLLM kops/s" not in header and "best / best" not in header
    assert '"Not a comparison with vLLM 0.10.2"' in section(md, V1_0102)


def test_hook_renders_only_its_page_and_needs_the_marker(tmp_path):
    """Catches: the hook rewriting other pages, or a performance page that lost its marker
    building without any results."""
    write(tmp_path, V1_033, report([trace("only_trace")]))
    config = SimpleNamespace(config_file_path=str(tmp_path / "mkdocs.yml"))
    other = SimpleNamespace(file=SimpleNamespace(src_uri="capacity.md"))
    assert perf.on_page_markdown("PERFORMANCE-RESULTS", other, config, None) == "PERFORMANCE-RESULTS"
    page = SimpleNamespace(file=SimpleNamespace(src_uri="performance.md"))
    with pytest.raises(PluginError, match="marker"):
        perf.on_page_markdown("no marker here", page, config, None)
    md = perf.on_page_markdown("before\n\nPERFORMANCE-RESULTS\n\nafter", page, config, None)
    assert "PERFORMANCE-RESULTS" not in md and "`only_trace`" in md and md.count('"Not measured yet"') == 2 + len(SCALING)


def test_importing_the_hook_reads_and_writes_nothing(tmp_path):
    """Catches: module-level work in the hook (reading results, touching files) that would run
    whenever MkDocs or a test merely imports it."""
    probe = (
        "import builtins, io, os, pathlib\n"
        "def refuse(*a, **k): raise AssertionError(f'file access on import: {a[:1]}')\n"
        "import mkdocs.exceptions\n"  # the one dependency, imported before the trap is set
        "builtins.open = io.open = os.listdir = os.scandir = refuse\n"
        "for name in ('read_text', 'read_bytes', 'write_text', 'exists', 'is_file', 'glob', 'iterdir'):\n"
        "    setattr(pathlib.Path, name, refuse)\n"
        "import docs.hooks.performance_page\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_the_page_keeps_its_marker_commands_and_links():
    """Catches: the page losing its placeholder, its rerun commands drifting from the README's,
    or its link to the capacity experiment."""
    page = (REPO / "docs" / "performance.md").read_text()
    assert perf.MARKER in page and "(capacity.md)" in page
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Benchmarks and experiments", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.strip() and block in page
    assert "## The GPU kernel benchmark" in page and "bash conformance/gpu/run.sh" in page


# -- the scaling sections -------------------------------------------------------------------------
SCALING_033, SCALING_0102 = SCALING


def scaling_report(found="vLLM 0.33.0 installed: reference (policy v0.33.0) vs vLLM", not_met=()):
    def point(context, ref_us, vllm_us):
        return {"context": context, "num_ops": 10, "problems": [],
                "ops": {"free": {"calls": 4, "reference_us": ref_us, "vllm_us": vllm_us,
                                 "ratio_vllm_over_reference": vllm_us / ref_us}},
                "peak_bytes_per_block": {"reference": 120.0, "vllm": 250.0}}
    return {"found": found, "generation": "v1", "policy": "v0.33.0", "sides": ["reference", "vllm"],
            "pool_blocks": 100000, "block_size": 16, "seqs": 4, "decode": 256, "chunk": 2048, "repeats": 3,
            "seed": 0, "python": "3.11.7", "targets_not_met": list(not_met),
            "profiles": {"131072/reference": "   ncalls  tottime\n     4    0.025 free_blocks\n"},
            "contexts": [point(4096, 50.0, 60.0), point(131072, 1600.0, 1200.0)]}


def test_scaling_section_shows_each_figure_a_plot_and_the_misses(tmp_path):
    """Catches: a scaling section that drops a context or a side, prints a ratio the file does not
    hold, draws no plot, or hides the targets the run did not meet."""
    write(tmp_path, SCALING_033, scaling_report(not_met=["free at 131072 tokens: 0.75x of vLLM (below 1.0)"]))
    md = scaling_markdown(tmp_path)
    part = md[md.index(f"### {SCALING_033.title}"):md.index(f"### {SCALING_0102.title}")]
    assert "| `free` | 4k | 4 | 50.0 | 60.0 | 1.20 |" in part
    assert "| `free` | 128k | 4 | 1,600.0 | 1,200.0 | **0.75** |" in part
    assert "| 128k | 120 | 250 |" in part
    assert part.count("<svg") == 1 and part.count("<polyline") == 2
    assert "Targets not met" in part and "0.75x of vLLM" in part
    assert 'cProfile of one replay: 131072/reference' in part and "0.025 free_blocks" in part
    assert "Not measured" in md[md.index(f"### {SCALING_0102.title}"):]  # the other file is missing


def test_the_scaling_benchmarks_json_renders(tmp_path):
    """Catches: the scaling benchmark's JSON writer and the page's reader drifting apart."""
    from benchmarks import scaling

    out = tmp_path / "s.json"
    assert scaling.main(["--contexts", "256,512", "--pool", "200", "--seqs", "2", "--decode", "3",
                         "--chunk", "128", "--repeats", "1", "--generation", "v1", "--json", str(out)]) == 0
    data = ScalingReport.read(out)
    assert [p.context for p in data.contexts] == [256, 512]
    assert {"schedule_prefill", "schedule_decode", "append", "free"} <= set(data.contexts[0].ops)
    write(tmp_path, SCALING_033, out.read_text())
    assert "<svg" in scaling_markdown(tmp_path)


def test_a_broken_scaling_file_says_not_measured(tmp_path):
    """Catches: a malformed scaling file breaking the site build instead of being named."""
    broken = scaling_report()
    broken["contexts"][0]["ops"]["free"]["calls"] = "four"
    write(tmp_path, SCALING_033, broken)
    with pytest.raises(ReportError, match="calls"):
        ScalingReport.read(tmp_path / SCALING_033.path)
    assert "cannot be read" in scaling_markdown(tmp_path)
