"""L1: hybrid search (dense + BM25) over chunks, fused and rolled up to documents."""

from __future__ import annotations

import heapq
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from superbiz._text import Language, detect_language
from superbiz.config import RetrievalConfig
from superbiz.exceptions import EmbeddingError
from superbiz.retrieval.answers import AnswerEncoder, AnswerIndex
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.fusion import (
    answer_fusion,
    length_prior,
    lexical_reach,
    minmax_fusion,
    rrf_fusion,
)
from superbiz.retrieval.gathered import gathered_copies
from superbiz.retrieval.records import DENSE_METRIC, ChunkHit
from superbiz.retrieval.relevance import similarity_from_score
from superbiz.retrieval.store import ChunkStore
from superbiz.retrieval.title_match import UNIFORM, TitleVocabulary, title_coverage, title_words
from superbiz.retrieval.visibility import Visibility

log = logging.getLogger(__name__)

_CACHE_SIZE = 64
#: documents up to which a search asks for ``candidates`` hits (the benchmark sets, where
#: the depths were chosen, hold at most 600)
DEEP_FROM_DOCUMENTS = 2000


def candidate_depth(base: int, documents: int) -> int:
    """Hits one search asks for in a knowledge base of ``documents``: ``base`` up to
    ``DEEP_FROM_DOCUMENTS``, then growing with the square root of the size. The chunks
    that compete with a document's best one grow with the KB, and a fixed depth lets
    them crowd it out: on dev2 grown 25-fold (``eval scale``) three seed questions whose
    answer had ranked first fell out of the top 20 at 15 hits and came back at 37.

    >>> candidate_depth(15, 477), candidate_depth(15, 11_925), candidate_depth(15, 50_000)
    (15, 37, 75)
    """
    if documents <= DEEP_FROM_DOCUMENTS:
        return base
    return math.ceil(base * math.sqrt(documents / DEEP_FROM_DOCUMENTS))


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    hit: ChunkHit
    similarity: float  # exact cosine with the query
    raw_dense: float | None  # the backend's squared L2 distance, when it returned one
    raw_bm25: float | None  # BM25 magnitude, when the chunk was a BM25 hit


@dataclass(slots=True)
class DocHit:
    """A document in the L1 ranking: its best chunks, fused score and exact cosine."""

    doc_path: str
    title: str
    domain: str
    score: float
    similarity: float
    raw_dense: float | None
    chunks: list[ScoredChunk] = field(default_factory=list)
    #: the answer model's cosine with the document's opening, when it ranked this query
    answer: float | None = None
    #: the hybrid fused score before the answer model re-scored the document (``score``)
    hybrid: float | None = None


def document_language(doc: DocHit) -> Language:
    """The language a document is written in, judged on its title and best chunk."""
    text = doc.chunks[0].hit.text if doc.chunks else ""
    return detect_language(f"{doc.title}\n{text}")


class AnswerSource(NamedTuple):
    """The answer model and the index of document openings it is compared with."""

    encoder: AnswerEncoder
    openings: Callable[[], AnswerIndex]


class HybridSearcher:
    """``answers``, when given, is the answer model and its index of document openings
    (``retrieval.answers``): the query is encoded in a thread while the hybrid search
    runs, and the answer cosines re-rank its documents (``answer_fusion``)."""

    def __init__(
        self,
        embedder: Embedder,
        store: ChunkStore,
        settings: RetrievalConfig,
        *,
        answers: AnswerSource | None = None,
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.settings = settings
        self._answers = answers
        # threads start on the first query the answer model encodes: none without it
        self._answer_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="answers")
        self._cache: dict[str, np.ndarray] = {}
        self._cache_lock = threading.Lock()  # turns run in threads (server stores: no lock)

    def search(
        self,
        query: str,
        domain: str | None = None,
        *,
        answers: bool = True,
        visibility: Visibility | None = None,
        titles: TitleVocabulary = UNIFORM,
        sizes: Mapping[str, int] | None = None,
    ) -> tuple[np.ndarray, list[DocHit]]:
        """The query vector and the documents ranked by fused chunk scores, and by the
        answer model when there is one and ``answers`` is left on; among what
        ``visibility`` lets the reader see (None: everything), filtered in each search;
        ``sizes``, the KB's documents' chunk counts: each search as deep as a KB of that
        many documents needs (``candidate_depth``), and a page's passages that another
        gathers counted for the page (``gathered_copies``); title words weighed by how
        rare they are among the KB's ``titles``."""
        source = self._answers if answers else None
        pending = (
            self._answer_pool.submit(
                source.encoder.query, query[: self.settings.answers.query_chars]
            )
            if source
            else None
        )
        vector = self.embed(query)
        documents = len(sizes or ())
        dense_depth = candidate_depth(self.settings.candidates, documents)
        bm25_depth = candidate_depth(self.settings.bm25_candidates, documents)
        dense = self.store.search_dense(vector, dense_depth, domain, visibility)
        sparse = self.store.search_bm25(query, bm25_depth, domain, visibility)
        if sizes:
            copies = gathered_copies([*dense, *sparse], sizes)
            dense = [hit for hit in dense if hit.id not in copies]
            sparse = [hit for hit in sparse if hit.id not in copies]
        ranked = self.rank(query, vector, dense, sparse, titles, sizes)
        if source is None or pending is None:
            return vector, ranked
        try:
            query_vector = pending.result()
        except EmbeddingError as exc:  # the hybrid ranking stands without it
            log.warning("%s; this lookup is ranked without it", exc)
            return vector, ranked
        cosines = source.openings().scores(query_vector, domain)
        if visibility is not None:
            cosines = {path: cos for path, cos in cosines.items() if visibility.shows(path)}
        return vector, self.rerank(vector, ranked, cosines)

    def close(self) -> None:
        """Let the answer model's query threads go (the store is the caller's)."""
        self._answer_pool.shutdown(wait=False)

    def rerank(
        self, vector: np.ndarray, ranked: list[DocHit], cosines: dict[str, float]
    ) -> list[DocHit]:
        """``ranked`` with the answer model's best documents added and every document
        re-scored by ``answer_fusion``; unchanged when no document has an answer vector."""
        if not cosines:
            return ranked
        docs = {doc.doc_path: doc for doc in ranked}
        # the model's best documents: a partial sort, as every document has a cosine
        best = heapq.nlargest(self.settings.answers.candidates, cosines, key=cosines.__getitem__)
        extra = [path for path in best if path not in docs]
        docs.update(self.document_hits(vector, extra, 0.0))
        fused = answer_fusion(
            {path: doc.score for path, doc in docs.items()}, cosines, self.settings.answers.weight
        )
        return [
            replace(docs[path], score=score, answer=cosines.get(path), hybrid=docs[path].score)
            for path, score in sorted(fused.items(), key=lambda item: item[1], reverse=True)
        ]

    def nearest_chunks(
        self, query: str, limit: int, visibility: Visibility | None = None
    ) -> list[ChunkHit]:
        """The chunks nearest to ``query`` by dense search alone (no BM25, no fusion)."""
        return self.store.search_dense(self.embed(query), limit, None, visibility)

    def embed(self, query: str) -> np.ndarray:
        """The query's vector; the last few are cached because a governed call embeds its
        query once to infer its domain and once more to search."""
        with self._cache_lock:
            cached = self._cache.get(query)
        if cached is None:
            cached = self.embedder.embed_query(query)
            with self._cache_lock:
                if len(self._cache) >= _CACHE_SIZE:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[query] = cached
        return cached

    def document_hit(self, vector: np.ndarray, doc_path: str, score: float) -> DocHit | None:
        """A document outside the L1 candidates (e.g. an exact L0 match), scored exactly."""
        return self.document_hits(vector, [doc_path], score).get(doc_path)

    def document_hits(
        self, vector: np.ndarray, doc_paths: Sequence[str], score: float
    ) -> dict[str, DocHit]:
        """``document_hit`` for several documents, read in one store query."""
        found: dict[str, DocHit] = {}
        for path, chunks in self.store.chunks_of_documents(doc_paths).items():
            scored = sorted(
                (
                    ScoredChunk(c, _cosine(vector, c.vector), None, None)
                    for c in chunks
                    if c.vector is not None
                ),
                key=lambda c: c.similarity,
                reverse=True,
            )
            if scored:
                top = scored[0]
                found[path] = DocHit(
                    path, top.hit.title, top.hit.domain, score, top.similarity, None, scored
                )
        return found

    def rank(
        self,
        query: str,
        vector: np.ndarray,
        dense: Sequence[ChunkHit],
        sparse: Sequence[ChunkHit],
        titles: TitleVocabulary = UNIFORM,
        sizes: Mapping[str, int] | None = None,
    ) -> list[DocHit]:
        """Fuse at document level, best first.

        Each document takes its best dense cosine and its best BM25 score over its
        chunks; the two per-document lists are fused (min-max by default). Measured on
        the dev set, document-level fusion (MRR 0.947) edged out chunk-level fusion
        rolled up by max (0.943). Min-max fusion then adds ``title_weight`` times the
        share of the title the query names (``title_coverage``): dev English R@1 0.835 →
        0.865; each title word weighed by its rarity among the KB's ``titles`` (dev2
        R@1 0.906 → 0.908, dev2-answer-only 0.670 → 0.681, dev pair unchanged). Both
        lexical parts, BM25 and the title's words, count by the share of the query they
        could see (``lexical_reach``). A long document pays for the many chunks its best
        ones were drawn from (``length_prior`` over ``sizes``, its chunk counts: dev2 pair
        R@1 0.797 → 0.807, dev pair 0.839 → 0.840). Chunks inside a document are ordered
        by cosine.
        """
        chunks: dict[str, ScoredChunk] = {}
        for hit in dense:
            sim = similarity_from_score(hit.score, DENSE_METRIC)
            chunks[hit.id] = ScoredChunk(hit, sim, hit.score, None)
        for hit in sparse:
            known = chunks.get(hit.id)
            if known is not None:
                chunks[hit.id] = ScoredChunk(
                    known.hit, known.similarity, known.raw_dense, abs(hit.score)
                )
            else:
                sim = _cosine(vector, hit.vector) if hit.vector is not None else -1.0
                chunks[hit.id] = ScoredChunk(hit, sim, None, abs(hit.score))

        by_doc: dict[str, list[ScoredChunk]] = {}
        for chunk in chunks.values():
            by_doc.setdefault(chunk.hit.doc_path, []).append(chunk)
        dense_best = {
            path: max(c.similarity for c in cs if c.raw_dense is not None)
            for path, cs in by_doc.items()
            if any(c.raw_dense is not None for c in cs)
        }
        bm25_best = {
            path: max(c.raw_bm25 for c in cs if c.raw_bm25 is not None)
            for path, cs in by_doc.items()
            if any(c.raw_bm25 is not None for c in cs)
        }
        if self.settings.fusion == "rrf":
            fused = rrf_fusion(
                sorted(dense_best, key=dense_best.__getitem__, reverse=True),
                sorted(bm25_best, key=bm25_best.__getitem__, reverse=True),
                k=self.settings.rrf_k,
            )
        else:
            reach = lexical_reach(query, (f"{h.title}\n{h.text}" for h in sparse))
            fused = minmax_fusion(dense_best, bm25_best, self.settings.dense_weight, reach)
            if self.settings.title_weight:
                asked = title_words(query)
                weight = reach * self.settings.title_weight
                for path in fused:
                    title = by_doc[path][0].hit.title
                    fused[path] += weight * title_coverage(title, asked, titles)
            if sizes and self.settings.length_weight:
                fused = length_prior(fused, sizes, self.settings.length_weight)

        docs = []
        for path, score in sorted(fused.items(), key=lambda item: item[1], reverse=True):
            ordered = sorted(by_doc[path], key=lambda c: c.similarity, reverse=True)
            best = ordered[0]
            docs.append(
                DocHit(
                    doc_path=path,
                    title=best.hit.title,
                    domain=best.hit.domain,
                    score=score,
                    similarity=best.similarity,
                    raw_dense=best.raw_dense,
                    chunks=ordered,
                )
            )
        return docs


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Exact cosine of two unit vectors."""
    return float(np.clip(np.dot(a, b), -1.0, 1.0))
