"""Title coverage: the share of a document's title a query names, and how it reorders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fakes.embedders import KeywordEmbedder, TableEmbedder
from fakes.records import chunk_record
from superbiz.config import RetrievalConfig, Settings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.search import HybridSearcher
from superbiz.retrieval.title_match import (
    TitleCounts,
    TitleVocabulary,
    title_coverage,
    title_words,
)


@pytest.mark.parametrize(
    ("title", "words"),
    [
        ("KubePodCrashLooping", ["kube", "pod", "crash", "looping"]),
        ("Node Clock Not Synchronising", ["node", "clock", "synchronising"]),
        ("PrometheusTSDBReloadsFailing", ["prometheus", "tsdb", "reloads", "failing"]),
        ("TiDB 数据迁移常见问题", []),  # no Latin word of three letters: Chinese titles are neutral
        ("", []),
    ],
)
def test_title_words(title: str, words: list[str]) -> None:
    assert list(title_words(title)) == words


@pytest.mark.parametrize(
    ("title", "query", "coverage"),
    [
        ("Kube Pod Crash Looping", 'Pod web is waiting (reason: "CrashLoopBackOff")', 0.75),
        ("Kube Node Not Ready", "worker-3 has been unready for 15 minutes", 0.0),
        ("Kube Node Not Ready", "Node worker-3 is not ready", 2 / 3),
        ("Node Clock Skew Detected", "Clock skew detected on node 10.0.3.17", 1.0),
        ("Kube Quota Almost Full", "Namespace uses 90% of its pods quota", 0.25),
        ("TiDB 数据迁移常见问题", "TiDB 数据迁移失败", 0.0),
        ("Kube API Down", "", 0.0),
    ],
)
def test_title_coverage(title: str, query: str, coverage: float) -> None:
    assert title_coverage(title, title_words(query)) == pytest.approx(coverage)


def _searcher(title_weight: float) -> HybridSearcher:
    store = InMemoryChunkStore()
    store.ensure_collection(2)
    # the scheduler runbook is nearer in vector space and has the same words in its text;
    # the disk runbook only spreads the min-max range
    for path, title, text, vector in (
        ("k/sched.md", "Kube Scheduler Down", "pod restarts", (1.0, 0.0)),
        ("k/crash.md", "Kube Pod Crash Looping", "pod restarts", (0.8, 0.6)),
        ("k/disk.md", "Node Disk Full", "disk full", (0.0, 1.0)),
    ):
        store.replace_document(path, [chunk_record(path, vector, text, domain="k", title=title)])
    settings = RetrievalConfig(title_weight=title_weight)
    return HybridSearcher(TableEmbedder({QUERY: (1.0, 0.0)}, 2), store, settings)


QUERY = "pod restarts: crash looping"


def test_the_title_the_query_names_ranks_first() -> None:
    _, ranked = _searcher(0.0).search(QUERY)
    assert [d.doc_path for d in ranked][:2] == ["k/sched.md", "k/crash.md"]
    _, ranked = _searcher(0.4).search(QUERY)
    assert [d.doc_path for d in ranked][:2] == ["k/crash.md", "k/sched.md"]
    assert ranked[0].similarity == pytest.approx(0.8)  # the cosine itself is unchanged


def test_coverage_counts_a_title_word_as_any_pair_of_words_sharing_a_prefix_would() -> None:
    """The query's prefixes, set apart once per query, give the pairwise rule's share: a
    query word that starts with the title word's first four letters, or the title word
    with the query word's (short words of three letters included)."""
    rng = np.random.default_rng(36)
    words = ["".join(rng.choice(list("abc"), size=n)) for n in rng.integers(3, 7, size=400)]
    for _ in range(2000):
        title = " ".join(rng.choice(words, size=rng.integers(1, 5)))
        asked = tuple(rng.choice(words, size=rng.integers(0, 5)))
        expected = title_words(title)
        pairwise = sum(
            any(a.startswith(w[:4]) or w.startswith(a[:4]) for a in asked) for w in expected
        ) / len(expected)
        assert title_coverage(title, asked) == pairwise


def test_a_word_most_titles_share_weighs_little() -> None:
    """A storage operator's alerts all start "Ceph": a query naming "ceph" and "down"
    means the page whose title says "Down" rather than the nearer Ceph page; each names a
    third of its title."""
    titles = ["Ceph Cluster Full", "Ceph Monitor Slow", "Ceph Pool Quota", "Node Down Alert"]
    vocabulary = TitleVocabulary.of(titles)
    assert vocabulary.weight("ceph") < vocabulary.weight("down") == vocabulary.weight("node")
    asked = title_words("ceph is down")
    assert title_coverage("Ceph Cluster Full", asked) == title_coverage("Node Down Alert", asked)
    assert title_coverage("Ceph Cluster Full", asked, vocabulary) < 0.2
    assert title_coverage("Node Down Alert", asked, vocabulary) == pytest.approx(1 / 3)

    store = InMemoryChunkStore()
    store.ensure_collection(2)
    for n, (title, vector) in enumerate(
        zip(titles, [(1.0, 0.0), (0.0, 1.0), (0.0, 1.0), (0.9, 0.44)], strict=True)
    ):
        path = f"ops/{n}.md"
        text = "ceph down" if n in (0, 3) else "ceph slow"  # BM25 ties the two pages
        store.replace_document(path, [chunk_record(path, vector, text, title=title)])
    query = "ceph is down"
    searcher = HybridSearcher(TableEmbedder({query: (1.0, 0.0)}, 2), store, RetrievalConfig())
    assert searcher.search(query)[1][0].title == "Ceph Cluster Full"
    assert searcher.search(query, titles=vocabulary)[1][0].title == "Node Down Alert"


def test_title_counts_kept_by_difference_weigh_as_the_titles_counted_whole() -> None:
    """After documents come, go and change their titles, the vocabulary kept by
    difference weighs every word as one counted from every title does."""
    changes = [
        {"a": "Ceph Cluster Full", "b": "Ceph Monitor Slow", "c": "Node Down Alert"},
        {"a": "Ceph Cluster Full", "c": "Node Down Alert", "d": "Ceph Pool Quota"},  # b went
        {"a": "Ceph Cluster Nearly Full", "c": "Node Down Alert", "d": "Ceph Pool Quota"},
        {"c": "Node Down Alert"},
        {},
        {"e": "KubePodCrashLooping", "f": "Kube Pod Not Ready", "g": "支付失败排查"},
    ]
    kept = TitleCounts()
    for titles in changes:
        vocabulary, whole = kept.vocabulary(titles), TitleVocabulary.of(titles.values())
        words = {w for title in (*titles.values(), "Ceph Monitor Slow") for w in title_words(title)}
        assert {w: vocabulary.weight(w) for w in words} == {w: whole.weight(w) for w in words}


def test_a_knowledge_base_weighs_title_words_by_its_own_titles(
    tmp_path: Path, kb_writer: Callable[..., Path]
) -> None:
    """The retriever a knowledge base builds after each change reads its titles: a word
    every title shares weighs less than a title's own, and a new document's words count
    from the first lookup after it."""
    files = {
        f"ops/ceph-{word.lower()}.md": f"# Ceph {word}\n\nThe storage cluster is {word}.\n"
        for word in ("Full", "Slow", "Degraded")
    }
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path}/kb.db")
    kb = KnowledgeBase(settings, embedder=KeywordEmbedder(["storage"]), store=InMemoryChunkStore())
    try:
        Ingestor(kb).ingest([kb_writer(tmp_path / "kb", files)])
        titles = kb.retriever.titles
        assert titles.weight("ceph") < titles.weight("degraded") == titles.weight("slow")
        assert titles.weight("node") > titles.weight("degraded")  # in no title yet
        node = {"ops/node-down.md": "# Node Down\n\nA node of the storage cluster is down.\n"}
        Ingestor(kb).ingest([kb_writer(tmp_path / "kb", node)])
        assert kb.retriever.titles is not titles
        assert kb.retriever.titles.weight("node") == kb.retriever.titles.weight("degraded")
    finally:
        kb.close()
