"""What the knowledge base measures about itself after its documents change: exact keys'
document frequency and the level thresholds (real USE, Milvus Lite, SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fakes.embedders import CountingEmbedder
from superbiz.config import Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KEY_FREQUENCY_KEY, LEVEL_CALIBRATION_KEY, KnowledgeBase
from superbiz.knowledge.kb.statistics import refresh_statistics
from superbiz.retrieval.calibration import MIN_PROBES
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.relevance import DEFAULT_THRESHOLDS, RelevanceLevel

RUNBOOKS = {
    "kafka.md": "---\ntitle: Kafka\n---\n\nHow our Kafka clusters are laid out.\n",
    "consumer-lag.md": "---\ntitle: Consumer lag\n---\n\nKafka consumers fall behind.\n",
    "broker-down.md": "---\ntitle: Broker down\n---\n\nA Kafka broker stopped answering.\n",
    "topic-full.md": "---\ntitle: Topic full\n---\n\nA Kafka topic reached its size.\n",
    "zk.md": "---\ntitle: ZooKeeper session\n---\n\nKafka lost its ZooKeeper session.\n",
}


@pytest.fixture
def open_kb(tmp_path: Path, use_embedder: Embedder) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=use_embedder)
    yield kb
    kb.close()


def _write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_a_product_name_every_runbook_uses_is_not_an_exact_key_and_follows_changes(
    tmp_path: Path, open_kb: KnowledgeBase
) -> None:
    root = _write(tmp_path / "kb", RUNBOOKS)
    Ingestor(open_kb).ingest([root])

    assert open_kb.key_frequency is not None and open_kb.key_frequency.counts["kafka"] == 5
    for question in ("Kafka is slow today", "grafana.kafka.example.net shows errors"):
        retrieval = open_kb.retrieve(question)
        assert retrieval.exact_count == 0 and retrieval.level is not RelevanceLevel.PRECISE

    # the other runbooks go: now "Kafka" names the one page that uses it
    for name in ("broker-down.md", "topic-full.md", "zk.md", "consumer-lag.md"):
        (root / name).unlink()
    Ingestor(open_kb).ingest([root], prune=True)

    assert open_kb.key_frequency is not None and open_kb.key_frequency.counts["kafka"] == 1
    retrieval = open_kb.retrieve("Kafka is slow today")
    assert retrieval.level is RelevanceLevel.PRECISE and retrieval.top is not None
    assert retrieval.top.doc_path == "kafka.md"
    # inside a host name it is still no match
    assert open_kb.retrieve("grafana.kafka.example.net shows errors").exact_count == 0


def test_a_kb_too_small_to_measure_uses_the_shipped_thresholds(
    tmp_path: Path, open_kb: KnowledgeBase
) -> None:
    Ingestor(open_kb).ingest([_write(tmp_path / "kb", RUNBOOKS)])

    calibration = open_kb.calibration
    assert calibration is not None and not calibration.complete
    assert calibration.probes < MIN_PROBES
    assert open_kb.thresholds == DEFAULT_THRESHOLDS["use-multilingual-v3"]


def _faq(number: int) -> str:
    topics = ["disk", "memory", "network", "backup", "login", "upgrade", "index", "quota"]
    topic = topics[number % len(topics)]
    return (
        f"---\ntitle: Service {number} {topic} guide\n---\n\n"
        f"## Service {number} {topic} alarm fires\n\nCheck the {topic} of service {number}.\n\n"
        f"## Service {number} {topic} restore steps\n\nRestore service {number} from its "
        f"{topic} snapshot and verify it.\n"
    )


def test_thresholds_measured_on_the_kb_are_stored_and_settings_still_win(
    tmp_path: Path, open_kb: KnowledgeBase, use_embedder: Embedder
) -> None:
    root = _write(tmp_path / "kb", {f"s{n:02d}.md": _faq(n) for n in range(60)})
    Ingestor(open_kb).ingest([root])

    calibration = open_kb.calibration
    assert calibration is not None and calibration.complete
    assert calibration.probes >= MIN_PROBES and calibration.embedder == use_embedder.name
    thresholds = open_kb.thresholds
    assert thresholds == open_kb.measured_thresholds
    assert (thresholds.highly_relevant, thresholds.reference) == (
        calibration.highly_relevant,
        calibration.reference,
    )
    assert thresholds != DEFAULT_THRESHOLDS["use-multilingual-v3"]

    # another process reads the same stored numbers
    other = KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=use_embedder)
    try:
        assert other.thresholds == thresholds
    finally:
        other.close()
    # an explicit setting overrides the measured value (and asks for no lead)
    configured = Settings(
        data_dir=tmp_path / "data",
        retrieval={"normalization": {"highly-relevant-threshold": 0.9}},
    )
    pinned = KnowledgeBase(configured, embedder=use_embedder)
    try:
        assert pinned.thresholds.highly_relevant == 0.9
        assert pinned.thresholds.reference == calibration.reference
        assert pinned.thresholds.highly_relevant_lead == 0.0
    finally:
        pinned.close()


RUNBOOKS_NAMING_EACH_OTHER = {
    "KubeNodeNotReady.md": "---\ntitle: KubeNodeNotReady\n---\n\nA node has been unready for "
    "more than 15 minutes. Check the node conditions and its kubelet logs.\n",
    "KubeletDown.md": "---\ntitle: KubeletDown\n---\n\nKubelet has disappeared from Prometheus "
    "target discovery. The node's KubeNodeNotReady alert usually fires too. Restart the "
    "kubelet service and check its certificates.\n",
}


def test_a_key_two_documents_use_names_the_one_the_ranking_puts_first(
    tmp_path: Path, open_kb: KnowledgeBase
) -> None:
    """A runbook that mentions another alert by name, asked with its own alert's text:
    the other runbook's title is a key, but it does not name the answer."""
    Ingestor(open_kb).ingest([_write(tmp_path / "kb", RUNBOOKS_NAMING_EACH_OTHER)])
    assert open_kb.key_frequency is not None
    assert open_kb.key_frequency.users["kubenodenotready"] == (
        "KubeNodeNotReady.md",
        "KubeletDown.md",
    )

    asked = "Kubelet has disappeared from Prometheus target discovery; KubeNodeNotReady fires"
    retrieval = open_kb.retrieve(asked)
    assert retrieval.level is not RelevanceLevel.PRECISE and retrieval.exact_count == 0
    assert retrieval.top is not None and retrieval.top.doc_path == "KubeletDown.md"

    named = open_kb.retrieve("KubeNodeNotReady")
    assert named.level is RelevanceLevel.PRECISE and named.top is not None
    assert named.top.doc_path == "KubeNodeNotReady.md"


def test_another_process_reads_the_new_measurements_after_a_refresh(
    tmp_path: Path, open_kb: KnowledgeBase, use_embedder: Embedder
) -> None:
    """A process that read the measurements between a change of documents and their new
    measurement would keep the stale ones: storing them counts as a change."""
    Ingestor(open_kb).ingest([_write(tmp_path / "kb", RUNBOOKS)])
    open_kb.meta.set(KEY_FREQUENCY_KEY, "")  # as if not measured yet when the other read
    other = KnowledgeBase(Settings(data_dir=tmp_path / "data"), embedder=use_embedder)
    try:
        other.catch_up()
        assert other.key_frequency is None

        refresh_statistics(open_kb)

        assert other.catch_up() is True
        assert other.key_frequency is not None and other.key_frequency.counts["kafka"] == 5
    finally:
        other.close()


def test_a_setting_against_a_measured_value_wins_without_an_error(
    tmp_path: Path, open_kb: KnowledgeBase, use_embedder: Embedder
) -> None:
    """A measured highly-relevant threshold under a configured reference threshold (dev2
    measures 0.26 / 0.25) yields to the setting instead of stopping every lookup."""
    Ingestor(open_kb).ingest(
        [_write(tmp_path / "kb", {f"s{n:02d}.md": _faq(n) for n in range(60)})]
    )
    measured = open_kb.measured_thresholds
    assert measured is not None
    above = round(measured.highly_relevant + 0.05, 2)
    configured = Settings(
        data_dir=tmp_path / "data", retrieval={"normalization": {"reference-threshold": above}}
    )
    pinned = KnowledgeBase(configured, embedder=use_embedder)
    try:
        assert (pinned.thresholds.reference, pinned.thresholds.highly_relevant) == (above, above)
    finally:
        pinned.close()


def test_past_the_whole_measure_a_change_counts_only_the_documents_it_touched(
    tmp_path: Path, open_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    from superbiz.knowledge.kb import statistics

    monkeypatch.setattr(statistics, "WHOLE_DOCUMENTS", 2)
    root = _write(tmp_path / "kb", RUNBOOKS)
    Ingestor(open_kb).ingest([root])  # nothing stored yet: measured whole
    first = open_kb.key_frequency
    assert first is not None and len(first.measured) == 5 and first.counts["kafka"] == 5

    read: list[list[str]] = []
    chunks_of = open_kb.store.chunks_of_documents

    def spy(paths: Any, **kwargs: Any) -> Any:
        read.append(list(paths))
        return chunks_of(paths, **kwargs)

    monkeypatch.setattr(open_kb.store, "chunks_of_documents", spy)
    _write(
        root, {"compaction.md": "---\ntitle: Log compaction\n---\n\nKafka log compaction stalls.\n"}
    )
    Ingestor(open_kb).ingest([root])

    after = open_kb.key_frequency
    assert read == [["compaction.md"]]  # the five others were not read again
    assert after is not None and after.counts["kafka"] == 6 and len(after.measured) == 6
    assert after.users["log compaction"] == ("compaction.md",)
    retrieval = open_kb.retrieve("log compaction is stuck")
    assert retrieval.level is RelevanceLevel.PRECISE and retrieval.top is not None
    assert retrieval.top.doc_path == "compaction.md"


def test_a_knowledge_base_about_one_subject_keeps_the_shipped_reference(
    tmp_path: Path, open_kb: KnowledgeBase
) -> None:
    """Measured with no reference (``LevelCalibration.one_subject``): the measured
    highly-relevant rule stands, beside the shipped reference."""
    Ingestor(open_kb).ingest(
        [_write(tmp_path / "kb", {f"s{n:02d}.md": _faq(n) for n in range(60)})]
    )
    measured = open_kb.calibration
    assert measured is not None and measured.complete and measured.current
    one_subject = replace(measured, reference=None)
    open_kb.meta.set_measurements({LEVEL_CALIBRATION_KEY: one_subject.to_json()})
    open_kb.changed()

    shipped = DEFAULT_THRESHOLDS["use-multilingual-v3"]
    assert open_kb.calibration is not None and open_kb.calibration.one_subject
    assert open_kb.thresholds.reference == shipped.reference
    assert open_kb.thresholds.highly_relevant == max(
        measured.highly_relevant or 0, shipped.reference
    )
    assert open_kb.thresholds.highly_relevant_lead == measured.highly_relevant_lead


def test_thresholds_measured_the_older_way_are_measured_again_by_the_next_ingest(
    tmp_path: Path, open_kb: KnowledgeBase
) -> None:
    """A knowledge base measured before the method changed keeps its old thresholds until
    a document changes, unless its next ingest, with nothing new, measures it again."""
    root = _write(tmp_path / "kb", {f"s{n:02d}.md": _faq(n) for n in range(60)})
    Ingestor(open_kb).ingest([root])
    measured = open_kb.calibration
    assert measured is not None and measured.current
    older = replace(measured, method=0, reference=0.99)
    open_kb.meta.set_measurements({LEVEL_CALIBRATION_KEY: older.to_json()})
    open_kb.changed()
    assert open_kb.calibration is not None and not open_kb.calibration.current

    report = Ingestor(open_kb).ingest([root])

    assert not report.changed
    assert open_kb.calibration == measured


def test_each_search_looks_deeper_as_the_kb_grows(
    tmp_path: Path, open_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The depth follows the KB's size after every change (here past a lowered start)."""
    from superbiz.retrieval import search

    monkeypatch.setattr(search, "DEEP_FROM_DOCUMENTS", 2)
    root = _write(tmp_path / "kb", RUNBOOKS)
    Ingestor(open_kb).ingest([root])
    asked: list[tuple[str, int]] = []
    dense, bm25 = open_kb.store.search_dense, open_kb.store.search_bm25

    def record(kind: str, search: Any) -> Any:
        def searching(query: Any, limit: int, *args: Any) -> Any:
            asked.append((kind, limit))
            return search(query, limit, *args)

        return searching

    monkeypatch.setattr(open_kb.store, "search_dense", record("dense", dense))
    monkeypatch.setattr(open_kb.store, "search_bm25", record("bm25", bm25))

    open_kb.retrieve("A Kafka broker stopped answering")
    assert asked == [("dense", 24), ("bm25", 24)]  # 15 × √(5 / 2), rounded up
    (root / "acl.md").write_text("---\ntitle: ACL\n---\n\nKafka topic ACLs.\n", encoding="utf-8")
    Ingestor(open_kb).ingest([root])
    asked.clear()
    open_kb.retrieve("A Kafka broker stopped answering")
    assert asked == [("dense", 26), ("bm25", 26)]  # 15 × √(6 / 2)


@pytest.mark.parametrize("texts_kept", ["all", "none"])
def test_a_small_kb_measured_whole_again_reads_and_embeds_only_what_changed(
    tmp_path: Path, use_embedder: Embedder, monkeypatch: pytest.MonkeyPatch, texts_kept: str
) -> None:
    """Measured whole after every change, a KB of up to ``WHOLE_DOCUMENTS`` keeps in the
    process what it read: an added file reads its own text and embeds its own probes,
    and the numbers are those a process measuring everything afresh gets. Past the
    budget of characters kept (``TEXTS_KEPT``), texts are read again."""
    from superbiz.knowledge.kb import statistics
    from superbiz.knowledge.kb.statistics import measure

    if texts_kept == "none":
        monkeypatch.setattr(statistics, "TEXTS_KEPT", 0)

    embedder = CountingEmbedder(use_embedder)
    settings = Settings(data_dir=tmp_path / "data")
    kb = KnowledgeBase(settings, embedder=embedder)  # type: ignore[arg-type]
    root = _write(tmp_path / "kb", {**RUNBOOKS, **{f"s{n:02d}.md": _faq(n) for n in range(60)}})
    try:
        Ingestor(kb).ingest([root])
        probes = kb.calibration.probes if kb.calibration else 0
        assert probes >= MIN_PROBES

        read: list[list[str]] = []
        chunks_of = kb.store.chunks_of_documents

        def spy(paths: Any, *, vectors: bool = True) -> Any:
            if not vectors:  # the key count's read (the calibration's reads vectors)
                read.append(list(paths))
            return chunks_of(paths, vectors=vectors)

        monkeypatch.setattr(kb.store, "chunks_of_documents", spy)
        embedder.texts = 0
        # its title is a key the unchanged consumer-lag.md's text uses
        _write(root, {"behind.md": "---\ntitle: Consumers fall behind\n---\n\nScale them.\n"})
        Ingestor(kb).ingest([root])

        every = sorted([*RUNBOOKS, *(f"s{n:02d}.md" for n in range(60)), "behind.md"])
        assert read == [["behind.md"] if texts_kept == "all" else every]
        assert 0 < embedder.texts < 10  # its passage, its probe, its map entries
        frequency, calibration = kb.key_frequency, kb.calibration
        assert frequency is not None and calibration is not None
        assert frequency.users["consumers fall behind"] == ("behind.md", "consumer-lag.md")
        afresh = KnowledgeBase(settings, embedder=use_embedder)
        try:
            again = measure(afresh)
        finally:
            afresh.close()
        assert (again.frequency.counts, again.frequency.users) == (
            frequency.counts,
            frequency.users,
        )
        assert again.calibration.probes == calibration.probes
        assert again.calibration.reference == pytest.approx(calibration.reference, abs=1e-6)
        assert again.calibration.highly_relevant == pytest.approx(
            calibration.highly_relevant, abs=1e-6
        )
    finally:
        kb.close()


def test_a_change_keys_only_the_documents_it_touched_and_drops_the_keys_of_those_gone(
    tmp_path: Path, open_kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key count's index of every document is kept in the process and redone by
    difference: an upload keys its own document alone, and a removed document's keys
    no longer count in the documents that come after it."""
    from superbiz.knowledge.kb import statistics

    monkeypatch.setattr(statistics, "WHOLE_DOCUMENTS", 2)
    compaction = "---\ntitle: Log compaction\n---\n\nKafka log compaction stalls.\n"
    root = _write(tmp_path / "kb", {**RUNBOOKS, "compaction.md": compaction})
    Ingestor(open_kb).ingest([root])
    keyed: list[str] = []
    real_entry = statistics.exact_entry

    def spy(doc: Any, **kwargs: Any) -> Any:
        keyed.append(doc.path)
        return real_entry(doc, **kwargs)

    monkeypatch.setattr(statistics, "exact_entry", spy)
    (root / "compaction.md").unlink()
    retention = "---\ntitle: Retention\n---\n\nRetention runs after log compaction.\n"
    _write(root, {"retention.md": retention})
    Ingestor(open_kb).ingest([root], prune=True)

    assert keyed == ["retention.md"]
    after = open_kb.key_frequency
    # counted as a key only while a document was named by it
    assert after is not None and "log compaction" not in after.counts
    assert after.users["retention"] == ("retention.md",)
