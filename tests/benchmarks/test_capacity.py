"""The capacity experiment's building blocks: the workload, the reservation allocator, the paged
scheme on the reference block manager, and the serving loop. No timing is asserted anywhere."""

from benchmarks.capacity import serve
from benchmarks.capacity_schemes import PagedScheme, ReservationScheme
from benchmarks.workload import Request, make_requests


def test_workload_is_deterministic_and_respects_max_len():
    """Catches: an unseeded generator (figures that change on every run) or requests longer than
    the model's maximum length (which no reservation scheme could ever admit)."""
    a, b = make_requests(200, "sharegpt", 512, seed=3), make_requests(200, "sharegpt", 512, seed=3)
    assert a == b
    assert all(r.prompt_len >= 1 and r.output_len >= 1 and r.total_len <= 512 for r in a)
    assert make_requests(200, "sharegpt", 512, seed=4) != a


def test_first_fit_release_coalesces_neighbouring_holes():
    """Catches: freed regions that are never merged, so memory looks free but no large request
    fits again (an allocator leak that would inflate the contiguous schemes' waste)."""
    scheme = ReservationScheme("oracle", capacity=30, max_len=30)
    reqs = [Request(i, 5, 5) for i in range(3)]
    assert all(scheme.admit(r) for r in reqs)
    assert not scheme.admit(Request(9, 10, 10))  # 0 free
    scheme.release(reqs[0])
    scheme.release(reqs[2])
    assert not scheme.admit(Request(9, 10, 10))  # 20 free, but in two holes of 10
    scheme.release(reqs[1])
    assert scheme.holes == [(0, 30)]
    assert scheme.admit(Request(9, 15, 15))


def test_pow2_reserves_the_next_power_of_two_capped_at_max_len():
    """Catches: an off-by-one that reserves 2x for lengths that already are powers of two."""
    scheme = ReservationScheme("pow2", capacity=10_000, max_len=2048)
    assert scheme.reservation(Request(0, 60, 4)) == 64
    assert scheme.reservation(Request(1, 60, 5)) == 128
    assert scheme.reservation(Request(2, 1500, 548)) == 2048


def test_paged_serving_returns_every_block_and_beats_reservation():
    """Catches: the paged scheme leaking blocks through preemption (the pool would shrink run by
    run), or a simulator that credits paging without it really holding fewer slots."""
    requests = make_requests(60, "sharegpt", 512, seed=1)
    paged = PagedScheme(capacity=2048, block_size=16, max_len=512)
    outcome = serve(requests, paged, 512)
    assert paged.manager.pool.num_free_blocks == paged.manager.pool.num_blocks - 1
    assert not paged.manager.requests
    reserved = serve(requests, ReservationScheme("max", 2048, 512), 512)
    assert outcome.effective_usage_pct > reserved.effective_usage_pct
    assert outcome.mean_concurrency > reserved.mean_concurrency


def test_internal_fragmentation_counts_reservations_past_the_final_length():
    """Catches: the reservation schemes reported with no internal fragmentation (the capacity table
    showed 0 % for max, whose regions hold every slot past a request's final length), or the oracle,
    which reserves exactly the final length, charged with some."""
    from benchmarks.capacity import internal_waste

    scheme = ReservationScheme("max", capacity=100, max_len=20)
    reqs = [Request(0, 3, 4), Request(1, 5, 5)]
    assert all(scheme.admit(r) for r in reqs)
    assert internal_waste(scheme, reqs, live=3 + 5, held=40) == (20 - 7) + (20 - 10)
    oracle = ReservationScheme("oracle", capacity=100, max_len=20)
    assert all(oracle.admit(r) for r in reqs)
    assert internal_waste(oracle, reqs, live=8, held=17) == 0
    outcome = serve(make_requests(60, "sharegpt", 512, seed=1), ReservationScheme("max", 2048, 512), 512)
    assert outcome.internal_fragmentation_pct > 0


def test_the_committed_report_matches_a_rerun_of_the_reservation_schemes():
    """Catches: a change to the simulator or the schemes without a regenerated report (the capacity
    page would show figures the code no longer computes, as it once showed 0 % internal
    fragmentation for the reservation schemes). The three reservation rows and two of the nine
    paged rows (block sizes 16 and 256, about 3 s each) are rerun."""
    import dataclasses
    import json
    from pathlib import Path

    report = json.loads((Path(__file__).parents[2] / "docs/assets/capacity/capacity.json").read_text())
    requests = make_requests(report["requests"], report["workload"], report["max_len"])
    committed = {o["scheme"]: o for o in report["outcomes"]}
    schemes = [ReservationScheme(name, report["kv_slots"], report["max_len"]) for name in ("max", "pow2", "oracle")]
    schemes += [PagedScheme(report["kv_slots"], block_size, report["max_len"]) for block_size in (16, 256)]
    for scheme in schemes:
        outcome = serve(requests, scheme, report["max_len"])
        assert dataclasses.asdict(outcome) == committed[scheme.name], scheme.name
