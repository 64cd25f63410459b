"""The capacity page hook: the table comes from the experiment's JSON, never typed by hand."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from benchmarks.report import CapacityReport
from docs.hooks import capacity_page

# The repository's own build configuration: the hook reads its data from the folder of mkdocs.yml.
CONFIG = SimpleNamespace(config_file_path=str(Path(__file__).resolve().parents[2] / "mkdocs.yml"))


def outcome(scheme, usage, conc):
    return {"scheme": scheme, "effective_usage_pct": usage, "reserved_pct": 90.0,
            "mean_concurrency": conc, "max_concurrency": int(conc) + 1,
            "internal_fragmentation_pct": 1.0, "preemptions": 0, "steps": 10}


def test_table_has_every_scheme_and_the_concurrency_ratio():
    """Catches: a scheme silently dropped from the table, or a ratio computed against the wrong
    baseline (the page would overstate what paging buys)."""
    data = {"requests": 5, "workload": "sharegpt", "max_len": 64, "kv_slots": 1000,
            "outcomes": [outcome("max", 20.0, 10.0), outcome("oracle", 50.0, 20.0),
                         outcome("paged-16", 97.0, 40.0)]}
    table = capacity_page.capacity_table(CapacityReport.from_json(data))
    for scheme in ("max", "oracle", "paged-16"):
        assert f"| {scheme} |" in table
    assert "4.0x max" in table and "2.0x oracle" in table


def test_hook_fails_without_marker_or_data(tmp_path, monkeypatch):
    """Catches: a capacity page that builds without its numbers (a stale or empty page passing
    the strict build)."""
    page = SimpleNamespace(file=SimpleNamespace(src_uri="capacity.md"))
    with pytest.raises(PluginError, match="marker"):
        capacity_page.on_page_markdown("no marker here", page, CONFIG, None)
    monkeypatch.setattr(capacity_page, "DATA", tmp_path / "missing.json")
    with pytest.raises(PluginError, match="cannot read"):
        capacity_page.on_page_markdown("CAPACITY-TABLE", page, CONFIG, None)
    (tmp_path / "d.json").write_text(json.dumps({"requests": 1, "workload": "w", "max_len": 2,
                                                 "kv_slots": 3, "outcomes": [outcome("max", 1.0, 1.0)]}))
    monkeypatch.setattr(capacity_page, "DATA", tmp_path / "d.json")
    assert "| max |" in capacity_page.on_page_markdown("CAPACITY-TABLE", page, CONFIG, None)
