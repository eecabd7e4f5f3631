"""A Git tree's files written into the folder the ingest reads, from Git's objects: the
regular files read in batches of bounded size, a file over the size limit neither read
nor written, symlinks and submodules never followed and reported only where a reader
would miss them, hidden files left out as a folder's walk leaves them out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath

from superbiz.knowledge.sources.git import SUBMODULE_MODE, SYMLINK_MODE, BareRepository, Entry

#: blob bytes read from Git at a time when a tree is written (each file is within
#: ``ingest.max-file-bytes``; a repository of thousands of them is read in parts)
BLOB_BATCH_BYTES = 64 * 1024 * 1024


def write_files(
    repo: BareRepository,
    root: Path,
    entries: Sequence[Entry],
    *,
    max_bytes: int,
    target: Callable[[str], PurePosixPath],
    ingestible: Callable[[str, str], bool],
    document_name: Callable[[str], bool],
) -> list[tuple[str, str]]:
    """Write the regular files of ``entries`` under ``root``, each at ``target(path)``,
    and return the skipped items (label, reason). Symlinks and submodules are skipped
    (never followed, never written; a link named like a document, ``document_name``,
    is worth a line, one to a program is not). A file over ``max_bytes`` is neither read
    from Git nor written (disk use is part of the bound): a skipped item when it would be
    ingested (``ingestible(path, mode)``)."""
    skipped: list[tuple[str, str]] = []
    entries = [e for e in entries if not hidden(e.path)]
    files = [e for e in entries if e.mode not in (SYMLINK_MODE, SUBMODULE_MODE)]
    links = [e for e in entries if e.mode == SYMLINK_MODE]
    sizes = repo.sizes([e.blob for e in files])
    small = [e for e in files if sizes.get(e.blob, 0) <= max_bytes]
    for entry in files:
        size = sizes.get(entry.blob, 0)
        if size > max_bytes and ingestible(entry.path, entry.mode):
            skipped.append((str(target(entry.path)), too_large(size, max_bytes)))
    targets = repo.blobs([e.blob for e in links])
    for entry in entries:
        label = str(target(entry.path))
        if entry.mode == SUBMODULE_MODE:
            skipped.append((label, "a Git submodule: not fetched"))
        elif entry.mode == SYMLINK_MODE and document_name(entry.path):
            skipped.append((label, _symlink_reason(entry.path, targets[entry.blob])))
    root.mkdir(parents=True, exist_ok=True)
    for batch in _batches(small, sizes, BLOB_BATCH_BYTES):
        contents = repo.blobs([e.blob for e in batch])
        for entry in batch:
            file = root / target(entry.path)
            if any(part in ("..", "") for part in PurePosixPath(entry.path).parts):
                continue  # pragma: no cover - Git refuses such paths
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(contents[entry.blob])
    return skipped


def too_large(size: int, limit: int) -> str:
    """Why a file of ``size`` bytes was not written.

    >>> too_large(2048, 1024)
    'too large: 2048 bytes exceeds the 1024-byte limit (ingest.max-file-bytes); not written to disk'
    """
    return (
        f"too large: {size} bytes exceeds the {limit}-byte limit "
        "(ingest.max-file-bytes); not written to disk"
    )


def hidden(path: str) -> bool:
    """Whether a repository path is hidden: it, or a folder above it, begins with a dot.

    >>> hidden(".github/runbook.md"), hidden("docs/.draft.md"), hidden("docs/a.md")
    (True, True, False)
    """
    return any(part.startswith(".") for part in PurePosixPath(path).parts)


def remove_file(file: Path) -> None:
    """Delete ``file`` from a source's tree, and the folders it leaves empty up to the
    tree."""
    file.unlink(missing_ok=True)
    parent = file.parent
    try:
        while parent.name != "tree" and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    except OSError:
        pass


def _batches(entries: list[Entry], sizes: dict[str, int], limit: int) -> Iterator[list[Entry]]:
    """``entries`` in runs whose blobs hold at most ``limit`` bytes together (a single
    larger one alone)."""
    batch: list[Entry] = []
    held = 0
    for entry in entries:
        size = sizes.get(entry.blob, 0)
        if batch and held + size > limit:
            yield batch
            batch, held = [], 0
        batch.append(entry)
        held += size
    if batch:
        yield batch


def _symlink_reason(path: str, target: bytes) -> str:
    link = target.decode("utf-8", "replace")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
    if link.startswith("/") or resolved == ".." or resolved.startswith("../"):
        return f"symlink pointing out of the repository (to {link}): not followed"
    return f"symlink (to {link}): not followed; the file it names is ingested on its own"
