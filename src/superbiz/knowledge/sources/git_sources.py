"""Git repositories as sources: cloned (bare) into the data directory, their files
written from Git's objects into a tree the ingest reads, and synced by diff.

A first sync writes the whole tree of the branch; a later one fetches and applies only
what changed between the stored commit and the new one: a file added or changed is
ingested, a deleted file's document goes, a renamed file's document is renamed (its row,
answer vector and the sessions' record of it follow). When the stored commit is no
longer in the branch's history (a force-push), the tree is compared in full instead.
A failed fetch changes nothing: the last good state stays searchable and the source
records the error. Nothing from a repository is executed or followed: symlinks and
submodules are skipped items.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import uuid
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath

from superbiz.exceptions import NotFoundError, SourceError
from superbiz.knowledge.documents.document import read_with
from superbiz.knowledge.documents.included import tree_includes_others
from superbiz.knowledge.ingest.discovery import gone
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.ingest.report import IngestReport
from superbiz.knowledge.sources.git import (
    SUBMODULE_MODE,
    SYMLINK_MODE,
    BareRepository,
    Entry,
    check_url,
    redact,
)
from superbiz.knowledge.sources.git_site import nav_above, write_site
from superbiz.knowledge.sources.git_tree import hidden, remove_file, too_large, write_files
from superbiz.knowledge.sources.sync_result import SyncResult
from superbiz.storage.models import utcnow
from superbiz.storage.repository import StoredDocument
from superbiz.storage.sources import GIT, SourceRecord, SourceRepository

#: the folder of the data directory that Git sources are kept in
SOURCES = "sources"
#: skipped items a source row keeps (the first ones; the count is in ``counts``)
KEPT_SKIPS = 50


@dataclass(frozen=True, slots=True)
class Fetched:
    """A source's branch fetched into its repository, not yet applied; ``domain``, when
    set, is the domain its documents move to (``ingest --git URL --domain D`` on a source
    of another domain)."""

    source: SourceRecord
    commit: str
    domain: str | None = None


def clean_subdir(subdir: str | None) -> str:
    """A repository folder as a relative POSIX path; one that leaves the repository is
    refused.

    >>> clean_subdir("/docs/runbooks/"), clean_subdir(None), clean_subdir("./a/../b")
    ('docs/runbooks', '', 'b')
    """
    raw = (subdir or "").replace("\\", "/").strip("/")
    if not raw:
        return ""
    normal = posixpath.normpath(raw)
    if normal == ".":
        return ""
    if normal.startswith("../") or normal == "..":
        raise SourceError(f"--subdir {subdir!r} leaves the repository")
    return normal


def source_name(url: str, taken: set[str]) -> str:
    """A short name for the repository at ``url``: its last path component, numbered
    when another source has it.

    >>> source_name("https://x.example/team/run-books.git", {"run-books"})
    'run-books-2'
    """
    base = re.sub(r"\.git$", "", redact(url).rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1])
    base = re.sub(r"[^\w.-]+", "-", base).strip("-.") or "repository"
    name, number = base[:100], 1
    while name in taken:
        number += 1
        name = f"{base[:100]}-{number}"
    return name


class GitSources:
    """Adds and syncs Git sources of the knowledge base ``ingestor`` writes to."""

    def __init__(self, ingestor: Ingestor, sources: SourceRepository) -> None:
        self.ingestor = ingestor
        self.kb = ingestor.kb
        self.sources = sources
        self.timeout = self.kb.settings.sources.git_timeout_s
        self.home = self.kb.settings.data_dir / SOURCES

    def folder(self, name: str) -> Path:
        return self.home / name

    def tree(self, source: SourceRecord) -> Path:
        """The folder the source's files are written to (the documents' root)."""
        return self.folder(source.name) / "tree"

    def repository(self, name: str) -> BareRepository:
        return BareRepository(self.folder(name) / "repo.git", self.timeout)

    # -- adding ------------------------------------------------------------------------
    def add(
        self,
        url: str,
        *,
        branch: str | None = None,
        subdir: str | None = None,
        domain: str | None = None,
    ) -> SyncResult:
        """Clone and ingest the repository at ``url``, or sync it when it is a source
        already (same URL, branch and folder; a ``domain`` other than its own moves its
        documents there). Nothing is written when the URL or the branch does not exist."""
        check_url(url)
        location = redact(url)
        folder = clean_subdir(subdir)
        known = self.sources.all()
        wanted = branch or BareRepository.default_branch(url, self.timeout)
        for source in known:
            if (source.kind, source.location, source.branch, source.subdir or "") == (
                GIT,
                location,
                wanted,
                folder,
            ):
                moved = domain if domain and domain != source.domain else None
                return self.sync(source.name, url=url, domain=moved)
        if wanted not in (heads := BareRepository.branches(url, self.timeout)):
            listed = ", ".join(heads[:10]) or "none"
            raise SourceError(
                f"branch {wanted!r} does not exist in {location} (its branches: {listed})"
            )
        # a folder left by a source whose first sync broke off is not reused
        leftovers = {p.name for p in self.home.iterdir()} if self.home.is_dir() else set()
        name = source_name(url, {s.name for s in known} | leftovers)
        record = SourceRecord(
            name=name,
            kind=GIT,
            location=location,
            branch=wanted,
            subdir=folder or None,
            domain=domain or None,
        )
        staging = self.home / f".new-{uuid.uuid4().hex[:8]}"
        try:
            repo = BareRepository(staging / "repo.git", self.timeout)
            repo.init()
            commit = repo.fetch(url, wanted)
            repo.tree(commit, folder)  # a folder missing from the branch fails here
            staging.rename(self.folder(name))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        try:
            return self.apply(Fetched(record, commit))
        except BaseException:
            if self.sources.get(name) is None:  # the first sync did not finish: no source
                shutil.rmtree(self.folder(name), ignore_errors=True)
            raise

    # -- syncing -----------------------------------------------------------------------
    def sync(self, name: str, *, url: str | None = None, domain: str | None = None) -> SyncResult:
        """Fetch the source ``name`` and apply what changed (with ``domain``, its documents
        move under that domain); on a failure the error is recorded on the source (shown
        by ``superbiz sources``) and raised."""
        return self.apply(replace(self.fetch(name, url=url), domain=domain))

    def fetch(self, name: str, *, url: str | None = None) -> Fetched:
        """The network half of a sync: needs no lock, changes no document."""
        source = self.sources.get(name)
        if source is None or source.kind != GIT:
            raise NotFoundError(f"no Git source {name!r}")
        try:
            commit = self.repository(name).fetch(url or source.location, source.branch or "HEAD")
        except SourceError as exc:
            self.sources.failed(name, f"fetch failed: {exc}")
            raise
        return Fetched(source, commit)

    def apply(self, fetched: Fetched) -> SyncResult:
        """The writing half: the source's tree and documents brought to ``commit``."""
        with self.kb.write_lock.held():
            try:
                return self._apply(fetched)
            except SourceError as exc:
                self.sources.failed(fetched.source.name, str(exc))
                raise

    def _apply(self, fetched: Fetched) -> SyncResult:
        # another process may have applied a newer state since this one fetched
        source = self.sources.get(fetched.source.name) or fetched.source
        commit = fetched.commit
        repo = self.repository(source.name)
        tree = self.tree(source)
        old = source.commit
        if fetched.domain and fetched.domain != source.domain:
            # every document's path changes: the tree is written afresh under the new
            # domain and compared in full (the old paths' documents go, the new ones come)
            moved_from = source.domain
            source = replace(source, domain=fetched.domain)
            result = self._full(source, repo, commit)
            result.note = (
                f"domain changed from {moved_from or '(none)'} to {fetched.domain}: every "
                f"document moved under {fetched.domain}/"
            )
        elif old and self._read_otherwise(self.kb.documents.under(str(tree.resolve()))):
            result = self._full(source, repo, commit)
            result.note = (
                "superbiz reads files differently since the last sync (a new reader or "
                "chunking): the whole tree was read again"
            )
        elif old == commit and tree.is_dir():
            result = SyncResult(source, IngestReport(), mode="unchanged")
            result.report.skipped = [(s["path"], s["reason"]) for s in source.skipped]
        elif old and tree.is_dir() and repo.has_commit(old) and repo.is_ancestor(old, commit):
            result = self._incremental(source, repo, old, commit)
        else:
            result = self._full(source, repo, commit)
            if old and old != commit and repo.is_shallow():
                result.note = (
                    f"{old[:12]} is not in the history fetched (a shallow repository, or "
                    "history rewritten); the whole tree was compared"
                )
            elif old and old != commit:
                result.note = (
                    f"history rewritten (force-push?): {old[:12]} is not in the branch any "
                    "more; the whole tree was compared"
                )
        result.source = self._record(replace(source, commit=commit), result)
        return result

    def _record(self, source: SourceRecord, result: SyncResult) -> SourceRecord:
        record = replace(
            source,
            synced_at=utcnow(),
            counts={**result.counts(), "documents": self._documents(source)},
            skipped=[{"path": p, "reason": r} for p, r in result.report.skipped[:KEPT_SKIPS]],
            error=None,
            error_at=None,
        )
        self.sources.synced(record)
        return record

    def _documents(self, source: SourceRecord) -> int:
        return len(self.kb.documents.under(str(self.tree(source).resolve())))

    def _read_otherwise(self, stored: list[StoredDocument]) -> bool:
        """Whether an older reader or chunking made one of the source's ``stored``
        documents: no commit changes its file then, so only reading the whole tree again
        brings it up."""
        settings = self.kb.settings.ingest
        return any(d.read_with != read_with(d.path, settings) for d in stored)

    def _target(self, source: SourceRecord, path: str) -> PurePosixPath:
        """A repository file's document path (under the source's domain, if it has one)."""
        return PurePosixPath(source.domain, path) if source.domain else PurePosixPath(path)

    def _full(self, source: SourceRecord, repo: BareRepository, commit: str) -> SyncResult:
        """Write the whole tree of ``commit`` afresh, then ingest it with prune: unchanged
        files are skipped by content hash, documents of files gone are removed."""
        entries = repo.tree(commit, source.subdir or "")
        tree = self.tree(source)
        fresh = tree.with_name("tree.new")
        shutil.rmtree(fresh, ignore_errors=True)
        skipped = self._write(source, repo, fresh, entries)
        if tree.exists():
            stale = tree.with_name(f"tree.old-{uuid.uuid4().hex[:8]}")
            tree.rename(stale)
            fresh.rename(tree)
            shutil.rmtree(stale, ignore_errors=True)
        else:
            fresh.rename(tree)
        _, problems = self._site_above(source, repo, commit, tree)
        report = self.ingestor.ingest([tree], root=tree, prune=True)
        report.notes[:0] = problems
        report.skipped[:0] = skipped
        return SyncResult(source, report, mode="full")

    def _incremental(
        self, source: SourceRecord, repo: BareRepository, old: str, new: str
    ) -> SyncResult:
        changes = repo.diff(old, new, source.subdir or "")
        tree = self.tree(source)
        removed: list[str] = []
        renames: list[tuple[str, str]] = []
        written: list[Entry] = []
        kept: list[tuple[str, str]] = []  # changed past the size limit: earlier file kept
        sizes = repo.sizes([c.blob for c in changes if c.status != "D"])
        for change in changes:
            target = tree / self._target(source, change.path)
            size = sizes.get(change.blob, 0)
            if (
                change.status == "M"
                and size > self._max_bytes
                and target.is_file()
                and self._ingestible(change.path, change.mode)
            ):
                label = str(self._target(source, change.path))
                kept.append((label, too_large(size, self._max_bytes) + _EARLIER_KEPT))
                continue
            if change.old_path is not None:
                # a document follows its file only to a path that is ingested again
                if self._ingestible(change.path, change.mode) and size <= self._max_bytes:
                    renames.append((change.old_path, change.path))
                else:
                    removed.append(change.old_path)
                remove_file(tree / self._target(source, change.old_path))
            if change.status == "D":
                removed.append(change.path)
                remove_file(tree / self._target(source, change.path))
            else:
                remove_file(tree / self._target(source, change.path))  # a type change, say
                written.append(Entry(change.mode, change.blob, change.path))
        skipped = self._write(source, repo, tree, written)
        renamed = self._rename(source, renames)
        removed += [pair[0] for pair in renames if pair not in renamed]
        report = IngestReport()
        self._remove(source, [str(self._target(source, p)) for p in removed], report)
        entries = repo.tree(new, source.subdir or "")
        retitled, problems = self._site_above(source, repo, new, tree)
        if retitled or tree_includes_others(PurePosixPath(entry.path) for entry in entries):
            # a page that includes other files (a fragment, a code example, the site's
            # attributes) reads them as part of its text, a site's configuration above
            # the folder titles its pages: every page is read again, by hash, so those
            # that a changed file concerns are updated and it is no document
            written = entries
        files = [
            file
            for entry in written
            if self._ingestible(entry.path, entry.mode)
            and (file := tree / self._target(source, entry.path)).is_file()
        ]
        if files:
            ran = self.ingestor.ingest(files, root=tree)
            ran.removed[:0] = report.removed
            ran.domains_changed |= report.domains_changed
            report = ran
        elif report.removed:
            self.kb.store.flush()
            self.kb.changed()
            if self.ingestor.domains is not None:
                self.ingestor.domains.refresh(report.domains_changed)
        moved = {str(self._target(source, b)) for _, b in renamed}
        report.repaired = [p for p in report.repaired if p not in moved]
        # items skipped before and not touched by this diff are still skipped
        touched = {str(self._target(source, c.path)) for c in changes} | {
            str(self._target(source, c.old_path)) for c in changes if c.old_path
        }
        reported = {path for path, _ in report.skipped}
        still = [
            (s["path"], s["reason"])
            for s in source.skipped
            if s["path"] not in touched and s["path"] not in reported
        ]
        report.skipped[:0] = [*still, *kept, *skipped]
        report.notes[:0] = problems
        targets = [(str(self._target(source, a)), str(self._target(source, b))) for a, b in renamed]
        return SyncResult(source, report, renamed=targets)

    def _site_above(
        self, source: SourceRecord, repo: BareRepository, commit: str, tree: Path
    ) -> tuple[bool, list[str]]:
        """Write the ``nav`` of the site above a source of one folder beside its ``tree``
        (``git_site``): whether it changed, and what could not be read."""
        if not source.subdir:
            return False, []
        titles, problems = nav_above(repo, commit, source.subdir)
        docs_dir = PurePosixPath(tree.name, self._target(source, ".")).as_posix()
        return write_site(tree.parent, docs_dir, titles), problems

    def _ingestible(self, path: str, mode: str) -> bool:
        """What a folder's walk would pick up: a regular file of a known type, not hidden."""
        regular = mode not in (SYMLINK_MODE, SUBMODULE_MODE)
        return regular and not hidden(path) and self._document_name(path)

    def _document_name(self, path: str) -> bool:
        """Whether ``path`` names a file of a known type (``ingest.extensions``)."""
        return PurePosixPath(path).suffix.lower() in self.kb.settings.ingest.extensions

    def _rename(
        self, source: SourceRecord, renames: list[tuple[str, str]]
    ) -> list[tuple[str, str]]:
        """Move each renamed file's document to its new path (its chunks are written again
        by the ingest that follows: they are keyed by path); those that could not be
        (another document has the new path) are removed and ingested as new."""
        done = []
        for old, new in renames:
            before, after = str(self._target(source, old)), str(self._target(source, new))
            if self._owned(source, before) and self.kb.documents.rename(before, after):
                self.kb.store.delete_documents([before])
                done.append((old, new))
        return done

    def _owned(self, source: SourceRecord, doc_path: str) -> bool:
        """True when the document at ``doc_path`` comes from this source's tree."""
        doc = self.kb.documents.get(doc_path)
        tree = self.tree(source).resolve()
        return doc is not None and Path(doc.source_file).resolve().is_relative_to(tree)

    def _remove(self, source: SourceRecord, doc_paths: list[str], report: IngestReport) -> None:
        for path in doc_paths:
            doc = self.kb.documents.get(path)
            if doc is None or not self._owned(source, path) or not gone(doc.source_file):
                continue
            self.kb.store.delete_documents([path])
            self.kb.documents.delete([path])
            report.removed.append(path)
            report.domains_changed.add(doc.domain)

    @property
    def _max_bytes(self) -> int:
        return self.kb.settings.ingest.max_file_bytes

    def _write(
        self, source: SourceRecord, repo: BareRepository, root: Path, entries: list[Entry]
    ) -> list[tuple[str, str]]:
        """Write the files of ``entries`` under ``root`` (``git_tree.write_files``)."""
        return write_files(
            repo,
            root,
            entries,
            max_bytes=self._max_bytes,
            target=partial(self._target, source),
            ingestible=self._ingestible,
            document_name=self._document_name,
        )


_EARLIER_KEPT = (
    "; its earlier version stays on disk and searchable until the file is within the limit"
)
