"""The knowledge base of one data directory: documents, vectors, the exact index."""

from __future__ import annotations

import logging
from collections.abc import Collection
from functools import cached_property

from sqlalchemy import Engine

from superbiz.config import Settings
from superbiz.exceptions import ConfigError, IndexMismatchError, UnknownDomainError
from superbiz.knowledge.documents import normalize_domain
from superbiz.retrieval.answers import AnswerEncoder, AnswerIndex, shared_encoder
from superbiz.retrieval.embedders import Embedder, make_embedder
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.pipeline import Retrieval, Retriever
from superbiz.retrieval.relevance import DEFAULT_THRESHOLDS, FALLBACK_THRESHOLDS, Thresholds
from superbiz.retrieval.search import AnswerSource, HybridSearcher
from superbiz.retrieval.store import ChunkStore
from superbiz.retrieval.vector_store import MilvusChunkStore
from superbiz.storage.db import open_database
from superbiz.storage.repository import (
    DocumentRepository,
    MetaRepository,
    StoredDocument,
    knowledge_version,
)
from superbiz.storage.write_lock import KnowledgeWriteLock

log = logging.getLogger(__name__)

EMBEDDER_KEY = "embedder"
DIMENSION_KEY = "dimension"


class KnowledgeBase:
    """Opens the relational store and the vector store named by ``settings``.

    The embedder loads lazily: listing documents or domains never pays for it. A
    ``store`` passed in (e.g. ``InMemoryChunkStore``) replaces the configured Milvus one.

    Several processes may serve one knowledge base (replicas on one PostgreSQL and one
    Milvus server, ``superbiz ingest`` while they run): ``sync()`` notices the changes any
    of them made, through the relational store's ``knowledge_version``.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        store: ChunkStore | None = None,
    ) -> None:
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        pool = settings.database_pool
        self.engine = engine or open_database(
            settings.resolved_database_url, pool_size=pool.size, max_overflow=pool.overflow
        )
        self.documents = DocumentRepository(self.engine)
        self.meta = MetaRepository(self.engine)
        #: held by every write (ingest, upload, delete), see ``superbiz.storage.write_lock``
        self.write_lock = KnowledgeWriteLock(self.engine)
        self._embedder = embedder
        self._store = store
        self._owns_store = store is None
        self._exact: ExactIndex | None = None
        self._answers: AnswerIndex | None = None
        self._version = knowledge_version(self.engine)

    @property
    def store(self) -> ChunkStore:
        if self._store is None:
            vector = self.settings.vector
            self._store = MilvusChunkStore(
                self.settings.resolved_vector_uri, vector.collection, vector.token
            )
        return self._store

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = make_embedder(self.settings.embedding)
        return self._embedder

    @cached_property
    def answer_encoder(self) -> AnswerEncoder | None:
        """The answer model, when ``retrieval.answers.model`` names one."""
        if self.settings.retrieval.answers.model == "none":
            return None
        return shared_encoder()

    @cached_property
    def searcher(self) -> HybridSearcher:
        self.check_index()
        encoder = self.answer_encoder
        return HybridSearcher(
            self.embedder,
            self.store,
            self.settings.retrieval,
            answers=AnswerSource(encoder, lambda: self.answer_index) if encoder else None,
        )

    @cached_property
    def retriever(self) -> Retriever:
        return Retriever(
            self.searcher, lambda: self.exact_index, self.thresholds, self.settings.retrieval
        )

    def retrieve(
        self, query: str, domain: str | None = None, *, exclude: Collection[str] = ()
    ) -> Retrieval:
        """Ranked, levelled evidence for ``query`` among the documents not in ``exclude``,
        from the knowledge base as it is now (``sync`` first: an MCP lookup is a turn)."""
        self.sync()
        return self.retriever.retrieve(query, domain, exclude=exclude)

    def infer_domain(self, query: str) -> str | None:
        """The domain a query that names none is about (see ``Retriever.infer_domain``)."""
        return self.retriever.infer_domain(query)

    @property
    def excerpt_chars(self) -> int:
        """The excerpt unit: a primary document shows up to twice this (its two best
        chunks), a supplement up to half of it."""
        return self.settings.retrieval.excerpt_chars

    def check_index(self) -> None:
        """Fail clearly when the index was built by another embedder or dimension."""
        built_by = self.meta.get(EMBEDDER_KEY)
        if built_by and built_by != self.embedder.name:
            built_dim = self.store.dimension or self.meta.get(DIMENSION_KEY) or "?"
            raise IndexMismatchError(
                f"the index was built with embedder {built_by!r} ({built_dim}-d vectors) but "
                f"{self.embedder.name!r} ({self.embedder.dimension}-d) is configured; "
                "re-ingest with `superbiz ingest PATH --rebuild`"
            )
        if self.store.dimension is not None:
            self.store.ensure_collection(self.embedder.dimension)

    def record_embedder(self) -> None:
        self.meta.set(EMBEDDER_KEY, self.embedder.name)
        self.meta.set(DIMENSION_KEY, str(self.embedder.dimension))

    @property
    def thresholds(self) -> Thresholds:
        """Configured thresholds, else the measured defaults of the active embedder."""
        norm = self.settings.retrieval.normalization
        default = DEFAULT_THRESHOLDS.get(self.embedder.name, FALLBACK_THRESHOLDS)
        try:
            return Thresholds(
                highly_relevant=norm.highly_relevant_threshold
                if norm.highly_relevant_threshold is not None
                else default.highly_relevant,
                reference=norm.reference_threshold
                if norm.reference_threshold is not None
                else default.reference,
            )
        except ValueError as exc:  # one set against the other's default, or both inverted
            raise ConfigError(
                f"retrieval.normalization: {exc} (the defaults for {self.embedder.name} are "
                f"{default.highly_relevant} and {default.reference})"
            ) from exc

    @property
    def exact_index(self) -> ExactIndex:
        if self._exact is None:
            self._exact = ExactIndex(exact_entry(doc) for doc in self.documents.all())
        return self._exact

    @property
    def answer_index(self) -> AnswerIndex:
        """The documents' answer vectors, loaded once per knowledge version; documents
        without one (the model was turned on after their ingest) are logged, once."""
        if self._answers is None:
            encoder = self.answer_encoder
            rows = self.documents.answer_vectors(encoder.name) if encoder else []
            self._answers = AnswerIndex.from_rows(rows)
            if encoder and (missing := self.documents.count_without_answer_vector(encoder.name)):
                log.warning(
                    "retrieval.answers is on but %d documents have no answer vector yet; "
                    "`superbiz ingest` encodes them (the answer model ranks the others)",
                    missing,
                )
        return self._answers

    def invalidate(self) -> None:
        """Call after documents change: the exact and answer indexes are rebuilt on next use."""
        self._exact = None
        self._answers = None

    @property
    def version(self) -> int:
        """The ``knowledge_version`` this process's caches are at (see ``sync``)."""
        return self._version

    def sync(self) -> bool:
        """Drop what another process's document changes made stale; True if anything changed.

        One point query. The exact and answer indexes are rebuilt on next use; a configured vector
        store that had no collection yet is reopened, so that the collection another
        process created is searched (a collection's chunks are always read live).
        """
        current = knowledge_version(self.engine)
        if current == self._version:
            return False
        self._version = current
        self._exact = None
        self._answers = None
        if self._owns_store and self._store is not None and self._store.dimension is None:
            self._store.close()
            self._store = None
            self._close_searcher()
            self.__dict__.pop("retriever", None)
        return True

    def domains(self) -> dict[str, int]:
        return self.documents.domains()

    def require_domain(self, domain: str) -> str:
        normalized = normalize_domain(domain)
        if not self.documents.has_domain(normalized):
            raise UnknownDomainError(domain, sorted(self.domains()))
        return normalized

    def close(self) -> None:
        self._close_searcher()
        if self._store is not None:
            self._store.close()
        self.engine.dispose()

    def _close_searcher(self) -> None:
        searcher = self.__dict__.pop("searcher", None)
        if searcher is not None:
            searcher.close()


def exact_entry(doc: StoredDocument) -> ExactEntry:
    return ExactEntry(
        doc_path=doc.path,
        title=doc.title,
        domain=doc.domain,
        aliases=tuple(doc.aliases),
        # Derived covers are only headings: the map shows them, exact matching does not.
        covers=tuple(doc.covers) if doc.origin.get("covers") != "derived" else (),
        tags=tuple(doc.tags),
    )
