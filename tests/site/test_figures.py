"""The seed demo's data and figures: computed by the reference, consistent, well-formed SVG."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from docs.hooks import figures
from docs.hooks.seed_data import DEMO_NUM_BLOCKS, placement_demo, workload_stages

placements = st.lists(st.integers(0, DEMO_NUM_BLOCKS - 1), min_size=2, max_size=2, unique=True)


@settings(max_examples=10)
@given(placements)
def test_attention_does_not_depend_on_placement(table: list[int]) -> None:
    """Catches: a demo (or oracle) whose output changes with the physical block placement."""
    result = placement_demo(table)
    for n, out in result.output_by_length.items():
        assert out == pytest.approx(sum(range(1, n + 1)) / n, abs=1e-6)


def test_seed_placement_gives_three_after_five_tokens() -> None:
    """Catches: the seed's own numbers (blocks 4 and 1; result 3) not being what the page shows."""
    result = placement_demo([4, 1])
    assert result.output_by_length[5] == pytest.approx(3.0)
    section = figures.placement_section()
    assert "| `[4, 1]` | 2.5 | 3 |" in section and "| `[2, 7]` | 2.5 | 3 |" in section


def test_placement_refuses_tables_that_cannot_hold_the_sequence() -> None:
    """Catches: a demo silently reading unwritten (NaN) cache slots."""
    with pytest.raises(ValueError, match="holds 4 tokens"):
        placement_demo([3])
    with pytest.raises(ValueError, match="distinct"):
        placement_demo([3, 3])


@pytest.fixture(scope="module")
def stages():
    return workload_stages()


def test_reference_counts_equal_table_membership(stages) -> None:
    """Catches: a figure showing ref counts that disagree with the block tables it draws."""
    for stage in stages:
        counts: dict[int, int] = {}
        for ids in stage.tables.values():
            for block in ids:
                counts[block] = counts.get(block, 0) + 1
        assert counts == stage.refcounts, stage.caption


def test_workload_shows_sharing_cow_and_eviction(stages) -> None:
    """Catches: a workload that no longer exercises what the page says it shows."""
    shared = stages[1]
    assert shared.tables["A"][:2] == shared.tables["B"][:2]
    cow = stages[2]
    assert len(cow.cow) == 1
    src, dst = cow.cow[0]
    assert src in cow.tables["A"] and dst in cow.tables["A′"] and src not in cow.tables["A′"]
    assert cow.tables["A"][:2] == cow.tables["A′"][:2]
    finished = stages[3]
    assert not finished.tables and set(finished.evictable) == set(shared.tables["A"][:2])
    last = stages[4]
    assert last.evicted and set(last.evicted) <= set(finished.evictable)
    assert set(last.evicted) <= set(last.tables["C"])


def test_every_block_is_in_exactly_one_state(stages) -> None:
    """Catches: a block drawn as both free and held (or in no state at all)."""
    for stage in stages:
        held = set(stage.refcounts)
        free, evictable = set(stage.free), set(stage.evictable)
        assert not (held & free) and not (held & evictable) and not (free & evictable)
        assert held | free | evictable == set(range(figures.WORKLOAD_BLOCKS)), stage.caption


def test_figures_are_well_formed_svg(stages) -> None:
    """Catches: malformed SVG (unescaped text, unclosed tags) that browsers render as nothing."""
    svgs = [figures.placement_svg(placement_demo([4, 1]), "p"), figures._legend("l")]
    svgs += [figures.stage_svg(s, i, f"s{i}") for i, s in enumerate(stages, 1)]
    for svg in svgs:
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg") and root.find("{http://www.w3.org/2000/svg}title") is not None


def test_render_rejects_unknown_figures() -> None:
    """Catches: a misspelt marker silently leaving the page without its figure."""
    with pytest.raises(Exception, match="unknown figure"):
        figures.render("SEED-FIGURE:nope")
