"""Unit tests of the annotated-source hooks, on synthetic annotations and a fake upstream reader."""

from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotations.model import Note, parse
from docs.hooks.code_lines import highlight_lines, split_lines
from docs.hooks.source_page import (
    AnnotatedSourceError,
    anchor_ids,
    render_source,
    segments,
    stale_notes,
    status_text,
    upstream_url,
    verify_upstream,
)
from docs.hooks.source_set import SourceSet, rewrite_citations, section_of
from tests.site.synthetic import UPSTREAM_PY, NoteSpec, annotation_text, write_annotation

TAG = re.compile(r"<[^>]+>")


def visible_text(fragment: str) -> str:
    return html.unescape(TAG.sub("", fragment))


class Links:
    """A LinkResolver that records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def ref(self, symbol: str) -> str:
        self.asked.append(("ref", symbol))
        return f'<a class="test-ref" href="#api-{symbol}">{symbol}</a>'

    def prop_result(self, name: str) -> str | None:
        return f"passed against vLLM 9.9.9 ({name})"

    def prop(self, name: str) -> str | None:
        self.asked.append(("prop", name))
        return f"conformance/#{name}"

    def see(self, target: str) -> str | None:
        self.asked.append(("see", target))
        return None

    def compare(self, note_id: str) -> str | None:
        self.asked.append(("compare", note_id))
        return f"compare/#{note_id}"


# --- code_lines -----------------------------------------------------------------------------------

source_text = st.lists(
    st.sampled_from(['"""doc', "start", 'end"""', "x = 1  # c", "'''", "", "    return a < b & c", "\t\ty"]),
    max_size=12,
).map(lambda lines: "\n".join(lines) + "\n")


@given(source_text, st.sampled_from(["m.py", "k.cu", "notes.unknownext"]))
def test_highlighting_keeps_one_fragment_per_line(text: str, path: str) -> None:
    """Catches: a token spanning lines (docstring, comment) shifting every later line number."""
    fragments = highlight_lines(text, path)
    lines = split_lines(text)
    assert len(fragments) == len(lines)
    assert [visible_text(f) for f in fragments] == lines


@given(source_text)
def test_highlighted_fragments_are_balanced(text: str) -> None:
    """Catches: a <span> opened on one line and closed on another, breaking the per-line markup."""
    for fragment in highlight_lines(text, "m.py"):
        assert fragment.count("<span") == fragment.count("</span>")


def test_multiline_docstring_is_highlighted_on_each_line() -> None:
    """Catches: continuation lines of a docstring losing their string colour class."""
    fragments = highlight_lines(UPSTREAM_PY.decode(), "tiny.py")
    assert 'class="s' in fragments[3] and 'class="s' in fragments[4]
    assert "<span" in fragments[2] and "def" in visible_text(fragments[2])


# --- segments ---------------------------------------------------------------------------------------


def note(nid: str, start: int, end: int) -> Note:
    return Note(nid, start, end, "0" * 12, "body")


@given(st.integers(1, 40), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4)), max_size=8))
def test_segments_tile_the_file_in_order(line_count: int, gaps_and_lengths) -> None:
    """Catches: lines shown twice or dropped between notes, or notes detached from their lines."""
    notes, line = [], 1
    for i, (gap, length) in enumerate(gaps_and_lengths):
        start = line + gap
        end = start + length
        if end > line_count:
            break
        notes.append(note(f"n{i}", start, end))
        line = end + 1
    segs = segments(notes, line_count)
    covered = [n for s in segs for n in range(s.start, s.end + 1)]
    assert covered == list(range(1, line_count + 1))
    assert [s.note.id for s in segs if s.note] == [n.id for n in notes]
    for s in segs:
        if s.note:
            assert (s.start, s.end) == (s.note.start, s.note.end)
    assert all(not (a.note is None and b.note is None) for a, b in zip(segs, segs[1:]))


@pytest.mark.parametrize(
    "notes, problem",
    [
        ([note("a", 1, 3), note("b", 3, 4)], "overlaps"),
        ([note("a", 4, 5), note("b", 1, 2)], "overlaps or precedes"),
        ([note("a", 9, 12)], "ends after"),
    ],
)
def test_impossible_layouts_are_refused_by_name(notes, problem) -> None:
    """Catches: overlapping, unordered or out-of-file notes rendered as a silently wrong page."""
    with pytest.raises(AnnotatedSourceError, match=problem) as err:
        segments(notes, 10, "x.md")
    assert "x.md" in str(err.value)


# --- rendering ----------------------------------------------------------------------------------------


def test_render_places_every_line_once_with_its_anchor(annotation_root: Path) -> None:
    """Catches: missing or duplicated #L anchors, or line numbers that are not upstream's."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    out = render_source(ann, UPSTREAM_PY, {n.id: f"<p>{n.id} body</p>" for n in ann.notes}, Links())
    ids = re.findall(r'<div class="ann-line" id="L(\d+)">', out)
    assert [int(i) for i in ids] == list(range(1, len(split_lines(UPSTREAM_PY.decode())) + 1))
    lines = re.findall(r'<div class="ann-line" id="L\d+">.*?<span class="ann-src">(.*?)</span></div>', out)
    assert [visible_text(x).rstrip(" ") for x in lines] == [x.rstrip(" ") for x in split_lines(UPSTREAM_PY.decode())]


def test_each_note_sits_in_the_segment_of_its_lines(annotation_root: Path) -> None:
    """Catches: a note rendered beside the wrong code (off-by-one segment boundaries)."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    out = render_source(ann, UPSTREAM_PY, {}, Links())
    for n in ann.notes:
        seg = re.search(rf'<div class="ann-seg ann-annotated"><aside class="ann-note" id="{re.escape(n.id)}"'
                        rf'.*?</aside>(.*?)</div>\n', out, re.S)
        assert seg, n.id
        assert [int(x) for x in re.findall(r'id="L(\d+)"', seg.group(1))] == list(range(n.start, n.end + 1))


def test_note_links_use_the_resolver_and_the_pinned_tag(annotation_root: Path) -> None:
    """Catches: notes losing their ref/prop/see links, or upstream links to a moving branch."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    links = Links()
    out = render_source(ann, UPSTREAM_PY, {}, links)
    assert ("ref", "reference.blocks.errors") in links.asked
    assert ("prop", "demo.prop") in links.asked
    assert ("see", "v9.9.9/csrc/twice.cu#twice.body") in links.asked
    assert 'href="conformance/#demo.prop"' in out
    assert "· passed against vLLM 9.9.9 (demo.prop)" in out  # the release's result beside the link
    assert html.escape(upstream_url("9.9.9", "pkg/tiny.py", 3, 6)) in out
    assert upstream_url("9.9.9", "pkg/tiny.py", 3, 6).endswith("/blob/v9.9.9/pkg/tiny.py#L3-L6")
    assert 'href="#L3-L6"' in out
    # a note with refs links to its side-by-side view; notes without refs do not ask
    assert ("compare", "tiny.add") in links.asked and 'href="compare/#tiny.add"' in out
    assert ("compare", "tiny.box") not in links.asked


def test_anchor_ids_are_lines_and_note_ids_only(annotation_root: Path) -> None:
    """Catches: anchors that depend on other notes or pages (they must be L<n> and note ids)."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    out = render_source(ann, UPSTREAM_PY, {}, Links())
    rendered = set(re.findall(r' id="([^"]+)"', out))
    assert rendered == anchor_ids(ann, 11)


def test_wrong_upstream_bytes_are_refused(annotation_root: Path) -> None:
    """Catches: notes published beside bytes other than the ones they were written for."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    verify_upstream(ann, UPSTREAM_PY)
    with pytest.raises(AnnotatedSourceError, match="sha256"):
        verify_upstream(ann, UPSTREAM_PY + b"# one more line\n")


def test_stale_notes_are_detected(tmp_path: Path) -> None:
    """Catches: a note whose lines changed (hash drift) shown without any warning."""
    notes = [NoteSpec("ok", 1, 1), NoteSpec("drifted", 3, 4, hash="0123456789ab")]
    path = write_annotation(tmp_path, "9.9.9", "pkg/tiny.py", annotation_text("pkg/tiny.py", "9.9.9", UPSTREAM_PY, notes))
    assert [n.id for n in stale_notes(parse(path), UPSTREAM_PY)] == ["drifted"]


def test_status_banner_tells_removed_v0_code_apart() -> None:
    """Catches: a banner claiming V0 or kernel code is current, or newer code is removed."""
    assert "removed the V0 engine" in status_text("0.10.2", "vllm/core/block_manager.py")
    assert "no longer in the v0.33.0 source tree" in status_text("0.10.2", "csrc/attention/paged_attention_v1.cu")
    for version, path in (("0.33.0", "vllm/v1/core/block_pool.py"), ("0.10.2", "csrc/cache_kernels.cu")):
        assert "removed" not in status_text(version, path) and "no longer" not in status_text(version, path)


# --- the source set ---------------------------------------------------------------------------------------


def test_load_verifies_and_keys_pages_by_release_and_path(annotation_root: Path, fake_upstream) -> None:
    """Catches: pages at unstable URLs or built without reading the upstream bytes."""
    found = SourceSet.load(annotation_root, fake_upstream)
    assert set(found.entries) == {"sources/v9.9.9/pkg/tiny.py.md", "sources/v9.9.9/csrc/twice.cu.md"}
    assert found.entries["sources/v9.9.9/pkg/tiny.py.md"].data == UPSTREAM_PY
    assert section_of(found.entries["sources/v9.9.9/csrc/twice.cu.md"].annotation) == "CUDA kernels"
    assert found.see_target("v9.9.9/csrc/twice.cu#twice.body") == ("sources/v9.9.9/csrc/twice.cu.md", "twice.body")
    assert found.see_target("v9.9.9/csrc/twice.cu#no.such") is None


def test_load_names_every_broken_file(annotation_root: Path, fake_upstream) -> None:
    """Catches: a malformed annotation or unverifiable bytes being skipped instead of failing."""
    (annotation_root / "v9.9.9" / "pkg" / "broken.py.md").write_text("no header here\n")
    bad_sha = annotation_text("pkg/other.py", "9.9.9", UPSTREAM_PY, [], sha256="0" * 64)
    write_annotation(annotation_root, "9.9.9", "pkg/other.py", bad_sha)
    fake_upstream.files[("9.9.9", "pkg/other.py")] = UPSTREAM_PY
    with pytest.raises(AnnotatedSourceError) as err:
        SourceSet.load(annotation_root, fake_upstream)
    assert "broken.py.md" in str(err.value) and "other.py.md" in str(err.value)
    assert "sha256" in str(err.value)


def test_missing_upstream_file_fails_with_the_path(annotation_root: Path, fake_upstream) -> None:
    """Catches: a reader failure swallowed, leaving a page without code."""
    del fake_upstream.files[("9.9.9", "csrc/twice.cu")]
    with pytest.raises(AnnotatedSourceError, match="csrc/twice.cu"):
        SourceSet.load(annotation_root, fake_upstream)


def test_citations_are_rewritten_or_reported() -> None:
    """Catches: note citations left as dead relative links, or unknown notes silently accepted."""
    text = "See [a](v1.2.3/x/y.py#n.one) and [b](v1.2.3/x/z.py#gone) and [c](https://example.invalid/)."
    known = {("1.2.3", "x/y.py", "n.one")}
    out, missing = rewrite_citations(text, lambda v, p, i: f"PAGE/{p}#{i}" if (v, p, i) in known else None)
    assert "[a](PAGE/x/y.py#n.one)" in out
    assert "[b](v1.2.3/x/z.py#gone)" in out and missing == ["v1.2.3/x/z.py#gone"]
    assert "(https://example.invalid/)" in out


def test_sha_of_fixture_matches_header(annotation_root: Path) -> None:
    """Catches: the fixtures themselves drifting from the format (a test that could not fail)."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    assert ann.sha256 == hashlib.sha256(UPSTREAM_PY).hexdigest()
    assert [n.id for n in ann.notes] == ["tiny.doc", "tiny.add", "tiny.box"]


def test_license_marker_is_shown_but_never_written_verbatim(tmp_path: Path) -> None:
    """Catches: built pages containing an upstream SPDX header line verbatim (or altering its text)."""
    marker_line = "# " + "SPDX-" + "FileCopyrightText: someone"
    data = (marker_line + "\nx = 1\n").encode()
    notes = [NoteSpec("header", 1, 2)]
    path = write_annotation(tmp_path, "9.9.9", "pkg/lic.py", annotation_text("pkg/lic.py", "9.9.9", data, notes))
    out = render_source(parse(path), data, {}, Links())
    assert "SPDX-" + "FileCopyrightText" not in out
    first = re.search(r'id="L1">.*?<span class="ann-src">(.*?)</span></div>', out).group(1)
    assert visible_text(first) == marker_line


def test_code_is_excluded_from_search_in_a_non_nesting_container(annotation_root: Path) -> None:
    """Catches: upstream code flooding the search index (an exclusion ended by a nested </div>)."""
    ann = parse(annotation_root / "v9.9.9" / "pkg" / "tiny.py.md")
    out = render_source(ann, UPSTREAM_PY, {}, Links())
    blocks = re.findall(r"<(\w+) class=\"ann-code[^\"]*\" data-search-exclude>", out)
    assert blocks and set(blocks) == {"section"}
    assert out.count("<section") == out.count("</section>") == len(blocks)
