"""The knowledge base of one data directory: documents, vectors, the exact index."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace
from functools import cached_property

import numpy as np
from sqlalchemy import Engine

from superbiz._text import has_cjk
from superbiz.access import Reader
from superbiz.config import Settings
from superbiz.exceptions import ConfigError, EmbeddingError, IndexMismatchError, UnknownDomainError
from superbiz.knowledge.documents.domains import normalize_domain
from superbiz.knowledge.kb._mirror import DocumentMirror
from superbiz.knowledge.kb.access_rules import AccessRules, ReaderView, domain_lists
from superbiz.knowledge.kb.cache import Versioned
from superbiz.knowledge.kb.exact_entries import exact_entry
from superbiz.knowledge.kb.map_vectors import KeptMapVectors
from superbiz.retrieval.answers import AnswerEncoder, AnswerIndex, shared_encoder
from superbiz.retrieval.calibration import LevelCalibration
from superbiz.retrieval.embedders import Embedder, make_embedder
from superbiz.retrieval.exact_index import ExactIndex
from superbiz.retrieval.key_frequency import KeyFrequency
from superbiz.retrieval.pipeline import Retrieval, Retriever
from superbiz.retrieval.records import ChunkHit
from superbiz.retrieval.relevance import DEFAULT_THRESHOLDS, FALLBACK_THRESHOLDS, Thresholds
from superbiz.retrieval.search import AnswerSource, HybridSearcher
from superbiz.retrieval.store import ChunkStore
from superbiz.retrieval.title_match import TitleCounts
from superbiz.retrieval.vector_store import MilvusChunkStore
from superbiz.storage.db import open_database
from superbiz.storage.kb_writes import KnowledgeWriteLock
from superbiz.storage.knowledge_version import knowledge_version
from superbiz.storage.repository import DocumentRepository, MetaRepository, StoredDocument

log = logging.getLogger(__name__)

EMBEDDER_KEY = "embedder"
DIMENSION_KEY = "dimension"
#: ``kb_meta`` keys of what the KB measures about itself (``superbiz.knowledge.kb.statistics``)
KEY_FREQUENCY_KEY = "key_frequency"
LEVEL_CALIBRATION_KEY = "level_calibration"
#: readers' views kept at once (one per distinct set of groups; emptied when full)
_VIEWS_KEPT = 256


class KnowledgeBase:
    """Opens the relational store and the vector store named by ``settings``.

    The embedder loads lazily: listing documents or domains never pays for it. A
    ``store`` passed in (e.g. ``InMemoryChunkStore``) replaces the configured Milvus one.

    Several processes may serve one knowledge base (replicas on one PostgreSQL and one
    Milvus server, ``superbiz ingest`` while they run): ``catch_up()`` notices the changes any
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
        #: held by every write (ingest, upload, delete), see ``superbiz.storage.kb_writes``
        self.write_lock = KnowledgeWriteLock(self.engine)
        self._embedder = embedder
        self._store = store
        self._owns_store = store is None
        #: changes of the documents seen so far (``changed``): every cache below is
        #: stamped with the count it was built at (``superbiz.knowledge.kb.cache``)
        self._changes = 0
        self._cache_lock = threading.RLock()
        #: the documents, the exact and the answer index, each brought up to date by
        #: difference after a change
        self._mirror = DocumentMirror(self.documents)
        self._documents = Versioned(self._refresh_documents)
        self._chinese = Versioned(self._chinese_documents)
        self._exact = ExactIndex()
        self._exact_docs: dict[str, StoredDocument] = {}  # the document of each entry
        self._exact_cache = Versioned(self._update_exact)
        self._answer_rows: dict[str, tuple[tuple[str, str], tuple[str, str, bytes]]] = {}
        self._answers = Versioned(self._update_answers)
        #: rows each index redid at its last refreshes, counted (what a change costs)
        self.work = {"exact_entries": 0, "answer_rows": 0}
        #: the stored measurements, read once per change
        self._frequency = Versioned(
            lambda: KeyFrequency.from_json(self.meta.get(KEY_FREQUENCY_KEY))
        )
        self._calibration = Versioned(
            lambda: LevelCalibration.from_json(self.meta.get(LEVEL_CALIBRATION_KEY))
        )
        #: who may read each domain (``access.domains`` by domain), what documents may
        #: read (``access_rules``) and each reader's view of them
        self.domain_access = domain_lists(settings.access.domains)
        self._access = Versioned(
            lambda: AccessRules.of(self.documents.access_lists(), self.domain_access)
        )
        self._views: dict[tuple[bool, frozenset[str]], ReaderView] = {}
        #: the retriever holds the thresholds, measured per change, and the titles' words
        self._titles = TitleCounts()  # counted by difference
        self._retriever = Versioned(
            lambda: Retriever(
                self.searcher,
                lambda: self.exact_index,
                self.thresholds,
                self.settings.retrieval_config,
                titles=self._titles.vocabulary(
                    {path: doc.title for path, doc in self.current_documents().items()}
                ),
                sizes={path: doc.chunk_count for path, doc in self.current_documents().items()},
            )
        )
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
            self._embedder = make_embedder(self.settings.embedding_config)
        return self._embedder

    @cached_property
    def map_vectors(self) -> KeptMapVectors:
        """The map's entry vectors, kept in the store for every process (the planner's)."""
        return KeptMapVectors(self.documents, self.embedder)

    @cached_property
    def answer_encoder(self) -> AnswerEncoder | None:
        """The answer model, when ``retrieval.answers.model`` names one."""
        if self.settings.retrieval.answers.model == "none":
            return None
        return shared_encoder()

    def match_passages(self, question: str, passages: Sequence[str]) -> list[float] | None:
        """The passage model's cosine of ``question`` with each of ``passages``
        (``quote_order.PassageMatcher``), when ``retrieval.answers.passages`` names one;
        None without, or when it fails (the answer then reads its documents in the
        lookups' order)."""
        if self.settings.retrieval.answers.passages == "none" or not passages:
            return None
        chars = self.settings.retrieval_config.answers.query_chars
        try:
            return shared_encoder().cosines(question[:chars], passages)
        except EmbeddingError as exc:
            log.warning("%s; the answer reads its documents in the lookups' order", exc)
            return None

    @cached_property
    def searcher(self) -> HybridSearcher:
        self.check_index()
        encoder = self.answer_encoder
        return HybridSearcher(
            self.embedder,
            self.store,
            self.settings.retrieval_config,
            answers=AnswerSource(encoder, lambda: self.answer_index) if encoder else None,
        )

    @property
    def retriever(self) -> Retriever:
        return self._retriever.get(self._changes)

    def retrieve(
        self,
        query: str,
        domain: str | None = None,
        *,
        exclude: Collection[str] = (),
        page: bool = False,
        reader: Reader | None = None,
    ) -> Retrieval:
        """Ranked, levelled evidence for ``query`` among the documents not in ``exclude``
        that ``reader`` may read (None: an unrestricted reader), from the knowledge base as
        it is now (``catch_up`` first: an MCP lookup is a turn); ``page``: see
        ``Retriever.retrieve``."""
        self.catch_up()
        visibility = self.view(reader).visibility
        return self.retriever.retrieve(
            query, domain, exclude=exclude, page=page, visibility=visibility
        )

    def infer_domain(self, query: str, reader: Reader | None = None) -> str | None:
        """The domain a query that names none is about (see ``Retriever.infer_domain``),
        among those ``reader`` may read."""
        return self.retriever.infer_domain(query, self.view(reader).visibility)

    @property
    def access_rules(self) -> AccessRules:
        """Who may read each document, as stored now (read once per knowledge version)."""
        return self._access.get(self._changes)

    def view(self, reader: Reader | None) -> ReaderView:
        """What ``reader`` (None: an unrestricted reader) may see, computed once per
        knowledge version and group set."""
        who = reader or Reader.everyone()
        view = self._views.get(who.key)
        if view is None or view.rules is not self.access_rules:
            if len(self._views) >= _VIEWS_KEPT:
                self._views.clear()
            view = self._views[who.key] = self.access_rules.view(who)
        return view

    def passages(self, paths: Sequence[str]) -> dict[str, list[ChunkHit]]:
        """Every stored chunk of each document (heading path, text, dense vector), in
        document order: what an answer chooses its passages from."""
        return self.store.chunks_of_documents(list(paths)) if paths else {}

    def unknown_names(self, names: Sequence[str], reader: Reader | None = None) -> list[str]:
        """Which of ``names`` no passage ``reader`` may read holds, nor a word of (a
        lexical search for it finds nothing: "tiup-playground" is known where "tiup"
        is). Read on what the reader may read, so that a name only a hidden document
        holds is as unknown to it as one no document holds."""
        visibility = self.view(reader).visibility
        return [name for name in names if not self.store.search_bm25(name, 1, None, visibility)]

    def embed_question(self, text: str) -> np.ndarray:
        """``text`` embedded as a query, comparable with the passages' vectors."""
        return self.embedder.embed_query(text)

    @property
    def excerpt_chars(self) -> int:
        """The excerpt unit: a primary document shows up to twice this (its two best
        chunks), a supplement up to half of it."""
        return self.settings.advanced.retrieval.excerpt_chars

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
        """Configured thresholds, else the ones measured on this KB by its embedder
        (``level_calibration``), else the shipped defaults of the active embedder."""
        norm = self.settings.retrieval.normalization
        highly, reference = norm.highly_relevant_threshold, norm.reference_threshold
        default = self.measured_thresholds
        if default is None:
            default = DEFAULT_THRESHOLDS.get(self.embedder.name, FALLBACK_THRESHOLDS)
        elif highly is None and reference is not None:  # a measured value yields to a setting
            default = replace(default, highly_relevant=max(default.highly_relevant, reference))
        elif reference is None and highly is not None:
            default = replace(default, reference=min(default.reference, highly))
        try:
            return Thresholds(
                highly_relevant=highly if highly is not None else default.highly_relevant,
                reference=reference if reference is not None else default.reference,
                # a configured highly-relevant threshold is the seed's rule: no lead
                highly_relevant_lead=0.0 if highly is not None else default.highly_relevant_lead,
            )
        except ValueError as exc:  # one set against the other's default, or both inverted
            raise ConfigError(
                f"retrieval.normalization: {exc} (the defaults for {self.embedder.name} are "
                f"{default.highly_relevant} and {default.reference})"
            ) from exc

    @property
    def calibration(self) -> LevelCalibration | None:
        """The levels' measurement stored by the last change of documents, if any."""
        return self._calibration.get(self._changes)

    @property
    def measured_thresholds(self) -> Thresholds | None:
        """The stored calibration's thresholds when they were measured by the embedder now
        configured on enough probes (the shipped reference beside a measured highly-relevant
        rule for a KB about one subject); None sends lookups to the shipped numbers."""
        measured = self.calibration
        if measured is None or measured.embedder != self.embedder.name:
            return None
        if measured.highly_relevant is None:
            return None
        reference = measured.reference
        if reference is None:  # one subject's documents (``LevelCalibration.one_subject``)
            reference = DEFAULT_THRESHOLDS.get(self.embedder.name, FALLBACK_THRESHOLDS).reference
        return Thresholds(
            highly_relevant=max(measured.highly_relevant, reference),
            reference=reference,
            highly_relevant_lead=measured.highly_relevant_lead or 0.0,
        )

    @property
    def key_frequency(self) -> KeyFrequency | None:
        """How many documents use each exact key, as stored by the last change of
        documents; None before the first measurement (every key counts as specific)."""
        return self._frequency.get(self._changes)

    def current_documents(self, *, fresh: bool = False) -> dict[str, StoredDocument]:
        """The stored documents by path (in path order) as of the last ``catch_up`` or
        ``changed`` (``fresh``: as stored now), read by difference
        (``DocumentMirror``): an unchanged document is the same object as before."""
        with self._cache_lock:
            return self._documents.get(self._changes, fresh=fresh)

    def writes_chinese(self, reader: Reader | None = None) -> bool:
        """Whether some document ``reader`` may read (None: an unrestricted reader) has its
        title, covers or when-to-retrieve line in Chinese characters. Documents that write
        none (a team's English vendor docs) cannot name a Chinese question's words: the
        answer selection does not hold their absence against their passages
        (``select_answer``). Read on what the reader may read, so that how its answers are
        chosen says nothing of the documents it may not."""
        with self._cache_lock:
            chinese = self._chinese.get(self._changes)
        visibility = self.view(reader).visibility
        return any(visibility is None or visibility.shows(path) for path in chinese)

    def _chinese_documents(self) -> frozenset[str]:
        return frozenset(
            path
            for path, doc in self.current_documents().items()
            if has_cjk("\n".join([doc.title, *doc.covers, doc.when_to_retrieve or ""]))
        )

    def _refresh_documents(self) -> dict[str, StoredDocument]:
        self._mirror.refresh()
        return self._mirror.rows

    @property
    def documents_read(self) -> int:
        """Document rows read into ``current_documents`` so far (counted work)."""
        return self._mirror.rows_read

    @property
    def exact_index(self) -> ExactIndex:
        """The exact index, its entries redone only for the documents that changed."""
        with self._cache_lock:
            return self._exact_cache.get(self._changes)

    def _update_exact(self) -> ExactIndex:
        docs = self.current_documents()
        index, used = self._exact, self._exact_docs
        for path in used.keys() - docs.keys():
            index.remove(path)
            del used[path]
        for path, doc in docs.items():
            if used.get(path) is not doc:
                if path in used:
                    index.remove(path)
                index.add(exact_entry(doc))
                used[path] = doc
                self.work["exact_entries"] += 1
        index.key_frequency = self.key_frequency
        return index

    @property
    def answer_index(self) -> AnswerIndex:
        """The documents' answer vectors, only the changed ones read again after a change;
        documents without one (the model was turned on after their ingest) are logged,
        once per change."""
        with self._cache_lock:
            return self._answers.get(self._changes)

    def _update_answers(self) -> AnswerIndex:
        encoder = self.answer_encoder
        if encoder is None:
            self._answer_rows = {}
            return AnswerIndex.from_rows([])
        prints = self.documents.answer_fingerprints(encoder.name)
        rows = {
            path: held for path, held in self._answer_rows.items() if prints.get(path) == held[0]
        }
        for row in self.documents.answer_vectors(encoder.name, sorted(prints.keys() - rows)):
            rows[row[0]] = (prints[row[0]], row)
            self.work["answer_rows"] += 1
        self._answer_rows = rows
        answers = AnswerIndex.from_rows([rows[path][1] for path in sorted(rows)])
        if missing := self.documents.count_without_answer_vector(encoder.name):
            log.warning(
                "retrieval.answers is on but %d documents have no answer vector yet; "
                "`superbiz ingest` encodes them (the answer model ranks the others)",
                missing,
            )
        return answers

    def changed(self) -> None:
        """Call after documents change: every cache derived from them (the documents, the
        exact and the answer index, the access rules, the stored measurements, the
        retriever that holds the thresholds) is built again on next use, the indexes by
        difference."""
        with self._cache_lock:
            self._changes += 1

    @property
    def changes(self) -> int:
        """How many changes of the documents this process has seen: what a cache built
        from them (here, or the runtime's map) is stamped with."""
        return self._changes

    @property
    def version(self) -> int:
        """The ``knowledge_version`` this process's caches are at (see ``catch_up``)."""
        return self._version

    def catch_up(self) -> bool:
        """Count another process's document changes as a change here (``changed``); True
        if anything changed.

        One point query. The caches are built again on next use (the indexes for the
        changed documents only); a configured vector store that had no collection yet is
        reopened, so that the collection another process created is searched (a
        collection's chunks are always read live).
        """
        current = knowledge_version(self.engine)
        if current == self._version:
            return False
        self._version = current
        self.changed()
        if self._owns_store and self._store is not None and self._store.dimension is None:
            self._store.close()
            self._store = None
            self._close_searcher()
        return True

    def domains(self, reader: Reader | None = None) -> dict[str, int]:
        """Domain → document count; with a restricted ``reader``, of what it may read."""
        view = self.view(reader)
        if not view.restricted:
            return self.documents.domains()
        counts: dict[str, int] = {}
        for path, (domain, _) in view.rules.documents.items():
            if view.may_read(path):
                counts[domain] = counts.get(domain, 0) + 1
        return dict(sorted(counts.items()))

    def require_domain(self, domain: str, reader: Reader | None = None) -> str:
        """``domain`` normalised; ``UnknownDomainError`` (listing the domains ``reader``
        may read) when it has no document ``reader`` may read: a restricted domain is
        unknown to those who may not read it, not forbidden."""
        normalized = normalize_domain(domain)
        view = self.view(reader)
        known = (
            normalized in view.domains if view.restricted else self.documents.has_domain(normalized)
        )
        if not known:
            raise UnknownDomainError(domain, sorted(self.domains(reader)))
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
