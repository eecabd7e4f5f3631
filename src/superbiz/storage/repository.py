"""Repositories: the only place that writes SQL for documents and index facts (the domains'
table: :mod:`superbiz.storage.domains`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Engine,
    bindparam,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.orm import Session

from superbiz.storage.db import upsert_insert
from superbiz.storage.knowledge_version import bump_version, deleted_rows
from superbiz.storage.models import (
    AnswerVectorRow,
    DocumentRow,
    KbMetaRow,
    MapVectorRow,
    SessionRetrievalRow,
)


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A document as the relational store knows it."""

    path: str
    title: str
    domain: str
    content_hash: str
    size_bytes: int
    chunk_count: int
    source_file: str
    metadata: dict[str, Any]
    #: the groups that may read it (``superbiz.access``); None: its domain's rule
    access: tuple[str, ...] | None = None

    @property
    def covers(self) -> list[str]:
        return list(self.metadata.get("covers") or [])

    @property
    def tags(self) -> list[str]:
        return list(self.metadata.get("tags") or [])

    @property
    def aliases(self) -> list[str]:
        return list(self.metadata.get("aliases") or [])

    @property
    def when_to_retrieve(self) -> str | None:
        return self.metadata.get("when_to_retrieve")

    @property
    def read_with(self) -> str:
        """How its file became text and chunks (``knowledge.documents.document.read_with``);
        empty for a document stored before superbiz recorded it."""
        return str(self.metadata.get("read_with") or "")

    @property
    def origin(self) -> dict[str, str]:
        """Where covers and when_to_retrieve came from (frontmatter, llm, derived)."""
        return dict(self.metadata.get("origin") or {})


def _stored(row: DocumentRow) -> StoredDocument:
    return StoredDocument(
        path=row.path,
        title=row.title,
        domain=row.domain,
        content_hash=row.content_hash,
        size_bytes=row.size_bytes,
        chunk_count=row.chunk_count,
        source_file=row.source_file,
        metadata=dict(row.metadata_ or {}),
        access=tuple(row.access) if row.access is not None else None,
    )


_HAS_DOMAIN = select(DocumentRow.id).where(DocumentRow.domain == bindparam("domain")).limit(1)


def _lacks_answer(model: str) -> tuple[ColumnElement[bool], ...]:
    """A document with chunks and no vector under ``model`` for its current content."""
    valid = select(AnswerVectorRow.path).where(
        AnswerVectorRow.model == model,
        AnswerVectorRow.content_hash == DocumentRow.content_hash,
        AnswerVectorRow.path == DocumentRow.path,
    )
    return (DocumentRow.chunk_count > 0, ~valid.exists())


class KeptVectors(NamedTuple):
    """A map entry's two vectors (float32, little-endian), each with the hash of the text
    it was made from (``MapVectorRow``)."""

    entry_hash: str
    entry: bytes
    title_hash: str
    title: bytes


#: paths per ``IN (…)`` query (SQLite allows 32,766 parameters)
_PATHS_PER_QUERY = 500


class DocumentRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def all(self) -> list[StoredDocument]:
        with Session(self.engine) as session:
            rows = session.scalars(select(DocumentRow).order_by(DocumentRow.path))
            return [_stored(row) for row in rows]

    def under(self, folder: str) -> list[StoredDocument]:
        """The documents whose file lies in ``folder`` (as ``source_file`` spells it; its
        ``%`` and ``_`` are letters), found by the database, not by reading every row."""
        inside = DocumentRow.source_file.startswith(os.path.join(folder, ""), autoescape=True)
        with Session(self.engine) as session:
            return [_stored(row) for row in session.scalars(select(DocumentRow).where(inside))]

    def files_outside(self, folder: str) -> list[str]:
        """The files, not in ``folder``, that documents were read from (``under``'s
        complement, each file once): whether a knowledge base holds more than one folder's
        files, asked without reading a document."""
        inside = DocumentRow.source_file.startswith(os.path.join(folder, ""), autoescape=True)
        query = select(DocumentRow.source_file).where(~inside).distinct()
        with self.engine.connect() as connection:
            return sorted(connection.scalars(query))

    def fingerprints(self) -> dict[str, tuple[Any, ...]]:
        """Path → what changes whenever its row does (content, domain, title, last
        update), read without the rows: what a cache compares to find the changed ones."""
        query = select(
            DocumentRow.path,
            DocumentRow.content_hash,
            DocumentRow.domain,
            DocumentRow.title,
            DocumentRow.updated_at,
        )
        with self.engine.connect() as connection:
            return {row[0]: tuple(row[1:]) for row in connection.execute(query)}

    def with_fingerprints(
        self, paths: Iterable[str]
    ) -> list[tuple[StoredDocument, tuple[Any, ...]]]:
        """The stored ones of ``paths``, each with its ``fingerprints`` value, read
        ``_PATHS_PER_QUERY`` at a time."""
        paths = list(paths)
        out = []
        with Session(self.engine) as session:
            for start in range(0, len(paths), _PATHS_PER_QUERY):
                chunk = paths[start : start + _PATHS_PER_QUERY]
                for row in session.scalars(select(DocumentRow).where(DocumentRow.path.in_(chunk))):
                    fingerprint = (row.content_hash, row.domain, row.title, row.updated_at)
                    out.append((_stored(row), fingerprint))
        return out

    def get(self, path: str) -> StoredDocument | None:
        with Session(self.engine) as session:
            row = session.scalar(select(DocumentRow).where(DocumentRow.path == path))
            return _stored(row) if row else None

    def titles(self, paths: Iterable[str]) -> dict[str, str]:
        """Path → title of those of ``paths`` that are stored, in one query."""
        wanted = sorted(set(paths))
        if not wanted:
            return {}
        query = select(DocumentRow.path, DocumentRow.title).where(DocumentRow.path.in_(wanted))
        with Session(self.engine) as session:
            return {path: title for path, title in session.execute(query)}

    def domains(self) -> dict[str, int]:
        """Domain → document count, sorted by domain."""
        with Session(self.engine) as session:
            rows = session.execute(
                select(DocumentRow.domain, func.count()).group_by(DocumentRow.domain)
            )
            return dict(sorted((domain, count) for domain, count in rows))

    def access_lists(self) -> list[tuple[str, str, tuple[str, ...] | None]]:
        """``(path, domain, access)`` of every document: what deciding who reads what
        needs, without the metadata."""
        query = select(DocumentRow.path, DocumentRow.domain, DocumentRow.access)
        with self.engine.connect() as connection:
            return [
                (path, domain, tuple(access) if access is not None else None)
                for path, domain, access in connection.execute(query.order_by(DocumentRow.path))
            ]

    def has_domain(self, domain: str) -> bool:
        """One indexed point query: the check a governed call makes on every named domain."""
        with self.engine.connect() as connection:
            return connection.execute(_HAS_DOMAIN, {"domain": domain}).first() is not None

    def save(self, doc: StoredDocument) -> None:
        """Insert or update by path, in one transaction."""
        self.save_all([doc])

    def save_all(self, docs: Iterable[StoredDocument]) -> None:
        """Insert or update each of ``docs`` by path, all in one transaction (an ingest
        writes the rows of a batch of files at once: one commit instead of one each)."""
        docs = list(docs)
        if not docs:
            return
        with Session(self.engine) as session, session.begin():
            paths = [doc.path for doc in docs]
            rows = {
                row.path: row
                for row in session.scalars(select(DocumentRow).where(DocumentRow.path.in_(paths)))
            }
            for doc in docs:
                row = rows.get(doc.path)
                if row is None:
                    row = rows[doc.path] = DocumentRow(path=doc.path)
                    session.add(row)
                row.title = doc.title
                row.domain = doc.domain
                row.content_hash = doc.content_hash
                row.size_bytes = doc.size_bytes
                row.chunk_count = doc.chunk_count
                row.source_file = doc.source_file
                row.metadata_ = doc.metadata
                row.access = list(doc.access) if doc.access is not None else None
            bump_version(session)

    def delete(self, paths: Iterable[str]) -> int:
        paths = list(paths)
        if not paths:
            return 0
        with Session(self.engine) as session, session.begin():
            session.execute(delete(AnswerVectorRow).where(AnswerVectorRow.path.in_(paths)))
            session.execute(delete(MapVectorRow).where(MapVectorRow.path.in_(paths)))
            deleted = deleted_rows(session, delete(DocumentRow).where(DocumentRow.path.in_(paths)))
            if deleted:
                bump_version(session)
            return deleted

    def rename(self, old: str, new: str) -> bool:
        """Give the document at ``old`` the path ``new``, keeping its row (id, creation
        time), its answer vector and the sessions' record of having retrieved it: a file
        renamed in its repository is the same document. False when ``old`` is not stored
        or ``new`` is taken. Its chunks are the caller's to move (they are keyed by path)."""
        with Session(self.engine) as session, session.begin():
            taken = session.scalar(select(DocumentRow.id).where(DocumentRow.path == new))
            row = session.scalar(select(DocumentRow).where(DocumentRow.path == old))
            if row is None or taken is not None:
                return False
            row.path = new
            session.execute(delete(AnswerVectorRow).where(AnswerVectorRow.path == new))
            session.execute(
                update(AnswerVectorRow).where(AnswerVectorRow.path == old).values(path=new)
            )
            session.execute(delete(MapVectorRow).where(MapVectorRow.path == new))
            session.execute(update(MapVectorRow).where(MapVectorRow.path == old).values(path=new))
            had_old = select(SessionRetrievalRow.session_id).where(
                SessionRetrievalRow.doc_path == old
            )
            session.execute(  # a session that had both keeps one record (the key)
                delete(SessionRetrievalRow).where(
                    SessionRetrievalRow.doc_path == new,
                    SessionRetrievalRow.session_id.in_(had_old),
                )
            )
            session.execute(
                update(SessionRetrievalRow)
                .where(SessionRetrievalRow.doc_path == old)
                .values(doc_path=new)
            )
            bump_version(session)
            return True

    def delete_all(self) -> None:
        with Session(self.engine) as session, session.begin():
            session.execute(delete(AnswerVectorRow))
            session.execute(delete(MapVectorRow))
            session.execute(delete(DocumentRow))
            bump_version(session)

    # -- answer vectors (``retrieval.answers``) -------------------------------
    def answer_vectors(
        self, model: str, paths: Iterable[str] | None = None
    ) -> list[tuple[str, str, bytes]]:
        """``(path, domain, vector)`` of every document (of ``paths``, when given) whose
        vector under ``model`` was made from its current content."""
        query = (
            select(DocumentRow.path, DocumentRow.domain, AnswerVectorRow.vector)
            .join(AnswerVectorRow, AnswerVectorRow.path == DocumentRow.path)
            .where(
                AnswerVectorRow.model == model,
                AnswerVectorRow.content_hash == DocumentRow.content_hash,
            )
            .order_by(DocumentRow.path)
        )
        with self.engine.connect() as connection:
            if paths is None:
                return [(p, domain, vector) for p, domain, vector in connection.execute(query)]
            wanted, out = list(paths), []
            for start in range(0, len(wanted), _PATHS_PER_QUERY):
                chunk = wanted[start : start + _PATHS_PER_QUERY]
                rows = connection.execute(query.where(DocumentRow.path.in_(chunk)))
                out += [(p, domain, vector) for p, domain, vector in rows]
            return out

    def answer_fingerprints(self, model: str) -> dict[str, tuple[str, str]]:
        """Path → (content hash, domain) of every document with a current vector under
        ``model``, without the vectors: what the answer index compares."""
        query = (
            select(DocumentRow.path, DocumentRow.content_hash, DocumentRow.domain)
            .join(AnswerVectorRow, AnswerVectorRow.path == DocumentRow.path)
            .where(
                AnswerVectorRow.model == model,
                AnswerVectorRow.content_hash == DocumentRow.content_hash,
            )
        )
        with self.engine.connect() as connection:
            return {path: (digest, domain) for path, digest, domain in connection.execute(query)}

    def without_answer_vector(self, model: str) -> list[StoredDocument]:
        """Documents with chunks and no vector under ``model`` for their current content."""
        query = select(DocumentRow).where(*_lacks_answer(model)).order_by(DocumentRow.path)
        with Session(self.engine) as session:
            return [_stored(row) for row in session.scalars(query)]

    def count_without_answer_vector(self, model: str) -> int:
        """How many ``without_answer_vector`` would return, in one count."""
        query = select(func.count()).select_from(DocumentRow).where(*_lacks_answer(model))
        with self.engine.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def save_answer_vectors(
        self, model: str, vectors: Iterable[tuple[str, str, bytes]], *, announce: bool = True
    ) -> None:
        """Replace the vectors of ``(path, content_hash, vector)`` in one transaction. With
        ``announce`` the knowledge version moves, so that every process rebuilds its answer
        index; a long backfill announces now and then (``announce_change``), not per batch."""
        rows = list(vectors)
        if not rows:
            return
        with Session(self.engine) as session, session.begin():
            paths = [path for path, _, _ in rows]
            session.execute(delete(AnswerVectorRow).where(AnswerVectorRow.path.in_(paths)))
            session.add_all(
                AnswerVectorRow(path=path, model=model, content_hash=digest, vector=vector)
                for path, digest, vector in rows
            )
            if announce:
                bump_version(session)

    # -- map vectors (the planner's entries) ----------------------------------
    def map_vectors(self, model: str, paths: Iterable[str]) -> Iterator[tuple[str, KeptVectors]]:
        """The vectors ``model`` made of those of ``paths`` that have them, read
        ``_PATHS_PER_QUERY`` at a time and handed on as read: a whole map's (0.2 GB at
        50,000 documents) is never held as rows."""
        query = select(
            MapVectorRow.path,
            MapVectorRow.entry_hash,
            MapVectorRow.entry,
            MapVectorRow.title_hash,
            MapVectorRow.title,
        ).where(MapVectorRow.model == model)
        wanted = list(paths)
        with self.engine.connect() as connection:
            for start in range(0, len(wanted), _PATHS_PER_QUERY):
                chunk = wanted[start : start + _PATHS_PER_QUERY]
                for row in connection.execute(query.where(MapVectorRow.path.in_(chunk))):
                    yield row[0], KeptVectors(*row[1:])

    def save_map_vectors(self, model: str, vectors: Iterable[tuple[str, KeptVectors]]) -> None:
        """Insert or replace the vectors ``model`` made of each ``(path, vectors)``: two
        processes that embedded one entry at once both save it. Not a change of the
        knowledge (its version stays): the vectors are derived from what is stored.
        ``vectors`` is taken ``_PATHS_PER_QUERY`` at a time, so a generator is never
        held whole."""
        pending = iter(vectors)
        with self.engine.begin() as connection:
            while rows := [
                {"path": path, "model": model, **kept._asdict()}
                for path, kept in islice(pending, _PATHS_PER_QUERY)
            ]:
                statement = upsert_insert(self.engine, MapVectorRow).values(rows)
                replaced = {c: statement.excluded[c] for c in KeptVectors._fields}
                connection.execute(
                    statement.on_conflict_do_update(index_elements=["path", "model"], set_=replaced)
                )

    def announce_change(self) -> None:
        """Move the knowledge version for what was saved without announcing it."""
        with Session(self.engine) as session, session.begin():
            bump_version(session)


class MetaRepository:
    """Small key/value facts about the index (embedder name, dimension)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, key: str) -> str | None:
        with Session(self.engine) as session:
            row = session.get(KbMetaRow, key)
            return row.value if row else None

    def set(self, key: str, value: str) -> None:
        with Session(self.engine) as session, session.begin():
            session.merge(KbMetaRow(key=key, value=value))

    def set_measurements(self, values: dict[str, str]) -> None:
        """Store what the KB measured about its documents and count it as a change of the
        knowledge, in one transaction: a process that read the old measurements after the
        documents changed (and caches them per knowledge version) reads them again."""
        with Session(self.engine) as session, session.begin():
            for key, value in values.items():
                session.merge(KbMetaRow(key=key, value=value))
            bump_version(session)
