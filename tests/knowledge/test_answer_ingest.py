"""The answer model's vectors through ingest and retrieval, on SQLite and PostgreSQL with
Milvus Lite, USE and multilingual-e5-small, all real: encoded once per content, replaced
when a document changes, gone with it, backfilled when the model is turned on, and seen by
a second process on the same database."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select

from conftest import write_kb
from superbiz.config import (
    AdvancedRetrievalSettings,
    AdvancedSettings,
    AnswerSettings,
    RetrievalSettings,
)
from superbiz.exceptions import EmbeddingError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.ingest import answers as ingest_answers
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.answers import E5_MODEL, answer_head
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.relevance import EVIDENCE_LEVELS, RelevanceLevel
from superbiz.storage.knowledge_version import knowledge_version
from superbiz.storage.models import AnswerVectorRow

FAQ = {
    "database/scale-out.md": "---\ntitle: TiDB 运维 / 扩缩容\ncategory: database\n---\n"
    "可以在线进行。用 `tiup cluster scale-out` 加入新的 TiKV 节点后，PD 会逐步把 Region "
    "调度过去，一般几个小时内完成，期间业务不受影响。\n",
    "database/slow-log.md": "---\ntitle: TiDB 运维 / 慢查询\ncategory: database\n---\n"
    "执行时间超过 300 毫秒的语句会写入慢日志，阈值由 `tidb_slow_log_threshold` 控制。\n",
    "database/gc.md": "---\ntitle: TiDB 运维 / GC\ncategory: database\n---\n"
    "GC 默认每 10 分钟运行一次，保留 10 分钟以内的历史版本，可以通过 tidb_gc_life_time "
    "调整数据保留时长。\n",
    "infrastructure/cert.md": "---\ntitle: Certificate expiry\ncategory: infrastructure\n---\n"
    "Renew it with cert-manager: delete the Secret and the Certificate resource issues a new "
    "one within a minute.\n",
    "infrastructure/empty.md": "---\ntitle: Placeholder\ncategory: infrastructure\n---\n",
}
WITH_TEXT = sorted(path for path in FAQ if not path.endswith("empty.md"))

OpenKB = Callable[..., KnowledgeBase]


@pytest.fixture
def open_kb(
    tmp_path: Path, database_url: str, make_settings: Callable[..., Any], use_embedder: Embedder
) -> Iterator[OpenKB]:
    """``open_kb(answers=True, levels="cosine")``: a KB on this test's database, with or
    without the model."""
    opened: list[KnowledgeBase] = []

    def make(answers: bool = True, levels: str = "cosine") -> KnowledgeBase:
        retrieval = RetrievalSettings(answers=AnswerSettings(model="e5" if answers else "none"))
        advanced = AdvancedSettings(retrieval=AdvancedRetrievalSettings(levels=levels))
        settings = make_settings(tmp_path, database_url, retrieval=retrieval, advanced=advanced)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        opened.append(kb)
        return kb

    yield make
    for kb in reversed(opened):
        kb.close()


def stored_vectors(kb: KnowledgeBase) -> dict[str, np.ndarray]:
    rows = kb.documents.answer_vectors(E5_MODEL)
    return {path: np.frombuffer(vector, dtype="<f4") for path, _, vector in rows}


def answer_rows(kb: KnowledgeBase) -> int:
    with kb.engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(AnswerVectorRow)).scalar())


def test_each_document_opening_is_encoded_once_per_content(tmp_path: Path, open_kb: OpenKB) -> None:
    corpus = write_kb(tmp_path / "kb", FAQ)
    kb = open_kb()
    totals: list[int] = []
    ticks: list[str] = []
    report = Ingestor(kb).ingest([corpus], on_total=totals.append, on_progress=ticks.append)
    assert report.answers_encoded == len(WITH_TEXT)  # the empty file is skipped
    # the progress bar's total grows by the openings, each ticked after the files
    assert totals == [len(FAQ), len(FAQ) + len(WITH_TEXT)]
    assert ticks[len(FAQ) :] == [f"answer model: {path}" for path in WITH_TEXT]
    assert "4 openings encoded for answers" in report.summary()
    first = stored_vectors(kb)
    assert sorted(first) == WITH_TEXT
    assert Ingestor(kb).ingest([corpus]).answers_encoded == 0  # nothing changed

    (corpus / "database/gc.md").write_text(FAQ["database/gc.md"] + "\n也可以手动触发。\n")
    report = Ingestor(kb).ingest([corpus])
    assert report.updated == ["database/gc.md"] and report.answers_encoded == 1
    again = stored_vectors(kb)
    assert not np.allclose(again["database/gc.md"], first["database/gc.md"])
    assert np.array_equal(again["database/slow-log.md"], first["database/slow-log.md"])

    (corpus / "database/gc.md").unlink()
    report = Ingestor(kb).ingest([corpus], prune=True)
    assert report.removed == ["database/gc.md"]
    assert sorted(stored_vectors(kb)) == [p for p in WITH_TEXT if p != "database/gc.md"]
    assert answer_rows(kb) == len(WITH_TEXT) - 1  # the row went with its document


def test_turning_the_model_on_encodes_what_an_earlier_ingest_stored(
    tmp_path: Path, open_kb: OpenKB, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = write_kb(tmp_path / "kb", FAQ)
    plain = open_kb(answers=False)
    assert Ingestor(plain).ingest([corpus]).answers_encoded == 0
    assert answer_rows(plain) == 0
    plain.close()

    kb = open_kb()
    with caplog.at_level("WARNING", logger="superbiz.knowledge.kb.base"):
        assert len(kb.answer_index) == 0  # lookups rank as before, and the log says why
    assert "4 documents have no answer vector yet; `superbiz ingest`" in caplog.text
    report = Ingestor(kb).ingest([corpus])
    assert report.unchanged and not report.added
    assert report.answers_encoded == len(WITH_TEXT)  # read back from the vector store
    # the same openings an ingest of the files encodes
    encoder = kb.answer_encoder
    assert encoder is not None
    doc = kb.documents.get("infrastructure/cert.md")
    assert doc is not None
    body = FAQ["infrastructure/cert.md"].split("---\n", 2)[2]
    expected = encoder.passages([answer_head(doc.title, body, 250)])[0]
    assert np.allclose(stored_vectors(kb)["infrastructure/cert.md"], expected, atol=1e-6)


@pytest.mark.parametrize(("every_s", "announcements"), [(30.0, 1), (0.0, 2)])
def test_a_backfill_tells_other_processes_now_and_then_not_per_batch(
    tmp_path: Path,
    open_kb: OpenKB,
    monkeypatch: pytest.MonkeyPatch,
    every_s: float,
    announcements: int,
) -> None:
    """Each announcement makes every serving process rebuild its indexes: a backfill of two
    batches announces once at its end, or per batch when the interval has passed."""
    corpus = write_kb(tmp_path / "kb", FAQ)
    Ingestor(open_kb(answers=False)).ingest([corpus])
    kb = open_kb()
    before = knowledge_version(kb.engine)
    monkeypatch.setattr(ingest_answers, "ANSWER_BATCH", 2)
    monkeypatch.setattr(ingest_answers, "ANSWER_ANNOUNCE_S", every_s)
    assert Ingestor(kb).ingest([corpus]).answers_encoded == len(WITH_TEXT)
    assert knowledge_version(kb.engine) - before == announcements


def test_a_backfill_the_model_stops_announces_what_it_encoded(
    tmp_path: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_kb(tmp_path / "kb", FAQ)
    Ingestor(open_kb(answers=False)).ingest([corpus])
    reader = open_kb()  # a serving replica
    assert len(reader.answer_index) == 0
    kb = open_kb()
    encoder = kb.answer_encoder
    assert encoder is not None
    works, calls = encoder.passages, []

    def second_batch_fails(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        if len(calls) == 2:
            raise EmbeddingError("the answer model (multilingual-e5-small-q4) failed: test")
        return works(texts)

    monkeypatch.setattr(ingest_answers, "ANSWER_BATCH", 2)
    monkeypatch.setattr(encoder, "passages", second_batch_fails)
    with pytest.raises(EmbeddingError):
        Ingestor(kb).ingest([corpus])
    assert answer_rows(kb) == 2
    assert reader.catch_up() and len(reader.answer_index) == 2


def test_lookups_are_ranked_with_the_answer_model_in_every_process(
    tmp_path: Path, open_kb: OpenKB
) -> None:
    reader = open_kb()  # another replica: opened before the ingest, on the same database
    assert len(reader.answer_index) == 0
    writer = open_kb()
    Ingestor(writer).ingest([write_kb(tmp_path / "kb", FAQ)])

    outcome = GovernedLookup(reader, InMemorySessionTracker()).lookup(
        "s", "扩容后新节点多久能分到数据？"
    )
    assert outcome.ranked[0].doc_path == "database/scale-out.md"
    assert outcome.result.primary is not None
    assert outcome.result.primary.path == "database/scale-out.md"
    cosines = outcome.details.answer_similarities
    assert len(cosines) == len(outcome.ranked[:10]) and None not in cosines
    assert cosines[0] == max(cosines)  # type: ignore[type-var]
    assert len(reader.answer_index) == len(WITH_TEXT)


def test_evidence_levels_are_decided_and_recorded_with_each_call(
    tmp_path: Path, open_kb: OpenKB
) -> None:
    kb = open_kb(levels="evidence")
    Ingestor(kb).ingest([write_kb(tmp_path / "kb", FAQ)])
    lookup = GovernedLookup(kb, InMemorySessionTracker())
    for number, question in enumerate(["扩容后新节点多久能分到数据？", "慢日志的阈值是多少"]):
        outcome = lookup.lookup(f"s{number}", question)
        probability = outcome.details.primary_probability
        assert probability is not None and 0.0 < probability < 1.0
        sure = probability >= EVIDENCE_LEVELS.threshold
        assert (outcome.result.relevance_level is RelevanceLevel.HIGHLY_RELEVANT) == sure
    assert (
        GovernedLookup(open_kb(), InMemorySessionTracker())
        .lookup("s", "扩容后新节点多久能分到数据？")
        .details.primary_probability
        is None
    )  # the seed's rule


def test_without_the_model_nothing_is_encoded_or_recorded(tmp_path: Path, open_kb: OpenKB) -> None:
    kb = open_kb(answers=False)
    Ingestor(kb).ingest([write_kb(tmp_path / "kb", FAQ)])
    assert kb.answer_encoder is None and len(kb.answer_index) == 0
    outcome = GovernedLookup(kb, InMemorySessionTracker()).lookup("s", "慢 SQL 记录在哪里？")
    assert outcome.details.answer_similarities == []
    assert all(doc.answer is None for doc in outcome.ranked)


def test_concurrent_lookups_rank_as_one_at_a_time(tmp_path: Path, open_kb: OpenKB) -> None:
    """Turns run in threads: the engine keeps no state between calls, so queries encoded
    at once (each on its own OpenMP team) rank exactly as sequential ones."""
    kb = open_kb()
    Ingestor(kb).ingest([write_kb(tmp_path / "kb", FAQ)])
    questions = [
        "扩容后新节点多久能分到数据？",
        "慢 SQL 记录在哪里？",
        "旧版本数据保留多长时间？",
        "How do I renew an expiring certificate?",
    ] * 3

    def ranking(question: str) -> list[tuple[str, float | None]]:
        return [(doc.doc_path, doc.answer) for doc in kb.retrieve(question).ranked]

    alone = [ranking(q) for q in questions]
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(ranking, questions))
    assert [[path for path, _ in r] for r in together] == [[path for path, _ in r] for r in alone]
    for mine, theirs in zip(together, alone, strict=True):
        assert [a for _, a in mine] == pytest.approx([a for _, a in theirs], abs=1e-6)


def test_a_failing_answer_model_loses_no_document_and_the_next_ingest_catches_up(
    tmp_path: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = write_kb(tmp_path / "kb", FAQ)
    kb = open_kb()
    encoder = kb.answer_encoder
    assert encoder is not None

    def broken(texts: object) -> np.ndarray:
        raise EmbeddingError("the answer model (multilingual-e5-small-q4) failed: test")

    with monkeypatch.context() as patch:
        patch.setattr(encoder, "passages", broken)
        with pytest.raises(EmbeddingError, match="answer model"):
            Ingestor(kb).ingest([corpus])
    assert [doc.path for doc in kb.documents.all()] == WITH_TEXT  # every document is in
    assert answer_rows(kb) == 0
    report = Ingestor(kb).ingest([corpus])
    assert report.unchanged == WITH_TEXT and report.answers_encoded == len(WITH_TEXT)


def _whole(kb: KnowledgeBase) -> tuple[Any, ...]:
    """What the exact index, the answer index and the map hold, for comparison."""
    from superbiz.knowledge.coverage.map import build_map

    index, answers = kb.exact_index, kb.answer_index
    titles = [doc.title for doc in kb.documents.all()]
    return (
        sorted(index.keys()),
        [[(m.doc_path, m.field, m.key) for m in index.match(title)] for title in titles],
        answers.paths,
        answers.matrix.tobytes(),
        build_map(kb).to_yaml(),
    )


def test_a_one_document_change_redoes_that_document_only(tmp_path: Path, open_kb: OpenKB) -> None:
    """After one document changes, by this process's ingest or by another process, the
    documents, the exact index and the answer index (and the map built from them) are
    redone for that document only, counted as rows read and entries built, and hold what
    a whole rebuild in a fresh process holds."""
    corpus = write_kb(tmp_path / "kb", FAQ)
    kb = open_kb()
    Ingestor(kb).ingest([corpus])
    _whole(kb)
    stored = len(kb.documents.all())
    assert kb.work == {"exact_entries": stored, "answer_rows": len(WITH_TEXT)}
    read, work = kb.documents_read, dict(kb.work)

    (corpus / "database/gc.md").write_text(FAQ["database/gc.md"].replace("GC", "垃圾回收 GC"))
    assert Ingestor(kb).ingest([corpus]).updated == ["database/gc.md"]
    ours = _whole(kb)
    assert kb.documents_read - read == 1
    assert kb.work == {
        "exact_entries": work["exact_entries"] + 1,
        "answer_rows": work["answer_rows"] + 1,
    }
    assert ours == _whole(open_kb())  # a fresh process builds the same whole

    # another process renames a document's title: this one reads that row alone
    other = open_kb()
    doc = other.documents.get("infrastructure/cert.md")
    assert doc is not None
    other.documents.save(dataclasses.replace(doc, title="TLS certificate expiry"))
    read, work = kb.documents_read, dict(kb.work)
    assert kb.catch_up()
    ours = _whole(kb)
    assert kb.documents_read - read == 1
    assert kb.work == {
        "exact_entries": work["exact_entries"] + 1,
        "answer_rows": work["answer_rows"],
    }
    assert [m.doc_path for m in kb.exact_index.match("TLS certificate expiry")] == [
        "infrastructure/cert.md"
    ]
    assert ours == _whole(open_kb())
