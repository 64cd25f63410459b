"""Command line for the annotations: ``python -m annotations fetch|stamp|check|coverage|cite|verify-citation|drift|sample``.

* ``fetch [--version V] [--checkout PATH] [FILES]``: obtain every upstream file the annotation
  files name, verify each against its header's sha256, and say what was fetched.
* ``stamp FILE...``: fill ``????????????`` note hashes, a ``?`` header sha256 and the hashes of
  upstream citations written without one (never overwrites a hash that is present).
* ``stamp --citations``: record the hashes of ``reference/``'s legacy citations in
  ``annotations/citations.lock`` (adds new ones, drops ones no longer cited, keeps the rest).
* ``check [FILES]``: every check of ``annotations.check``; exit 1 with one line per problem.
* ``coverage [FILES]``: the per-file coverage table only.
* ``cite NOTE_ID``: the note's citation in Markdown and plain text, with its quoted upstream lines.
* ``verify-citation TEXT|-``: each pasted citation against the release bytes: fine, moved, drifted.
* ``drift VERSION``: follow every note into a later release (``annotations.drift``): unchanged,
  moved, changed or gone; writes ``annotations/drift/v<pinned>-to-<VERSION>.json`` and a summary.
* ``drift --check``: recompute the committed reports from the sdists; exit 1 where they disagree,
  or where a changed note of the newest pinned release has no ``- later:`` line.
* ``sample [--count N] [--seed S] [--context N] [--out FILE]`` (or ``--notes ID...`` in place of
  count and seed): an audit worksheet (``annotations.audit_sheet``): notes drawn by the auditor's
  seed, or named, each beside its sha256-verified upstream lines, its links and later releases,
  with empty verdict lines; each file's reach header lines, each shared definition and each linked
  property once at the end.

Run from the repository root with the dev environment, so ``ref`` links can import ``reference``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from annotations import audit_sheet, citations, cite, drift
from annotations.check import Checker, FileCoverage
from annotations.model import (
    ANNOTATIONS_ROOT,
    UNSTAMPED_SHA256,
    AnnotationFormatError,
    Reader,
    annotation_paths,
    parse,
    stamp_text,
)
from upstream import fetch


def _reader(checkout: Path | None) -> Reader:
    return lambda version, path: fetch.read_file(version, path, checkout)


def _lister(checkout: Path | None):
    """Every file of a release: the sdist's listing, or the tag's tree in a checkout."""
    if checkout is None:
        return fetch.release_files

    def tree(version: str) -> list[str]:
        out = subprocess.run(
            ["git", "-C", str(checkout), "ls-tree", "-r", "--name-only", f"v{version}"],
            capture_output=True, text=True, check=False,
        )
        if out.returncode != 0:
            raise fetch.UpstreamError(f"{checkout}: no tag v{version}: {out.stderr.strip()}")
        return out.stdout.split("\n")

    return tree


def _commit(checkout: Path | None):
    return lambda version: fetch.release_commit(version, checkout)


def _annotation_targets(args: argparse.Namespace) -> list[Path]:
    return [Path(f) for f in args.files] if args.files else annotation_paths(args.root)


def coverage_table(rows: list[FileCoverage]) -> str:
    """A fixed-width table: one row per annotation file, then the total."""
    lines = [f"{'upstream file':<52} {'covered/non-blank':>17} {'%':>7} {'target':>7}"]
    for row in rows:
        name = f"v{row.version}/{row.upstream}"
        lines.append(f"{name:<52} {f'{row.covered}/{row.nonblank}':>17} {row.percent:>6.1f}% {row.target:>6g}%")
    covered, nonblank = sum(r.covered for r in rows), sum(r.nonblank for r in rows)
    total = 100.0 * covered / nonblank if nonblank else 100.0
    lines.append(f"{'total':<52} {f'{covered}/{nonblank}':>17} {total:>6.1f}%")
    return "\n".join(lines)


def cmd_fetch(args: argparse.Namespace) -> int:
    failures = 0
    fetched: set[tuple[str, str]] = set()
    for path in _annotation_targets(args):
        try:
            af = parse(path)
        except AnnotationFormatError as err:
            print(f"skip {err}")
            failures += 1
            continue
        if args.version and af.version != args.version:
            continue
        if (af.version, af.upstream) in fetched:
            continue
        fetched.add((af.version, af.upstream))
        try:
            data = fetch.read_file(af.version, af.upstream, args.checkout)
        except Exception as err:  # noqa: BLE001 (one failed file should not hide the others)
            print(f"FAIL {af.upstream} @ {af.version}: {err}")
            failures += 1
            continue
        digest = hashlib.sha256(data).hexdigest()
        lines = data.count(b"\n")
        if af.sha256 == UNSTAMPED_SHA256:
            verdict = "header sha256 not stamped yet"
        elif digest == af.sha256:
            verdict = "sha256 ok"
        else:
            print(f"FAIL {af.upstream} @ {af.version}: sha256 {digest} but {path} says {af.sha256}")
            failures += 1
            continue
        if args.checkout is not None and digest == af.sha256:
            fetch.store_file(af.version, af.upstream, data)  # verified bytes: later checks run offline
        source = f"checkout {args.checkout}" if args.checkout else "release sdist"
        print(f"fetched {af.upstream} @ {af.version} from {source}: {lines} lines, {verdict}")
    print(f"{len(fetched)} upstream files, {failures} failures")
    return 1 if failures else 0


def stamp_ledger(checker: Checker) -> tuple[int, int]:
    """Rewrite the legacy-citation ledger: add missing entries, drop unused ones; (added, dropped)."""
    found = [c for path in checker.citation_sources() for c in citations.find(path)]
    old = citations.read_ledger(checker.ledger_path)
    _, used = citations.check(found, checker.resolver, old, checker.repo or checker.root.parent)
    new: dict[citations.LedgerKey, str] = {}
    for key in used:
        if key in old:
            new[key] = old[key]  # never overwrite: a mismatch is drift for `check` to report
            continue
        source, version, path, start, end = key
        lines = checker.resolver.lines(version, path)
        if not isinstance(lines, Exception):
            new[key] = citations.range_hash(lines, start, end)
    citations.write_ledger(checker.ledger_path, new)
    return len(set(new) - set(old)), len(set(old) - set(new))


def cmd_stamp(args: argparse.Namespace) -> int:
    reader = _reader(args.checkout)
    status = 0
    if not args.files and not args.citations:
        print("nothing to stamp: name files, or pass --citations")
        return 2
    if args.citations:
        checker = Checker(args.root, reader=reader, release_commit=_commit(args.checkout), lister=_lister(args.checkout))
        added, dropped = stamp_ledger(checker)
        print(f"{checker.ledger_path}: {added} entries added, {dropped} dropped")
    resolver = citations.Resolver(reader)
    for name in args.files:
        path = Path(name)
        try:
            text = path.read_text(encoding="utf-8")
            changes: list[str] = []
            if path.suffix == ".md" and text.startswith("---"):
                text, changes = stamp_text(path, text, reader)
            text, cited = citations.stamp_inline(text, resolver)
            if cited:
                changes.append(f"{cited} upstream citations")
        except (AnnotationFormatError, ValueError, fetch.UpstreamError) as err:
            print(f"not stamped: {err}")
            status = 1
            continue
        if changes:
            path.write_text(text, encoding="utf-8")
        print(f"{path}: stamped {len(changes)}" + (": " + ", ".join(changes) if changes else " (nothing to fill)"))
    return status


def conformance_properties() -> set[str]:
    """The names a note's ``prop:`` may give: conformance's property registry. The command, not the
    checker, reads it, so ``annotations.check`` imports no other room; imported on first use."""
    from conformance.properties import property_names

    return property_names()


def cmd_check(args: argparse.Namespace) -> int:
    checker = Checker(args.root, reader=_reader(args.checkout), release_commit=_commit(args.checkout),
                      lister=_lister(args.checkout), property_names=conformance_properties)
    report = checker.run([Path(f) for f in args.files] if args.files else None)
    for problem in report.problems:
        print(problem)
    if report.coverage:
        print(coverage_table(report.coverage))
    print(f"{len(report.problems)} problems" if report.problems else "annotations check: ok")
    return 0 if report.ok else 1


def cmd_coverage(args: argparse.Namespace) -> int:
    checker = Checker(args.root, reader=_reader(args.checkout), release_commit=_commit(args.checkout),
                      lister=_lister(args.checkout), property_names=conformance_properties)
    report = checker.run(_annotation_targets(args))
    print(coverage_table(report.coverage))
    return 0


def cmd_cite(args: argparse.Namespace) -> int:
    """Print a note's citation (Markdown, its quoted upstream lines, plain text)."""
    reader = _reader(args.checkout)
    try:
        af, note = cite.find_note(args.note, args.root, args.version)
        block = cite.quoted(af, note, reader)
        site = args.site_url or cite.site_url()
    except (cite.CiteError, fetch.UpstreamError, AnnotationFormatError, OSError) as err:
        print(f"cannot cite {args.note}: {err}", file=sys.stderr)
        return 2
    cited = cite.note_citation(af, note)
    print(f"{cited.markdown(site)}\n\n{block}\n\nplain: {cited.plain(site)}")
    return 0


def cmd_verify_citation(args: argparse.Namespace) -> int:
    """Check pasted citations against the release bytes: fine, moved or drifted (or dead)."""
    text = sys.stdin.read() if args.text == "-" else args.text
    verdicts = cite.verify(text, _reader(args.checkout), args.release, args.root)
    if not verdicts:
        print("no citation with lines found: expected a Markdown link to github.com/vllm-project/vllm/blob/"
              "v<version>/<path>#L<a>-L<b> titled with its hash, or v<version>/<path>#L<a>-L<b>@<hash>",
              file=sys.stderr)
        return 2
    for verdict in verdicts:
        print(f"{verdict.status}: {verdict.label}: {verdict.detail}")
    return 0 if all(v.status == cite.FINE for v in verdicts) else 1


def add_cite_commands(sub) -> None:
    """The ``cite`` and ``verify-citation`` subcommands."""
    cmd = sub.add_parser("cite", help="print a note's citation with its quoted upstream lines")
    cmd.add_argument("note", metavar="NOTE_ID", help="a note id, or v<version>/<path>#<id> where ids repeat")
    cmd.add_argument("--version", default=None, help="look for the note at this release only, e.g. 0.10.2")
    cmd.add_argument("--site-url", default=None, help="the site the citation links to (default: mkdocs.yml site_url)")
    cmd.set_defaults(func=cmd_cite)
    ver = sub.add_parser("verify-citation", help="check a pasted citation against the release bytes")
    ver.add_argument("text", metavar="TEXT", help="the pasted citation(s), or - to read them from stdin")
    ver.add_argument("--release", default=None, help="check the cited lines in this release instead, e.g. 0.33.0")
    ver.set_defaults(func=cmd_verify_citation)
    for each in (cmd, ver):
        each.add_argument("--checkout", type=Path, default=None, help="a local vLLM git checkout with the pinned tags")
        each.add_argument("--root", type=Path, default=ANNOTATIONS_ROOT, help=argparse.SUPPRESS)


def cmd_drift(args: argparse.Namespace) -> int:
    """Follow every pinned note into a later release (write the reports), or check the committed ones."""
    try:
        annotations = [parse(p) for p in annotation_paths(args.root)]
    except AnnotationFormatError as err:
        print(f"drift: {err}", file=sys.stderr)
        return 2
    drift_root, repo = args.root / "drift", args.root.parent
    try:
        if args.check:
            problems = drift.check_committed(annotations, _reader(None), _lister(None), drift.sdist_record, repo, drift_root)
            for problem in problems:
                print(problem)
            print(f"{len(problems)} drift problems" if problems else "drift check: ok")
            return 1 if problems else 0
        if not args.version:
            print("drift: name the later release (e.g. 0.34.0), or pass --check", file=sys.stderr)
            return 2
        reports = drift.follow(args.version, annotations, _reader(None), _lister(None), drift.sdist_record, repo,
                               progress=lambda line: print(f"  {line}", file=sys.stderr))
    except (drift.DriftError, fetch.UpstreamError) as err:
        print(f"drift: {err}", file=sys.stderr)
        return 2
    drift_root.mkdir(parents=True, exist_ok=True)
    for report in reports:
        path = drift.report_path(report.from_version, report.to_version, drift_root)
        path.write_text(report.dumps(), encoding="utf-8")
        print(drift.summary(report))
        print(f"wrote {path}\n")
    return 0


def add_drift_command(sub) -> None:
    """The ``drift`` subcommand."""
    cmd = sub.add_parser("drift", help="follow every note into a later release, or check the committed reports")
    cmd.add_argument("version", nargs="?", metavar="VERSION", help="the later release, e.g. 0.34.0")
    cmd.add_argument("--check", action="store_true",
                     help="recompute every committed report and fail where it disagrees with the bytes")
    cmd.add_argument("--root", type=Path, default=ANNOTATIONS_ROOT, help=argparse.SUPPRESS)
    cmd.set_defaults(func=cmd_drift)


def _repository_commit(root: Path) -> str:
    """The commit of the checkout holding the annotations root, marked with the folders a worksheet
    reads (the notes, ``reference/``, ``conformance/``) that have uncommitted changes."""
    def git(*words: str) -> str:
        out = subprocess.run(["git", "-C", str(root), *words], capture_output=True, text=True, check=False)
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown (not a git checkout)"
    folders = [(root, root.name), (root.parent / "reference", "reference"), (root.parent / "conformance", "conformance")]
    changed = [f"{name}/" for path, name in folders if path.is_dir() and git("status", "--porcelain", "--", str(path))]
    return commit + (" with uncommitted changes to " + ", ".join(changed) if changed else "")


def cmd_sample(args: argparse.Namespace) -> int:
    """Write an audit worksheet for notes drawn by a seed or named by the auditor."""
    try:
        if args.context < 0:
            raise audit_sheet.SampleError(f"--context {args.context}: give 0 or more lines")
        notes = audit_sheet.population(args.root)
        if args.notes:
            if args.count is not None or args.seed is not None:
                raise audit_sheet.SampleError("--notes names the notes to audit: leave out --count and --seed")
            chosen = audit_sheet.named(notes, args.notes)
            how = "python -m annotations sample --notes " + " ".join(args.notes)
        else:
            count = audit_sheet.DEFAULT_COUNT if args.count is None else args.count
            seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(8), "big")
            chosen = audit_sheet.draw(notes, count, seed)
            how = f"python -m annotations sample --count {count} --seed {seed}"
        properties, unavailable = audit_sheet.property_checks(args.root.parent)
        sheet = audit_sheet.worksheet(chosen, _reader(args.checkout), how, _repository_commit(args.root),
                                      len(notes), args.root, properties, args.context, unavailable)
        if args.out is not None:
            args.out.write_text(sheet, encoding="utf-8")
    except (audit_sheet.SampleError, cite.CiteError, drift.DriftError, fetch.UpstreamError,
            AnnotationFormatError, OSError) as err:
        print(f"sample: {err}", file=sys.stderr)
        return 2
    if args.out is None:
        sys.stdout.write(sheet)
    else:
        print(f"wrote {args.out}: {len(chosen)} notes", file=sys.stderr)
    print(f"reproduce with: {how}", file=sys.stderr)
    return 0


def add_sample_command(sub) -> None:
    """The ``sample`` subcommand."""
    cmd = sub.add_parser("sample", help="write an audit worksheet for notes drawn at random or named")
    cmd.add_argument("--count", type=int, default=None,
                     help=f"how many notes to draw (default {audit_sheet.DEFAULT_COUNT})")
    cmd.add_argument("--seed", type=int, default=None, help="the draw's seed (default: a fresh one from os.urandom)")
    cmd.add_argument("--notes", nargs="+", metavar="NOTE_ID", default=None,
                     help="audit these notes instead of a draw (ids, or v<version>/<path>#<id> where ids repeat); "
                          "not with --count or --seed")
    cmd.add_argument("--out", type=Path, default=None, help="write the worksheet here instead of standard output")
    cmd.add_argument("--context", type=int, default=audit_sheet.CONTEXT_LINES,
                     help=f"upstream lines shown before and after each note's range (default {audit_sheet.CONTEXT_LINES})")
    cmd.add_argument("--checkout", type=Path, default=None, help="a local vLLM git checkout with the pinned tags")
    cmd.add_argument("--root", type=Path, default=ANNOTATIONS_ROOT, help=argparse.SUPPRESS)
    cmd.set_defaults(func=cmd_sample)


def main(argv: list[str] | None = None) -> int:
    repo = str(ANNOTATIONS_ROOT.parent)
    if repo not in sys.path:
        sys.path.insert(0, repo)  # so `ref` links resolve into reference/ from any directory
    parser = argparse.ArgumentParser(prog="python -m annotations", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, help_text in (
        ("fetch", cmd_fetch, "fetch and verify every upstream file the annotations name"),
        ("stamp", cmd_stamp, "fill placeholder hashes in annotation files"),
        ("check", cmd_check, "check hashes, ranges, coverage and links"),
        ("coverage", cmd_coverage, "print the per-file coverage table"),
    ):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("files", nargs="*", metavar="FILE")
        cmd.add_argument("--checkout", type=Path, default=None, help="a local vLLM git checkout with the pinned tags")
        cmd.add_argument("--root", type=Path, default=ANNOTATIONS_ROOT, help=argparse.SUPPRESS)
        if name == "stamp":
            cmd.add_argument("--citations", action="store_true", help="rewrite the ledger of reference/'s citations")
        if name == "fetch":
            cmd.add_argument("--version", default=None, help="only files annotated at this release, e.g. 0.10.2")
        cmd.set_defaults(func=func)
    add_cite_commands(sub)
    add_drift_command(sub)
    add_sample_command(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
