"""The ``ChunkStore`` protocol: what ingestion and search need from a vector store.

``MilvusChunkStore`` (Milvus Lite, a server or Zilliz) is the production store;
``InMemoryChunkStore`` runs the same retrieval and governance logic without Milvus.
Dense scores follow Milvus' ``L2`` convention (squared distance of unit vectors), so
``similarity_from_score(score, DENSE_METRIC)`` is the exact cosine for every store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import numpy as np

from superbiz.retrieval.records import ChunkHit, ChunkRecord, ChunkWords
from superbiz.retrieval.visibility import Visibility

#: a context long work runs in, from whoever holds the stores' lock: it lets go of the lock
#: there, so that lookups run meanwhile (``flush``'s wait, an ingest's embedding and key
#: count, the statistics' computing)
Outside = Callable[[], AbstractContextManager[object]]


class ChunkStore(Protocol):
    """Chunks with a dense vector and a BM25-searchable text, grouped by document."""

    @property
    def dimension(self) -> int | None:
        """The vectors' dimension; ``None`` until the first ``ensure_collection``."""
        ...

    @property
    def upgrade(self) -> str | None:
        """What rebuilding the index would gain, where an older superbiz built it in a
        shape that still works (None: nothing to gain)."""
        ...

    def ensure_collection(self, dimension: int) -> None:
        """Create the (empty) index for ``dimension``-d vectors, or check the existing one."""
        ...

    def drop(self) -> None:
        """Remove every chunk and the index itself (a rebuild follows)."""
        ...

    def replace_document(self, doc_path: str, chunks: Sequence[ChunkRecord]) -> None:
        """Delete every chunk of ``doc_path``, then insert ``chunks``."""
        ...

    def insert(self, chunks: Sequence[ChunkRecord]) -> None:
        """Add ``chunks`` (ids no stored chunk has: an update's old chunks stay until
        ``delete_chunks`` removes them)."""
        ...

    def delete_documents(self, doc_paths: Sequence[str]) -> None: ...

    def chunk_ids(self, doc_paths: Sequence[str]) -> dict[str, set[str]]:
        """doc_path → the ids of its chunks, for ``doc_paths`` that have any."""
        ...

    def delete_chunks(self, ids: Collection[str]) -> None:
        """Delete the chunks with these ids (an updated document's earlier version)."""
        ...

    def flush(self, waiting: Outside = nullcontext) -> None:
        """Make what was written searchable at full speed; a wait for the index to build
        (which touches nothing a reader uses) runs inside ``waiting``."""
        ...

    def index_state(self, doc_paths: Sequence[str] | None) -> dict[str, tuple[int, frozenset[str]]]:
        """doc_path → (chunk count, content hashes) for ``doc_paths`` that have chunks;
        None: for every document the index holds."""
        ...

    def chunks_of(self, doc_path: str) -> list[ChunkHit]:
        """Every chunk of ``doc_path`` with its vector, in chunk order."""
        ...

    def chunks_of_documents(
        self, doc_paths: Sequence[str], *, vectors: bool = True
    ) -> dict[str, list[ChunkHit]]:
        """``chunks_of`` for several documents in one query; documents without chunks
        are left out; ``vectors=False`` may leave the chunks' vectors out."""
        ...

    def refuses(self, doc_path: str, domain: str) -> str | None:
        """Why this store cannot hold a document of ``doc_path`` in ``domain``, None when it
        can (a collection an earlier superbiz made holds shorter keys than a path may be)."""
        ...

    def vectors_by_words(self, doc_paths: Sequence[str]) -> dict[ChunkWords, np.ndarray]:
        """The vectors of ``doc_paths``' chunks by what each was embedded from: an update
        embeds only the chunks whose words changed. A chunk whose words the store cut
        short is left out (another text may share what was kept)."""
        ...

    def search_dense(
        self,
        vector: np.ndarray,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        """Nearest chunks first; ``score`` is the squared L2 distance. ``visibility``
        filters inside the search (``Visibility.admits_chunk``)."""
        ...

    def search_bm25(
        self,
        text: str,
        limit: int,
        domain: str | None = None,
        visibility: Visibility | None = None,
    ) -> list[ChunkHit]:
        """Best BM25 hits first; ``abs(score)`` is the BM25 score, ``vector`` is set."""
        ...

    def close(self) -> None: ...
