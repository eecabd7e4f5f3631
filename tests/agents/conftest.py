"""Fixtures shared by the agent tests."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest

from superbiz.config import Settings
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


@pytest.fixture(scope="module")
def example_kb(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Embedder
) -> Iterator[KnowledgeBase]:
    """The example corpus the real-model transcripts were recorded on, ingested without
    an LLM (once per module)."""
    root = tmp_path_factory.mktemp("example-kb")
    kb = KnowledgeBase(Settings(data_dir=root / "data"), embedder=use_embedder)
    corpus = Path(str(resources.files("superbiz") / "examples" / "corpus"))
    try:
        Ingestor(kb, domains=DomainService(kb)).ingest([corpus])
        yield kb
    finally:
        kb.close()
