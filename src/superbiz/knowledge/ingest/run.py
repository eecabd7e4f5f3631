"""One ingest run as a value: what it was asked, what it found stored, what it holds
while it runs (the files read, the group embedding), and what it did (``report``).

A run is made by ``Ingestor.ingest`` and dropped when it ends, so nothing of one run
(its report, its openings, its threads) is left on the long-lived ``Ingestor`` for the
next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from superbiz.knowledge.documents.site_titles import SiteTitles
from superbiz.knowledge.ingest.batches import Group, Pending
from superbiz.knowledge.ingest.discovery import Found, RealPaths
from superbiz.knowledge.ingest.report import IngestReport
from superbiz.retrieval.embedders import EmbedTexts
from superbiz.storage.repository import StoredDocument

Progress = Callable[[str], None]


@dataclass(slots=True)
class IngestRun:
    """One run of ``Ingestor.ingest``."""

    paths: Sequence[Path]
    prune: bool = False
    rebuild: bool = False
    #: read again each stored document an older reader or chunking made
    reread: bool = False
    #: the KB folder files in it take their paths from
    root: Path | None = None
    on_total: Callable[[int], None] | None = None
    on_progress: Progress | None = None
    report: IngestReport = field(default_factory=IngestReport)
    #: each file's real path, worked out once
    real: RealPaths = field(default_factory=RealPaths)
    #: the documentation sites (``mkdocs.yml``, ``SUMMARY.md``, ``_sidebar.md``) above the
    #: run's files, each folder asked once
    sites: SiteTitles = field(default_factory=SiteTitles)
    #: the documents stored when the run began, by path and by the real path of their file
    stored: dict[str, StoredDocument] = field(default_factory=dict)
    by_source: dict[str, list[StoredDocument]] = field(default_factory=dict)
    #: stored documents whose index disagrees with their row
    broken: set[str] = field(default_factory=set)
    #: what discovery found, each real file once
    found: list[Found] = field(default_factory=list)
    #: each file's KB folder and the copies stored under narrower folders' paths
    placed: dict[Path, tuple[Path, list[str]]] = field(default_factory=dict)
    #: copy's document path → the file now stored under its wider folder's path
    moving: dict[str, Path] = field(default_factory=dict)
    #: document path → the file this run stored there
    seen: dict[str, Path] = field(default_factory=dict)
    #: unchanged files whose folder moved: their rows follow them
    followed: list[StoredDocument] = field(default_factory=list)
    #: folders that could not be read: nothing under them is gone
    unlisted: list[Path] = field(default_factory=list)
    #: real files that could not be loaded: their rows stay
    unloaded: set[str] = field(default_factory=set)
    #: real files another page includes (``include_fragments``): no document of their own
    fragments: set[str] = field(default_factory=set)
    #: documents read and chunked, not yet handed to the embedding threads
    pending: list[Pending] = field(default_factory=list)
    #: this run's document openings, so that the answer model needs no store read
    heads: dict[str, str] = field(default_factory=dict)
    #: the run's embedding threads, and the group embedding while files are read
    pool: ThreadPoolExecutor | None = None
    started: Group | None = None
    #: full groups indexed so far; the worker processes the threads embed with from one
    #: of them on (None: the embedder itself), and what closes them when the run ends
    full_groups: int = 0
    embed: EmbedTexts | None = None
    closing: ExitStack = field(default_factory=ExitStack)

    def tick(self, label: str) -> None:
        """One file (or document) done: tell the caller."""
        if self.on_progress:
            self.on_progress(label)

    def skip(self, path: str, reason: str, label: str | None = None) -> None:
        """Report ``path`` skipped for ``reason``; ``label`` is what progress shows."""
        self.report.skipped.append((path, reason))
        self.tick(path if label is None else label)

    def earlier_versions(self, pending: list[Pending]) -> list[str]:
        """The paths of ``pending`` documents stored when the run began (updates, repairs)."""
        return [p.doc.path for p in pending if p.doc.path in self.stored]
