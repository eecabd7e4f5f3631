"""One page in several formats is one document.

Node.js ships its API docs as ``.md`` beside ``.html``; a team exports a wiki page beside
its PDF. Ingested, each version is a document of its own, and a lookup showed both (two
of the primary's supplement slots for one page) and an answer quoted the one and listed the
other. A document is taken for another format of a page when its folder, its file name but
for the extension, and its title are those of the page.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import lru_cache
from pathlib import PurePosixPath

from superbiz.retrieval.search import DocHit

__all__ = ["later_formats", "one_format", "page_key"]


@lru_cache(maxsize=65536)
def page_key(path: str, title: str) -> tuple[str, str]:
    """What two formats of one page share (cached: a lookup asks it of every candidate).

    >>> page_key("api/fs.md", "File system") == page_key("api/fs.html", "File System")
    True
    >>> page_key("api/fs.md", "File system") == page_key("api/fs.md", "Streams")
    False
    """
    return str(PurePosixPath(path).with_suffix("")), title.casefold()


def later_formats(pages: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The paths of ``pages`` (path, title) that repeat an earlier one's page in another
    format.

    >>> sorted(later_formats([("api/child_process.md", "Child process"),
    ...                       ("api/child_process.html", "Child process"),
    ...                       ("api/cluster.html", "Cluster")]))
    ['api/child_process.html']
    """
    seen: set[tuple[str, str]] = set()
    later: set[str] = set()
    for path, title in pages:
        key = page_key(path, title)
        if key in seen:
            later.add(path)
        seen.add(key)
    return frozenset(later)


def one_format(ranked: list[DocHit], held: Collection[str] = ()) -> list[DocHit]:
    """``ranked`` with each page once, at the rank of its best version: the version the
    session holds when it holds one (so the page counts as held, and its other format is
    not shown as new), else the best ranked.

    >>> hit = lambda path, title: DocHit(path, title, "api", 1.0, 0.5, None)
    >>> ranked = [hit("fs.html", "FS"), hit("net.md", "Net"), hit("fs.md", "FS")]
    >>> [d.doc_path for d in one_format(ranked)]
    ['fs.html', 'net.md']
    >>> [d.doc_path for d in one_format(ranked, held={"fs.md"})]  # the page is held
    ['fs.md', 'net.md']
    """
    versions: dict[tuple[str, str], DocHit] = {}
    for doc in ranked:
        key = page_key(doc.doc_path, doc.title)
        kept = versions.get(key)
        if kept is None or (doc.doc_path in held and kept.doc_path not in held):
            versions[key] = doc
    if len(versions) == len(ranked):
        return ranked
    placed: set[tuple[str, str]] = set()
    pages = []
    for doc in ranked:
        key = page_key(doc.doc_path, doc.title)
        if key not in placed:
            placed.add(key)
            pages.append(versions[key])
    return pages
