"""Quiet, readable runs: vLLM's log lines in a file, harness failures as lines, the target said once."""

from __future__ import annotations

import io
import logging

import pytest

from conformance import report, vllm_log
from conformance.lockstep import NotApplicable
from conformance.properties import Property, Result


@pytest.fixture
def restore_loggers():
    saved = {n: (list(logging.getLogger(n).handlers), logging.getLogger(n).propagate) for n in vllm_log.LOGGERS}
    yield
    for name, (handlers, propagate) in saved.items():
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            logger.removeHandler(h)
            h.close()
        for h in handlers:
            logger.addHandler(h)
        logger.propagate = propagate


def test_vllm_log_lines_go_to_the_file_not_the_terminal(tmp_path, capsys, restore_loggers):
    """Catches: vLLM's INFO/WARNING lines ("Successfully reset prefix cache", about 9,000 of them in
    one test run) printed between the progress lines instead of into the file the report names."""
    stray = logging.StreamHandler()  # what vLLM's own configuration installs on its logger
    logging.getLogger("vllm").addHandler(stray)
    vllm_log.to_file(tmp_path / "vllm.log")
    # torch, imported by to_file before it redirects, keeps no handler of its own that would print
    assert all(getattr(h, vllm_log.HANDLER_MARK, False) for h in logging.getLogger("torch").handlers)
    logging.getLogger("vllm.v1.core.block_pool").info("Successfully reset prefix cache")
    logging.getLogger("torch._library.opaque_object").warning("register_opaque_type is deprecated")
    captured = capsys.readouterr()
    assert "reset prefix cache" not in captured.out + captured.err
    text = (tmp_path / "vllm.log").read_text()
    assert "Successfully reset prefix cache" in text and "register_opaque_type" in text
    assert stray not in logging.getLogger("vllm").handlers


def _props(*props):
    return lambda: {p.name: p for p in props}


def test_a_property_that_crashes_is_a_harness_error_line_not_a_traceback(monkeypatch):
    """Catches: an exception inside one property (the HarnessError of a version the harness cannot
    read, an AttributeError from an internal that changed) ending the whole run with a traceback
    and no report, as traces.corpus did on a source build."""
    def crash(n, steps, progress):
        raise AttributeError("'int' object has no attribute 'block_id'")

    def fine(n, steps, progress):
        return Result(True, n, 0, "ok")

    def absent(n, steps, progress):
        raise NotApplicable("no such mechanism")

    monkeypatch.setattr(report, "all_properties", _props(Property("a.crash", "x", crash), Property("b.fine", "x", fine),
                                                         Property("c.absent", "x", absent)))
    out = io.StringIO()
    result = report.run([], 3, 3, out=out)
    by_name = {p["name"]: p for p in result["properties"]}
    assert by_name["a.crash"]["status"] == "failed" and by_name["a.crash"]["failure"] == "harness_error"
    assert "AttributeError: 'int' object has no attribute 'block_id'" in by_name["a.crash"]["detail"]
    assert by_name["b.fine"]["status"] == "passed" and by_name["c.absent"]["status"] == "not_applicable"
    assert "Traceback" not in out.getvalue()


def test_the_report_says_which_release_a_version_is_driven_as(monkeypatch):
    """Catches: a dev build driven as 0.33.0 reported as if 0.33.1.dev12 itself had been measured."""
    from tests.conformance.test_versions import ALL, fake_installed

    fake_installed(monkeypatch, "0.33.1.dev12+g1a2b3c4", ALL)
    monkeypatch.setattr(report, "all_properties", _props(Property("b.fine", "x", lambda n, s, p: Result(True, n, 0, "ok"))))
    out = io.StringIO()
    result = report.run([], 1, 1, out=out)
    assert result["driven_as"] == "0.33.0" and result["exact_release"] is False
    assert "0.33.1.dev12 is not in the measured matrix: driven as 0.33.0" in out.getvalue()
    assert result["target_note"] == "0.33.1.dev12 is not in the measured matrix: driven as 0.33.0"


def test_a_divergence_on_a_version_driven_as_another_is_a_candidate_behaviour_change(monkeypatch):
    """Catches: a dev build's divergence from the release it is driven as reported as a plain
    failure of the reference (it is first of all a candidate behaviour change of that build), and
    the same wording given to a divergence at a measured release."""
    from tests.conformance.test_versions import ALL, fake_installed

    diverged = Property("v1.x", "x", lambda n, s, p: Result(False, 1, 2, "/free_queue[0]: 1 != 2",
                                                            {"failure": "divergence"}))
    monkeypatch.setattr(report, "all_properties", _props(diverged))
    fake_installed(monkeypatch, "0.34.1.dev3", ALL)
    out = io.StringIO()
    entry = report.run([], 1, 1, out=out)["properties"][0]
    assert "candidate behaviour change" in entry["candidate_behaviour_change"]
    assert "0.34.1.dev3 differs here from 0.34.0" in out.getvalue()
    fake_installed(monkeypatch, "0.34.0", ALL)
    assert "candidate_behaviour_change" not in report.run([], 1, 1, out=io.StringIO())["properties"][0]
