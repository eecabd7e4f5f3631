"""Relational schema (SQLAlchemy 2.x). Alembic migrations in ``migrations/`` create it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from superbiz.storage.session_ids import SESSION_ID_MAX

# none_as_null: a missing value is SQL NULL (``IS NULL`` finds it), not the JSON ``null``.
JsonType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


#: column sizes that ingestion checks before writing (PostgreSQL refuses longer values)
PATH_MAX = 1024
TITLE_MAX = 512
DOMAIN_MAX = 128
#: an embedder's name (``embedding.model``: an endpoint's model names run long)
MODEL_MAX = 255
#: the largest turn number an ``Integer`` column holds on every store (PostgreSQL's int4)
MAX_TURN = 2**31 - 1


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """A UTC timestamp, aware on every backend: SQLite keeps no offset and hands back a
    naive value, which ``isoformat()`` writes without one and comparing with ``utcnow()``
    refuses; PostgreSQL hands back ``+00:00``."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    pass


class DocumentRow(Base):
    """One knowledge document (``api_document`` in the original design); chunks live in Milvus."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(String(PATH_MAX), unique=True)
    title: Mapped[str] = mapped_column(String(TITLE_MAX))
    domain: Mapped[str] = mapped_column(String(DOMAIN_MAX), index=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(Integer)
    chunk_count: Mapped[int] = mapped_column(Integer)
    source_file: Mapped[str] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JsonType, default=dict)
    #: the groups that may read it (``superbiz.access``); null: its domain's rule
    access: Mapped[list[str] | None] = mapped_column(JsonType, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class AnswerVectorRow(Base):
    """A document opening's vector under the answer model (``retrieval.answers``).

    Valid while ``content_hash`` is the document's: an edited document's old vector is
    never used, and the next ingest replaces it. Deleted with its document.
    """

    __tablename__ = "answer_vector"

    path: Mapped[str] = mapped_column(String(PATH_MAX), primary_key=True)
    model: Mapped[str] = mapped_column(String(64))
    content_hash: Mapped[str] = mapped_column(String(64))
    #: float32, little-endian
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class MapVectorRow(Base):
    """A knowledge-map entry's vectors under one embedder, as the deterministic planner
    embeds them: ``entry`` (title, covers and when-to-retrieve) and ``title`` (the title
    alone), each beside a hash of the text it was made from.

    Kept so that a new process (each ``superbiz ask``, each replica) does not embed the
    whole map again; a vector is valid while its hash is its text's. Both in one row,
    written together: a 512-d vector is 2 KB, and on SQLite's 4 KB pages a row of one
    took a page (8.2 KB a document, both written at once 4.6). Deleted with its document.
    """

    __tablename__ = "map_vector"

    path: Mapped[str] = mapped_column(String(PATH_MAX), primary_key=True)
    model: Mapped[str] = mapped_column(String(MODEL_MAX), primary_key=True)
    entry_hash: Mapped[str] = mapped_column(String(64))
    #: float32, little-endian, like ``title``
    entry: Mapped[bytes] = mapped_column(LargeBinary)
    title_hash: Mapped[str] = mapped_column(String(64))
    title: Mapped[bytes] = mapped_column(LargeBinary)


class SessionRetrievalRow(Base):
    """Action memory: which document (and its domain) a session already retrieved."""

    __tablename__ = "session_retrievals"

    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), primary_key=True)
    doc_path: Mapped[str] = mapped_column(String(1024), primary_key=True)
    domain: Mapped[str] = mapped_column(String(128))
    retrieved_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class KbMetaRow(Base):
    """Facts about the index, e.g. which embedder built it."""

    __tablename__ = "kb_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class KnowledgeVersionRow(Base):
    """One row (``id`` 1) whose ``version`` grows with every change to documents or
    domains: a process compares it with the version its caches were built at."""

    __tablename__ = "knowledge_version"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)


class ToolInvocationRow(Base):
    """One tool call of the executor (or an MCP client), executed or blocked."""

    __tablename__ = "tool_invocation"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), index=True)
    turn: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    tool_name: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[dict[str, Any]] = mapped_column(JsonType)
    domain: Mapped[str | None] = mapped_column(String(128), nullable=True)
    relevance_level: Mapped[str | None] = mapped_column(String(20), nullable=True)
    dedup_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    retrieval_details: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    executed: Mapped[bool] = mapped_column(Boolean)
    verdict: Mapped[str] = mapped_column(String(16))
    water_level: Mapped[str] = mapped_column(String(8))
    latency_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: who asked for the call: ``model``, or ``plan`` (a planned lookup run by code)
    origin: Mapped[str] = mapped_column(String(8), default="model", server_default="model")
    #: the OpenTelemetry trace the call ran in (32 hex digits); None when none was recorded
    trace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)

    __table_args__ = (Index("ix_tool_invocation_session_turn", "session_id", "turn"),)


class KnowledgeDomainRow(Base):
    """A domain of the knowledge map (docs/design.md §6.2), aggregated from its documents."""

    __tablename__ = "knowledge_domain"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    domain_id: Mapped[str] = mapped_column(String(128), unique=True)
    description: Mapped[str | None] = mapped_column(String(256), nullable=True)
    when_to_retrieve: Mapped[str | None] = mapped_column(Text, nullable=True)
    document_count: Mapped[int] = mapped_column(Integer, default=0)
    source: Mapped[str] = mapped_column(String(16), default="derived")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


SESSION_TITLE_MAX = 200


class ChatSessionRow(Base):
    __tablename__ = "chat_sessions"

    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), primary_key=True)
    #: a name the user gave the session (the page's rename); null: its first question
    title: Mapped[str | None] = mapped_column(String(SESSION_TITLE_MAX), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class ChatMessageRow(Base):
    """One message of a conversation; an assistant answer keeps its evidence and plan."""

    __tablename__ = "chat_messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), index=True)
    turn: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    evidence: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonType, nullable=True)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    #: an answer's source (model, repaired, extractive, fallback, no_evidence); None for a
    #: question and for answers stored before it was kept
    answer_source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: the OpenTelemetry trace of the turn that wrote the answer (32 hex digits)
    trace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)

    __table_args__ = (Index("ix_chat_messages_session_turn", "session_id", "turn"),)


class TurnFeedbackRow(Base):
    """A person's rating of one answer (one per turn; rating again replaces it)."""

    __tablename__ = "turn_feedback"

    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)
    rating: Mapped[str] = mapped_column(String(8))  # up | down
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        UtcDateTime, default=utcnow, onupdate=utcnow, index=True
    )


class SourceRow(Base):
    """A place documents are ingested from (a folder, or a Git repository) and its last
    sync. ``location`` never holds credentials: a URL's user and password are removed
    before it is stored."""

    __tablename__ = "sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    location: Mapped[str] = mapped_column(Text)
    branch: Mapped[str | None] = mapped_column(String(256), nullable=True)
    subdir: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    domain: Mapped[str | None] = mapped_column(String(DOMAIN_MAX), nullable=True)
    #: the commit the stored documents were last synced from (Git sources)
    commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    synced_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    #: what the last successful sync did: added, updated, renamed, removed, skipped …
    counts: Mapped[dict[str, Any]] = mapped_column(JsonType, default=dict)
    #: the last sync's skipped items, ``[{"path", "reason"}]``
    skipped: Mapped[list[dict[str, str]] | None] = mapped_column(JsonType, nullable=True)
    #: why the last attempt failed (cleared by the next success); the documents of the
    #: last good sync stay as they were
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


#: a person's name as sign-in and the CLI give it (an email address fits)
USER_NAME_MAX = 128


class UserRow(Base):
    """A person who may use the service: added by an admin (``superbiz users add``) or on
    first sign-in with the identity provider. A removed person keeps the row, marked, so
    that signing in again is refused until an admin adds them back."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(USER_NAME_MAX), unique=True)
    role: Mapped[str] = mapped_column(String(8))
    groups: Mapped[list[str]] = mapped_column(JsonType, default=list)
    #: the identity provider's ``sub`` of the person first signed in under this name
    subject: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_seen_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)
    removed_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class ApiKeyRow(Base):
    """A person's API key, stored as the SHA-256 of the key (the key itself is printed
    once); ``prefix`` is the part shown in lists."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(Integer, index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime, nullable=True)


class SignInRow(Base):
    """One browser's sign-in: the page's cookie holds a random token, this row its
    SHA-256, so every replica knows it and signing out (or removing the person) ends it
    everywhere at once."""

    __tablename__ = "sign_ins"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(Integer, index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    #: the provider's ID token, sent back as ``id_token_hint`` when signing out there
    id_token: Mapped[str | None] = mapped_column(Text, nullable=True)


class PendingSignInRow(Base):
    """A sign-in on its way through the identity provider: the PKCE verifier and nonce
    of one authorization request, found again by its ``state`` on any replica."""

    __tablename__ = "pending_sign_ins"

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    code_verifier: Mapped[str] = mapped_column(String(128))
    nonce: Mapped[str] = mapped_column(String(64))
    redirect_uri: Mapped[str] = mapped_column(String(1024))
    return_to: Mapped[str] = mapped_column(String(1024))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)


class SessionOwnerRow(Base):
    """Whose a chat (or MCP) session is: claimed by its first turn, never changed, kept
    when the session is cleared so that its id never passes to someone else."""

    __tablename__ = "session_owners"

    session_id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), primary_key=True)
    owner: Mapped[str] = mapped_column(String(USER_NAME_MAX), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class AuditEventRow(Base):
    """Who did what, when: sign-ins, uploads, deletes, role changes, refused requests."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(USER_NAME_MAX))
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str | None] = mapped_column(String(PATH_MAX), nullable=True)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    #: the client's address as the server saw it
    address: Mapped[str | None] = mapped_column(String(64), nullable=True)
