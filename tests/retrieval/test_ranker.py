"""The learned ranker: the features it reads of each candidate, its file, and what it does
to a ranking (in the pipeline too, on an in-memory store with chosen vectors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fakes.embedders import TableEmbedder
from fakes.records import chunk_record
from superbiz.config import RetrievalConfig
from superbiz.exceptions import ConfigError
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex, ExactMatch, MatchField
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.pipeline import Retriever
from superbiz.retrieval.ranker import (
    ANSWER_FEATURES,
    FEATURES,
    LinearRanker,
    RankerModels,
    TreeRanker,
    candidate_features,
    load_rankers,
    rerank,
    shipped_rankers,
)
from superbiz.retrieval.records import ChunkHit
from superbiz.retrieval.relevance import RelevanceLevel, Thresholds
from superbiz.retrieval.search import DocHit, HybridSearcher, ScoredChunk


def chunk(
    path: str,
    index: int,
    text: str,
    *,
    heading: str = "",
    similarity: float = 0.3,
    dense: bool = True,
    bm25: float | None = None,
) -> ScoredChunk:
    hit = ChunkHit(f"{path}#{index}", path, "ops", path, heading, index, text, 0.0)
    return ScoredChunk(hit, similarity, 0.5 if dense else None, bm25)


def doc(
    path: str, title: str, chunks: list[ScoredChunk], score: float, answer: float | None = None
) -> DocHit:
    best = max(c.similarity for c in chunks)
    return DocHit(path, title, "ops", score, best, 0.5, chunks, answer=answer)


def column(matrix: np.ndarray, name: str) -> list[float]:
    names = FEATURES + ANSWER_FEATURES
    return [round(float(v), 4) for v in matrix[:, names.index(name)]]


QUERY = "Redis 连接池 耗尽 deploy"
RANKED = [
    doc(
        "a.md",
        "Kafka lag",
        [chunk("a.md", 2, "consumer backlog grows", similarity=0.5, bm25=None)],
        score=1.0,
    ),
    doc(
        "b.md",
        "Redis 连接池",
        [
            chunk("b.md", 0, "连接池耗尽时先看慢查询", heading="处理", similarity=0.4, bm25=6.0),
            chunk("b.md", 1, "归还连接", heading="处理", similarity=0.2, dense=False, bm25=2.0),
        ],
        score=0.8,
    ),
    doc(
        "c.md",
        "Deploy checklist",
        [chunk("c.md", 0, "freeze the branch " * 20, similarity=0.1, dense=False, bm25=4.0)],
        score=0.3,
    ),
]
MATCHES = [
    ExactMatch("b.md", "Redis 连接池", "ops", MatchField.TITLE, "redis 连接池"),
    ExactMatch("c.md", "Deploy checklist", "ops", MatchField.TAG, "deploy"),
]


def test_features_read_each_candidate_on_the_query_s_scale() -> None:
    matrix = candidate_features(QUERY, RANKED, MATCHES)
    assert matrix.shape == (3, len(FEATURES))
    assert column(matrix, "hybrid") == [1.0, 0.8, 0.3]
    assert column(matrix, "dense_gap") == [0.0, -0.1, -0.4]
    # ranks among the documents each search returned; 0 where it did not return one
    assert column(matrix, "dense_rr") == [1.0, 0.5, 0.0]
    assert column(matrix, "bm25_rr") == [0.0, 1.0, 0.5]
    # BM25 over the query's largest: best chunk 6 of 6, sum 8 of 8, a section 8 of 8
    assert column(matrix, "bm25") == [0.0, 1.0, round(4 / 6, 4)]
    assert column(matrix, "bm25_document") == [0.0, 1.0, 0.5]
    assert column(matrix, "bm25_section") == [0.0, 1.0, 0.5]
    assert column(matrix, "bm25_chunks") == [0.0, round(np.log(3), 4), round(np.log(2), 4)]
    assert column(matrix, "named") == [0.0, 1.0, 0.0]
    assert column(matrix, "tagged") == [0.0, 0.0, 1.0]
    # the query is Chinese (five CJK characters against two Latin words)
    assert column(matrix, "other_language") == [1.0, 0.0, 1.0]
    assert column(matrix, "opening") == [0.0, 1.0, 1.0]
    # key terms: redis, 连接池, 耗尽, deploy; "耗尽" only in b's text, "deploy" in c's title
    assert column(matrix, "heading_terms") == [0.0, 0.5, 0.25]
    assert column(matrix, "text_terms") == [0.0, 0.75, 0.25]
    assert column(matrix, "title_coverage") == [0.0, 1.0, 0.5]
    # the second round's: the fused order's ranks and gaps
    assert column(matrix, "hybrid_rr") == [1.0, 0.5, 0.3333]
    assert column(matrix, "hybrid_gap") == [0.0, -0.2, -0.7]
    # the best passage as the answer selection scores it: cosine + 0.3 × terms named
    # (b's first chunk names redis, 连接池, 耗尽 with its title: 0.4 + 0.3 × 3/4)
    assert column(matrix, "passage") == [0.5, 0.625, 0.175]
    assert column(matrix, "passage_gap") == [-0.125, 0.0, -0.45]
    assert column(matrix, "passage_terms") == [0.0, 0.75, 0.25]
    assert column(matrix, "title_terms") == [0.0, 0.5, 0.25]
    assert column(matrix, "chunk_position") == [round(np.log(3), 4), 0.0, 0.0]
    # the query's own: the same on every row
    assert column(matrix, "query_chinese") == [1.0, 1.0, 1.0]
    assert column(matrix, "query_length") == [round(np.log(5), 4)] * 3


def test_answer_features_are_only_read_for_the_answer_model() -> None:
    ranked = [
        doc("a.md", "A", [chunk("a.md", 0, "x")], 1.0, answer=0.8),
        doc("b.md", "B", [chunk("b.md", 0, "y")], 0.5, answer=0.9),
        doc("c.md", "C", [chunk("c.md", 0, "z")], 0.2),
    ]
    matrix = candidate_features("anything", ranked, [], answers=True)
    assert matrix.shape == (3, len(FEATURES) + len(ANSWER_FEATURES))
    assert column(matrix, "answer") == [0.8, 0.9, 0.0]
    assert column(matrix, "answer_gap") == [-0.1, 0.0, -1.0]


def model_on(name: str, weight: float = 1.0) -> LinearRanker:
    size = len(FEATURES)
    weights = np.zeros(size)
    weights[FEATURES.index(name)] = weight
    return LinearRanker(FEATURES, np.zeros(size), np.ones(size), weights)


def test_rerank_orders_by_the_model_and_keeps_the_hybrid_score() -> None:
    ranked = rerank(QUERY, RANKED, MATCHES, model_on("bm25_document"))
    assert [d.doc_path for d in ranked] == ["b.md", "c.md", "a.md"]
    assert [d.score for d in ranked] == [1.0, 0.5, 0.0]
    # what the supplements' rule reads is the fused hybrid score, unchanged
    assert [d.hybrid for d in ranked] == [0.8, 0.3, 1.0]
    # equal scores keep the fused order
    same = rerank(QUERY, RANKED, MATCHES, model_on("named", 0.0))
    assert [d.doc_path for d in same] == ["a.md", "b.md", "c.md"]


def test_a_ranker_file_round_trips_and_bad_ones_are_named(tmp_path: Path) -> None:
    models = RankerModels(model_on("named"), None, {"datasets": ["x"]})
    path = tmp_path / "ranker.json"
    path.write_text(models.to_json(), encoding="utf-8")
    loaded = load_rankers(path)
    assert loaded.plain is not None and loaded.answers is None
    assert loaded.plain.weights.tolist() == models.plain.weights.tolist()  # type: ignore[union-attr]
    assert loaded.for_lookup(answered=True) is None

    data = json.loads(models.to_json())
    # a model may read any of this version's features, by name; one it does not know is
    # another version's file
    data["plain"]["features"][-1] = "bm25_title"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"not this version's \(unknown: \['bm25_title'\]"):
        load_rankers(path)
    data = json.loads(models.to_json())
    data["plain"]["features"] = ["hybrid", "dense"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="one number per feature"):
        load_rankers(path)
    data = json.loads(models.to_json())
    data["plain"]["scale"][0] = 0.0
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="scale > 0"):
        load_rankers(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_rankers(tmp_path / "missing.json")


def tree_on(name: str, threshold: float) -> TreeRanker:
    """One tree: +1 when ``name`` is over ``threshold``, -1 otherwise."""
    return TreeRanker.from_dict(
        {
            "kind": "trees",
            "features": [name],
            "trees": [
                {
                    "feature": [0, 0, 0],
                    "threshold": [threshold, 0, 0],
                    "left": [1, 1, 2],
                    "right": [2, 1, 2],
                    "value": [0.0, -1.0, 1.0],
                }
            ],
        }
    )


def test_trees_score_by_their_leaves_and_round_trip(tmp_path: Path) -> None:
    two = TreeRanker.from_dict(
        {
            "features": ["bm25_document", "named"],
            "trees": [
                tree_on("bm25_document", 0.6).to_dict()["trees"][0],
                # a deeper one: named (feature 1) first, then bm25_document
                {
                    "feature": [1, 0, 0, 0, 0],
                    "threshold": [0.5, 0.25, 0, 0, 0],
                    "left": [1, 3, 2, 3, 4],
                    "right": [2, 4, 2, 3, 4],
                    "value": [0, 0, 5.0, 0.25, 0.5],
                },
            ],
        }
    )
    # bm25_document [0, 1, 0.5], named [0, 1, 0]
    assert two.scores(candidate_features(QUERY, RANKED, MATCHES)).tolist() == [-0.75, 6.0, -0.5]
    ranked = rerank(QUERY, RANKED, MATCHES, two)
    assert [d.doc_path for d in ranked] == ["b.md", "c.md", "a.md"]
    path = tmp_path / "trees.json"
    path.write_text(RankerModels(two, None, {}).to_json(), encoding="utf-8")
    loaded = load_rankers(path).plain
    assert isinstance(loaded, TreeRanker)
    assert loaded.scores(candidate_features(QUERY, RANKED, MATCHES)).tolist() == [-0.75, 6.0, -0.5]

    data = json.loads(path.read_text())
    data["plain"]["trees"][1]["left"][0] = 0  # a node that is its own child on one side
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="children come after"):
        load_rankers(path)
    data["plain"]["trees"] = []
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="at least one tree"):
        load_rankers(path)
    data["plain"]["kind"] = "forest"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="neither linear nor trees"):
        load_rankers(path)


def test_the_shipped_file_has_both_models() -> None:
    shipped = shipped_rankers()
    assert isinstance(shipped.plain, TreeRanker) and shipped.plain.features == FEATURES
    assert shipped.answers is not None and shipped.answers.answers
    assert shipped.fitted["datasets"] == ["dev", "dev-answer-only", "dev2", "dev2-answer-only"]


def test_a_lookup_ranks_with_the_file_and_levels_the_new_primary(tmp_path: Path) -> None:
    """The pipeline re-scores its candidates with ``advanced.retrieval.ranker: learned``;
    the level is read on the primary it puts first (a document under another's cosine
    leads nothing, so it is no HIGHLY_RELEVANT), and ``fused`` leaves the ranking alone."""
    vectors = {"redis.md": (1.0, 0.0), "kafka.md": (0.7, float(np.sqrt(1 - 0.49)))}
    store = InMemoryChunkStore()
    store.ensure_collection(2)
    for path, vector in vectors.items():
        store.replace_document(path, [chunk_record(path, vector, "pool")])
    index = ExactIndex([ExactEntry(path, path, "ops") for path in vectors])
    path = tmp_path / "ranker.json"
    # a model that prefers the lower cosine: what a ranker trained elsewhere may do
    path.write_text(RankerModels(model_on("dense", -1.0), None, {}).to_json(), "utf-8")

    def retrieve(**settings: object) -> list[str | RelevanceLevel | None]:
        config = RetrievalConfig(**settings)  # type: ignore[arg-type]
        searcher = HybridSearcher(TableEmbedder({"pool exhausted": (1.0, 0.0)}, 2), store, config)
        found = Retriever(searcher, lambda: index, Thresholds(0.6, 0.3), config).retrieve(
            "pool exhausted"
        )
        return [*(d.doc_path for d in found.ranked), found.level]

    assert retrieve() == ["redis.md", "kafka.md", RelevanceLevel.HIGHLY_RELEVANT]
    learned = retrieve(ranker="learned", ranker_file=path)
    assert learned == ["kafka.md", "redis.md", RelevanceLevel.REFERENCE]
