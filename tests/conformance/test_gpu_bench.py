"""The GPU kernel benchmark, tested without a GPU: the sweep plan and the floor and bandwidth
arithmetic (``plan.py``), the two targets and the table (``evaluate.py``), the entry points
(``bench.py``, ``run.py``), the module split itself, and one tiny sweep (``measure.py``) on the CPU
under the Triton interpreter with a stub timer and stand-in CUDA ops.

Nothing here launches a Triton kernel in this process: the end-to-end sweep runs in a subprocess
with ``TRITON_INTERPRET=1`` set before Triton loads, so the file works whatever the calling
environment set.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")  # as the other kernel tests: before triton loads

from conformance.gpu import bench, evaluate, measure, plan, run

REPO = Path(__file__).resolve().parents[2]
GIB = 2**30


def test_full_plan_has_every_point_and_window_rows_only_past_the_window():
    """Catches: a sweep that drops a dtype/batch/context, or adds window rows whose window covers
    the whole context (they would repeat the row without a window under another name)."""
    planned = plan.plan(**plan.FULL)
    points = [p for p, _ in planned]
    assert len(points) == 2 * 5 * 4 + 2 * 5 * 2 == 60
    assert all(reason is None for _, reason in planned)  # largest: 32 GiB <= 48 GiB
    plain = {(p.dtype, p.batch, p.context) for p in points if p.window is None}
    assert plain == {(d, b, c) for d in ("float16", "bfloat16") for b in (1, 8, 32, 128, 256)
                     for c in (512, 2048, 8192, 32768)}
    windowed = [p for p in points if p.window is not None]
    assert {p.window for p in windowed} == {4096}
    assert {p.context for p in windowed} == {8192, 32768}
    assert all(p.shape == plan.Shape(128, 16, 32, 8) for p in points)
    quick = [p for p, _ in plan.plan(**plan.QUICK)]
    assert len(quick) == 2 * 2 * 2 + 2 * 2
    assert {(p.batch, p.context) for p in quick} == {(1, 512), (1, 32768), (256, 512),
                                                     (256, 32768)}


def test_memory_budget_skips_are_planned_and_named():
    """Catches: a point over the budget that is silently dropped (the table must say it was
    skipped) or allocated anyway, and an off-by-one at exactly the budget."""
    planned = dict(plan.plan(("float16",), (128, 256), (32768,), (None,), max_kv_gib=16))
    by_batch = {p.batch: (p, reason) for p, reason in planned.items()}
    p128, r128 = by_batch[128]
    p256, r256 = by_batch[256]
    assert p128.kv_cache_bytes == 16 * GIB and r128 is None
    assert p256.kv_cache_bytes == 32 * GIB
    assert r256 == "skipped: KV cache 32.0 GiB > --max-kv-gib 16"
    rows = [evaluate.point_row(p, reason) for p, reason in planned.items()]
    table = evaluate.format_table(rows)
    assert "skipped: KV cache 32.0 GiB > --max-kv-gib 16" in table
    targets = evaluate.evaluate_targets(rows)
    assert [s["batch"] for s in targets["skipped"]] == [256]


def test_kv_bytes_floor_and_bandwidth_arithmetic():
    """Catches: a floor that counts only keys (or only one KV head), ignores the window, uses
    the query head count, or a copy bandwidth that forgets a copy both reads and writes."""
    p = plan.Point("float16", 32, 2048, None)
    assert p.kv_read_bytes == 2 * 32 * 2048 * 8 * 128 * 2 == 256 * 2**20
    assert p.kv_cache_bytes == p.kv_read_bytes
    w = plan.Point("bfloat16", 4, 32768, 4096)
    assert w.tokens_read == 4096
    assert w.kv_read_bytes == 2 * 4 * 4096 * 8 * 128 * 2
    assert w.kv_cache_bytes == 2 * 4 * 32768 * 8 * 128 * 2  # the whole context is allocated
    odd = plan.Point("float16", 1, 520, None)  # a partial last block is still allocated
    assert odd.kv_cache_bytes == 2 * 33 * 16 * 8 * 128 * 2 and odd.tokens_read == 520
    assert plan.floor_us(256 * 2**20, 4e12) == pytest.approx(67.108864)
    assert plan.pct_of_bandwidth(50.0, 62.5) == pytest.approx(80.0)
    seen = []
    bandwidth = measure.copy_bandwidth("cpu", lambda fn: (seen.append(fn()), {"us": 2.0})[1],
                                     num_bytes=1000)
    assert len(seen) == 1 and bandwidth == pytest.approx(2 * 1000 / 2e-6)


def _row(dtype="float16", batch=32, context=8192, window=None, times=None, agree=True,
         floor=100.0):
    point = plan.Point(dtype, batch, context, window)
    row = evaluate.point_row(point)
    row["floor_us"] = floor
    for name in plan.KERNELS:
        if window is not None and name != "reference_triton_varlen":
            row["kernels"][name] = {"na": "no window support"}
        elif name in (times or {}):
            us = times[name]
            row["kernels"][name] = {"us": us, "pct_bandwidth": plan.pct_of_bandwidth(floor, us)}
    row["agreement"] = {"ok": agree, "compared": {} if agree else {
        "vllm_cuda_v2": {"ok": False, "max_abs_diff": 0.5}}}
    row["ref_best_over_cuda_v2"] = evaluate.ratio_to_cuda_v2(row)
    return row


def test_target_a_boundary_and_disagreement():
    """Catches: an inverted or off-by-one 10% comparison, using the slower of v1/v2 instead of
    the faster, counting window rows, or a fast-but-wrong kernel counted as meeting the target."""
    ok = _row(batch=1, times={"reference_triton_v1": 2.0, "reference_triton_v2": 1.09,
                              "reference_triton_varlen": 1.0, "vllm_cuda_v2": 1.0})
    slow = _row(batch=8, times={"reference_triton_v1": 1.11, "reference_triton_v2": 1.5,
                                "reference_triton_varlen": 1.0, "vllm_cuda_v2": 1.0})
    wrong = _row(batch=32, agree=False, times={"reference_triton_v1": 0.5,
                                               "reference_triton_v2": 0.5,
                                               "vllm_cuda_v2": 1.0})
    windowed = _row(batch=32, context=32768, window=4096,
                    times={"reference_triton_varlen": 9.0})
    assert ok["ref_best_over_cuda_v2"] == pytest.approx(1.09)
    a = evaluate.evaluate_targets([ok, slow, wrong, windowed])["within_10pct_of_cuda_v2"]
    assert (a["evaluated"], a["met"]) == (3, 1)
    assert [(m["batch"], m["reason"]) for m in a["not_met"]] == [(8, "1.11x CUDA v2"),
                                                                 (32, "outputs disagree")]
    none = evaluate.evaluate_targets([ok], ops_loaded=False)["within_10pct_of_cuda_v2"]
    assert none["not_evaluated"] and none["met"] == 0
    summary = evaluate.format_summary(evaluate.evaluate_targets([ok, slow]))
    assert "1 of 2 points meet it" in summary and "batch=8 context=8192" in summary


def test_target_b_large_points_and_best_reference_kernel():
    """Catches: a "large" threshold other than batch x context >= 32 x 8192, judging a point by a
    CUDA kernel or the slowest reference kernel, or leaving window rows out silently."""
    times = {"reference_triton_v1": 200.0, "reference_triton_v2": 125.0,  # 50%, 80%
             "reference_triton_varlen": 150.0, "vllm_cuda_v2": 100.0}
    at_threshold = _row(batch=32, context=8192, times=times)
    below = _row(batch=16, context=8192, times=times)
    long_thin = _row(batch=8, context=32768, times={**times, "reference_triton_v2": 126.0})
    windowed = _row(batch=256, context=32768, window=4096,
                    times={"reference_triton_varlen": 110.0})
    assert [r["large"] for r in (at_threshold, below, long_thin)] == [True, False, True]
    b = evaluate.evaluate_targets([at_threshold, below, long_thin, windowed])[
        "bandwidth_80pct_at_large"]
    assert "32 x 8192" in b["definition"]
    got = [(p["batch"], p["window"], p["best_kernel"], round(p["pct_bandwidth"], 1), p["meets"])
           for p in b["points"]]
    assert got == [(32, None, "reference_triton_v2", 80.0, True),
                   (8, None, "reference_triton_v2", 79.4, False),
                   (256, 4096, "reference_triton_varlen", 90.9, True)]
    assert (b["evaluated"], b["met"]) == (3, 2)
    assert "32 x 8192" in evaluate.format_summary(evaluate.evaluate_targets([at_threshold]))


def test_table_lists_every_point_with_na_for_cuda_under_a_window():
    """Catches: a table that drops rows (skipped or windowed ones), shows a CUDA time where the
    CUDA kernels cannot run, or hides a disagreement."""
    times = {n: 100.0 for n in plan.KERNELS}
    rows = [_row(times=times), _row(window=4096, context=32768,
                                    times={"reference_triton_varlen": 50.0}),
            _row(batch=8, agree=False, times=times),
            evaluate.point_row(plan.Point("bfloat16", 256, 32768, None), "skipped: test")]
    no_ops = _row(batch=1, times={n: 100.0 for n in plan.REFERENCE_KERNELS})
    for name in ("vllm_cuda_v1", "vllm_cuda_v2"):
        no_ops["kernels"][name] = {"na": "vLLM ops not loaded"}
    rows.append(no_ops)
    lines = evaluate.format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    assert all(len(line) == len(lines[0]) for line in lines)  # aligned columns
    window_line = lines[3]
    assert "4096" in window_line and window_line.count("n/a (no window support)") == 4
    assert "50.0 (200%)" in window_line and "yes" in window_line
    assert "100.0 (100%)" in lines[2] and "1.00" in lines[2]
    assert "NO: CUDA v2 0.5" in lines[4]
    assert "skipped: test" in lines[5] and "bf16" in lines[5]
    assert lines[6].count("not loaded") == 2


def test_cache_fill_is_the_same_data_in_both_layouts():
    """Catches: a classic/flash fill that permutes heads, dims or offsets differently (the
    varlen kernel would then attend over other values than the classic kernels), and block
    tables that reuse or skip a block id."""
    import torch

    from reference.attention.layouts import classic_key_at, classic_value_at, flash_at

    shape = plan.Shape(head_size=32, block_size=16, num_heads=4, num_kv_heads=2)
    for dtype in ("float16", "bfloat16"):
        point = plan.Point(dtype, 3, 40, None, shape)
        kc, vc = measure.make_cache(point, "classic", "cpu", seed=5)
        kf, vf = measure.make_cache(point, "flash", "cpu", seed=5)
        assert kf.shape == (9, 16, 2, 32) and kc.shape == (9, 2, 4, 16, 8)
        assert not torch.equal(kf, vf)
        assert float(kf.float().min()) >= -1 and float(kf.float().max()) < 1
        for block, offset in ((0, 0), (4, 7), (8, 15)):
            assert torch.equal(classic_key_at(kc, block, offset), flash_at(kf, block, offset))
            assert torch.equal(classic_value_at(vc, block, offset), flash_at(vf, block, offset))
        again, _ = measure.make_cache(point, "flash", "cpu", seed=5)
        assert torch.equal(again, kf)
        inputs = measure.make_inputs(point, "cpu", seed=5)
        assert inputs["block_tables"].shape == (3, 3)
        assert sorted(inputs["block_tables"].flatten().tolist()) == list(range(9))
        assert inputs["query_start_loc"].tolist() == [0, 1, 2, 3]


def test_run_py_wires_the_sweep_options(monkeypatch):
    """Catches: run.sh's benchmark step running the full sweep by default (it must fit the
    device budget), ignoring --bench-full or the memory budget, or calling a benchmark entry
    point that no longer exists."""
    calls = []
    monkeypatch.setattr(bench, "run", lambda ops, **kw: calls.append((ops, kw)) or {"ok": 1})
    args = run.parse_args([])
    assert args.bench_full is False and args.bench_max_kv_gib == plan.DEFAULT_MAX_KV_GIB == 48
    assert run.benchmark("OPS", args) == {"ok": 1}
    run.benchmark(None, run.parse_args(["--bench-full", "--bench-max-kv-gib", "8"]))
    assert calls == [("OPS", {"quick": True, "max_kv_gib": 48.0}),
                     (None, {"quick": False, "max_kv_gib": 8.0})]
    assert len(run.sweep_points(args)) == 12
    assert len(run.sweep_points(run.parse_args(["--bench-full", "--bench-max-kv-gib", "8"]))) < 60
    with pytest.raises(SystemExit):
        run.parse_args(["--bench-max-kv-gib", "0"])


SPLIT_CHILD = textwrap.dedent('''
    import sys
    from conformance.gpu import evaluate, plan
    assert "torch" not in sys.modules, "the planner/evaluator imported torch"
    from conformance.gpu import bench
    assert "conformance.gpu.run" not in sys.modules, "bench imports run (the old import cycle)"
    assert "torch" not in sys.modules, "importing bench imported torch"
    from conformance.gpu import ops, run
    assert run.bench is bench and bench.load_ops is ops.load_ops is run.load_ops
    print("ok")
''')


def test_planner_and_evaluator_are_pure_and_bench_run_do_not_import_each_other():
    """Catches: the sweep planner or evaluator importing torch (they must run and be tested on
    any machine), the bench.py <-> run.py import cycle coming back, or two copies of the ops
    loading (run.sh and the standalone benchmark must load the same ops the same way)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", SPLIT_CHILD], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_standalone_refuses_without_gpu(capsys):
    """Catches: the standalone benchmark crashing inside torch (or loading vLLM) on a machine
    without a GPU instead of refusing with exit status 2 and one line."""
    assert bench.main(["--quick"], has_gpu=lambda: False) == bench.NO_GPU
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no CUDA GPU" in err[0]


def test_estimated_full_sweep_fits_the_device_budget():
    """Catches: a sweep grown past the issue's five-minute budget by the benchmark's own model
    of its cost (which also prints at the start of every run)."""
    full = [p for p, _ in plan.plan(**plan.FULL)]
    quick = [p for p, _ in plan.plan(**plan.QUICK)]
    assert plan.estimate_seconds(quick) < 60
    assert plan.estimate_seconds(quick) < plan.estimate_seconds(full) < 300


# The end-to-end sweep: run in a subprocess so that Triton loads under its interpreter here.
E2E = textwrap.dedent('''
    import json, sys
    from conformance.gpu import measure, plan
    from reference.attention import decode, oracle, varlen

    events = []

    def recorded(module, attr, name):
        real = getattr(module, attr)
        def call(*args, **kwargs):
            checks_on = kwargs.get("validate", True)
            events.append(f"{name}:{'checked' if checks_on else 'unchecked'}")
            return real(*args, **kwargs)
        setattr(module, attr, call)

    recorded(decode, "paged_attention_v1", "ref_v1")
    recorded(decode, "paged_attention_v2", "ref_v2")
    recorded(varlen, "varlen_paged_attention", "varlen")

    class FakeOps:
        """vllm._custom_ops' signatures, computed by the plain-PyTorch oracle."""
        __name__ = "fake_ops"
        def __init__(self, broken_v2=False):
            self.broken_v2 = broken_v2
        def paged_attention_v1(self, out, q, kc, vc, num_kv_heads, scale, tables, lens,
                               block_size, max_len, alibi, kv_dtype, k_scale, v_scale):
            assert (num_kv_heads, block_size, alibi, kv_dtype) == (2, 16, None, "auto")
            assert max_len == int(lens.max())
            events.append("cuda_v1")
            out.copy_(oracle.paged_decode_oracle(q, kc, vc, tables, lens, scale))
        def paged_attention_v2(self, out, exp_sums, max_logits, tmp, q, kc, vc, num_kv_heads,
                               scale, tables, lens, block_size, max_len, alibi, kv_dtype,
                               k_scale, v_scale):
            parts = -(-max_len // 512)
            assert exp_sums.shape == max_logits.shape == (q.shape[0], q.shape[1], parts)
            assert tmp.shape == (*exp_sums.shape, q.shape[2]) and tmp.dtype == q.dtype
            events.append("cuda_v2")
            if self.broken_v2:
                out.zero_()
            else:
                out.copy_(oracle.paged_decode_oracle(q, kc, vc, tables, lens, scale))

    TIMES = {"ref_v1": 12.0, "ref_v2": 10.5, "varlen": 11.0, "cuda_v1": 20.0, "cuda_v2": 10.0}

    def stub_timer(fn):
        events.append("timer")
        before = len(events)
        fn()
        name = events[-1].split(":")[0] if len(events) > before else "copy"
        return {"us": TIMES.get(name, 10.0), "reps_us": [1.0], "calls_per_rep": 1}

    shape = plan.Shape(head_size=32, block_size=16, num_heads=4, num_kv_heads=2)
    good = measure.sweep(plan.plan(("float16",), (2,), (32, 64), (None, 32), shape=shape),
                       FakeOps(), device="cpu", timer=stub_timer, copy_bytes=4096,
                       ops_source="fake ops", log=lambda line: events.append("log"))
    good_events = list(events)
    events.clear()
    bad = measure.sweep(plan.plan(("bfloat16",), (2,), (32,), (None,), shape=shape),
                      FakeOps(broken_v2=True), device="cpu", timer=stub_timer, bandwidth=1e9,
                      log=lambda line: None)
    json.dump({"good": good, "events": good_events, "bad": bad}, sys.stdout)
''')


@pytest.fixture(scope="module")
def e2e():
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", E2E], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def test_tiny_sweep_checks_before_timing_and_returns_the_documented_result(e2e):
    """Catches: timing before (or without) the agreement check, Triton compiling inside a timed
    call, host checks left on in timed calls (or off in the check), CUDA ops called on window
    rows or with vLLM's arguments in the wrong order, and a result missing documented fields."""
    good = e2e["good"]
    assert set(good) >= {"settings", "shape", "device", "ops", "timing", "copy_bandwidth_GBps",
                         "estimated_seconds", "points", "targets", "table", "summary",
                         "elapsed_seconds"}
    json.dumps(good)
    assert good["copy_bandwidth_GBps"] == pytest.approx(2 * 4096 / 10e-6 / 1e9)
    assert [(p["context"], p["window"]) for p in good["points"]] == [(32, None), (64, None),
                                                                    (64, 32)]
    classic = ["ref_v1:checked", "ref_v2:checked", "cuda_v1", "cuda_v2", "varlen:checked",
               "timer", "varlen:unchecked", "timer", "ref_v1:unchecked", "timer",
               "ref_v2:unchecked", "timer", "cuda_v1", "timer", "cuda_v2", "log"]
    windowed = ["ref_v1:checked", "varlen:checked", "timer", "varlen:unchecked", "log"]
    assert e2e["events"][:3] == ["log", "timer", "log"]  # start line, copy bandwidth, its line
    assert e2e["events"][3:] == classic + classic + windowed + ["log"] * 3

    first, _, window_row = good["points"]
    assert list(first["kernels"]) == list(plan.KERNELS)
    assert first["agreement"]["ok"] and first["agreement"]["baseline"] == "reference_triton_v1"
    assert set(first["agreement"]["compared"]) == {"reference_triton_v2", "vllm_cuda_v1",
                                                   "vllm_cuda_v2", "reference_triton_varlen"}
    assert first["agreement"]["max_abs_baseline"] > 0.01  # the check compared real outputs
    assert first["floor_us"] == pytest.approx(2 * 2 * 32 * 2 * 32 * 2 / (2 * 4096 / 10e-6) * 1e6)
    v2 = first["kernels"]["reference_triton_v2"]
    assert v2["us"] == 10.5 and v2["pct_bandwidth"] == pytest.approx(100 * first["floor_us"] / 10.5)
    assert first["ref_best_over_cuda_v2"] == pytest.approx(1.05)
    assert window_row["agreement"]["baseline"] == plan.WINDOW_BASELINE
    assert set(window_row["agreement"]["compared"]) == {"reference_triton_varlen"}
    assert window_row["agreement"]["ok"]
    assert window_row["kv_read_bytes"] == window_row["kv_cache_bytes"] // 2
    assert all(window_row["kernels"][n] == {"na": "no window support"}
               for n in plan.CLASSIC_KERNELS)
    targets = good["targets"]
    assert targets["within_10pct_of_cuda_v2"]["met"] == 2
    assert targets["disagreements"] == [] and targets["skipped"] == []
    assert good["table"].count("\n") == 2 + 2 and "n/a (no window support)" in good["table"]


def test_tiny_sweep_records_a_disagreement_in_the_row(e2e):
    """Catches: a kernel that computes something else being timed and reported as if it did the
    same work (the row, the targets and the table must all say the outputs disagree)."""
    bad = e2e["bad"]
    (row,) = bad["points"]
    assert not row["agreement"]["ok"]
    assert not row["agreement"]["compared"]["vllm_cuda_v2"]["ok"]
    assert row["agreement"]["compared"]["reference_triton_v2"]["ok"]
    assert row["kernels"]["vllm_cuda_v2"]["us"] == 10.0  # still timed, and flagged
    assert bad["targets"]["disagreements"] == [{"dtype": "bfloat16", "batch": 2, "context": 32,
                                                "window": None}]
    assert bad["targets"]["within_10pct_of_cuda_v2"]["not_met"][0]["reason"] == \
        "outputs disagree"
    assert "NO: CUDA v2" in bad["table"] and "DISAGREEMENTS" in bad["summary"]
