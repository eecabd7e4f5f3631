"""Finding the files to ingest and placing each under its knowledge-base path.

Pure path logic and directory walks, no store writes: which files a run sees (hidden
entries, symlinks and unreadable folders reported, never followed), and under which KB
folder each one is stored, so that a file ingested from a sub-folder is not stored twice.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from superbiz.knowledge.documents.included import site_attributes
from superbiz.knowledge.formats import ASCIIDOC_EXTENSIONS, adoc_includes
from superbiz.knowledge.formats.rst_includes import includes, own_document, target
from superbiz.retrieval.passages import is_navigation
from superbiz.storage.repository import StoredDocument


@dataclass(frozen=True, slots=True)
class Candidate:
    file: Path
    root: Path


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A folder the walk could not list: reported as skipped, and what is stored from it
    is left alone (a file not listed is not a file gone)."""

    label: str
    reason: str
    folder: Path


#: what discovery yields: a file to load, a folder it could not list, or ``(label, reason)``
Found = Candidate | Unreadable | tuple[str, str]


def discover(
    paths: Sequence[Path], extensions: Sequence[str], root: Path | None = None
) -> Iterator[Candidate | Unreadable | tuple[str, str]]:
    """Files to ingest under ``paths`` (sorted; hidden entries skipped), or
    ``(label, reason)`` for a path that cannot be ingested at all. A file's document path
    is relative to its folder, or to ``root`` when that folder holds it."""
    for path in paths:
        if path.is_dir():
            found, others = _walk(path.resolve(), extensions)
            yield from found
            if others and not any(isinstance(item, Candidate) for item in found):
                # an AsciiDoc manual ingested nothing without a word
                yield (str(path), f"{_unread(others)} (expected {', '.join(extensions)})")
        elif path.is_file():
            file = path.resolve()
            base = root.resolve() if root and file.is_relative_to(root.resolve()) else file.parent
            if path.suffix.lower() in extensions:
                yield Candidate(file, base)
            else:
                yield (str(path), f"unsupported file type (expected {', '.join(extensions)})")
        else:
            yield (str(path), "no such file or directory")


def _walk(root: Path, extensions: Sequence[str]) -> tuple[list[Found], Counter[str]]:
    """The files under ``root`` with one of ``extensions``, sorted by path, and how many
    files of each other extension it holds. Symlinked folders are never followed (a link
    out of the KB, or a loop, would ingest what the operator did not put there): each is
    reported with what it points to; so is each folder that cannot be listed (``os.walk``
    would leave it out without a word)."""
    found: list[tuple[str, Candidate | Unreadable | tuple[str, str]]] = []
    others: Counter[str] = Counter()

    def unreadable(exc: OSError) -> None:
        folder = Path(exc.filename)
        relative = folder.relative_to(root).as_posix() if folder != root else str(root)
        label = _shown(relative)
        reason = (
            f"cannot read this folder: {exc.strerror or exc}; "
            "its stored documents are kept as they are (not pruned)"
        )
        found.append((label, Unreadable(label, reason, folder)))

    for folder, dirs, files in os.walk(root, onerror=unreadable):
        here = Path(folder)
        for name in list(dirs):
            if name.startswith("."):
                dirs.remove(name)
            elif (here / name).is_symlink():
                dirs.remove(name)
                label = _shown((here / name).relative_to(root).as_posix())
                found.append((label, (label, _shown(_linked_folder(here / name, root)))))
        for name in files:
            file = here / name
            if name.startswith("."):
                continue
            relative = file.relative_to(root).as_posix()
            label = _shown(relative)
            if file.suffix.lower() not in extensions:
                if file.is_symlink() and _is_loop(file):
                    found.append((label, (label, "symlink loop")))
                else:
                    others[file.suffix.lower()] += 1
            elif label != relative:
                found.append((label, (label, "file name is not valid UTF-8: rename the file")))
            else:
                found.append((label, Candidate(file, root)))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])], others


def _unread(others: Counter[str]) -> str:
    """What a folder holds when it holds no file of a format superbiz reads.

    >>> _unread(Counter({".org": 12}))
    'no file of a format superbiz reads: 12 .org files'
    >>> _unread(Counter({".org": 2, ".png": 1})).split(": ")[1]
    '2 .org and 1 .png files'
    >>> _unread(Counter({".org": 12, ".png": 3, "": 1, ".svg": 1})).split(": ")[1]
    '12 .org, 3 .png and 2 other files'
    """
    shown = [(count, suffix) for suffix, count in others.most_common() if suffix][:2]
    total = sum(others.values())
    parts = [f"{count} {suffix}" for count, suffix in shown]
    if rest := total - sum(count for count, _ in shown):
        parts.append(f"{rest} other" if shown else f"{rest} extensionless")
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"no file of a format superbiz reads: {listed} file{'s' if total > 1 else ''}"


#: the most of a page read for its includes (they come first in a Sphinx page)
_INCLUDE_SCAN = 200_000


def without_fragments(found: Sequence[Found]) -> tuple[list[Found], dict[Path, str]]:
    """``found`` with each file that is part of something else — included by another
    page (``include_fragments``), the material of a Sphinx site's HTML build
    (``sphinx_build_material``), or a site's navigation (``site_navigation``) — turned
    into a skip with its reason, and those files with the label each is skipped under."""
    fragments = {
        **include_fragments(found),
        **sphinx_build_material(found),
        **site_navigation(found),
    }
    labels = {
        item.file: item.file.relative_to(item.root).as_posix()
        for item in found
        if isinstance(item, Candidate) and item.file in fragments
    }
    kept: list[Found] = [
        (labels[item.file], fragments[item.file])
        if isinstance(item, Candidate) and item.file in labels
        else item
        for item in found
    ]
    return kept, labels


def include_fragments(found: Iterable[Found]) -> dict[Path, str]:
    """Files that a reStructuredText or AsciiDoc page among ``found`` includes and that
    are no page themselves, each with the reason to skip it: Sphinx manuals keep shared
    text in ``.txt`` files (CMake's ``envvar/ENV_VAR.txt``, included by 53 pages) that
    Sphinx never builds alone, and read as a document of its own such a fragment was
    quoted first for every question about an environment variable; Antora sites keep it
    in partials. Each page is read with its fragments written in
    (``formats.rst_includes``, ``formats.adoc_includes``). An include of a ``.rst`` file is
    left alone: Sphinx builds those as pages too, unless told not to; so is a fragment
    included with options that are not written in (``:literal:``), and an AsciiDoc page
    with a title of its own (a modular guide's module): each stays a document.

    Paths absolute in a reStructuredText directive (``/include.txt``) are relative to the
    walked folder, as Sphinx reads them against its source folder; ``<isonum.txt>`` names
    a file of docutils' own."""
    candidates = [item for item in found if isinstance(item, Candidate)]
    files = {item.file for item in candidates}
    pages: dict[Path, list[str]] = {}
    for item in candidates:
        suffix = item.file.suffix.lower()
        if suffix != ".rst" and suffix not in ASCIIDOC_EXTENSIONS:
            continue
        text = _head(item.file)
        if text is None:
            continue  # its own read reports it
        page = PurePosixPath(item.file.relative_to(item.root).as_posix())
        if suffix == ".rst":
            named = [target(i.name, page) for i in includes(text) if i.inlined]
            is_fragment = _no_frontmatter
        else:  # read as it is ingested: under its site's attributes (``{partialsdir}``)
            text = site_attributes(page, item.root) + text
            named = [adoc_includes.target(i.name, page) for i in adoc_includes.includes(text)]
            is_fragment = _adoc_fragment
        for path in named:
            fragment = item.root / path if path is not None else None
            # a fragment read once for its head, however many pages include it
            if fragment in files and (fragment in pages or is_fragment(fragment)):
                pages.setdefault(fragment, []).append(page.as_posix())
    return {fragment: _included_by(by) for fragment, by in pages.items()}


def _head(file: Path) -> str | None:
    """The first ``_INCLUDE_SCAN`` characters of ``file``, or None when it cannot be read."""
    try:
        with file.open(encoding="utf-8", errors="replace") as handle:
            return handle.read(_INCLUDE_SCAN)
    except OSError:
        return None


def _no_frontmatter(file: Path) -> bool:
    """Whether ``file`` opens without frontmatter (``rst_includes.own_document``): with
    it, no fragment but a document of its own with its own access list."""
    try:
        with file.open("rb") as handle:
            head = handle.read(8)
    except OSError:
        return True  # its own read reports it
    return not own_document(head.decode("utf-8", errors="replace"))


def _adoc_fragment(file: Path) -> bool:
    """Whether ``file``, which an AsciiDoc page includes, is written into it
    (``adoc_includes.written_in``): no title of its own, no access list."""
    head = _head(file)
    return head is None or adoc_includes.written_in(head)  # unread: its own read reports it


#: what Sphinx's HTML builder writes at its output's root (the cross-reference inventory)
SPHINX_INVENTORY = "objects.inv"
#: folders of a Sphinx HTML build that hold no page: each page's source, copied beside
#: the page built from it, and the theme's scripts, styles and their licences
_SPHINX_MATERIAL = {
    "_sources": "the source of a page Sphinx built, copied beside it: the page is ingested",
    "_static": "a file of the Sphinx theme (scripts, styles, licences), not a page",
}
#: pages at a Sphinx build's root that Sphinx generates rather than reads from a source:
#: the search page (empty until its script runs) and the indexes of terms and modules
_SPHINX_GENERATED = frozenset({"search.html", "genindex.html", "py-modindex.html"})
_GENERATED_REASON = "a page Sphinx generates (search, or an index of links), not one of its pages"


def sphinx_build_material(found: Iterable[Found]) -> dict[Path, str]:
    """Files in the ``_sources`` and ``_static`` folders of a Sphinx HTML build (a folder
    holding ``objects.inv``), and the search and index pages at its root, each with the
    reason to skip it. Ingested as they are, a site downloaded from Read the Docs held
    every page twice, its HTML and its source (``_sources/how-to/sso.md.txt``, in a
    domain of its own), a theme's licence, and an empty ``search.html`` that ``eval``
    refused as an unreadable file."""
    builds: dict[Path, bool] = {}

    def is_build(folder: Path) -> bool:
        return builds.setdefault(folder, (folder / SPHINX_INVENTORY).is_file())

    material: dict[Path, str] = {}
    for item in found:
        if not isinstance(item, Candidate):
            continue
        parts = item.file.relative_to(item.root).parts[:-1]
        if item.file.name in _SPHINX_GENERATED and is_build(item.file.parent):
            material[item.file] = _GENERATED_REASON
        for depth, name in enumerate(parts):
            if name in _SPHINX_MATERIAL and is_build(item.root.joinpath(*parts[:depth])):
                material[item.file] = _SPHINX_MATERIAL[name]
                break
    return material


#: the files a documentation site keeps its navigation in, by the tool that reads them
_NAVIGATION_FILES = {
    "SUMMARY.md": "GitBook's table of contents",
    "_sidebar.md": "Docsify's sidebar",
    "_navbar.md": "Docsify's navigation bar",
}


def site_navigation(found: Iterable[Found]) -> dict[Path, str]:
    """A documentation site's navigation files (GitBook's ``SUMMARY.md``, Docsify's
    ``_sidebar.md`` and ``_navbar.md``) that hold nothing but links to its pages, each with
    the reason to skip it: every page title in one file, it matched any question's words
    and answered none (Apollo's sidebar names each of its 37 guides). A file of that name
    with text of its own (an incident's summary) stays a document."""
    skipped: dict[Path, str] = {}
    for item in found:
        if not isinstance(item, Candidate) or item.file.name not in _NAVIGATION_FILES:
            continue
        text = _head(item.file)
        if text is not None and is_navigation(text):  # unread: its own read reports it
            skipped[item.file] = (
                f"{_NAVIGATION_FILES[item.file.name]}: links to the site's pages, which are "
                "ingested themselves, not a page"
            )
    return skipped


def _included_by(pages: Sequence[str]) -> str:
    """Why a fragment is skipped.

    >>> _included_by(["CC.rst"])
    'included by CC.rst (reStructuredText `include`): part of that page, not a document'
    >>> _included_by(["pages/docker.adoc", "pages/k8s.adoc"]).split(": ")[0]
    'included by pages/docker.adoc and 1 more pages (AsciiDoc `include::`)'
    """
    more = f" and {len(pages) - 1} more pages" if len(pages) > 1 else ""
    which = "those pages" if more else "that page"
    how = "reStructuredText `include`" if pages[0].endswith(".rst") else "AsciiDoc `include::`"
    return f"included by {pages[0]}{more} ({how}): part of {which}, not a document"


def _shown(name: str) -> str:
    """``name`` printable: bytes that are not UTF-8 (which Python keeps as surrogates and
    no store accepts) written as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _linked_folder(link: Path, root: Path) -> str:
    """Why the symlinked folder ``link`` under ``root`` is not followed."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return "symlink loop" if _is_loop(link) else f"broken symlink (to {link.readlink()})"
    if link.parent.resolve().is_relative_to(target):
        return f"symlink loop: a folder link to {target}, which contains it"
    if not target.is_relative_to(root):
        return f"symlink to a folder outside the KB ({target}): not followed"
    return (
        f"symlink to a folder inside the KB: not followed "
        f"(its files are ingested from {target.relative_to(root).as_posix()})"
    )


def _is_loop(link: Path) -> bool:
    try:
        link.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a symlink loop this way
        return True
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


#: a path's real path: ``os.path.realpath``, or a run's ``RealPaths``
RealPath = Callable[[str | os.PathLike[str]], str]


class RealPaths:
    """``os.path.realpath`` that works out each path once: for one ingest run, whose
    files do not move under it. ``realpath`` is an ``lstat`` a path component, and a run
    asks it about each file up to ten times (40 % of an unchanged re-ingest of 477 files,
    45,000 ``lstat`` calls). A file that is no link is its folder's real path and its
    name: a folder is worked out once for all its files (each stored document's file is
    asked about at every ingest: 0.75 s of a one-file upload into 11,925 documents).

    >>> real = RealPaths()
    >>> real("/") == real(Path("/")) == "/"
    True
    >>> real("/usr/../usr/bin") == os.path.realpath("/usr/bin")
    True
    """

    def __init__(self) -> None:
        self._found: dict[str, str] = {}

    def __call__(self, path: str | os.PathLike[str]) -> str:
        key = os.fspath(path)
        found = self._found.get(key)
        if found is None:
            folder, name = os.path.split(key)
            if (
                os.path.isabs(key)
                and folder
                and name not in ("", ".", "..")
                and not os.path.islink(key)
            ):
                found = os.path.join(self(folder), name)
            else:
                found = os.path.realpath(key)
            self._found[key] = found
        return found


def each_file_once(
    items: Iterable[Candidate | Unreadable | tuple[str, str]],
    real: RealPath = os.path.realpath,
) -> list[Candidate | Unreadable | tuple[str, str]]:
    """``items`` with each real file once, under the widest folder given for it:
    ``ingest corpus corpus/payment`` walks ``payment/x.md`` twice, and the narrower walk
    must neither decide its path nor report it as its own duplicate."""
    items = list(items)
    widest: dict[str, Candidate] = {}
    for item in items:
        if isinstance(item, Candidate):
            file = real(item.file)
            kept = widest.get(file)
            if kept is None or len(item.root.parts) < len(kept.root.parts):
                widest[file] = item
    chosen = {id(item) for item in widest.values()}
    return [i for i in items if not isinstance(i, Candidate) or id(i) in chosen]


def stored_roots(
    stored: Iterable[StoredDocument],
    real: RealPath = os.path.realpath,
) -> set[Path]:
    """The folders stored documents were ingested from (their KB roots)."""
    roots = {_root_of(real(d.source_file), d.path) for d in stored}
    return {Path(root) for root in roots if root is not None}


def placement(
    item: Candidate,
    same: list[StoredDocument],
    kb_roots: set[Path],
    real: RealPath = os.path.realpath,
) -> tuple[Path, list[str]]:
    """``(root, copies)`` for a file whose stored documents are ``same``: it is loaded
    against the widest KB folder that holds the folder it was found in (ingesting a
    sub-folder or one file of a KB, new or known, stores it under its KB path and domain,
    not as a second copy), and ``copies`` are its documents stored under other paths
    from narrower folders, to remove once it has landed."""
    file, root = Path(real(item.file)), Path(real(item.root))
    wider = [r for r in kb_roots if root.is_relative_to(r)]
    widest = min(wider, key=lambda r: len(r.parts), default=root)
    copies = [
        doc.path
        for doc in same
        if (r := stored_root(file, doc.path)) is not None
        and r != widest
        and r.is_relative_to(widest)
    ]
    return widest, copies


def stored_root(real: Path, doc_path: str) -> Path | None:
    """The folder a document at ``doc_path`` was ingested from, given its real file.

    >>> stored_root(Path("/kb/ops/disk.md"), "ops/disk.md"), stored_root(Path("/x.md"), "x.md")
    (PosixPath('/kb'), PosixPath('/'))
    >>> stored_root(Path("/kb/ops/disk.md"), "api/disk.md") is None
    True
    """
    root = _root_of(str(real), doc_path)
    return None if root is None else Path(root)


def _root_of(real: str, doc_path: str) -> str | None:
    """``stored_root`` on strings, as every stored document's root is worked out at each
    ingest (pathlib took 0.5 s of a one-file upload into 11,925 documents): a real path
    is absolute and normalised, so the root is what comes before ``/doc_path``."""
    tail = f"/{doc_path}"
    if not doc_path or not real.endswith(tail):
        return None
    return real[: -len(tail)] or "/"


def under(file: str, folders: Sequence[Path | str]) -> bool:
    """Whether ``file`` is one of ``folders`` or lies in one: ``Path.is_relative_to`` on
    strings, for absolute normalised paths (a stored document's file, a folder a run
    resolved), as every stored file is asked at each prune.

    >>> under("/kb/ops/a.md", ["/kb"]), under("/kb2/a.md", ["/kb"]), under("/a.md", ["/"])
    (True, False, True)
    """
    for folder in map(str, folders):
        if file == folder or file.startswith(folder.rstrip("/") + "/"):
            return True
    return False


def gone(file: str) -> bool:
    """True only when ``file`` surely does not exist: a file that cannot be checked
    (``Permission denied`` on a folder above it) is not gone."""
    try:
        os.stat(file)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def root_of(source: Path, doc_path: str) -> Path:
    parts = len(Path(doc_path).parts)
    return source.parents[parts - 1] if parts else source.parent


def stored_files(docs: Iterable[StoredDocument]) -> list[Candidate]:
    """The files of ``docs`` that are still there, each to be read against the folder its
    document's path was given under."""
    return [
        Candidate(Path(doc.source_file), root_of(Path(doc.source_file), doc.path))
        for doc in docs
        if not gone(doc.source_file)
    ]
