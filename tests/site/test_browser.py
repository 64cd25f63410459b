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
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit, unquote

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
    page.fill("input.md-search__input", "copy-on-write")
    # The search worker builds its index in the page (~0.6 MB); on a loaded 2-core machine that
    # has taken over 15 s, so allow a minute before calling search broken.
    page.wait_for_selector(".md-search-result__item", timeout=60000)
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
