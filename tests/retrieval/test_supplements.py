"""Which documents are shown beside the primary: each on its own evidence (a cosine under
highly relevant needs BM25 or the answer model to agree), in the query's language unless
its cosine alone is highly relevant."""

from __future__ import annotations

import pytest

from superbiz._text import Language
from superbiz.retrieval.pipeline import document_language, supplements
from superbiz.retrieval.records import ChunkHit
from superbiz.retrieval.relevance import Thresholds
from superbiz.retrieval.search import DocHit, ScoredChunk

THRESHOLDS = Thresholds(highly_relevant=0.6, reference=0.3)
EN_TEXT = "Check the NTP daemon and the clock offset of the node."
ZH_TEXT = "同步延迟时，先检查下游集群的负载和网络，再调整并发度。"


def doc(
    path: str,
    score: float,
    similarity: float,
    text: str = EN_TEXT,
    *,
    bm25: bool = True,
    answer: float | None = None,
) -> DocHit:
    """A one-chunk document; ``bm25``: its chunk was a BM25 hit (it shares query terms);
    ``answer``: the answer model's cosine with its opening."""
    hit = ChunkHit(f"{path}#0", path, "ops", path, "", 0, text, score)
    chunk = ScoredChunk(hit, similarity, 0.0, 1.0 if bm25 else None)
    return DocHit(path, path, "ops", score, similarity, None, [chunk], answer=answer)


def shown(
    rest: list[DocHit],
    *,
    top_similarity: float = 0.7,
    limit: int = 4,
    language: Language = "en",
    margin: float | None = 0.1,
) -> list[str]:
    top = doc("primary", 1.0, top_similarity)
    found = supplements(
        top, rest, THRESHOLDS, limit, language=language, margin=margin, answer_reference=0.85
    )
    return [d.doc_path for d in found]


def test_a_cosine_must_come_near_the_primarys() -> None:
    rest = [doc("near", 0.2, 0.65), doc("far", 0.2, 0.45), doc("edge", 0.2, 0.6)]
    assert shown(rest) == ["near", "edge"]  # 0.45 is above reference but 0.25 below the top
    assert shown(rest, margin=0.3) == ["near", "far", "edge"]


def test_without_a_margin_any_cosine_above_reference_qualifies() -> None:
    rest = [doc("near", 0.2, 0.65), doc("far", 0.2, 0.45), doc("below", 0.2, 0.25)]
    assert shown(rest, margin=None) == ["near", "far"]


def test_the_reference_threshold_still_bounds_a_low_primary() -> None:
    # the primary (e.g. an exact match) has cosine 0.32: "within 0.1" would admit 0.25
    assert shown([doc("low", 0.2, 0.25), doc("ok", 0.2, 0.31)], top_similarity=0.32) == ["ok"]


def test_a_high_fused_score_qualifies_without_cosine() -> None:
    # BM25 evidence lifts a document whose cosine is far below the reference
    assert shown([doc("lexical", 0.6, 0.12), doc("weak", 0.4, 0.12)]) == ["lexical"]


def test_a_cosine_under_highly_relevant_needs_a_second_witness() -> None:
    rest = [
        doc("dense-only", 0.2, 0.65, bm25=False),  # highly relevant: enough on its own
        doc("neighbour", 0.2, 0.55, bm25=False),  # near the primary, but nothing else says so
        doc("terms", 0.2, 0.55),  # BM25 found it too
        doc("answered", 0.2, 0.55, bm25=False, answer=0.9),  # the answer model agrees
        doc("unsure", 0.2, 0.55, bm25=False, answer=0.8),  # under its reference level
    ]
    assert shown(rest, top_similarity=0.6) == ["dense-only", "terms", "answered"]
    # the fused score stays a witness of its own (it carries the BM25 or dense rank)
    assert shown([doc("fused", 0.6, 0.55, bm25=False)], top_similarity=0.6) == ["fused"]


def test_another_language_needs_a_highly_relevant_cosine_or_shared_terms() -> None:
    rest = [
        doc("zh-fused", 0.9, 0.5, ZH_TEXT, bm25=False),  # a high fused score, its cosine alone
        doc("zh-terms", 0.6, 0.2, ZH_TEXT),  # the query's own terms, e.g. "Redis"
        doc("zh-cosine", 0.2, 0.65, ZH_TEXT, bm25=False),
        doc("zh-weak-terms", 0.3, 0.68, ZH_TEXT),
    ]
    assert shown(rest, margin=None) == ["zh-terms", "zh-cosine", "zh-weak-terms"]
    assert shown(rest, language="zh", margin=None) == [
        "zh-fused",
        "zh-terms",
        "zh-cosine",
        "zh-weak-terms",
    ]


def test_the_limit_counts_only_qualifying_documents() -> None:
    rest = [doc("far", 0.1, 0.1), doc("a", 0.9, 0.7), doc("b", 0.9, 0.7), doc("c", 0.9, 0.7)]
    assert shown(rest, limit=2) == ["a", "b"]
    assert shown(rest, limit=0) == []


@pytest.mark.parametrize(
    ("title", "text", "language"),
    [
        ("NodeClockSkewDetected", EN_TEXT, "en"),
        ("TiDB 数据迁移常见问题", ZH_TEXT, "zh"),
        ("TiCDC 常见问题", "TiCDC 的 changefeed 同步中断时，使用 cdc cli 查看状态。", "zh"),
    ],
)
def test_document_language(title: str, text: str, language: str) -> None:
    hit = doc("p", 1.0, 1.0, text)
    hit.title = title
    assert document_language(hit) == language
