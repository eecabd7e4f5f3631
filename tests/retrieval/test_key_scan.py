"""The key count's automaton (``_key_scan``): the counts the bucket walk gives, made
again after a change, and not used where the library fails its check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from superbiz.retrieval import _key_scan
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.key_frequency import KeyFrequency

ENTRIES = [
    ExactEntry("db/pool.md", "Redis 连接池 耗尽", "db", aliases=("redis-pool",)),
    ExactEntry("db/data.md", "数据 同步", "db", covers=("数据库 备份",)),
    ExactEntry("ops/kafka.md", "Kafka lag", "ops", aliases=("kafka consumer lag",)),
    ExactEntry("ops/k8s.md", "k8s node down", "ops", tags=("kubectl",)),
    ExactEntry("ops/dotnet.md", ".net gc pauses", "ops"),  # no word starts the key
    ExactEntry("ops/cpp.md", "c++ build cache", "ops"),
    ExactEntry("ops/log.md", "Log rotation", "ops", covers=("logrotate config",)),
]

TEXTS = [
    ("a.md", "Redis连接池耗尽 after the redis pool filled up"),
    ("b.md", "数据库备份 failed; 数据 同步 later. 数据库 is fine"),
    ("c.md", "Lag on grafana.kafka.example.net for kafka_consumer_lag; kafka lag grows"),
    ("d.md", "kubectlx is not kubectl; the k8s node down alert fired"),
    ("e.md", "the .net gc pauses; a c++ build cache miss; c++ build cachex"),
    ("f.md", "catalog rotation: log rotation and logrotate config, see /etc/logrotate.conf"),
    ("g.md", "nothing that names a document"),
]


def _counted(monkeypatch: pytest.MonkeyPatch, *, automaton: bool) -> KeyFrequency:
    monkeypatch.setattr(_key_scan, "_works", lambda: automaton)
    index = ExactIndex(ENTRIES)
    counted = index.frequency(TEXTS)
    assert (index._scanner is not None) is automaton
    return counted


def test_the_automaton_counts_what_the_bucket_walk_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scanned = _counted(monkeypatch, automaton=True)
    assert scanned == _counted(monkeypatch, automaton=False)
    assert scanned.counts["redis连接池耗尽"] == 1
    assert scanned.counts["数据库备份"] == 1 and scanned.counts["数据同步"] == 1
    assert scanned.counts["kafka lag"] == 1  # not inside the host name or the identifier
    assert scanned.counts["k8s node down"] == 1 and scanned.counts["kubectl"] == 1
    assert scanned.counts["c++ build cache"] == 1
    assert scanned.counts["log rotation"] == 1 and scanned.counts["logrotate config"] == 1
    assert ".net gc pauses" not in scanned.counts  # as no bucket a text reaches holds it


def test_the_automaton_is_made_again_after_a_change() -> None:
    index = ExactIndex(ENTRIES)
    assert "kafka lag" in index.frequency(TEXTS).counts
    index.remove("ops/kafka.md")
    index.add(ExactEntry("ops/stream.md", "Stream lag grows", "ops"))
    counts = index.frequency([("x.md", "kafka lag: stream lag grows")]).counts
    assert counts == {"stream lag grows": 1}


def test_after_changes_the_kept_automaton_counts_as_one_made_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A change keeps the automaton of every key (380,000 at 50,000 documents: about 1 s
    to make) beside a small one of the keys added since, and drops the keys gone; past
    ``ADDED_KEYS`` added keys the whole is made again. Either way a count after the
    changes is the count of an index made of the documents as they are."""
    monkeypatch.setattr(_key_scan, "ADDED_KEYS", 2)
    index = ExactIndex(ENTRIES)
    index.frequency(TEXTS)
    whole = index._scanner
    changes = [
        ("remove", "ops/kafka.md"),
        ("add", ExactEntry("ops/stream.md", "Stream lag grows", "ops", tags=("kafka lag",))),
        ("remove", "db/data.md"),
        ("add", ExactEntry("db/backup.md", "数据库 备份", "db")),
        ("add", ExactEntry("ops/disk.md", "Disk full", "ops", covers=("node disk pressure",))),
    ]
    entries = list(ENTRIES)
    texts = [*TEXTS, ("h.md", "stream lag grows; kafka lag; disk full and node disk pressure")]
    for step, (change, what) in enumerate(changes):
        if change == "remove":
            index.remove(str(what))
            entries = [e for e in entries if e.doc_path != what]
        else:
            assert isinstance(what, ExactEntry)
            index.add(what)
            entries.append(what)
        assert index.frequency(texts) == ExactIndex(entries).frequency(texts)
        kept = isinstance(index._scanner, _key_scan.ChangedKeys)
        assert kept == (step < 4), step  # the fifth change adds the third key since
        assert not kept or index._scanner.whole is whole


def test_a_library_giving_other_positions_is_not_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Positions in UTF-8 bytes (the CJK characters before a key count three each) would
    put every check after them in the wrong place: the count walks the buckets."""

    def in_bytes(self: _key_scan.KeyScanner, text: str) -> Iterator[tuple[str, int, int]]:
        data = text.encode()
        for key in self.keys:
            start = data.find(key.encode())
            if start >= 0:
                yield key, start, start + len(key.encode())

    monkeypatch.setattr(_key_scan.KeyScanner, "occurrences", in_bytes)
    _key_scan._works.cache_clear()
    try:
        assert _key_scan.scanner(["pool"]) is None
        index = ExactIndex(ENTRIES)
        assert index.frequency(TEXTS).counts["redis连接池耗尽"] == 1
        assert index._scanner is None
    finally:
        _key_scan._works.cache_clear()
    assert "walking the buckets" in caplog.text
