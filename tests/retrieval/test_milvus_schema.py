"""A chunk's row fits its collection's fields as a Milvus server counts them: in UTF-8 bytes.

Milvus Lite checks a VARCHAR's length in characters, a Milvus server in bytes, so a CJK
title of 400 characters (1,200 bytes) passed Lite and was refused by a server's 1,024.
The schema's own sizes are read here (pymilvus builds it, as a store does), and the
longest values a document may have go through ``chunk_row``; then a real Lite file takes
and gives back such a row.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pymilvus import DataType, MilvusClient

from conftest import write_kb
from fakes.records import chunk_record
from superbiz.access import GROUP_MAX, GROUPS_MAX, encode_access
from superbiz.config import Settings, VectorSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval import milvus_schema
from superbiz.retrieval.milvus_schema import (
    HEADING_MAX,
    chunk_collection,
    chunk_row,
    cut_to_bytes,
    kept_whole,
)
from superbiz.retrieval.vector_store import BM25_ANALYZER, MilvusChunkStore
from superbiz.storage.models import DOMAIN_MAX, PATH_MAX, TITLE_MAX

CJK = "订单退款超时"  # three bytes a character
EMOJI = "🚨"  # four
SHORT = "# Restart\n\nRestart the worker after a deploy.\n"


def longest_chunk(char: str) -> tuple[str, str]:
    """A path and domain as long as a document's may be, in ``char``s."""
    return f"{char * (PATH_MAX - 3)}.md", char * DOMAIN_MAX


@pytest.mark.parametrize("char", [CJK[0], EMOJI, "a"])
def test_every_field_of_a_longest_row_fits_in_utf8_bytes(char: str) -> None:
    schema, _ = chunk_collection(MilvusClient, 8, BM25_ANALYZER)
    sizes = {
        field.name: field.params["max_length"]
        for field in schema.fields
        if field.dtype == DataType.VARCHAR
    }
    path, domain = longest_chunk(char)
    record = chunk_record(
        path,
        np.ones(8),
        char * 6000,
        domain=domain,
        title=char * TITLE_MAX,
        heading=char * 3000,
        chunk_id="c" * 64,
        content_hash="f" * 64,
    )
    groups = [f"{n:02}{char * (GROUP_MAX - 2)}" for n in range(GROUPS_MAX)]
    row = chunk_row(dataclasses.replace(record, access=encode_access(groups)), access=True)
    over = {
        name: len(row[name].encode())
        for name, size in sizes.items()
        if len(row[name].encode()) > size
    }
    assert not over, f"over their fields' {sizes}: {over}"
    assert row["doc_path"] == path and row["domain"] == domain  # keys, never cut


def test_a_cut_keeps_whole_characters_and_kept_whole_knows_a_cut_heading() -> None:
    assert cut_to_bytes(CJK, 8) == CJK[:2]
    assert cut_to_bytes(EMOJI * 3, 9) == EMOJI * 2
    assert cut_to_bytes(CJK, 18) == CJK
    cut = cut_to_bytes(CJK * 200, HEADING_MAX)
    assert len(cut.encode()) == HEADING_MAX - 2  # 682 characters: the 683rd does not fit
    assert not kept_whole({"search_text": "s", "heading": cut})
    assert kept_whole({"search_text": "s", "heading": CJK * 100})  # 1,800 bytes, uncut


def test_a_lite_file_takes_a_long_cjk_row_and_gives_it_back(tmp_path: Path) -> None:
    store = MilvusChunkStore(str(tmp_path / "kb.db"), "chunks")
    path, domain = longest_chunk(CJK[0])
    heading = CJK * 200
    try:
        store.ensure_collection(8)
        title = CJK * 80
        record = chunk_record(path, np.ones(8), "退款", domain=domain, title=title, heading=heading)
        store.insert([dataclasses.replace(record, id="c1")])
        (hit,) = store.chunks_of(path)
        assert hit.domain == domain
        assert hit.heading == cut_to_bytes(heading, HEADING_MAX)
        assert hit.title == cut_to_bytes(title, 1024)
        assert store.vectors_by_words([path]) == {}  # its heading was cut: embedded again
    finally:
        store.close()


def test_a_path_an_earlier_collection_cannot_hold_is_a_skipped_file_not_a_failed_ingest(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    milvus_server: Any,
    milvus_collection: str,
    database_url: str,
    use_embedder: Any,
) -> None:
    """On a Milvus server a collection an earlier superbiz made holds paths of 1,024
    bytes: a longer one is skipped with its reason, and the other files go in."""
    vector = VectorSettings(uri=milvus_server.uri, collection=milvus_collection)
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, vector=vector)
    earlier = MilvusChunkStore(vector.uri, vector.collection)
    with monkeypatch.context() as before:
        before.setitem(milvus_schema.KEY_BYTES, "doc_path", 1024)
        earlier.ensure_collection(use_embedder.dimension)
    earlier.close()
    long_path = "运维手册/" * 80 + "值班.md"  # 405 characters, 1,049 bytes
    files = {long_path: "# 值班\n\n交接班时核对告警。\n", "ops/a.md": SHORT}
    root = write_kb(tmp_path / "kb", files)
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        report = Ingestor(kb).ingest([root])
        assert report.added == ["ops/a.md"]
        ((path, reason),) = report.skipped
        assert path == long_path and "1,049 bytes, longer than the 1,024" in reason
        assert "--rebuild" in reason
    finally:
        kb.close()
