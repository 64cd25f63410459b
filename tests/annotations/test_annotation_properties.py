"""Properties of the checker over random upstream files and random note tilings."""

from __future__ import annotations

from annotation_toy import UPSTREAM, VERSION, NoteSpec, ToyRelease
from hypothesis import given
from hypothesis import strategies as st

from annotations.model import range_hash, stamp_text, upstream_lines


@st.composite
def file_and_notes(draw):
    """A synthetic upstream file (unique non-blank lines, some blank) and sorted disjoint notes."""
    kinds = draw(st.lists(st.booleans(), min_size=1, max_size=40))  # True: blank line
    source = b"".join(b"\n" if blank else f"line {i} = {i * 7}\n".encode() for i, blank in enumerate(kinds))
    cuts = sorted(draw(st.sets(st.integers(1, len(kinds)), max_size=len(kinds))))
    notes, keep = [], draw(st.lists(st.booleans(), min_size=len(cuts) + 1, max_size=len(cuts) + 1))
    bounds = [1] + [c + 1 for c in cuts if c < len(kinds)] + [len(kinds) + 1]
    bounds = sorted(set(bounds))
    for index, (start, stop) in enumerate(zip(bounds, bounds[1:])):
        if keep[index % len(keep)]:
            notes.append(NoteSpec(f"n.{index}", start, stop - 1))
    return source, notes


def _release(tmp_path_factory, source: bytes) -> ToyRelease:
    release = ToyRelease(tmp_path_factory.mktemp("prop") / "annotations")
    release.root.mkdir()
    release.files[(VERSION, UPSTREAM)] = source
    release.files[(VERSION, "vllm/_version.py")] = b"commit_id = 'gabcdef123'\n"
    return release


@given(file_and_notes())
def test_coverage_matches_ground_truth(tmp_path_factory, case):
    """Catches: coverage counting blank lines, double counting, or passing a tiling that leaves a non-blank line bare."""
    source, notes = case
    release = _release(tmp_path_factory, source)
    release.write(notes)
    report = release.checker().run()
    lines = source.split(b"\n")[:-1]
    nonblank = {n for n, text in enumerate(lines, 1) if text.strip()}
    covered = {n for note in notes for n in range(note.start, note.end + 1)} & nonblank
    [row] = report.coverage
    assert (row.covered, row.nonblank) == (len(covered), len(nonblank))
    assert report.ok == (covered == nonblank)
    if not report.ok:
        [problem] = report.problems
        listed: set[int] = set()
        for span in problem.message.split("uncovered: ")[1].split(", "):
            first, _, last = span.partition("-")
            listed |= set(range(int(first[1:]), int((last or first)[1:]) + 1))
        assert listed & nonblank == nonblank - covered and not listed & covered


@given(file_and_notes(), st.integers(1, 5))
def test_stamped_notes_pass_and_shifted_file_names_new_ranges(tmp_path_factory, case, shift):
    """Catches: stamp and check disagreeing on hashes, or the drift hint giving a wrong offset after lines are inserted."""
    source, notes = case
    release = _release(tmp_path_factory, source)
    placeholders = [NoteSpec(n.id, n.start, n.end, hash="?" * 12) for n in notes]
    path = release.write(placeholders, sha256="?", coverage="0")
    text, _ = stamp_text(path, path.read_text(), release.reader)
    path.write_text(text)
    assert release.checker().run().ok
    release.files[(VERSION, UPSTREAM)] = b"".join(f"# new {k}\n".encode() for k in range(shift)) + source
    messages = [str(p) for p in release.checker().run().problems]
    old_lines, new_lines = upstream_lines(source), upstream_lines(release.files[(VERSION, UPSTREAM)])
    for note in notes:
        drift = [m for m in messages if f"note `{note.id}` " in m]
        if range_hash(old_lines, note.start, note.end) == range_hash(new_lines, note.start, note.end):
            assert drift == []  # only blank lines under the note: nothing moved that matters
            continue
        assert len(drift) == 1 and "hash drift" in drift[0], drift
        if any(old_lines[n - 1].strip() for n in range(note.start, note.end + 1)):  # unique content
            assert f"appear at L{note.start + shift}-L{note.end + shift} (moved +{shift})" in drift[0], drift
