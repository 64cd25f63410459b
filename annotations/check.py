"""Prove that the notes still describe the upstream lines they sit beside.

Notes are written against exact upstream bytes. If the pinned release were swapped, a line
inserted, or a note's range mistyped, the prose would silently drift away from the code it
explains. The checker fetches the pinned bytes and turns every such mismatch into a
:class:`Problem` that names the file, the note and the lines, so a reader can fix it at once:

* the whole file's sha256 and the release commit (the right file of the right release);
* each note's hash (the lines under the note are the lines it was written for); when a note went
  stale it searches the current file for the old content and suggests the new range;
* ranges inside the file, in ascending order, not overlapping, and covering at least the
  header's target share of non-blank lines (listing what is uncovered);
* links: ``ref`` imports and resolves, ``prop`` is a registered conformance property, ``see`` and
  Markdown citations ``(v<version>/<path>#<note id>)`` name notes that exist;
* citations of upstream lines anywhere (notes, pages, ``reference/``; ``annotations.citations``):
  the file exists in the release, the range lies inside it, the content hash matches; and no line
  outside a note's range is named in plain text (``L120``), where no hash would check it;
* the shared serving definitions (``serving.md``): well formed, and each one included by a header.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from annotations import citations as upstream_citations
from annotations import serving as serving_definitions
from annotations.model import (
    ANNOTATIONS_ROOT,
    UNSTAMPED_HASH,
    UNSTAMPED_SHA256,
    AnnotationFile,
    AnnotationFormatError,
    Note,
    Reader,
    annotation_paths,
    is_blank,
    parse,
    range_hash,
    upstream_lines,
)
from annotations.reach import CITING as REACH_CITING
from annotations.reach import REQUIRED_FOR as REACH_REQUIRED_FOR
from upstream import fetch

RefResolver = Callable[[str], "str | None"]  # dotted path -> error message, or None when it resolves

#: Markdown citations of notes, e.g. ``[text](v0.10.2/vllm/core/block_manager.py#block_manager.allocate)``.
CITATION = re.compile(r"\]\((?P<path>v[0-9]+\.[0-9]+\.[0-9]+/[^)#\s]+)(?:#(?P<id>[^)\s]*))?\)")
_COMMIT_ID = re.compile(r"commit_id\s*=\s*['\"]g?(?P<commit>[0-9a-f]+)['\"]")
#: A line reference written as plain text, ``L120`` or ``L120-L140``. Lines outside a note's own
#: range are cited as Markdown links (FORMAT.md, "Upstream citations"), so that the checker verifies
#: their hash; plain text would let a wrong number pass.
_BARE_LINES = re.compile(r"(?<![\w#/-])L(?P<start>[0-9]+)(?:-L(?P<end>[0-9]+))?(?!\w)")
_MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\((?:[^()]|\([^)]*\))*\)")
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK_TAIL = re.compile(r"^[^\[\]]*\]\((?:[^()]|\([^)]*\))*\)")  # a link whose text began on the line before


def _blank(match: re.Match[str]) -> str:
    """Spaces as long as the match, so that what follows keeps its offsets."""
    return " " * len(match[0])


def bare_line_references(line: str) -> list[tuple[int, int, str]]:
    """Each line reference in ``line`` that is neither a link nor code: its start, its end and how
    it is written (``L120`` or ``L120-L140``)."""
    masked = _CODE_SPAN.sub(_blank, _MARKDOWN_LINK.sub(_blank, _LINK_TAIL.sub(_blank, line)))
    return [(int(m["start"]), int(m["end"] or m["start"]), m[0]) for m in _BARE_LINES.finditer(masked)]


@dataclass(frozen=True)
class Problem:
    """One reason the annotations are not trustworthy, located as precisely as possible."""

    path: Path
    message: str
    note_id: str | None = None
    lines: str | None = None  # e.g. "L3-L9"

    def __str__(self) -> str:
        where = str(self.path)
        if self.note_id:
            where += f": note `{self.note_id}`"
        if self.lines:
            where += f" {self.lines}"
        return f"{where}: {self.message}"


def page_line_problems(path: Path, text: str) -> list[Problem]:
    """Line numbers a study page writes as plain text outside code: a page has no lines of its own,
    so each must be a link whose hash is checked."""
    problems: list[Problem] = []
    for number, line in upstream_citations.unfenced_lines(text):
        for _, _, cited in bare_line_references(line):
            problems.append(Problem(path, f"line {number}: {cited} is plain text: cite it as a Markdown link"))
    return problems


def unchecked_citation_problems(path: Path, text: str) -> list[Problem]:
    """Upstream lines a study page cites as ``file.py:12-34`` or ``file.py L12-L34`` outside a link,
    even in code: only ``reference/``'s ledger checks that form, so on a page no hash would."""
    problems: list[Problem] = []
    for number, line in upstream_citations.unfenced_lines(text):
        masked = _MARKDOWN_LINK.sub(_blank, _LINK_TAIL.sub(_blank, line))
        for match in upstream_citations.LEGACY_FILE.finditer(masked):
            problems.append(Problem(
                path, f"line {number}: {match[0]} cites upstream lines outside a link: write a Markdown link"
                " (`python -m annotations stamp` fills the hash)",
            ))
    return problems


@dataclass(frozen=True)
class FileCoverage:
    """How much of one upstream file the notes cover."""

    path: Path
    upstream: str
    version: str
    covered: int
    nonblank: int
    target: float

    @property
    def percent(self) -> float:
        return 100.0 * self.covered / self.nonblank if self.nonblank else 100.0


@dataclass
class Report:
    """Everything one check found."""

    problems: list[Problem] = field(default_factory=list)
    coverage: list[FileCoverage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def resolve_ref(dotted: str) -> str | None:
    """Import the longest module prefix of ``dotted`` and follow the rest with getattr.

    Returns ``None`` when the symbol exists, otherwise a sentence saying what is missing.
    Only symbols in ``reference`` count: notes point at our re-implementation, not elsewhere.
    """
    parts = dotted.split(".")
    if parts[0] != "reference" or not all(p.isidentifier() for p in parts):
        return f"ref {dotted!r} is not a dotted path into reference/"
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
                continue
            return f"importing {module_name} failed: {err}"
        except Exception as err:  # noqa: BLE001 (any import failure makes the ref dead)
            return f"importing {module_name} failed: {type(err).__name__}: {err}"
        for depth, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attr):
                missing = f"{'.'.join(parts[:depth])} has no attribute {attr!r}"
                if depth == cut and hasattr(obj, "__path__"):
                    missing += " (and no submodule of that name)"
                return missing
            obj = getattr(obj, attr)
        return None
    return f"no module of {dotted!r} can be imported"


def reference_source(dotted: str) -> tuple[Path, int] | None:
    """The source file and first line defining the symbol ``dotted`` names, or ``None`` when the
    symbol cannot be found or is bound some other way (an import, an unpacking, inside a block, or
    in a base class: an inherited value).

    A function or class is located by its definition (for a name bound to one defined elsewhere,
    that definition), a property by its getter, a Triton kernel (an object of Triton's own types,
    autotuned or not) by the function it wraps, and a value bound at the top level of its module or
    class, a ``functools.partial`` or ``partialmethod`` among them, by its last binding there, a
    class field made from a bare annotation included (none when a later import, any star import,
    an unpacking, an augmented assignment or a block rebinds it: :func:`_top_level_binding`).
    """
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner = obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                owner, obj = obj, getattr(obj, attr)
        except AttributeError:
            return None
        bound = inspect.getattr_static(owner, parts[-1], None) if len(parts) > cut else None
        if not isinstance(bound, functools.partial | functools.partialmethod):
            target = source_object(obj)
            for candidate in (target, _kernel_function(target)):
                found = definition_line(candidate)
                if found is not None:
                    return found
        return _top_level_binding(owner, parts[-1]) if len(parts) > cut else None
    return None


def definition_line(obj: object) -> tuple[Path, int] | None:
    """The source file and first line (its first decorator's, if any) of a function, class or
    module ``obj``, or ``None`` when Python keeps no source for it."""
    try:
        source = inspect.getsourcefile(obj)  # type: ignore[arg-type]
        line = inspect.getsourcelines(obj)[1]  # type: ignore[arg-type]
    except (TypeError, OSError):
        return None
    return None if source is None else (Path(source).resolve(), max(line, 1))


def _is_triton(obj: object) -> bool:
    module = type(obj).__module__
    return module == "triton" or module.startswith("triton.")


def _kernel_function(obj: object) -> object | None:
    """The Python function under a Triton kernel, through any autotuner or heuristics wrapping it
    (each an object of Triton's own types with an ``fn``); ``None`` for anything else."""
    if not _is_triton(obj):
        return None
    while _is_triton(obj) and getattr(obj, "fn", None) is not None:
        obj = obj.fn  # type: ignore[attr-defined]
    return None if _is_triton(obj) else obj


def source_object(obj: object) -> object:
    """What holds the source of ``obj``: a property's getter, a cached property's function, and the
    function under any decorator that keeps ``__wrapped__`` (``functools.cache``, ``functools.wraps``);
    a decorator that keeps no ``__wrapped__`` is located as itself."""
    if isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, functools.cached_property):
        obj = obj.func
    return inspect.unwrap(obj) if callable(obj) else obj


def _top_level_binding(owner: object, name: str) -> tuple[Path, int] | None:
    """Where the module or class ``owner`` last binds ``name`` at its top level (an assignment with
    a value, a ``def`` or ``class`` at its first decorator, or a bare annotation of a name the class
    itself holds and no earlier statement binds: a ``NamedTuple`` or slotted-dataclass field), or
    ``None``, also when a later statement rebinds it in a way the locator recognises (an import, any
    star import, an unpacking, an augmented assignment, an ``except ... as``, inside a block); a
    ``match`` capture, a walrus in an assignment's value or a ``global`` write from a function are
    not recognised."""
    try:
        source = inspect.getsourcefile(owner)  # type: ignore[arg-type]
        lines, first = inspect.getsourcelines(owner)  # type: ignore[arg-type]
    except (TypeError, OSError):
        return None
    if source is None:
        return None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    body = tree.body[0].body if inspect.isclass(owner) and tree.body and isinstance(tree.body[0], ast.ClassDef) else tree.body
    offset = max(first, 1) - 1
    found: int | None = None
    rebound = False  # some statement bound the name in a way that gives no line of its own
    for node in body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            found = node.lineno
        elif any(isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store) and inner.id == name
                 for target in targets for inner in ast.walk(target)):
            found, rebound = None, True  # an unpacking rebinds it
        elif (isinstance(node, ast.AnnAssign) and node.value is None and isinstance(node.target, ast.Name)
              and node.target.id == name and found is None and not rebound and inspect.isclass(owner)
              and name in vars(owner)):
            found = node.lineno  # a field the class itself holds, made from the annotation (NamedTuple, slots)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            found = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        elif _rebinds(node, name):
            found, rebound = None, True
    return None if found is None else (Path(source).resolve(), found + offset)


def _rebinds(node: ast.stmt, name: str) -> bool:
    """Whether a top-level statement other than a plain assignment, ``def`` or ``class`` binds ``name``
    (a star import counts as binding every name)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return _import_binds(node, name)
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Assign | ast.AnnAssign):
        return False
    for inner in _same_scope(node):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store) and inner.id == name:
            return True
        if isinstance(inner, ast.ExceptHandler) and inner.name == name:
            return True
        if isinstance(inner, ast.Import | ast.ImportFrom) and _import_binds(inner, name):
            return True
        if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and inner.name == name:
            return True
    return False


def _import_binds(node: ast.Import | ast.ImportFrom, name: str) -> bool:
    """Whether an import binds ``name`` (``import a.b`` binds ``a``; a star import binds every name)."""
    return any(alias.name == "*" or (alias.asname or alias.name.split(".")[0]) == name for alias in node.names)


def _same_scope(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``node`` in its own scope: not the bodies of functions, classes, lambdas or
    comprehensions, but a def's decorators and default values, a class's decorators, bases and
    keywords, a comprehension's first iterable and its walrus targets, which all belong to it."""
    yield node
    children: list[ast.AST]
    if isinstance(node, ast.ClassDef):
        children = [*node.decorator_list, *node.bases, *node.keywords]
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        arguments = node.args
        children = [*getattr(node, "decorator_list", []), *arguments.defaults,
                    *(default for default in arguments.kw_defaults if default is not None)]
    elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        yield from (inner.target for inner in ast.walk(node) if isinstance(inner, ast.NamedExpr))
        children = [node.generators[0].iter]
    else:
        children = list(ast.iter_child_nodes(node))
    for child in children:
        yield from _same_scope(child)


def _spans(numbers: Iterable[int], lines: list[bytes]) -> list[tuple[int, int]]:
    """Group line numbers into ranges, bridging blank lines (they never need covering)."""
    spans: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if spans and all(is_blank(lines[k - 1]) for k in range(spans[-1][1] + 1, n)):
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    return spans


def _format_spans(spans: list[tuple[int, int]]) -> str:
    return ", ".join(f"L{a}" if a == b else f"L{a}-L{b}" for a, b in spans)


def find_moved(lines: list[bytes], length: int, old_hash: str) -> list[int]:
    """Start lines where ``length`` consecutive lines hash to ``old_hash`` (a stale note's new home)."""
    return [s for s in range(1, len(lines) - length + 2) if range_hash(lines, s, s + length - 1) == old_hash]


class Checker:
    """Checks annotation files under ``root`` against upstream bytes from ``reader``.

    The reader, the ref resolver and the property registry are injected so that tests can run
    the checker on small synthetic upstream files with no network and no conformance package.
    ``property_names`` lists the names a note's ``prop:`` may give; the checker imports no
    registry itself (``python -m annotations check`` passes conformance's), and without one every
    ``prop:`` link is reported as unchecked.
    """

    def __init__(
        self,
        root: Path = ANNOTATIONS_ROOT,
        reader: Reader | None = None,
        ref_resolver: RefResolver = resolve_ref,
        property_names: Callable[[], set[str]] | None = None,
        release_commit: Callable[[str], str] | None = None,
        lister: upstream_citations.Lister | None = None,
        repo: Path | None = None,
    ) -> None:
        self.root = Path(root)
        self.reader: Reader = reader or (lambda version, path: fetch.read_file(version, path))
        self.release_commit = release_commit or self._commit_from_reader
        self.ref_resolver = ref_resolver
        self.property_names = property_names
        #: the repository whose docs/ and reference/ a full run also scans for upstream citations
        self.repo = Path(repo) if repo is not None else (
            self.root.parent if self.root.resolve() == ANNOTATIONS_ROOT.resolve() else None
        )
        if lister is None and reader is None:
            lister = fetch.release_files
        self.resolver = upstream_citations.Resolver(self.reader, lister)
        self._parsed: dict[Path, AnnotationFile | AnnotationFormatError] = {}
        self._props: set[str] | None = None
        self._props_error: str | None = None
        self._commits: dict[str, str | Exception] = {}

    # -- helpers -------------------------------------------------------------------------------
    def parsed(self, path: Path) -> AnnotationFile | AnnotationFormatError:
        path = Path(path).resolve()
        if path not in self._parsed:
            try:
                self._parsed[path] = parse(path)
            except AnnotationFormatError as err:
                self._parsed[path] = err
        return self._parsed[path]

    def _props_known(self) -> set[str]:
        if self._props is not None:
            return self._props
        if self.property_names is None:
            self._props, self._props_error = set(), "no property registry was given to the checker"
            return self._props
        try:
            self._props = set(self.property_names())
        except Exception as err:  # noqa: BLE001 (a broken registry makes every prop dead)
            self._props, self._props_error = set(), f"the property registry failed: {type(err).__name__}: {err}"
        return self._props

    def _commit_from_reader(self, version: str) -> str:
        """The release commit as setuptools-scm recorded it in the release's ``vllm/_version.py``."""
        text = self.reader(version, "vllm/_version.py").decode("utf-8", "replace")
        match = _COMMIT_ID.search(text)
        if not match:
            raise ValueError("no commit_id in vllm/_version.py")
        return match["commit"]

    def _release_commit(self, version: str) -> str | Exception:
        if version not in self._commits:
            try:
                self._commits[version] = self.release_commit(version)
            except Exception as err:  # noqa: BLE001 (reported as a problem)
                self._commits[version] = err
        return self._commits[version]

    def citation_problem(self, target_path: str, note_id: str | None) -> str | None:
        """Why a citation ``v<version>/<path>[#id]`` does not resolve, or ``None``."""
        md = self.root / (target_path + ".md")
        if not md.is_file():
            return f"no annotation file {target_path}.md"
        parsed = self.parsed(md)
        if isinstance(parsed, AnnotationFormatError):
            return f"the cited file does not parse: {parsed}"
        if note_id is not None and parsed.note(note_id) is None:
            return f"{target_path} has no note `{note_id}`"
        return None

    # -- one annotation file -------------------------------------------------------------------
    def check_file(self, path: Path) -> tuple[list[Problem], FileCoverage | None]:
        parsed = self.parsed(path)
        if isinstance(parsed, AnnotationFormatError):
            return [Problem(parsed.path, f"line {parsed.line}: {parsed.message}")], None
        af = parsed
        problems: list[Problem] = []
        try:
            relative = Path(path).resolve().relative_to(self.root.resolve()).as_posix()
            if relative != f"{af.cite_path}.md":
                problems.append(Problem(af.path, f"lives at {relative} but its header says {af.cite_path}.md"))
        except ValueError:
            problems.append(Problem(af.path, f"is outside the annotations root {self.root}"))
        problems += self._link_problems(af)
        problems += self._bare_line_problems(af)
        problems += self.upstream_citation_problems([af.path])
        problems += self._reach_problems(af)
        try:
            data = self.reader(af.version, af.upstream)
        except Exception as err:  # noqa: BLE001 (any fetch failure is reported, not raised)
            problems.append(Problem(af.path, f"cannot fetch {af.upstream} @ {af.version}: {err}"))
            return problems, None
        commit = self._release_commit(af.version)
        if isinstance(commit, Exception):
            problems.append(Problem(af.path, f"cannot read the release commit of {af.version}: {commit}"))
        elif not (commit.startswith(af.commit) or af.commit.startswith(commit)):
            problems.append(Problem(af.path, f"header commit {af.commit} but release {af.version} is commit {commit}"))
        actual = hashlib.sha256(data).hexdigest()
        file_moved = False
        if af.sha256 == UNSTAMPED_SHA256:
            problems.append(Problem(af.path, "header sha256 is '?': run `python -m annotations stamp` on it"))
        elif af.sha256 != actual:
            file_moved = True
            problems.append(Problem(
                af.path, f"upstream {af.upstream} @ {af.version} has sha256 {actual}, header says {af.sha256}:"
                " the release moved or this is the wrong file",
            ))
        lines = upstream_lines(data)
        problems += self._range_problems(af, lines, file_moved)
        coverage, coverage_problem = self._coverage(af, lines)
        if coverage_problem:
            problems.append(coverage_problem)
        return problems, coverage

    def _range_problems(self, af: AnnotationFile, lines: list[bytes], file_moved: bool) -> list[Problem]:
        problems: list[Problem] = []
        stale: list[str] = []
        previous: Note | None = None
        for note in af.notes:
            if previous is not None and note.start <= previous.end:
                what = "overlaps" if note.start >= previous.start else "comes before"
                problems.append(Problem(
                    af.path, f"{what} note `{previous.id}` {previous.range_text}: notes must ascend without overlap",
                    note.id, note.range_text,
                ))
            previous = note
            if note.end > len(lines):
                problems.append(Problem(
                    af.path, f"range ends after the file's last line L{len(lines)}", note.id, note.range_text
                ))
                continue
            if note.hash == UNSTAMPED_HASH:
                problems.append(Problem(af.path, "hash is unstamped: run `python -m annotations stamp`", note.id, note.range_text))
                continue
            current = range_hash(lines, note.start, note.end)
            if current != note.hash:
                stale.append(note.id)
                moved = sorted(find_moved(lines, note.end - note.start + 1, note.hash), key=lambda s: abs(s - note.start))
                if moved:
                    hint = "; the old lines now appear at " + ", ".join(
                        f"L{s}-L{s + note.end - note.start} (moved {s - note.start:+d})" for s in moved[:3]
                    ) + (f" and {len(moved) - 3} more places" if len(moved) > 3 else "")
                else:
                    hint = "; the old lines are nowhere in the current file: re-read and rewrite this note"
                problems.append(Problem(
                    af.path, f"hash drift: the note says {note.hash}, the lines hash to {current}{hint}",
                    note.id, note.range_text,
                ))
        if stale and file_moved:
            problems.append(Problem(af.path, f"{len(stale)} of {len(af.notes)} notes went stale: {', '.join(stale)}"))
        return problems

    def _coverage(self, af: AnnotationFile, lines: list[bytes]) -> tuple[FileCoverage, Problem | None]:
        nonblank = {n for n in range(1, len(lines) + 1) if not is_blank(lines[n - 1])}
        covered = {n for note in af.notes for n in range(note.start, min(note.end, len(lines)) + 1)} & nonblank
        coverage = FileCoverage(af.path, af.upstream, af.version, len(covered), len(nonblank), af.coverage)
        if len(covered) * 100 < af.coverage * len(nonblank):
            uncovered = _format_spans(_spans(nonblank - covered, lines))
            return coverage, Problem(
                af.path, f"coverage {coverage.percent:.1f}% ({len(covered)}/{len(nonblank)} non-blank lines)"
                f" is under the target {af.coverage:g}%; uncovered: {uncovered}",
            )
        return coverage, None

    def _reach_problems(self, af: AnnotationFile) -> list[Problem]:
        """Reachability: required where the release demands it; 'unreached' and 'models' must cite upstream."""
        problems: list[Problem] = []
        required = af.version in REACH_REQUIRED_FOR
        if required and not af.serving:
            problems.append(Problem(af.path, f"release {af.version} needs a 'serving:' header saying what the serving path is"))
        for route in af.reach.routes if af.reach is not None else ():
            if route.status in REACH_CITING and not upstream_citations.find_markdown(af.path, route.why):
                problems.append(Problem(af.path, f"header reach '{route.status}' cites no upstream lines"))
        for note in af.notes:
            reach = af.reach_of(note)
            if reach is None:
                if required:
                    problems.append(Problem(
                        af.path, f"no reachability status (a '- reach:' line or a 'reach:' header is required at {af.version})",
                        note.id, note.range_text,
                    ))
                continue
            for route in note.reach.routes if note.reach is not None else ():
                if route.status in REACH_CITING and not upstream_citations.find_markdown(af.path, route.why):
                    cited = "the callers" if route.status == "unreached" else "the code that selects it for those models"
                    problems.append(Problem(
                        af.path, f"reach '{route.status}' must cite {cited} (an upstream citation in its why)", note.id, note.range_text
                    ))
        return problems

    def _link_problems(self, af: AnnotationFile) -> list[Problem]:
        problems: list[Problem] = []
        for note in af.notes:
            for ref in note.refs:
                error = self.ref_resolver(ref)
                if error:
                    problems.append(Problem(af.path, f"dead ref {ref}: {error}", note.id, note.range_text))
            for prop in note.props:
                known = self._props_known()
                if prop not in known:
                    why = self._props_error or "not a registered conformance property"
                    problems.append(Problem(af.path, f"dead prop {prop}: {why}", note.id, note.range_text))
            for see in note.sees:
                target, _, note_id = see.partition("#")
                error = self.citation_problem(target, note_id)
                if error:
                    problems.append(Problem(af.path, f"dead see {see}: {error}", note.id, note.range_text))
            for message in self._citation_errors(note.body):
                problems.append(Problem(af.path, message, note.id, note.range_text))
        problems += [Problem(af.path, f"introduction: {m}") for m in self._citation_errors(af.intro)]
        return problems

    def _bare_line_problems(self, af: AnnotationFile) -> list[Problem]:
        """Plain-text line numbers outside a note's range, which no hash checks (``- later:`` items,
        which speak of another release's lines, and fenced blocks are left alone)."""
        if not af.notes:
            return []
        headings = [note.heading_line for note in af.notes]
        problems: list[Problem] = []
        in_later = False
        for number, line in upstream_citations.unfenced_lines(af.path.read_text(encoding="utf-8")):
            if number <= headings[0]:
                continue
            note = af.notes[bisect.bisect_right(headings, number) - 1]
            if number == note.heading_line:
                in_later = False
                continue
            in_later = line.startswith("- later:") or (in_later and line.startswith("  "))
            if not in_later:
                for start, end, cited in bare_line_references(line):
                    if start < note.start or end > note.end:
                        problems.append(Problem(
                            af.path, f"line {number}: {cited} lies outside the note's lines and is plain text:"
                            " cite it as a Markdown link (`python -m annotations stamp` fills the hash)",
                            note.id, note.range_text,
                        ))
        return problems

    def _citation_errors(self, markdown: str) -> list[str]:
        errors: list[str] = []
        for _, line in upstream_citations.unfenced_lines(markdown):
            for match in CITATION.finditer(line):
                error = self.citation_problem(match["path"], match["id"])
                if error:
                    errors.append(f"dead citation ({match['path']}#{match['id'] or ''}): {error}")
        return errors

    @property
    def ledger_path(self) -> Path:
        """Where the content hashes of ``reference/``'s legacy citations are recorded."""
        return self.root / "citations.lock"

    def upstream_citation_problems(self, paths: Iterable[Path], full: bool = False) -> list[Problem]:
        """Dead, unstamped or drifted upstream citations in ``paths`` (Markdown or Python).

        With ``full`` the ledger is also checked for entries no citation uses any more.
        """
        found = [c for path in paths for c in upstream_citations.find(Path(path))]
        problems: list[Problem] = []
        try:
            ledger = upstream_citations.read_ledger(self.ledger_path)
        except ValueError as err:
            return [Problem(self.ledger_path, str(err))]
        repo = self.repo or self.root.parent
        messages, used = upstream_citations.check(found, self.resolver, ledger, repo)
        problems += [Problem(c.source, f"line {c.line}: {m}") for c, m in messages]
        if full:
            for key in sorted(set(ledger) - used):
                source, version, path, start, end = key
                problems.append(Problem(
                    self.ledger_path, f"stale entry: {source} no longer cites v{version}/{path}#L{start}-L{end}:"
                    " run `python -m annotations stamp --citations`",
                ))
        return problems

    def citation_sources(self) -> list[Path]:
        """Files outside ``annotations/`` whose upstream citations a full run checks."""
        if self.repo is None:
            return []
        return (sorted((self.repo / "docs").rglob("*.md")) +
                [p for room in ("reference", "conformance", "benchmarks") for p in sorted((self.repo / room).rglob("*.py"))])

    def check_markdown(self, path: Path) -> list[Problem]:
        """Validate the note citations of a free Markdown file (e.g. reading-questions.md), and
        report any line number it writes as plain text."""
        text = Path(path).read_text(encoding="utf-8")
        problems: list[Problem] = self.upstream_citation_problems([Path(path)])
        problems += page_line_problems(Path(path), text)
        for number, line in upstream_citations.unfenced_lines(text):
            for match in CITATION.finditer(line):
                error = self.citation_problem(match["path"], match["id"])
                if error:
                    problems.append(Problem(Path(path), f"line {number}: dead citation: {error}"))
        return problems

    # -- everything ----------------------------------------------------------------------------
    def run(self, paths: Iterable[Path] | None = None) -> Report:
        """Check ``paths`` (annotation files or other Markdown), or everything under the root."""
        if paths is None:
            targets = annotation_paths(self.root) + sorted(self.root.glob("*.md"))
        else:
            targets = [Path(p) for p in paths]
        report = Report()
        for target in targets:
            if self._is_annotation(target):
                problems, coverage = self.check_file(target)
                report.problems += problems
                if coverage:
                    report.coverage.append(coverage)
            elif target.suffix == ".md":
                report.problems += self.check_markdown(target)
            else:
                report.problems += self.upstream_citation_problems([target])
        if paths is None:
            report.problems += self.serving_problems()
            sources = self.citation_sources()
            report.problems += self.upstream_citation_problems(sources, full=True)
            for page in sources:
                if page.suffix == ".md":
                    text = page.read_text(encoding="utf-8")
                    report.problems += page_line_problems(page, text) + unchecked_citation_problems(page, text)
        return report

    def serving_problems(self) -> list[Problem]:
        """A malformed ``serving.md``, a definition there that no ``serving:`` header includes, or a
        line number written as plain text there (a definition has no lines of its own)."""
        path = self.root / serving_definitions.SERVING_FILE
        try:
            definitions = serving_definitions.definitions_at(self.root)
        except serving_definitions.ServingError as err:
            return [Problem(path, f"line {err.line}: {err}")]
        used = {
            (parsed.version, name)
            for target in annotation_paths(self.root)
            if isinstance(parsed := self.parsed(target), AnnotationFile)
            for name in parsed.serving_names
        }
        problems = [
            Problem(path, f"definition `{version}/{name}` is included by no serving: or reach: header; remove it or use it")
            for version, name in sorted(set(definitions) - used)
        ]
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        return problems + page_line_problems(path, text)

    def _is_annotation(self, path: Path) -> bool:
        """Annotation files live under ``v<version>/``; anything else with a header is one too."""
        try:
            first = path.resolve().relative_to(self.root.resolve()).parts[0]
            if re.match(r"^v[0-9]", first) and len(path.resolve().relative_to(self.root.resolve()).parts) > 1:
                return True
        except ValueError:
            pass
        return path.suffix == ".md" and path.read_text(encoding="utf-8").startswith("---")
