"""Conversions are bounded in memory and time: a file that inflates past
``ingest.convert-memory-mb`` or converts longer than ``ingest.convert-timeout-s`` is a
skipped file with the reason, the run goes on, and the files after it convert (a fresh
converter process), on SQLite and PostgreSQL with the real USE embedder and Milvus Lite.
The bombs are written by ``superbiz.evaluation._bombs`` (the same ``eval bombs`` uses)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import write_kb
from superbiz.evaluation._bombs import docx_bomb, html_entity_bomb, pdf_stream_bomb, text_pdf
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

#: a stream of 400 MB of ``q Q`` (PDFium held about twice that), 0.4 MB on disk
SMALL_PDF_BOMB = 100_000_000


def test_files_that_inflate_past_the_memory_bound_are_skipped_and_the_run_goes_on(
    tmp_path: Path,
    database_url: str,
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
) -> None:
    """A 1.17 MB PDF whose stream inflates to 1.2 GB drove ``superbiz ingest`` to 2.58 GB
    before it was skipped as "no text layer"; a 172 KB .docx of 47 MB of XML took 843 MB
    and 255 s. Here the converter's memory is capped at 128 MB."""
    folder = write_kb(
        tmp_path / "kb",
        {
            "manuals/bomb.pdf": pdf_stream_bomb(SMALL_PDF_BOMB),
            "manuals/bomb.docx": docx_bomb(),
            "manuals/entities.html": html_entity_bomb(200_000),
            "manuals/gateway.pdf": text_pdf(pages=30),
            "ops/deploy.md": "# Deploy\n\nFreeze the release branch first.\n",
        },
    )
    settings = make_settings(tmp_path, database_url, ingest={"convert_memory_mb": 128})
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        report = Ingestor(kb).ingest([folder])
        reasons = dict(report.skipped)
        memory = "converting it needs more than 128 MB of memory (ingest.convert-memory-mb)"
        assert reasons["manuals/bomb.pdf"].startswith(memory)
        assert reasons["manuals/bomb.docx"].startswith(memory)
        assert sorted(report.added) == [
            "manuals/entities.html",
            "manuals/gateway.pdf",
            "ops/deploy.md",
        ]
        gateway = kb.documents.get("manuals/gateway.pdf")
        assert gateway is not None and gateway.chunk_count > 0
        assert kb.retrieve("Section 17 gateway runbook").ranked[0].doc_path == "manuals/gateway.pdf"
        # the entities are never expanded: the page is read as the text it is
        entities = kb.store.chunks_of("manuals/entities.html")
        assert entities and "lollol" not in entities[0].text
    finally:
        kb.close()


def test_a_conversion_past_the_time_bound_is_skipped_with_the_reason(
    tmp_path: Path,
    database_url: str,
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
) -> None:
    page = "<html><body>" + "<p>a</p>" * 600_000 + "</body></html>"  # 4.8 MB: seconds
    folder = write_kb(
        tmp_path / "kb", {"wiki/slow.html": page, "ops/deploy.md": "# Deploy\n\nFreeze first.\n"}
    )
    settings = make_settings(
        tmp_path, database_url, ingest={"convert_timeout_s": 0.3, "max_file_bytes": 6_000_000}
    )
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        report = Ingestor(kb).ingest([folder])
        assert dict(report.skipped) == {
            "wiki/slow.html": "conversion took longer than 0.3 s (ingest.convert-timeout-s): "
            "refused"
        }
        assert report.added == ["ops/deploy.md"]
    finally:
        kb.close()
