"""Chunks as a store writes them, for tests that fill a store without an ingest.

``chunk_record`` gives one ``ChunkRecord`` with the fields a test rarely cares about
filled the way an ingest fills them for a one-section document: its id is
``<doc>#<index>``, its title the path, no heading, and BM25 indexes the text shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from superbiz.retrieval.records import ChunkRecord


def chunk_record(
    doc: str,
    vector: Sequence[float] | np.ndarray,
    text: str = "",
    *,
    index: int = 0,
    domain: str = "ops",
    title: str | None = None,
    heading: str = "",
    content_hash: str = "h",
    search_text: str | None = None,
    chunk_id: str | None = None,
) -> ChunkRecord:
    """Chunk ``index`` of ``doc`` with ``vector`` (as float32) and ``text``."""
    return ChunkRecord(
        id=chunk_id if chunk_id is not None else f"{doc}#{index}",
        doc_path=doc,
        domain=domain,
        title=doc if title is None else title,
        heading=heading,
        chunk_index=index,
        content_hash=content_hash,
        text=text,
        search_text=text if search_text is None else search_text,
        vector=np.asarray(vector, dtype=np.float32),
    )
