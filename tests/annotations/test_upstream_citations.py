"""Citations of upstream lines outside a note's range: found in every form, resolved, hash-checked.

The toy release (``annotation_toy``) serves ``toy/ring.py``; each test plants one citation in a
note, a page or a ``reference/`` module of a throwaway repository and runs the checker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from annotation_toy import UPSTREAM, VERSION, NoteSpec

from annotations import citations
from annotations.model import range_hash, upstream_lines

GH = f"https://github.com/vllm-project/vllm/blob/v{VERSION}/{UPSTREAM}"


def _hash(toy, start: int, end: int) -> str:
    return range_hash(upstream_lines(toy.files[(VERSION, UPSTREAM)]), start, end)


def _repo(toy, tmp_path: Path):
    """A repository around the toy annotations root, with empty docs/ and reference/."""
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "reference").mkdir(exist_ok=True)
    return toy.checker(repo=tmp_path, lister=lambda version: [UPSTREAM, "other/ring.py", "toy/queue.py"])


def _messages(report) -> str:
    return "\n".join(str(p) for p in report.problems)


def test_good_link_citation_in_a_note_passes(toy, tmp_path):
    """Catches: a correct, stamped citation reported as a problem (the checker would cry wolf)."""
    link = f"[ring.py L11-L14]({GH}#L11-L14 \"{_hash(toy, 11, 14)}\")"
    toy.write([NoteSpec("ring.module", 1, 3, body=f"See {link}."), *[NoteSpec(*n) for n in
              (("ring.init", 6, 9), ("ring.push", 11, 14), ("ring.peek", 16, 17))]])
    report = _repo(toy, tmp_path).run()
    assert report.ok, _messages(report)


def test_planted_dead_citation_fails_the_check(toy, tmp_path):
    """Catches: a citation whose range lies past the end of the upstream file passing unnoticed."""
    toy.write()
    page = tmp_path / "docs" / "page.md"
    _repo(toy, tmp_path)
    page.write_text(f"Read [ring.py L40-L44]({GH}#L40-L44 \"0123456789ab\").\n", encoding="utf-8")
    report = _repo(toy, tmp_path).run()
    assert not report.ok
    assert "page.md" in _messages(report) and "ends after the last line L17" in _messages(report)


def test_citation_of_a_missing_file_fails(toy, tmp_path):
    """Catches: a citation of an upstream file that the release does not have."""
    toy.write(intro=f"See v{VERSION}/toy/gone.py#L1-L2@0123456789ab.")
    report = _repo(toy, tmp_path).run()
    assert "dead: no toy/gone.py" in _messages(report)


def test_hash_drift_is_reported(toy, tmp_path):
    """Catches: a citation whose lines changed (or whose range was mistyped) keeping a stale hash."""
    wrong = _hash(toy, 6, 9)
    toy.write(intro=f"See [push]({GH}#L11-L14 \"{wrong}\").")
    report = _repo(toy, tmp_path).run()
    assert f"the citation says {wrong}, the lines hash to {_hash(toy, 11, 14)}" in _messages(report)


def test_unstamped_citation_is_reported_and_stamp_fills_it(toy, tmp_path):
    """Catches: a line citation without a content hash passing (drift would then go unseen), or a
    stamp that writes a wrong hash or overwrites a present one."""
    toy.write(intro=f"See [push]({GH}#L11-L14) and [peek]({GH}#L16-L17 \"ffffffffffff\").")
    checker = _repo(toy, tmp_path)
    assert "unstamped" in _messages(checker.run())
    path = toy.root / f"v{VERSION}/{UPSTREAM}.md"
    text, count = citations.stamp_inline(path.read_text(encoding="utf-8"), citations.Resolver(toy.reader))
    assert count == 1
    assert f"#L11-L14 \"{_hash(toy, 11, 14)}\")" in text and "ffffffffffff" in text


def test_whole_file_link_needs_no_hash_but_must_exist(toy, tmp_path):
    """Catches: a link to a whole upstream file demanded a hash, or a link to a missing file passing."""
    toy.write(intro=f"See [ring.py]({GH}) and [gone](https://github.com/vllm-project/vllm/blob/v{VERSION}/toy/gone.py).")
    messages = _messages(_repo(toy, tmp_path).run())
    assert "toy/ring.py" not in messages.replace("toy/ring.py.md", "")
    assert "dead: no toy/gone.py" in messages


def test_legacy_reference_citations_use_the_ledger(toy, tmp_path):
    """Catches: ``reference/``'s ``file.py:N-M`` citations escaping the check, a bare file name
    resolved to the wrong file, a new citation passing without a recorded hash, or a stale entry."""
    toy.write()
    checker = _repo(toy, tmp_path)
    module = tmp_path / "reference" / "mod.py"
    module.write_text(f"# the push (v{VERSION} toy/ring.py:11-14), the peek (``:16-17``)\n", encoding="utf-8")
    assert "not in the ledger" in _messages(checker.run())
    found = citations.find(module)
    assert [(c.path, c.start, c.end) for c in found] == [("toy/ring.py", 11, 14), ("toy/ring.py", 16, 17)]
    key = lambda a, b: ("reference/mod.py", VERSION, UPSTREAM, a, b)  # noqa: E731 - a ledger key, built in one expression
    citations.write_ledger(checker.ledger_path, {key(11, 14): _hash(toy, 11, 14), key(16, 17): _hash(toy, 16, 17)})
    assert _repo(toy, tmp_path).run().ok
    module.write_text(f"# the push (v{VERSION} toy/ring.py:12-14)\n", encoding="utf-8")
    messages = _messages(_repo(toy, tmp_path).run())
    assert "not in the ledger" in messages and "stale entry" in messages


def test_legacy_dead_and_ambiguous_names_fail(toy, tmp_path):
    """Catches: a bare file name that matches two release files being silently resolved to one, and
    a legacy range past the file's end passing."""
    toy.write()
    checker = _repo(toy, tmp_path)
    (tmp_path / "reference" / "amb.py").write_text(f"# v{VERSION} ring.py:1-3\n", encoding="utf-8")
    (tmp_path / "reference" / "dead.py").write_text(f"# v{VERSION} toy/ring.py:90-99\n", encoding="utf-8")
    (tmp_path / "reference" / "near.py").write_text(f"# v{VERSION} toy/queue.py:1\n# ring.py:1-3\n", encoding="utf-8")
    messages = _messages(checker.run())
    assert "amb.py: line 1: citation v9.9.9/ring.py#L1-L3: dead: 'ring.py' is ambiguous" in messages
    assert "dead.py: line 1" in messages and "ends after the last line L17" in messages
    assert "near.py: line 2: citation v9.9.9/ring.py#L1-L3: not in the ledger" in messages  # settled by toy/


@pytest.mark.parametrize("text, expected", [
    ("v0.10.2 vllm/core/block/naive_block.py:88-110", [("0.10.2", "vllm/core/block/naive_block.py", 88, 110)]),
    ("v0.33.0 vllm/v1/core/kv_cache_manager.py:207-210, 518-525", [
        ("0.33.0", "vllm/v1/core/kv_cache_manager.py", 207, 210), ("0.33.0", "vllm/v1/core/kv_cache_manager.py", 518, 525)]),
    ("(v0.10.2 ``block_manager.py:257-259``, ``:340-342``)", [("0.10.2", "block_manager.py", 257, 259), ("0.10.2", "block_manager.py", 340, 342)]),
    ("evictor.py L74-150", [(citations.NO_RELEASE, "evictor.py", 74, 150)]),
    ("v0.10.2/vllm/core/scheduler.py#L1656-L1657@0123456789ab", [("0.10.2", "vllm/core/scheduler.py", 1656, 1657)]),
])
def test_python_citation_forms(text, expected):
    """Catches: a written form of citation in reference/ that the finder misses or misreads."""
    found = citations.find_python(Path("reference/blocks/mod.py"), f"# {text}\n")
    assert [(c.version, c.path, c.start, c.end) for c in found] == expected


def test_real_repository_citations_resolve():
    """Catches: a dead, drifted or unrecorded upstream citation anywhere in docs/ or reference/ of
    this repository (the pinned sdists are read from the cache; skipped without them)."""
    from annotations.check import Checker
    from annotations.model import ANNOTATIONS_ROOT
    from upstream import fetch

    try:
        fetch.release_files("0.10.2")
        fetch.release_files("0.33.0")
    except Exception as err:  # noqa: BLE001 (no cache and no network)
        pytest.skip(f"the pinned sdists cannot be read: {err}")
    checker = Checker(ANNOTATIONS_ROOT)
    problems = checker.upstream_citation_problems(checker.citation_sources(), full=True)
    assert not problems, "\n".join(str(p) for p in problems)


def test_a_citation_that_states_no_release_is_a_problem_not_a_guess(toy, tmp_path):
    """Catches: a legacy citation without a release being read at a release guessed from the citing
    file's folder (reference/**/v0/ as 0.10.2, anything else as 0.33.0), so a comment about another
    release was checked against lines that say something else."""
    toy.write()
    (tmp_path / "reference" / "v0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "reference" / "v0" / "bare.py").write_text("# see toy/ring.py:1-3\n", encoding="utf-8")
    messages = _messages(_repo(toy, tmp_path).run())
    assert "bare.py: line 1: citation toy/ring.py:1-3 states no release" in messages


def test_a_hotfix_release_is_read_whole():
    """Catches: a citation of a four-part hotfix release (v0.9.0.1, v0.10.1.1) read as the release
    before it (v0.9.0) and checked against that release's bytes."""
    found = citations.find_python(Path("conformance/mod.py"), "# v0.9.0.1 vllm/v1/core/block_pool.py:10-12\n")
    assert [(c.version, c.path) for c in found] == [("0.9.0.1", "vllm/v1/core/block_pool.py")]
    plain = citations.find_markdown(Path("docs/x.md"), "v0.10.1.1/vllm/v1/request.py#L3-L4@????????????")
    assert [(c.version, c.start, c.end) for c in plain] == [("0.10.1.1", 3, 4)]
