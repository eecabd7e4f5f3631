"""Fixtures of the knowledge tests: a fresh embedded knowledge base, and what it stored of a
document."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


@pytest.fixture
def kb(
    tmp_path: Path, make_settings: Callable[..., Any], use_embedder: Embedder
) -> Iterator[KnowledgeBase]:
    """An empty knowledge base on the embedded defaults (Milvus Lite, SQLite)."""
    knowledge = KnowledgeBase(make_settings(tmp_path), embedder=use_embedder)
    yield knowledge
    knowledge.close()


@pytest.fixture
def stored_text() -> Callable[[KnowledgeBase, str], str]:
    """``stored_text(kb, path)``: the text of the document at ``path`` as its chunks hold it."""

    def text(kb: KnowledgeBase, path: str) -> str:
        return "\n".join(chunk.text for chunk in kb.store.chunks_of(path))

    return text
