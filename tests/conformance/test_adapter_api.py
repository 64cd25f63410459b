"""The adapters' public API (used by the machines and the benchmarks), inside a vLLM environment."""

from __future__ import annotations

import importlib.util

from conformance import versions
from conformance.configs import V0Config, V1Config
from conformance.lockstep import NotApplicable
from tests.conformance.pinned import unavailable

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def v1_system():
    if not HAS_VLLM:
        unavailable("vLLM is not importable in this environment", "v1.")
    from conformance.adapters.vllm_v1 import VllmV1System

    policy = versions.installed_v1_policy_name()
    return VllmV1System(V1Config.from_json({
        "policy": policy, "block_size": 2, "num_blocks": 8, "max_model_len": 16, "groups": [{"kind": "full"}],
        "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0", "entropy": "5e" * 32, "watermark": 0.0}))


def test_v1_make_request_and_advance_match_the_scheduler():
    """Catches: a benchmark-built request that hashes or advances differently from the machine's
    (the bookkeeping used to be written four times)."""
    system = v1_system()
    request = system.make_request("x", [1, 2, 3, 4, 5], salt="s", lora="a")
    assert request.num_tokens == 5 and len(request.block_hashes) == 2
    assert system.make_request("y", [1, 2, 3, 4, 5]).block_hashes != request.block_hashes
    blocks = system.manager.allocate_slots(request, 5)
    assert blocks is not None
    system.advance_after_allocation(request, 5)
    assert request.num_computed_tokens == 5 and request.status == system.RequestStatus.RUNNING
    system.manager.free(request)
    system.advance_after_preemption(request)
    assert request.num_computed_tokens == 0 and request.status == system.RequestStatus.PREEMPTED


def test_logged_v1_api_matches_the_installed_code_at_a_measured_release():
    """Catches: a change-log API field whose value at a measured release contradicts that release's
    code (a wrong first release would be papered over by the adapter's detection, and the releases
    page would state it); at a version driven as another release a difference is expected and is
    reported instead."""
    system = v1_system()
    from conformance.adapters.installed_api import differences_seen

    assert hasattr(system.manager, "evict_blocks") == system.api.evict_blocks_method
    if versions.installed_target().exact:
        assert differences_seen() == {}


def v0_system():
    if not HAS_VLLM:
        unavailable("vLLM is not importable in this environment", "v0.")
    try:
        versions.installed_v0()
    except NotApplicable as why:
        unavailable(str(why), "v0.")
    from conformance.adapters.vllm_v0 import VllmV0System

    return VllmV0System(V0Config.from_json(V0_CONFIG))


V0_CONFIG = {"block_size": 2, "num_gpu_blocks": 8, "num_cpu_blocks": 2, "watermark": 0.0, "enable_caching": True}


def test_v0_make_sequence_and_group():
    """Catches: the V0 benchmark and machine building sequences differently."""
    system = v0_system()
    seq = system.make_sequence(7, [1, 2, 3])
    assert seq.seq_id == 7 and seq.get_token_ids() == [1, 2, 3]
    group = system.make_group("g", [seq])
    assert group.request_id == "g" and group.get_seqs() == [seq]
    system.bm.allocate(group)
    assert len(system.bm.get_block_table(seq)) == 2


def test_the_reference_v0_adapter_refuses_an_unknown_op_as_invalid_argument():
    """Catches: the reference V0 adapter letting an unknown op escape as a bare ValueError (the
    lockstep engine then reports "not an OpError", a harness bug, where vLLM's adapter refused)."""
    from conformance.adapters.reference_v0 import ReferenceV0System
    from conformance.lockstep import outcome

    assert outcome(ReferenceV0System(V0Config.from_json(V0_CONFIG)), {"op": "allocate_everything"}) == {"error": "invalid_argument"}


def test_both_v0_adapters_refuse_an_unknown_op_alike():
    """Catches: vLLM's V0 adapter turning an unknown op into "refused" (its ValueError path)
    while the reference says "invalid_argument", so the two would diverge on the op itself."""
    from conformance.adapters.reference_v0 import ReferenceV0System
    from conformance.lockstep import compare_step

    system = v0_system()
    out, diff = compare_step(ReferenceV0System(V0Config.from_json(V0_CONFIG)), system, {"op": "allocate_everything"})
    assert diff is None and out == {"error": "invalid_argument"}


V1_CONFIG = {"block_size": 2, "num_blocks": 8, "max_model_len": 16, "groups": [{"kind": "full"}]}

# Named after a helper both V1 adapters have (``_request``): outside the vocabulary all the same.
NOT_AN_OP = {"op": "request", "req": "r"}


def test_the_reference_v1_adapter_refuses_an_unknown_op_as_invalid_argument():
    """Catches: the reference V1 adapter running a method for a name outside the V1 vocabulary
    (here its ``_request`` helper's), or refusing it otherwise than as "invalid_argument"."""
    from conformance.adapters.reference_v1 import ReferenceV1System
    from conformance.lockstep import outcome

    system = ReferenceV1System(V1Config.from_json({"policy": "v0.33.0", **V1_CONFIG}))
    assert outcome(system, NOT_AN_OP) == {"error": "invalid_argument"}


def test_both_v1_adapters_refuse_an_unknown_op_alike():
    """Catches: vLLM's V1 adapter dispatching a name outside the vocabulary to one of its methods
    (its ``_request`` helper answers "unknown_request") or refusing it otherwise than the
    reference does, so the two would diverge on the op itself."""
    from conformance.adapters.reference_v1 import ReferenceV1System
    from conformance.lockstep import compare_step

    system = v1_system()
    reference = ReferenceV1System(system.config)
    out, diff = compare_step(reference, system, NOT_AN_OP)
    assert diff is None and out == {"error": "invalid_argument"}


def test_both_generations_refuse_an_unknown_op_in_one_words():
    """Catches: the V0 and V1 adapters drifting apart in how they refuse an op outside their
    vocabulary (category or wording)."""
    from conformance.adapters.reference_v0 import ReferenceV0System
    from conformance.adapters.reference_v1 import ReferenceV1System
    from conformance.lockstep import OpError

    refusals = []
    for system in (ReferenceV0System(V0Config.from_json(V0_CONFIG)),
                   ReferenceV1System(V1Config.from_json({"policy": "v0.33.0", **V1_CONFIG}))):
        try:
            system.apply({"op": "allocate_everything"})
        except OpError as err:
            refusals.append((err.category, err.detail))
    assert refusals == [("invalid_argument", "unknown v0 op 'allocate_everything'"),
                        ("invalid_argument", "unknown v1 op 'allocate_everything'")]


def test_vllm_v0_sequences_follow_the_one_v0_sequence_model():
    """Catches: vLLM's sequences (VllmV0Sequences, used by the adapter and the benchmark) and the
    model the reference side keeps (V0Sequences) drifting apart: a status, token, computed count
    or stage that one side changes and the other does not."""
    from conformance.adapters.v0_sequences import FINISHED, RUNNING, SWAPPED, WAITING, V0Sequences
    from conformance.adapters.vllm_v0 import VllmV0Sequences

    ours, theirs = V0Sequences(), VllmV0Sequences(v0_system())

    def state(book, seq_id):
        seq = book.seqs[seq_id]
        if isinstance(book, V0Sequences):
            return seq.status, list(seq.tokens), seq.computed, seq.prefill
        status = "FINISHED" if seq.is_finished() else seq.status.name
        return status, seq.get_token_ids(), seq.data.get_num_computed_tokens(), seq.is_prefill()

    for book in (ours, theirs):
        book.add_group("g", [1, 2], [5, 6, 7])
        book.move("g", WAITING, RUNNING)
        book.compute(1, 2)
        book.compute_all(2)
        book.append_token(2, 9)
        book.fork("g", 2, 3)
        book.finish(1)
        book.move("g", RUNNING, SWAPPED)
    for seq_id in (1, 2, 3):
        assert state(ours, seq_id) == state(theirs, seq_id), seq_id
    assert [s.seq_id for s in ours.with_status("g", SWAPPED)] == [s.seq_id for s in theirs.with_status("g", SWAPPED)]
    assert state(ours, 1)[0] == FINISHED and ours.live("g") == [2, 3]


def test_a_config_of_one_semantics_is_not_taken_for_the_other():
    """Catches: ``TraceConfig.of`` handing back whatever object it is given (a V1Config passed
    where a V0Config is expected would reach the V0 adapters and fail deep inside them), and a
    V0 trace's JSON object not read back to the same config."""
    import pytest

    v0 = V0Config.from_json(V0_CONFIG)
    v1 = V1Config.from_json({**V1_CONFIG, "policy": "v0.33.0"})
    assert V0Config.of(v0) is v0 and V1Config.of(v1) is v1
    assert V0Config.of(V0_CONFIG) == v0
    with pytest.raises(TypeError, match="V0Config"):
        V0Config.of(v1)  # type: ignore[arg-type]  # the mistake under test
