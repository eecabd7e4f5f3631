"""The knowledge base's version-stamped cache: a value is built again only when asked at
another change count, and a build that fails leaves nothing stamped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.cache import Versioned
from superbiz.retrieval.memory_store import InMemoryChunkStore


def test_a_value_is_built_once_per_version() -> None:
    builds: list[int] = []
    cache = Versioned(lambda: builds.append(len(builds)) or len(builds))
    assert cache.get(0) == cache.get(0) == 1
    assert cache.current(0) and not cache.current(1)
    assert cache.get(1) == 2
    assert cache.get(1, fresh=True) == 3
    assert builds == [0, 1, 2]


def test_a_failed_build_is_tried_again() -> None:
    attempts: list[str] = []

    def build() -> str:
        attempts.append("x")
        if len(attempts) == 1:
            raise RuntimeError("store away")
        return "built"

    cache = Versioned(build)
    with pytest.raises(RuntimeError):
        cache.get(3)
    assert not cache.current(3)
    assert cache.get(3) == "built"
    assert len(attempts) == 2


def test_none_is_a_value_like_any_other() -> None:
    """A measurement not stored yet (None) is read once per version, not every time."""
    reads: list[None] = []
    cache: Versioned[None] = Versioned(lambda: reads.append(None))
    assert cache.get(0) is None and cache.get(0) is None
    assert len(reads) == 1


def test_a_change_rebuilds_the_caches_and_the_index_by_difference(
    tmp_path: Path, make_settings: Callable[..., Any], small_kb: Path, use_embedder: Any
) -> None:
    kb = KnowledgeBase(make_settings(tmp_path), embedder=use_embedder, store=InMemoryChunkStore())
    try:
        ingestor = Ingestor(kb)
        first = ingestor.ingest([small_kb])
        # each run is its own: the second reports nothing of the first
        second = ingestor.ingest([small_kb])
        assert first.added and not second.added
        assert sorted(second.unchanged) == sorted(first.added)

        rules, exact, retriever = kb.access_rules, kb.exact_index, kb.retriever
        assert kb.access_rules is rules and kb.retriever is retriever
        redone = kb.work["exact_entries"]
        kb.changed()
        assert kb.access_rules is not rules and kb.retriever is not retriever
        assert kb.exact_index is exact  # one index, brought up to date by difference
        assert kb.work["exact_entries"] == redone  # no document changed: no entry redone
    finally:
        kb.close()
