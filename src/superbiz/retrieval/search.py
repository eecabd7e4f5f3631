"""L1: hybrid search (dense + BM25) over chunks, fused and rolled up to documents."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from superbiz.config import RetrievalSettings
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.fusion import minmax_fusion, rrf_fusion
from superbiz.retrieval.relevance import similarity_from_score
from superbiz.retrieval.vector_store import DENSE_METRIC, ChunkHit, MilvusChunkStore


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    hit: ChunkHit
    fused: float
    similarity: float
    raw_dense: float | None  # the backend's squared L2 distance, when it returned one
    raw_bm25: float | None


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


class HybridSearcher:
    def __init__(
        self, embedder: Embedder, store: MilvusChunkStore, settings: RetrievalSettings
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.settings = settings

    def search(self, query: str, domain: str | None = None) -> tuple[np.ndarray, list[DocHit]]:
        """The query vector and the documents ranked by fused chunk scores."""
        vector = self.embedder.embed_query(query)
        limit = self.settings.candidates
        dense = self.store.search_dense(vector, limit, domain)
        sparse = self.store.search_bm25(query, limit, domain)
        return vector, self.rank(vector, dense, sparse)

    def document_hit(self, vector: np.ndarray, doc_path: str, score: float) -> DocHit | None:
        """A document outside the L1 candidates (e.g. an exact L0 match), scored exactly."""
        chunks = self.store.chunks_of(doc_path)
        if not chunks:
            return None
        scored = sorted(
            (
                ScoredChunk(c, score, float(np.clip(np.dot(vector, c.vector), -1, 1)), None, None)
                for c in chunks
                if c.vector is not None
            ),
            key=lambda c: c.similarity,
            reverse=True,
        )
        if not scored:
            return None
        top = scored[0]
        return DocHit(doc_path, top.hit.title, top.hit.domain, score, top.similarity, None, scored)

    def rank(
        self, vector: np.ndarray, dense: Sequence[ChunkHit], sparse: Sequence[ChunkHit]
    ) -> list[DocHit]:
        """Fuse chunk hits and roll them up to documents, best first."""
        max_l2 = self.settings.normalization.max_l2_distance
        hits: dict[str, ChunkHit] = {}
        sims: dict[str, float] = {}
        raw_dense: dict[str, float] = {}
        for hit in dense:
            hits[hit.id] = hit
            raw_dense[hit.id] = hit.score
            sims[hit.id] = similarity_from_score(hit.score, DENSE_METRIC, max_l2)
        raw_bm25 = {hit.id: abs(hit.score) for hit in sparse}
        for hit in sparse:
            hits.setdefault(hit.id, hit)
            if hit.id not in sims and hit.vector is not None:
                sims[hit.id] = float(np.clip(np.dot(vector, hit.vector), -1.0, 1.0))
        if self.settings.fusion == "rrf":
            fused = rrf_fusion([h.id for h in dense], [h.id for h in sparse], k=self.settings.rrf_k)
        else:
            dense_sims = {h.id: sims[h.id] for h in dense}
            fused = minmax_fusion(dense_sims, raw_bm25, self.settings.dense_weight)

        docs: dict[str, DocHit] = {}
        for chunk_id in sorted(fused, key=fused.__getitem__, reverse=True):
            hit = hits[chunk_id]
            scored = ScoredChunk(
                hit=hit,
                fused=fused[chunk_id],
                similarity=sims.get(chunk_id, -math.inf),
                raw_dense=raw_dense.get(chunk_id),
                raw_bm25=raw_bm25.get(chunk_id),
            )
            doc = docs.get(hit.doc_path)
            if doc is None:
                docs[hit.doc_path] = DocHit(
                    hit.doc_path,
                    hit.title,
                    hit.domain,
                    scored.fused,
                    scored.similarity,
                    scored.raw_dense,
                    [scored],
                )
                continue
            doc.chunks.append(scored)
            if scored.similarity > doc.similarity:
                doc.similarity, doc.raw_dense = scored.similarity, scored.raw_dense
        return sorted(docs.values(), key=lambda d: d.score, reverse=True)
