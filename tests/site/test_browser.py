"""The built site in a real browser: anchors, highlighting, search, console errors, every link.

Run in the browser environment against a site built by the dev environment::

    E=$(scripts/ensure-env requirements/dev.txt); PYTHONPATH=. $E/bin/mkdocs build --strict
    scripts/browser-deps            # Debian's chromium at /usr/bin/chromium (never `playwright install`)
    B=$(scripts/ensure-env requirements/browser.txt)
    PYTHONPATH=. $B/bin/python -m pytest --noconftest tests/site/test_browser.py

The site is served by ``http.server`` on 127.0.0.1 (a free port) and opened with Debian's
chromium through Playwright. Screenshots go to ``$SITE_SCREENSHOTS`` (default
``site-screenshots/``). Missing pieces (Playwright, chromium, the built site) fail the test unless
``SITE_BROWSER_OPTIONAL=1`` is set, in which case they skip with the reason.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import time
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_DIR", REPO / "site"))
CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(os.environ.get("SITE_SCREENSHOTS", "site-screenshots"))
OPTIONAL = os.environ.get("SITE_BROWSER_OPTIONAL") == "1"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing(reason: str):
    """Fail by default; skip only when SITE_BROWSER_OPTIONAL=1 says missing pieces are expected."""
    if OPTIONAL:
        pytest.skip(reason)
    pytest.fail(reason + " (set SITE_BROWSER_OPTIONAL=1 to skip instead)")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output readable
        pass


@pytest.fixture(scope="module")
def base_url():
    if not (SITE / "index.html").is_file():
        missing(f"no built site at {SITE}: run `PYTHONPATH=. mkdocs build --strict` first")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed: use the env from requirements/browser.txt")
    if not os.access(CHROMIUM, os.X_OK):
        missing(f"{CHROMIUM} is missing: run scripts/browser-deps")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Watched:
    """A page that records console errors and uncaught exceptions."""

    def __init__(self, browser, width: int = 1400, height: int = 900) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def watched(browser):
    w = Watched(browser)
    yield w
    w.close()


def annotated_pages() -> list[str]:
    """Site paths of the generated annotated pages, block manager first if present."""
    pages = sorted(str(p.parent.relative_to(SITE)) + "/" for p in (SITE / "sources").glob("v*/**/index.html"))
    pages.sort(key=lambda p: (not p.endswith("vllm/core/block_manager.py/"), p))
    return pages


@pytest.fixture(scope="module")
def annotated(base_url) -> str:
    pages = annotated_pages()
    if not pages:
        missing(f"the built site at {SITE} has no annotated pages")
    return pages[0]


def in_viewport(page, selector_js: str) -> bool:
    return page.evaluate(
        f"""() => {{ const el = {selector_js}; if (!el) return false;
        const r = el.getBoundingClientRect();
        return r.bottom > 0 && r.top < window.innerHeight && r.height > 0; }}"""
    )


def highlighted_lines(page) -> list[int]:
    return page.evaluate("() => Array.from(document.querySelectorAll('.ann-line.ann-hl'), e => +e.id.slice(1))")


def test_line_link_highlights_and_scrolls(watched, base_url, annotated) -> None:
    """Catches: #L anchors that do not highlight their line or leave it off screen."""
    page = watched.page
    page.goto(base_url + annotated)
    count = page.locator(".ann-line").count()
    target = max(1, min(count, count * 2 // 3))
    page.click(f'a.ann-ln[href="#L{target}"]')
    page.wait_for_function(f"() => document.getElementById('L{target}').classList.contains('ann-hl')")
    page.wait_for_timeout(300)
    assert highlighted_lines(page) == [target]
    assert in_viewport(page, f"document.getElementById('L{target}')")
    assert not watched.errors, watched.errors


def test_range_link_highlights_exactly_the_range(watched, base_url, annotated) -> None:
    """Catches: #L120-L140 ranges ignored (no element has that id) or highlighted off by one."""
    page = watched.page
    page.goto(base_url + annotated)
    count = page.locator(".ann-line").count()
    start, end = max(1, count // 2), min(count, count // 2 + 6)
    page.goto(f"{base_url}{annotated}#L{start}-L{end}")  # same document: a hashchange
    page.wait_for_function(f"() => document.getElementById('L{start}').classList.contains('ann-hl')")
    page.wait_for_timeout(300)
    assert highlighted_lines(page) == list(range(start, end + 1))
    assert in_viewport(page, f"document.getElementById('L{start}')")
    fresh = Watched(page.context.browser)
    try:
        fresh.page.goto(f"{base_url}{annotated}#L{start}-L{end}")  # a fresh load with the range
        fresh.page.wait_for_function(f"() => document.getElementById('L{end}').classList.contains('ann-hl')")
        assert highlighted_lines(fresh.page) == list(range(start, end + 1))
        assert not fresh.errors, fresh.errors
    finally:
        fresh.close()
    assert not watched.errors, watched.errors


def test_note_link_highlights_note_and_its_lines(watched, base_url, annotated) -> None:
    """Catches: note anchors with dots in their ids not resolving, or the note's lines not marked."""
    page = watched.page
    page.goto(base_url + annotated)
    ids = page.evaluate("() => Array.from(document.querySelectorAll('aside.ann-note'), n => n.id)")
    assert ids, "the annotated page has no notes"
    note_id = ids[len(ids) * 2 // 3]
    page.evaluate("id => document.getElementById(id).querySelector('a.ann-note-id').click()", note_id)
    selector = f"document.getElementById({note_id!r})"
    page.wait_for_function(f"() => {selector}.classList.contains('ann-target')")
    page.wait_for_timeout(300)
    start, end = page.evaluate(f"() => [+{selector}.dataset.start, +{selector}.dataset.end]")
    assert highlighted_lines(page) == list(range(start, end + 1))
    assert in_viewport(page, selector)
    assert not watched.errors, watched.errors


def test_theory_link_to_a_note_lands_on_it(watched, base_url) -> None:
    """Catches: cross-page links into annotated notes that land on nothing."""
    page = watched.page
    page.goto(base_url + "theory/virtual-memory/")
    link = page.locator("article a[href*='sources/'][href*='#']").first
    href = link.get_attribute("href")
    fragment = unquote(href.split("#", 1)[1])
    link.click()
    page.wait_for_load_state("load")
    selector = f"document.getElementById({fragment!r})"
    page.wait_for_function(f"() => {selector} && {selector}.classList.contains('ann-target')")
    page.wait_for_timeout(300)
    assert in_viewport(page, selector)
    assert not watched.errors, watched.errors


def test_search_finds_pages(watched, base_url) -> None:
    """Catches: a search index that is missing, empty or unreachable offline."""
    page = watched.page
    page.goto(base_url)
    page.click("label.md-search__icon, .md-search__input", timeout=5000)
    # The search worker builds its index in the page (~1 MB) and answers a query typed before it
    # was ready with nothing, not later: so type the query again until results show, for up to
    # three minutes on a loaded machine, before calling search broken.
    deadline = time.monotonic() + 180
    while True:
        page.fill("input.md-search__input", "")
        page.fill("input.md-search__input", "copy-on-write")
        try:
            page.wait_for_selector(".md-search-result__item", timeout=5000)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
    assert page.locator(".md-search-result__item").count() > 0
    assert not watched.errors, watched.errors


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)


def _ids_of(path: Path) -> set[str]:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.ids


def _local_file(url: str, base: str) -> Path:
    path = unquote(urlsplit(url).path)[len(urlsplit(base).path):]
    target = SITE / path
    return target / "index.html" if path == "" or path.endswith("/") or target.is_dir() else target


def test_every_page_loads_cleanly_and_every_internal_link_resolves(browser, base_url) -> None:
    """Catches: broken internal links or anchors anywhere, and pages with console errors."""
    page = Watched(browser, 1200, 800)
    seen: set[str] = set()
    queue = deque([base_url])
    broken: list[str] = []
    errors: list[str] = []
    ids_cache: dict[Path, set[str]] = {}
    try:
        while queue:
            url = queue.popleft()
            if url in seen:
                continue
            seen.add(url)
            page.errors.clear()
            response = page.page.goto(url, wait_until="load")
            if response is None or response.status != 200:
                broken.append(f"{url}: HTTP {response.status if response else 'no response'}")
                continue
            errors += [f"{url}: {e}" for e in page.errors]
            hrefs = page.page.evaluate("() => Array.from(document.querySelectorAll('a[href]'), a => a.href)")
            for href in set(hrefs):
                if not href.startswith(base_url):
                    continue
                target, fragment = urldefrag(href)
                file = _local_file(target, base_url)
                if not file.is_file():
                    broken.append(f"{url} -> {href}: no such file")
                    continue
                if fragment and file.suffix == ".html":
                    if file not in ids_cache:
                        ids_cache[file] = _ids_of(file)
                    ids = ids_cache[file]
                    if unquote(fragment) not in ids and not re.fullmatch(r"L\d+-L\d+", fragment):
                        broken.append(f"{url} -> {href}: no anchor #{fragment}")
                if file.suffix == ".html" and target not in seen:
                    queue.append(target)
    finally:
        page.close()
    assert len(seen) > 10, f"the crawl reached only {len(seen)} pages"
    assert not broken, "\n".join(sorted(set(broken))[:50])
    assert not errors, "\n".join(errors[:50])


def test_screenshots(browser, base_url, annotated) -> None:
    """Catches: layout regressions going unseen (the screenshots are for people to look at)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    probe = Watched(browser)
    try:
        probe.page.goto(base_url + annotated)
        ids = probe.page.evaluate("() => Array.from(document.querySelectorAll('aside.ann-note'), n => n.id)")
    finally:
        probe.close()
    focus = f"#{ids[len(ids) // 3]}" if ids else ""
    shots = [
        ("annotated-wide.png", annotated + focus, 1400, False),
        ("annotated-narrow.png", annotated, 420, False),
        ("seed-demo.png", "seed-demo/", 1400, True),
        ("conformance.png", "conformance/", 1400, True),
    ]
    errors: list[str] = []
    for name, path, width, full in shots:
        w = Watched(browser, width, 1000)
        try:
            w.page.goto(base_url + path, wait_until="load")
            w.page.wait_for_timeout(400)
            w.page.screenshot(path=str(SHOTS / name), full_page=full)
            errors += w.errors
        finally:
            w.close()
        assert (SHOTS / name).stat().st_size > 10_000, f"{name} looks empty"
    assert not errors, errors


# --- reference source pages, both-way links, the side-by-side view --------------------------------

def note_with_ref(page) -> dict:
    """The first note on the open annotated page that has a ref: link, with that link's target."""
    found = page.evaluate(
        """() => { for (const n of document.querySelectorAll('aside.ann-note')) {
             const a = n.querySelector('a.ann-reflink'); const c = n.querySelector('li.ann-cmp a');
             if (a && c) return {id: n.id, href: a.getAttribute('href'), compare: c.getAttribute('href')}; }
           return null; }"""
    )
    assert found, "no note with a ref: link on the annotated page"
    return found


def symbol_state(page, anchor: str) -> dict:
    return page.evaluate(
        """id => { const el = document.getElementById(id); if (!el) return null;
             const hl = Array.from(document.querySelectorAll('.ann-line.ann-hl'), e => +e.id.slice(1));
             const r = el.getBoundingClientRect();
             return {start: +el.dataset.start, end: +el.dataset.end, hl: hl,
                     target: el.classList.contains('ann-target'), visible: r.bottom > 0 && r.top < innerHeight}; }""",
        anchor,
    )


def test_ref_link_opens_the_symbol_lines_and_the_symbol_links_back(watched, base_url, annotated) -> None:
    """Catches: a note's ref: landing on a page without the symbol's lines, or no way back to the note."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = watched.page
    page.goto(base_url + annotated)
    note = note_with_ref(page)
    anchor = unquote(note["href"].split("#", 1)[1])
    page.evaluate("id => document.getElementById(id).querySelector('a.ann-reflink').click()", note["id"])
    page.wait_for_url(re.compile(r"/reference/reference\.[^/]+/#"))
    page.wait_for_function("id => { const e = document.getElementById(id); return e && e.classList.contains('ann-target'); }", arg=anchor)
    page.wait_for_timeout(300)
    state = symbol_state(page, anchor)
    assert state["hl"] == list(range(state["start"], state["end"] + 1)) and state["hl"], state
    assert state["visible"], "the symbol's note is off screen"
    assert page.locator(".ann-refsrc .ann-line").count() > 10
    page.screenshot(path=str(SHOTS / "reference-source.png"))
    # the symbol (or, for an attribute, its owner) lists the note we came from
    back = page.locator(f"li.ann-cite a[href$='#{note['id']}']").first
    assert back.count() == 1, f"the reference page does not cite note {note['id']} back"
    back.click()
    page.wait_for_url(re.compile(re.escape(annotated) + "#"))
    page.wait_for_function("id => document.getElementById(id).classList.contains('ann-target')", arg=note["id"])
    assert not watched.errors, watched.errors


def test_comparison_view_side_by_side_wide_and_stacked_narrow(browser, base_url, annotated) -> None:
    """Catches: a comparison view that is not reachable from both pages, or that does not put the two
    codes side by side on wide screens and one above the other on narrow ones."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for width, name in ((1400, "compare-wide.png"), (420, "compare-narrow.png")):
        w = Watched(browser, width, 1000)
        try:
            w.page.goto(base_url + annotated)
            note = note_with_ref(w.page)
            w.page.evaluate("id => document.getElementById(id).querySelector('li.ann-cmp a').click()", note["id"])
            w.page.wait_for_url(re.compile(r"/compare/v"))
            section = f"document.getElementById({note['id']!r})"
            w.page.wait_for_function(f"() => {section} !== null")
            w.page.wait_for_timeout(300)
            boxes = w.page.evaluate(
                f"""() => {{ const s = {section}; const r = x => x.getBoundingClientRect();
                    const u = s.querySelector('.cmp-upstream'), f = s.querySelector('.cmp-reference');
                    return {{u: [r(u).left, r(u).right, r(u).top, r(u).bottom], f: [r(f).left, r(f).right, r(f).top, r(f).bottom],
                             lines: [u.querySelectorAll('.ann-line').length, f.querySelectorAll('.ann-line').length],
                             top: r(s).top}}; }}"""
            )
            assert min(boxes["lines"]) > 0, boxes
            if width >= 1200:
                assert boxes["f"][0] >= boxes["u"][1] - 1 and abs(boxes["f"][2] - boxes["u"][2]) < 2, boxes
            else:
                assert boxes["f"][2] >= boxes["u"][3] - 1, boxes
            w.page.screenshot(path=str(SHOTS / name))
            # and the reference side's title leads to the symbol on its source page, which links here too
            href = w.page.evaluate(f"() => {section}.querySelector('.cmp-reference .cmp-head a').href")
            w.page.goto(href)
            w.page.wait_for_load_state("load")
            assert w.page.locator(f"li.ann-cite a.ann-cmp[href$='#{note['id']}']").count() >= 1
            errors += w.errors
        finally:
            w.close()
    assert not errors, errors


def test_no_raw_sphinx_roles_outside_code_listings() -> None:
    """Catches: `:attr:`/`:class:`/`:meth:` roles shown as raw text anywhere on the site.

    Code listings (``section.ann-code``) show exact source files, whose docstrings may spell roles;
    the same docstrings are rendered as prose beside them, and that prose must have none."""
    if not (SITE / "index.html").is_file():
        missing(f"no built site at {SITE}")
    role = re.compile(r":(?:py:)?(?:attr|class|meth|func|mod|data|exc|obj|const):(?:<code>|`|&#96;)")
    listing = re.compile(r'<section class="ann-code[^"]*"[^>]*>.*?</section>', re.S)
    script = re.compile(r"<script\b.*?</script>", re.S)
    found = []
    for path in SITE.rglob("*.html"):
        text = script.sub("", listing.sub("", path.read_text(encoding="utf-8")))
        for match in role.finditer(text):
            found.append(f"{path.relative_to(SITE)}: {text[max(0, match.start() - 60):match.end() + 40]!r}")
    assert not found, "\n".join(found[:20])


# --- trace explorer -------------------------------------------------------------------------------

def reference_system(trace: dict):
    """The reference system of a trace, as the conformance adapters build it."""
    if trace["semantics"] == "v1":
        from conformance.adapters.reference_v1 import ReferenceV1System
        from conformance.configs import V1Config

        return ReferenceV1System(V1Config.from_json(trace["config"]))
    from conformance.adapters.reference_v0 import ReferenceV0System
    from conformance.configs import V0Config

    return ReferenceV0System(V0Config.from_json(trace["config"]))


def shown_state(page) -> dict:
    return page.evaluate(
        """() => { const p = document.querySelector('.tx-panel');
          const chips = root => Array.from(root.querySelectorAll('.tx-chip'), c => +c.textContent);
          return {step: +p.dataset.step,
            tables: Array.from(p.querySelectorAll('table.tx-tables tr'), tr =>
                      [tr.dataset.req, Array.from(tr.querySelectorAll('.tx-group'), chips)]),
            free: chips(p.querySelector('.tx-free')),
            refs: Object.fromEntries(Array.from(p.querySelectorAll('.tx-block'), c => [c.dataset.block, +c.dataset.ref])),
            hashes: Object.fromEntries(Array.from(p.querySelectorAll('.tx-block'),
                      c => [c.dataset.block, c.querySelector('.tx-hash').textContent])),
            cow: Array.from(p.querySelectorAll('.tx-chip.tx-cow-dst'), c => +c.textContent),
            evicted: Array.from(p.querySelectorAll('.tx-block.tx-evicted'), c => +c.dataset.block),
            current: Array.from(document.querySelectorAll('.tx-steps li.tx-current'), li => li.id)}; }"""
    )


def snapshot_after(trace: dict, steps: int) -> dict:
    system = reference_system(trace)
    from conformance.lockstep import OpError

    for op in trace["ops"][:steps]:
        try:
            system.apply(op)
        except OpError:
            pass
    return system.snapshot()


TRACE_PAGE = "trace-explorer/v1-upstream-test-prefill-v0.33.0/"
TRACE_FILE = REPO / "conformance" / "traces" / "v1" / "upstream-test-prefill-v0.33.0.json"


def test_trace_explorer_steps_with_keys_and_deep_links_and_shows_the_reference_state(browser, base_url) -> None:
    """Catches: an explorer whose keys or #step-N links do not move it, or whose panel shows another
    state than the reference's own snapshot after that step."""
    import json

    SHOTS.mkdir(parents=True, exist_ok=True)
    trace = json.loads(TRACE_FILE.read_text())
    w = Watched(browser, 1400, 1000)
    try:
        page = w.page
        page.goto(base_url + TRACE_PAGE)
        page.wait_for_function("() => document.querySelector('.tx-panel').dataset.step === '0'")
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        assert shown_state(page)["step"] == 3 and page.url.endswith("#step-3")
        page.keyboard.press("ArrowLeft")
        assert shown_state(page)["step"] == 2 and page.url.endswith("#step-2")
        page.click(".tx-next")
        assert shown_state(page)["step"] == 3
        page.screenshot(path=str(SHOTS / "trace-explorer-keys.png"))
        errors = list(w.errors)
    finally:
        w.close()
    # the step where the most requests hold blocks: the state to check is not trivially empty
    held = [sum(1 for r in snapshot_after(trace, k)["requests"].values() if any(r["tables"]))
            for k in range(len(trace["ops"]) + 1)]
    k = held.index(max(held))
    assert held[k] >= 2, held
    deep = Watched(browser, 1400, 1000)
    try:
        deep.page.goto(base_url + TRACE_PAGE + f"#step-{k}")
        deep.page.wait_for_function(f"() => document.querySelector('.tx-panel').dataset.step === '{k}'")
        shown = shown_state(deep.page)
        assert shown["current"] == [f"step-{k}"]
        snap = snapshot_after(trace, k)
        assert shown["tables"] == [[req, r["tables"]] for req, r in snap["requests"].items()]
        assert shown["free"] == snap["free_queue"]
        assert shown["refs"] == {str(i): ref for i, (ref, _) in enumerate(snap["blocks"])}
        assert shown["hashes"] == {str(i): (h[:8] if h else "·") for i, (_, h) in enumerate(snap["blocks"])}
        deep.page.screenshot(path=str(SHOTS / "trace-explorer-deep-link.png"))
        # the last step evicts the cached prompt blocks: they are highlighted, as the snapshots say
        deep.page.goto(base_url + TRACE_PAGE + f"#step-{len(trace['ops'])}")
        deep.page.wait_for_function(f"() => document.querySelector('.tx-panel').dataset.step === '{len(trace['ops'])}'")
        before, after = snapshot_after(trace, len(trace["ops"]) - 1), snapshot_after(trace, len(trace["ops"]))
        dropped = sorted(i for i, ((_, h0), (_, h1)) in enumerate(zip(before["blocks"], after["blocks"])) if h0 and h0 != h1)
        assert dropped and shown_state(deep.page)["evicted"] == dropped
        errors += deep.errors
    finally:
        deep.close()
    assert not errors, errors


def test_trace_explorer_on_a_phone_shows_copy_on_write(browser, base_url) -> None:
    """Catches: an explorer unreadable on a phone (wider than the screen), or copy-on-write not shown."""
    from docs.hooks.trace_steps import SEED_DEMO_TRACE

    SHOTS.mkdir(parents=True, exist_ok=True)
    w = Watched(browser, 390, 844)
    try:
        page = w.page
        cow_step = next(k for k, op in enumerate(SEED_DEMO_TRACE["ops"], 1) if op["op"] == "append_slots")
        page.goto(base_url + f"trace-explorer/seed-demo-workload/#step-{cow_step}")
        page.wait_for_function(f"() => document.querySelector('.tx-panel').dataset.step === '{cow_step}'")
        snap = snapshot_after(SEED_DEMO_TRACE, cow_step)
        shown = shown_state(page)
        assert shown["tables"] == [[seq, [ids]] for seq, ids in snap["tables"].items()]
        assert shown["free"] == snap["gpu"]["free"]
        child = snap["tables"][str(SEED_DEMO_TRACE["ops"][cow_step - 1]["seq"])]
        assert shown["cow"] == [child[-1]], "the copy-on-write destination is not highlighted"
        overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the page is {overflow}px wider than a phone screen"
        page.screenshot(path=str(SHOTS / "trace-explorer-phone.png"), full_page=False)
        errors = list(w.errors)
    finally:
        w.close()
    assert not errors, errors


# --- exercise mode ---------------------------------------------------------------------------------

def panel_view(page) -> tuple[int, str]:
    step, view = page.evaluate("() => { const p = document.querySelector('.tx-panel'); return [+p.dataset.step, p.dataset.view]; }")
    return step, view


def forward_to(page, k: int) -> None:
    """Click forward until the panel is at step k (keys are ignored while an answer field has focus)."""
    for _ in range(k + 2):
        if panel_view(page)[0] == k:
            return
        page.click(".tx-next")
    assert panel_view(page)[0] == k


def answer(page, answers: dict[str, str]) -> None:
    for qid, text in answers.items():
        page.fill(f".tx-ex-q[data-q='{qid}'] input", text)
    page.click(".tx-ex-check")
    page.wait_for_function("() => document.querySelector('.tx-panel').dataset.view === 'state'")


def verdicts(page) -> dict[str, tuple[bool, str, str | None]]:
    return {qid: (ok, text, href) for qid, ok, text, href in page.evaluate(
        """() => Array.from(document.querySelectorAll('.tx-verdict'), v => [v.dataset.q,
             v.classList.contains('tx-right'), v.textContent,
             v.querySelector('a.tx-why') ? v.querySelector('a.tx-why').getAttribute('href') : null])""")}


def test_exercise_mode_checks_one_answer_right_and_one_wrong_on_desktop_and_phone(browser, base_url) -> None:
    """Catches: exercise mode showing the step before the student answers, grading against
    anything but the reference's state, a wrong answer without the right one and the note that
    explains it, progress lost on reload, the seed demo's attention answer not 3 in both layouts,
    or a form wider than a 390 px phone."""
    from docs.hooks.trace_steps import SEED_FIFTH_TOKEN_SLUG, SEED_FIFTH_TOKEN_TRACE

    SHOTS.mkdir(parents=True, exist_ok=True)
    trace = SEED_FIFTH_TOKEN_TRACE
    alloc = next(k for k, op in enumerate(trace["ops"], 1) if op["op"] == "allocate")
    snap = snapshot_after(trace, alloc)
    table, free, refs = snap["tables"]["1"], snap["gpu"]["free"], snap["gpu"]["refcounts"]
    assert table and free and snapshot_after(trace, alloc - 1)["gpu"]["free"][0] != free[0]
    last = len(trace["ops"])
    errors: list[str] = []
    for width, height, name in ((1400, 1000, "desktop"), (390, 844, "phone")):
        w = Watched(browser, width, height)
        try:
            page = w.page
            url = base_url + f"trace-explorer/{SEED_FIFTH_TOKEN_SLUG}/#exercise"
            page.goto(url)
            page.wait_for_function("() => document.querySelector('.tx-panel').dataset.step === '0'")
            assert page.get_attribute(".tx-ex-toggle", "aria-pressed") == "true"
            forward_to(page, alloc)
            assert panel_view(page) == (alloc, "question")
            # the answer is not on screen: the panel shows the state before the op
            assert page.locator(".tx-panel table.tx-tables tr").count() == 0
            ids = page.evaluate("() => Array.from(document.querySelectorAll('.tx-ex-q'), q => q.dataset.q)")
            assert ids == [f"s{alloc}-table", f"s{alloc}-ref", f"s{alloc}-free_head"], ids
            block = int(page.locator(f".tx-ex-q[data-q='s{alloc}-ref'] .tx-ex-prompt").inner_text().split("block ")[1].split("'")[0])
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name}: the question card is {overflow}px wider than the screen"
            page.screenshot(path=str(SHOTS / f"exercise-question-{name}.png"))
            wrong_head = str((free[0] + 1) % 8)
            answer(page, {f"s{alloc}-table": ", ".join(map(str, table)), f"s{alloc}-free_head": wrong_head,
                          f"s{alloc}-ref": str(refs.get(str(block), 0))})
            got = verdicts(page)
            assert got[f"s{alloc}-table"][0] and got[f"s{alloc}-ref"][0], got
            ok, text, why = got[f"s{alloc}-free_head"]
            assert not ok and f"you said {wrong_head}" in text and f"the reference computed {free[0]}" in text, text
            # the note that explains the free queue's order, on its annotated page
            note_page, _, note_id = urljoin(page.url, why).partition("#")
            target = SITE / unquote(urlsplit(note_page).path).lstrip("/") / "index.html"
            assert target.is_file() and f'id="{note_id}"' in target.read_text(), why
            # the step itself is now shown: the state after the op
            assert shown_state(page)["tables"] == [["1", [table]]]
            progress = page.inner_text(".tx-ex-progress")
            assert progress.startswith("3 of ") and progress.endswith("answered, 2 right"), progress
            page.screenshot(path=str(SHOTS / f"exercise-verdicts-{name}.png"))
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name}: the verdicts are {overflow}px wider than the screen"
            # kept in the browser: after a reload the step shows its verdicts, not the form again
            page.goto("about:blank")
            page.goto(url)
            page.wait_for_function("() => document.querySelector('.tx-panel').dataset.step === '0'")
            forward_to(page, alloc)
            assert panel_view(page) == (alloc, "state")
            assert {q: v[0] for q, v in verdicts(page).items()} == {q: v[0] for q, v in got.items()}
            # the seed demo's claim, as the last questions: 3 in both placements
            forward_to(page, last)
            assert panel_view(page) == (last, "question")
            attention = page.evaluate("() => Array.from(document.querySelectorAll('.tx-ex-q'), q => q.dataset.q)"
                                      ".filter(id => id.includes('attention'))")
            assert len(attention) == 2
            rest = {qid: "3" for qid in attention}
            rest[f"s{last}-returns"] = "0 1 9"  # wrong: the table holds two blocks
            answer(page, rest)
            got = verdicts(page)
            assert all(got[qid][0] for qid in attention), got
            assert not got[f"s{last}-returns"][0] and "the reference computed " + ", ".join(map(str, table + [
                snapshot_after(trace, last)["tables"]["1"][-1]])) in got[f"s{last}-returns"][1]
            errors += w.errors
        finally:
            w.close()
    assert not errors, errors


def test_explore_page_of_a_divergence_shows_both_sides_on_desktop_and_phone(browser, tmp_path, monkeypatch) -> None:
    """Catches: a `python -m conformance explore` page that is blank opened from disk, does not show
    the other side's state at the divergence, outlines no field (or the wrong one), leaves its
    links to the upstream lines out, or is wider than a 390 px phone."""
    import json

    from conformance import explore
    from conformance.__main__ import diverged_trace
    from conformance.adapters.reference_v1 import ReferenceV1System
    from conformance.configs import V1Config
    from conformance.lockstep import replay_sides, save_trace
    from conformance.machines import v1 as v1_machine

    class SwappingPeer(ReferenceV1System):  # the planted bug: after a free, the queue's head pair swaps
        freed = False

        def apply(self, op):
            self.freed = self.freed or op["op"] == "free"
            return super().apply(op)

        def snapshot(self):
            snap = super().snapshot()
            if self.freed:
                q = snap["free_queue"]
                snap["free_queue"] = [q[1], q[0], *q[2:]]
            return snap

    monkeypatch.setattr(v1_machine, "make_systems", lambda c: (ReferenceV1System(V1Config.of(c)),
                                                               SwappingPeer(V1Config.of(c), label="vllm-stand-in")))
    config = {"policy": "v0.33.0", "block_size": 4, "num_blocks": 6, "groups": [{"kind": "full"}],
              "max_model_len": 64, "enable_caching": True, "hash_fn": "sha256", "pythonhashseed": "0", "peer": "reference"}
    trace = {"semantics": "v1", "config": config, "ops": [
        {"op": "add_request", "req": "a", "tokens": list(range(8))},
        {"op": "get_computed_blocks", "req": "a"},
        {"op": "allocate_slots", "req": "a", "num_new_tokens": 8, "use_hit": True},
        {"op": "free", "req": "a"}]}
    done, diff, sides = replay_sides(trace)
    saved = save_trace(diverged_trace(trace, done, diff, sides), tmp_path, "planted")
    page_path = explore.write_page(saved, tmp_path / "page")
    ours, theirs = sides[0]["snapshot"]["free_queue"], sides[1]["snapshot"]["free_queue"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for width, height, name in ((1400, 1000, "desktop"), (390, 844, "phone")):
        w = Watched(browser, width, height)
        try:
            page = w.page
            page.goto(page_path.as_uri() + f"#step-{done}")
            page.wait_for_function(f"() => document.querySelector('.tx-panel').dataset.step === '{done}'")
            shown = page.evaluate("""() => Array.from(document.querySelectorAll('.tx-side'), side => ({
                label: side.querySelector('h3').textContent,
                free: Array.from(side.querySelectorAll('.tx-free .tx-chip'), c => +c.textContent),
                outlined: Array.from(side.querySelectorAll('.tx-diff'), e => e.dataset.box || e.className)}))""")
            assert [s["free"] for s in shown] == [ours, theirs], shown
            assert "vllm-stand-in" in shown[1]["label"]
            assert all(s["outlined"] == ["free"] for s in shown), shown
            assert "/free_queue[0]" in page.inner_text(".tx-first")
            hrefs = page.eval_on_selector_all(".tx-note-link", "els => els.map(a => a.href)")
            assert hrefs and all(h.startswith("https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/v1/core/") for h in hrefs)
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name}: the divergence view is {overflow}px wider than the screen"
            page.screenshot(path=str(SHOTS / f"explore-divergence-{name}.png"))
            assert json.loads(saved.read_text())["sides"][1]["label"] == "vllm-stand-in"
            errors += w.errors
        finally:
            w.close()
    assert not errors, errors


# --- citations: the cite controls on the annotated pages -----------------------------------------

def test_cite_control_copies_the_notes_markdown_on_desktop_and_phone(browser, base_url, annotated) -> None:
    """Catches: a cite control that shows or copies other text than the citation built at build time
    (release, file, range, note id, content hash, links), a plain-text tab that does not switch, a
    line anchor without its cite control or with another line's hash, or a popover wider than a
    390 px phone."""
    from annotations import cite
    from annotations.model import parse, range_hash, upstream_lines
    from upstream.fetch import read_file

    rel = annotated.removeprefix("sources/").rstrip("/")  # v0.10.2/vllm/core/block_manager.py
    af = parse(REPO / "annotations" / f"{rel}.md")
    note = af.notes[len(af.notes) // 2]
    cited = cite.note_citation(af, note)
    lines = upstream_lines(read_file(af.version, af.upstream))
    line = note.start
    errors: list[str] = []
    for width, height, name in ((1400, 1000, "desktop"), (390, 844, "phone")):
        context = browser.new_context(viewport={"width": width, "height": height},
                                      permissions=["clipboard-read", "clipboard-write"])
        page = context.new_page()
        page.on("console", lambda m, name=name: errors.append(f"{name} console: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e, name=name: errors.append(f"{name} pageerror: {e}"))
        try:
            page.goto(base_url + annotated + "#" + note.id)
            button = page.locator(f'aside.ann-note[id="{note.id}"] button.ann-cite')
            button.click()
            pop = page.locator(".ann-cite-pop")
            pop.wait_for(state="visible")
            page.wait_for_function("() => document.querySelector('.ann-cite-pop').dataset.copied !== 'pending'")
            md = page.input_value(".ann-cite-pop textarea")
            site = md.split("note [`", 1)[1].split("](", 1)[1].split("sources/", 1)[0]
            assert md == cited.markdown(site), md
            for part in (f"v{af.version}", f"`{af.upstream}` {note.range_text}", f"#{note.range_text}",
                         f"[`{note.id}`]", note.hash, f"sources/{rel}/#{note.id}"):
                assert part in md, (part, md)
            selected = page.evaluate("() => { const t = document.querySelector('.ann-cite-pop textarea');"
                                     " return t.value.slice(t.selectionStart, t.selectionEnd); }")
            assert selected == md, "the citation is not selected for copying by hand"
            if pop.get_attribute("data-copied") == "yes":
                assert page.evaluate("() => navigator.clipboard.readText()") == md
            box = pop.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (name, box)
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{name}: the cite popover is {overflow}px wider than the screen"
            page.screenshot(path=str(SHOTS / f"cite-note-{name}.png"))
            page.click(".ann-cite-pop [data-form='plain']")
            assert page.input_value(".ann-cite-pop textarea") == cited.plain(site)
            page.keyboard.press("Escape")
            pop.wait_for(state="hidden")
            # a line anchor: its control cites exactly that line, with the line's own content hash
            page.goto(base_url + annotated + f"#L{line}")
            page.locator(f'[id="L{line}"] button.ann-line-cite').click()
            pop.wait_for(state="visible")
            md_line = page.input_value(".ann-cite-pop textarea")
            digest = range_hash(lines, line, line)
            assert f"`{af.upstream}` L{line}](" in md_line and f'#L{line} "{digest}")' in md_line, md_line
            assert f"sources/{rel}/#L{line})" in md_line and f"content hash `{digest}`" in md_line, md_line
            assert page.locator("button.ann-line-cite").count() == 1
        finally:
            context.close()
    assert not errors, errors


# --- bugs found in vLLM: a page per trace of conformance/known-upstream-bugs/ ----------------------

def test_bug_pages_are_linked_and_step_to_the_divergence_on_desktop_and_phone(browser, base_url) -> None:
    """Catches: a known-bug trace without a page, bug pages not linked from the conformance page, an
    explorer that does not reach the step where vLLM diverged or shows another message there, a
    release table missing what was measured, or a page wider than a 390 px phone."""
    import json

    traces = sorted((REPO / "conformance" / "known-upstream-bugs").glob("*.json"))
    replays = json.loads((REPO / "conformance" / "known-upstream-bugs" / "about" / "replays.json").read_text())
    assert traces
    conformance = (SITE / "conformance" / "index.html").read_text()
    assert 'href="../bugs/"' in conformance, "the conformance page does not link the bug pages"
    index = (SITE / "bugs" / "index.html").read_text()
    for path in traces:
        assert f'href="{path.stem}/"' in index, f"bugs/ does not list {path.name}"
    errors: list[str] = []
    for width, height, name in ((1400, 1000, "desktop"), (390, 844, "phone")):
        w = Watched(browser, width, height)
        try:
            page = w.page
            for path in traces:
                trace = json.loads(path.read_text())
                last = len(trace["ops"])
                page.goto(base_url + f"bugs/{path.stem}/#step-{last}")
                page.wait_for_function(f"() => document.querySelector('.tx-panel').dataset.step === '{last}'")
                if trace.get("divergence"):
                    assert page.inner_text(".tx-panel .tx-diverge-msg") == trace["divergence"], path.name
                table = page.inner_text("article")
                for release, entry in replays["traces"].get(path.name, {}).items():
                    assert f"{release}\t{entry['verdict']}" in table, (path.name, release)
                assert "python -m conformance replay conformance/known-upstream-bugs/" + path.name in table
                overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
                assert overflow <= 1, f"{name}: bugs/{path.stem} is {overflow}px wider than the screen"
            page.screenshot(path=str(SHOTS / f"bug-page-{name}.png"))
            errors += w.errors
        finally:
            w.close()
    assert not errors, errors
