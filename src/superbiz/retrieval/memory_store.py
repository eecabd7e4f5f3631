"""``InMemoryChunkStore``: a small, exact ``ChunkStore`` in process memory.

For tests and for library users who want retrieval without Milvus. Dense search is
exhaustive with Milvus' score convention (squared L2 of unit vectors); BM25 is Okapi
BM25 over the same tokens as Milvus' analyzer (jieba, lowercase, ``BM25_STOP_WORDS``),
with statistics over the whole store (as Milvus keeps them) and the domain and
visibility filters applied before scoring.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext

import numpy as np

from superbiz._text import normalize, segmenter
from superbiz.exceptions import IndexMismatchError
from superbiz.retrieval.records import BM25_STOP_WORDS, ChunkHit, ChunkRecord, ChunkWords
from superbiz.retrieval.store import Outside
from superbiz.retrieval.visibility import Visibility

#: Okapi BM25 parameters (Milvus' defaults)
BM25_K1 = 1.2
BM25_B = 0.75

_STOP = frozenset(BM25_STOP_WORDS)
_WORD = re.compile(r"\w")


def bm25_tokens(text: str) -> list[str]:
    """The terms BM25 counts: jieba tokens, lowercased, without stop words or punctuation.

    >>> bm25_tokens("The Redis 连接池耗尽了？")
    ['redis', '连接池', '耗尽']
    """
    return [
        token
        for token in (t.strip() for t in segmenter().cut(normalize(text)))
        if token and _WORD.search(token) and token not in _STOP
    ]


class InMemoryChunkStore:
    """Implements ``ChunkStore`` with dictionaries and numpy; nothing is persisted."""

    def __init__(self) -> None:
        self.dimension: int | None = None
        self.upgrade: str | None = None  # nothing is built to be rebuilt
        self._chunks: dict[str, ChunkRecord] = {}
        self._terms: dict[str, Counter[str]] = {}

    def ensure_collection(self, dimension: int) -> None:
        if self.dimension is not None and self.dimension != dimension:
            raise IndexMismatchError(
                f"the vector index holds {self.dimension}-d vectors but the embedder "
                f"makes {dimension}-d ones"
            )
        self.dimension = dimension

    def drop(self) -> None:
        self._chunks.clear()
        self._terms.clear()
        self.dimension = None

    def replace_document(self, doc_path: str, chunks: Sequence[ChunkRecord]) -> None:
        self.delete_documents([doc_path])
        self.insert(chunks)

    def insert(self, chunks: Sequence[ChunkRecord]) -> None:
        for chunk in chunks:
            self._chunks[chunk.id] = chunk
            self._terms[chunk.id] = Counter(bm25_tokens(chunk.search_text))

    def delete_documents(self, doc_paths: Sequence[str]) -> None:
        doomed = set(doc_paths)
        self._remove(lambda path: path in doomed)

    def chunk_ids(self, doc_paths: Sequence[str]) -> dict[str, set[str]]:
        wanted = set(doc_paths)
        found: dict[str, set[str]] = {}
        for chunk in self._chunks.values():
            if chunk.doc_path in wanted:
                found.setdefault(chunk.doc_path, set()).add(chunk.id)
        return found

    def delete_chunks(self, ids: Collection[str]) -> None:
        for chunk_id in ids:
            self._chunks.pop(chunk_id, None)
            self._terms.pop(chunk_id, None)

    def flush(self, waiting: Outside = nullcontext) -> None:
        """Nothing to seal: every write is searchable at once."""

    def index_state(self, doc_paths: Sequence[str] | None) -> dict[str, tuple[int, frozenset[str]]]:
        wanted = None if doc_paths is None else set(doc_paths)
        counts: Counter[str] = Counter()
        hashes: dict[str, set[str]] = {}
        for chunk in self._chunks.values():
            if wanted is None or chunk.doc_path in wanted:
                counts[chunk.doc_path] += 1
                hashes.setdefault(chunk.doc_path, set()).add(chunk.content_hash)
        return {path: (counts[path], frozenset(hashes[path])) for path in counts}

    def chunks_of(self, doc_path: str) -> list[ChunkHit]:
        chunks = [c for c in self._chunks.values() if c.doc_path == doc_path]
        return [_hit(c, float("nan")) for c in sorted(chunks, key=lambda c: c.chunk_index)]

    def chunks_of_documents(
        self, doc_paths: Sequence[str], *, vectors: bool = True
    ) -> dict[str, list[ChunkHit]]:
        return {path: hits for path in doc_paths if (hits := self.chunks_of(path))}

    def refuses(self, doc_path: str, domain: str) -> str | None:
        return None  # any key fits

    def vectors_by_words(self, doc_paths: Sequence[str]) -> dict[ChunkWords, np.ndarray]:
        wanted = set(doc_paths)
        if not wanted:  # a group of new documents: no pass over the store
            return {}
        return {
            ChunkWords(c.search_text, c.heading, c.text): np.asarray(c.vector, dtype=np.float32)
            for c in self._chunks.values()
            if c.doc_path in wanted
        }

    def search_dense(
        self,
        vector: np.ndarray,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        chunks = self._searched(domain, visibility)
        if not chunks:
            return []
        matrix = np.stack([np.asarray(c.vector, dtype=np.float32) for c in chunks])
        query = np.asarray(vector, dtype=np.float32)
        distances = ((matrix - query) ** 2).sum(axis=1)
        order = np.argsort(distances, kind="stable")[:limit]
        return [_hit(chunks[i], float(distances[i])) for i in order]

    def search_bm25(
        self,
        text: str,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        terms = set(bm25_tokens(text))
        if not terms or not self._chunks:
            return []
        total = len(self._terms)
        average = sum(sum(tf.values()) for tf in self._terms.values()) / total
        idf = {
            term: math.log(1 + (total - df + 0.5) / (df + 0.5))
            for term in terms
            for df in [sum(1 for tf in self._terms.values() if term in tf)]
        }
        scored: list[tuple[float, ChunkRecord]] = []
        for chunk in self._searched(domain, visibility):
            tf = self._terms[chunk.id]
            norm = BM25_K1 * (1 - BM25_B + BM25_B * sum(tf.values()) / average)
            score = sum(
                idf[term] * tf[term] * (BM25_K1 + 1) / (tf[term] + norm)
                for term in terms
                if term in tf
            )
            if score > 0:
                scored.append((score, chunk))
        scored.sort(key=lambda item: item[0], reverse=True)
        return [_hit(chunk, score) for score, chunk in scored[:limit]]

    def close(self) -> None:
        """Nothing to release."""

    def _searched(self, domain: str | None, visibility: Visibility | None) -> list[ChunkRecord]:
        """The chunks a search ranks: of ``domain``, and that ``visibility`` admits."""
        return [
            c
            for c in self._chunks.values()
            if (domain is None or c.domain == domain)
            and (visibility is None or visibility.admits_chunk(c.domain, c.access))
        ]

    def _remove(self, doomed: Callable[[str], bool]) -> None:
        for chunk_id in [i for i, c in self._chunks.items() if doomed(c.doc_path)]:
            del self._chunks[chunk_id]
            del self._terms[chunk_id]


def _hit(chunk: ChunkRecord, score: float) -> ChunkHit:
    return ChunkHit(
        id=chunk.id,
        doc_path=chunk.doc_path,
        domain=chunk.domain,
        title=chunk.title,
        heading=chunk.heading,
        chunk_index=chunk.chunk_index,
        text=chunk.text,
        score=score,
        vector=np.asarray(chunk.vector, dtype=np.float32),
    )
