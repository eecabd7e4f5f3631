"""The map's entry vectors are kept in the relational store (SQLite and PostgreSQL): an
ingest embeds the entries of the documents it wrote, a new process's planner reads them
instead of embedding the whole map, only what changed is embedded again, another
embedder's are never used, and a store that fails costs only time."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine

from conftest import write_kb
from fakes.embedders import CountingEmbedder
from superbiz.agents.planner import MapPlanner, PlanRequest
from superbiz.config import PlannerConfig
from superbiz.exceptions import EmbeddingError, StoreError
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.coverage.map import KnowledgeMap, build_map
from superbiz.knowledge.ingest import ingestor as ingest_module
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb import map_vectors
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.map_vectors import KeptMapVectors, MapEntry, text_hash
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.repository import DocumentRepository, KeptVectors

QUESTION = "Redis 连接池耗尽怎么办？"
REDIS = "infrastructure/redis-pool.md"


@pytest.fixture
def kb(
    tmp_path: Path, database_url: str, make_settings: Callable[..., Any], use_embedder: Embedder
) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase(make_settings(tmp_path, database_url), embedder=use_embedder)
    try:
        Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(tmp_path / "kb")])
        yield kb
    finally:
        kb.close()


def new_process(kb: KnowledgeBase, name: str | None = None) -> tuple[MapPlanner, CountingEmbedder]:
    """A planner as a new process builds it: nothing held in memory yet."""
    embedder = CountingEmbedder(kb.embedder, name)
    kept = KeptMapVectors(kb.documents, embedder)  # type: ignore[arg-type]
    return MapPlanner(embedder, PlannerConfig(), kept), embedder  # type: ignore[arg-type]


def entries(kmap: KnowledgeMap) -> int:
    return sum(len(domain.documents) for domain in kmap.domains)


def test_after_an_ingest_a_new_process_plans_without_embedding_the_map(
    kb: KnowledgeBase,
) -> None:
    """The ingest embedded the map's entries as the first plan would have: one batch of
    entries and one of titles, in the map's order; so the plans and scores are those of a
    planner that embeds the map itself, to the last digit."""
    kmap = build_map(kb)
    planner, embedder = new_process(kb)
    plan = planner.plan(PlanRequest(QUESTION, kmap))

    assert embedder.texts == 0
    itself = MapPlanner(kb.embedder, PlannerConfig())
    assert itself.plan(PlanRequest(QUESTION, kmap)) == plan
    assert planner.domain_scores(QUESTION, kmap) == itself.domain_scores(QUESTION, kmap)
    assert planner.clear_margins(kmap) == itself.clear_margins(kmap)


class Kept:
    """What each ``KeptMapVectors.keeping`` was asked for (paths) and embedded (texts)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[list[str], int]] = []
        keeping = KeptMapVectors.keeping

        @contextmanager
        def spy(
            kept: KeptMapVectors, entries: Sequence[MapEntry], **kwargs: Any
        ) -> Iterator[Callable[[], int]]:
            with keeping(kept, entries, **kwargs) as finish:

                def finished() -> int:
                    embedded = finish()
                    self.calls.append(([path for path, _, _ in entries], embedded))
                    return embedded

                yield finished

        monkeypatch.setattr(KeptMapVectors, "keeping", spy)


def edit_redis(root: Path) -> None:
    source = root / REDIS
    source.write_text(
        source.read_text(encoding="utf-8").replace("covers: [", "covers: [maxTotal, "),
        encoding="utf-8",
    )


def test_only_an_entry_whose_text_changed_is_embedded_again(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = Kept(monkeypatch)
    edit_redis(tmp_path / "kb")
    Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"])
    kmap = build_map(kb)

    assert kept.calls == [([REDIS], 1)]  # the edited entry; its title did not change
    planner, embedder = new_process(kb)
    planner.plan(PlanRequest(QUESTION, kmap))
    assert embedder.texts == 0
    fresh = MapPlanner(kb.embedder, PlannerConfig())
    assert planner.domain_scores(QUESTION, kmap) == pytest.approx(
        fresh.domain_scores(QUESTION, kmap), abs=1e-6
    )


def test_an_unchanged_ingest_embeds_no_entry(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = Kept(monkeypatch)
    Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"])

    assert kept.calls == []


def test_the_entries_are_embedded_outside_the_store_lock(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns go on while a bulk upload's map entries are embedded (about 90 s at 50,000
    documents): the ingest hands ``keeping`` its ``outside_stores``, and whoever waits
    for the embedding calls waits inside it: each call here goes on only once the lock
    is let go of (a wait holding it would leave every call stopped)."""
    released: list[bool] = []

    @contextmanager
    def outside() -> Iterator[None]:
        released.append(True)
        try:
            yield
        finally:
            released.pop()

    handed: list[object] = []
    keeping = KeptMapVectors.keeping

    def spy(
        kept: KeptMapVectors, entries: Sequence[MapEntry], **kwargs: Any
    ) -> AbstractContextManager[Callable[[], int]]:
        handed.append(kwargs.get("outside"))
        return keeping(kept, entries, **kwargs)

    monkeypatch.setattr(KeptMapVectors, "keeping", spy)
    edit_redis(tmp_path / "kb")
    Ingestor(kb, domains=DomainService(kb), outside_stores=outside).ingest([tmp_path / "kb"])
    assert handed == [outside]

    inside: list[bool] = []

    class Watched(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            deadline = time.monotonic() + 10
            while not released and time.monotonic() < deadline:
                time.sleep(0.005)
            inside.append(bool(released))
            return super().embed(texts)

    monkeypatch.setattr(map_vectors, "KEEP_BATCH", 2)
    kept = KeptMapVectors(kb.documents, Watched(kb.embedder, "another-model"))  # type: ignore[arg-type]
    three = [(REDIS, "Redis 连接池", "Redis"), ("a.md", "API 429", "API"), ("b.md", "B", "B")]
    assert kept.keep(three, outside=outside) == 5  # "B" once: its entry is its title
    assert inside == [True] * 3  # entries and titles of two batches, B's title copied
    assert kept.keep(three, outside=outside) == 0


def test_an_ingest_measures_its_statistics_while_the_entries_embed(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both are mostly one core's work: the entries' embedding call has begun when the
    statistics are measured, and goes on beside them (here it finishes only once they
    have begun); the entries are kept once both are done. One after the other, each
    would wait here for the other in vain."""
    embedding, measuring = threading.Event(), threading.Event()
    statistics = ingest_module.refresh_statistics
    seen: list[str] = []

    def measured(kb: KnowledgeBase, **kwargs: Any) -> Any:
        seen.append("statistics after the embedding began" if embedding.wait(10) else "alone")
        measuring.set()
        return statistics(kb, **kwargs)

    embedder = kb.map_vectors.embedder

    class Beside(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            embedding.set()
            seen.append("embedding beside the statistics" if measuring.wait(10) else "alone")
            return super().embed(texts)

    monkeypatch.setattr(ingest_module, "refresh_statistics", measured)
    monkeypatch.setattr(kb.map_vectors, "embedder", Beside(embedder))
    edit_redis(tmp_path / "kb")
    Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"])

    # the edited entry's call (its title did not change)
    assert sorted(seen) == [
        "embedding beside the statistics",
        "statistics after the embedding began",
    ]
    planner, counted = new_process(kb)
    planner.plan(PlanRequest(QUESTION, build_map(kb)))
    assert counted.texts == 0  # every entry kept, the edited one too


def test_statistics_that_fail_leave_no_embedding_behind(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest's error is the statistics' own; the entries are not kept, and the
    first plan embeds the one that changed."""

    def broken(kb: KnowledgeBase, **kwargs: Any) -> Any:
        raise StoreError("kb_meta is locked")

    monkeypatch.setattr(ingest_module, "refresh_statistics", broken)
    edit_redis(tmp_path / "kb")
    with pytest.raises(StoreError, match="kb_meta is locked"):
        Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"])

    assert not [t for t in threading.enumerate() if t.name.startswith("map-entries")]
    planner, counted = new_process(kb)
    planner.plan(PlanRequest(QUESTION, build_map(kb)))
    assert counted.texts == 1  # the edited document's entry


def test_an_ingest_embeds_two_batches_at_once_each_as_one_call_for_it(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One embedding call runs on one core, so a bulk upload's entries are embedded two
    batches at once (the two batches' entry calls meet: one after the other they never
    would); each batch's rows are what one call for that batch gives, as a plan's."""
    monkeypatch.setattr(map_vectors, "KEEP_BATCH", 2)
    meeting = threading.Barrier(2, timeout=10)

    class Meeting(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            if texts[0] in {"Redis 连接池", "C 库"}:  # the first entry of each batch
                meeting.wait()
            return super().embed(texts)

    four = [
        (REDIS, "Redis 连接池", "Redis"),
        ("a.md", "API 429", "API"),
        ("b.md", "C 库", "B"),
        ("c.md", "D", "D"),
    ]
    kept = KeptMapVectors(kb.documents, Meeting(kb.embedder, "another-model"))  # type: ignore[arg-type]
    assert kept.keep(four) == 7  # "D" once: its entry is its title
    counted = CountingEmbedder(kb.embedder, "another-model")
    matrices = KeptMapVectors(kb.documents, counted).vectors(four)  # type: ignore[arg-type]
    assert counted.texts == 0  # all kept
    for batch in (slice(0, 2), slice(2, 4)):
        rows = four[batch]
        np.testing.assert_allclose(
            matrices[0][batch], kb.embedder.embed([e for _, e, _ in rows]), atol=1e-6
        )
        np.testing.assert_allclose(
            matrices[1][batch], kb.embedder.embed([t for _, _, t in rows]), atol=1e-6
        )


def test_a_title_that_is_its_whole_entry_is_embedded_once(kb: KnowledgeBase) -> None:
    """A document without covers or a when-to-retrieve line (every document of the
    benchmark sets) has its title for its entry: one text, one embedding, the same vector
    for both (the map's embedding at 50,000 documents was 76,150 texts for 38,075 entries)."""
    counted = CountingEmbedder(kb.embedder, "another-model")
    two = [("a.md", "API 429", "API 429"), ("b.md", "Refunds\n退款", "Refunds")]
    entry, title = KeptMapVectors(kb.documents, counted).vectors(two)  # type: ignore[arg-type]
    assert counted.texts == 3
    np.testing.assert_array_equal(title[0], entry[0])
    np.testing.assert_allclose(title[1], kb.embedder.embed(["Refunds"])[0], atol=1e-6)


def test_an_ingest_whose_entries_cannot_be_embedded_still_lands(
    kb: KnowledgeBase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The documents are stored and searchable; the first plan embeds the entries."""

    class Failing(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            raise EmbeddingError("embedding endpoint returned vectors of different lengths")

    monkeypatch.setattr(kb.map_vectors, "embedder", Failing(kb.map_vectors.embedder))
    edit_redis(tmp_path / "kb")
    with caplog.at_level(logging.WARNING, logger="superbiz.knowledge.coverage.map"):
        report = Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"])

    assert report.updated == [REDIS]
    assert "map entries not embedded, the first plan embeds them: embedding endpoint" in (
        caplog.text
    )
    planner, embedder = new_process(kb)
    planner.plan(PlanRequest(QUESTION, build_map(kb)))
    assert embedder.texts == 1


def test_vectors_of_another_embedder_are_never_used(kb: KnowledgeBase) -> None:
    kmap = build_map(kb)

    planner, embedder = new_process(kb, name="another-model")
    planner.plan(PlanRequest(QUESTION, kmap))

    # each entry, and each title (the map's clear margins); kept for the next process
    assert embedder.texts == 2 * entries(kmap)
    again, embedder = new_process(kb, name="another-model")
    assert again.plan(PlanRequest(QUESTION, kmap)) == planner.plan(PlanRequest(QUESTION, kmap))
    assert embedder.texts == 0


def test_the_kept_vectors_go_and_move_with_their_document(kb: KnowledgeBase) -> None:
    name, documents = kb.embedder.name, kb.documents
    kept = dict(documents.map_vectors(name, [REDIS, "api/rate-limit.md"]))
    assert set(kept) == {REDIS, "api/rate-limit.md"}

    assert documents.rename(REDIS, "infrastructure/redis.md")
    assert {
        path for path, _ in documents.map_vectors(name, [REDIS, "infrastructure/redis.md"])
    } == {"infrastructure/redis.md"}
    documents.delete(["infrastructure/redis.md"])
    assert not list(documents.map_vectors(name, ["infrastructure/redis.md"]))
    documents.delete_all()
    assert not list(documents.map_vectors(name, ["api/rate-limit.md"]))


def test_a_store_that_fails_costs_only_time(
    tmp_path: Path, use_embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    """No such table (a database never migrated): read and write fail, the vectors are the
    embedder's and the failure is logged."""
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    entries = [
        (REDIS, "Redis 连接池耗尽\n连接池", "Redis 连接池耗尽"),
        ("api.md", "API\n429", "API"),
    ]
    try:
        kept = KeptMapVectors(DocumentRepository(engine), use_embedder)
        with caplog.at_level(logging.WARNING, logger="superbiz.knowledge.kb.map_vectors"):
            vectors, titles = kept.vectors(entries)
    finally:
        engine.dispose()

    assert np.array_equal(vectors, use_embedder.embed([entry for _, entry, _ in entries]))
    assert np.array_equal(titles, use_embedder.embed([title for _, _, title in entries]))
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "map vectors not read, embedding them instead",
        "map vectors not kept, the next process embeds them again",
    ]


def test_a_kept_vector_of_another_length_is_embedded_again(
    kb: KnowledgeBase, use_embedder: Embedder
) -> None:
    """A row written by another build of the same-named model (a vector of another
    dimension) is never read as this one's."""
    entry = (REDIS, "Redis 连接池耗尽", "Redis")
    name = kb.embedder.name
    kb.documents.save_map_vectors(
        name,
        [(REDIS, KeptVectors(text_hash(entry[1]), b"\0" * 16, text_hash(entry[2]), b"\0" * 16))],
    )
    embedder = CountingEmbedder(use_embedder)
    vectors, titles = KeptMapVectors(kb.documents, embedder).vectors([entry])  # type: ignore[arg-type]

    assert embedder.texts == 2
    assert np.array_equal(vectors[0], use_embedder.embed([entry[1]])[0])
    assert np.array_equal(titles[0], use_embedder.embed([entry[2]])[0])
    assert len(dict(kb.documents.map_vectors(name, [REDIS]))[REDIS].entry) == 4 * vectors.shape[1]


def test_an_endpoints_long_model_name_keeps_its_vectors(kb: KnowledgeBase) -> None:
    """``embedding.model`` names an endpoint's model, e.g. a path on a vLLM server."""
    name = "/models/sentence-transformers/paraphrase-multilingual-mpnet-base-v2-" + "x" * 150
    kept = KeptVectors(text_hash("e"), b"\1" * 8, text_hash("t"), b"\2" * 8)
    kb.documents.save_map_vectors(name, [(REDIS, kept)])

    assert list(kb.documents.map_vectors(name, [REDIS])) == [(REDIS, kept)]


class AskedFor:
    """``KeptMapVectors``, recording the entries it is asked for."""

    def __init__(self, kept: KeptMapVectors) -> None:
        self.kept = kept
        self.asked: list[list[str]] = []

    def vectors(self, entries: Sequence[MapEntry]) -> tuple[np.ndarray, np.ndarray]:
        self.asked.append([path for path, _, _ in entries])
        return self.kept.vectors(entries)


def test_a_planner_asks_only_for_the_entries_a_new_map_changed(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    """A process that plans on one map and then on the map after an edit and a delete
    reuses what it holds: only the edited entry is asked for, and it plans as a new
    process does."""
    kept = AskedFor(kb.map_vectors)
    planner = MapPlanner(kb.embedder, PlannerConfig(), kept)
    before = build_map(kb)
    planner.plan(PlanRequest(QUESTION, before))
    source = tmp_path / "kb" / REDIS
    source.write_text(
        source.read_text(encoding="utf-8").replace("covers: [", "covers: [maxTotal, "),
        encoding="utf-8",
    )
    (tmp_path / "kb" / "api" / "rate-limit.md").unlink()
    Ingestor(kb, domains=DomainService(kb)).ingest([tmp_path / "kb"], prune=True)
    after = build_map(kb)

    plan = planner.plan(PlanRequest(QUESTION, after))

    assert kept.asked == [[doc.path for d in before.domains for doc in d.documents], [REDIS]]
    fresh = new_process(kb)[0]
    assert fresh.plan(PlanRequest(QUESTION, after)) == plan
    assert fresh.domain_scores(QUESTION, after) == planner.domain_scores(QUESTION, after)
    assert fresh.clear_margins(after) == planner.clear_margins(after)


def test_the_entries_of_several_batches_embed_before_the_ingest_waits_for_them(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk upload's entries come in many batches: the first ``KEEP_AHEAD`` windows of
    them begin on entering (with one window begun, 9,540 new documents' entries mostly
    waited for the statistics to end), each through the ``embed`` it is handed (the
    ingest's worker processes), and are kept by ``finish``."""
    monkeypatch.setattr(map_vectors, "KEEP_BATCH", 1)
    embedder = CountingEmbedder(kb.embedder, "another-model")
    kept = KeptMapVectors(kb.documents, embedder)  # type: ignore[arg-type]
    five = [(f"d{i}.md", f"entry {i}", f"title {i}") for i in range(5)]  # 3 windows of 2
    handed: list[str] = []
    all_made = threading.Event()

    def worker_embed(texts: Sequence[str]) -> np.ndarray:
        handed.extend(texts)
        if len(handed) == 10:
            all_made.set()
        return kb.embedder.embed(texts)

    with kept.keeping(five, embed=worker_embed) as finish:
        assert all_made.wait(10)  # every window's calls, before anything waits for them
        assert finish() == 10
    assert sorted(handed) == sorted(t for _, entry, title in five for t in (entry, title))
    assert embedder.texts == 0
    assert kept.keep(five) == 0  # all kept
