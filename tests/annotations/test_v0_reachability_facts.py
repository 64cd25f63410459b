"""The facts behind the 0.10.2 reachability badges, re-derived from the pinned sdist's source.

The badges say that forking, copy-on-write and lookahead slots are not reached when 0.10.2 serves,
and that swapping needs a setting. Those claims rest on a handful of call sites; this test scans the
whole ``vllm/`` tree of the pinned release (a static call-site probe, no vLLM import needed) and
fails if any of them stops holding, e.g. after a re-pin. Skipped only when the sdist is unavailable.
"""

from __future__ import annotations

import ast
import re
import tarfile

import pytest

from upstream import fetch

VERSION = "0.10.2"


@pytest.fixture(scope="module")
def tree() -> dict[str, str]:
    try:
        sdist = fetch.sdist_path(VERSION)
    except Exception as err:  # noqa: BLE001 (no cache and no network)
        pytest.skip(f"the vllm {VERSION} sdist cannot be read: {err}")
    prefix = f"vllm-{VERSION}/"
    out: dict[str, str] = {}
    with tarfile.open(sdist) as tar:  # one pass: extracting file by file would decompress it each time
        for member in tar:
            name = member.name[len(prefix):]
            if member.isfile() and name.startswith("vllm/") and name.endswith(".py"):
                out[name] = tar.extractfile(member).read().decode("utf-8", "replace")
    return out


def _calls(tree: dict[str, str], attribute: str) -> list[str]:
    """``file:line`` of every call ``<anything>.<attribute>(...)`` or ``<attribute>(...)``."""
    found = []
    for name, text in tree.items():
        if attribute not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == attribute:
                    found.append(f"{name}:{node.lineno}")
    return sorted(found)


def test_fork_seq_is_called_by_nothing(tree):
    """Catches: a caller of Scheduler.fork_seq appearing, which would make block_manager.fork and
    copy-on-write reachable and the 'unreached' badges false."""
    assert _calls(tree, "fork_seq") == []


def test_fork_call_chain_starts_only_at_fork_seq_and_the_allocate_loop(tree):
    """Catches: a new caller of any fork in the block layer (the chain must start at
    Scheduler.fork_seq, called by nothing, or at block_manager.allocate's loop, never entered)."""
    assert [c for c in _calls(tree, "fork") if c.startswith("vllm/core/")] == [
        "vllm/core/block/block_table.py:227",  # BlockTable.fork -> allocator.fork
        "vllm/core/block/cpu_gpu_block_allocator.py:226",  # device dispatch
        "vllm/core/block_manager.py:184",  # allocate: the loop over the group's other sequences
        "vllm/core/block_manager.py:344",  # block_manager.fork
        "vllm/core/scheduler.py:1657",  # Scheduler.fork_seq
    ]
    assert not [c for c in _calls(tree, "fork") if not c.startswith("vllm/core/") and "block" in c]


def test_parallel_samples_become_single_sequence_groups(tree):
    """Catches: the V0 engine building a multi-sequence group for the scheduler again (then the
    fork loop of allocate would run)."""
    engine = tree["vllm/engine/llm_engine.py"]
    assert "ParallelSampleSequenceGroup.add_request(" in engine
    built = _calls(tree, "SequenceGroup")
    assert built == ["vllm/engine/llm_engine.py:738", "vllm/sequence.py:1415"], built
    assert re.search(r"SequenceGroup\(request_id=request_id,\s*seqs=\[seq\]", engine)
    # the other one only assembles the n outputs of a parallel-sample request for the caller
    assert "group.assembled_seq_group = SequenceGroup(" in tree["vllm/sequence.py"]


def test_lookahead_slots_are_always_zero(tree):
    """Catches: _get_num_lookahead_slots returning anything but the constant 0."""
    module = ast.parse(tree["vllm/core/scheduler.py"])
    method = next(
        n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and n.name == "_get_num_lookahead_slots"
    )
    returns = [n for n in ast.walk(method) if isinstance(n, ast.Return)]
    assert [ast.literal_eval(r.value) for r in returns] == [0]


def test_swap_needs_the_setting_or_a_multi_sequence_group(tree):
    """Catches: a change of the default preemption rule (the 'swap only with preemption_mode=swap' badges)."""
    text = tree["vllm/core/scheduler.py"]
    assert re.search(
        r"if self\.user_specified_preemption_mode is None:\s*"
        r"if seq_group\.get_max_num_running_seqs\(\) == 1:\s*"
        r"preemption_mode = PreemptionMode\.RECOMPUTE",
        text,
    )


def test_get_and_reset_swaps_is_called_by_nothing(tree):
    """Catches: a caller of CpuGpuBlockAllocator.get_and_reset_swaps appearing (its badge says none)."""
    assert _calls(tree, "get_and_reset_swaps") == []
