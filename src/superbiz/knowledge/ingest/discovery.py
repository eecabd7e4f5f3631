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
from pathlib import Path

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
