"""The BM25 analyzer Milvus builds from ``BM25_ANALYZER``: what a question's function words
and punctuation contribute (nothing), checked with Milvus Lite's own analyzer."""

from __future__ import annotations

import pytest

from superbiz.retrieval.memory_store import bm25_tokens
from superbiz.retrieval.records import BM25_ANALYZER

create_analyzer = pytest.importorskip("milvus_lite.analyzer.factory").create_analyzer


def test_lite_drops_punctuation_markdown_and_function_words() -> None:
    analyzer = create_analyzer(BM25_ANALYZER)
    tokens = analyzer.tokenize("## TiKV 如何扩容？是否需要重启，the Region 的 leader 吗")
    assert {"tikv", "扩容", "重启", "region", "leader"} <= set(tokens)
    assert not {"##", "？", "，", "如何", "是否", "的", "吗", "the"} & set(tokens)


def test_the_in_memory_store_drops_the_same_terms() -> None:
    analyzer = create_analyzer(BM25_ANALYZER)
    text = "PD 调度慢怎么办？the Region 的 leader -- 是否 均衡"
    assert set(bm25_tokens(text)) <= set(analyzer.tokenize(text))
    assert not {"怎么办", "？", "的", "--", "是否", "the"} & set(bm25_tokens(text))
