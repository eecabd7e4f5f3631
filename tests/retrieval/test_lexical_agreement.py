"""A first document under the reference cosine that the query's own words name."""

from __future__ import annotations

from superbiz.retrieval.lexical_agreement import lexically_agreed
from superbiz.retrieval.records import ChunkHit
from superbiz.retrieval.search import DocHit, ScoredChunk


def _doc(path: str, title: str, text: str, similarity: float, bm25: float) -> DocHit:
    chunk = ScoredChunk(ChunkHit("c", path, "etcd", "", "Meaning", 0, text, 0.0), 0.2, 1.0, bm25)
    return DocHit(path, title, "etcd", 1.3, similarity, 1.0, [chunk])


def test_a_function_word_of_the_query_is_no_term_the_document_must_hold() -> None:
    """prometheus-operator's runbooks: "etcd has no leader" ranked ``etcdNoLeader`` first
    (its title names every word), at a cosine of 0.23, under the KB's reference 0.30, and
    BM25 put another runbook first; it showed nothing, as "has" is not in the runbook."""
    no_leader = _doc(
        "etcd/etcdNoLeader.md",
        "etcdNoLeader",
        "This alert is triggered when etcd cluster does not have a leader.",
        0.23,
        4.0,
    )
    fsync = _doc(
        "etcd/etcdHighFsyncDurations.md",
        "etcdHighFsyncDurations",
        "Slow disks make the leader miss its heartbeats; a new leader is elected.",
        0.10,
        6.0,
    )
    assert lexically_agreed("etcd has no leader", [no_leader, fsync])
    assert not lexically_agreed("etcd leader heartbeats", [no_leader, fsync])


def test_the_dense_first_document_may_lack_one_word_no_other_document_holds() -> None:
    """37signals' handbook: "What happens on my first day?" ranked the onboarding page first
    by cosine (0.28, under the reference) and it says "first day", not "happens"; a titles
    page that says "first" often headed BM25, and the lookup showed nothing."""
    onboarding = _doc(
        "getting-started.md",
        "Getting Started",
        "On your first day, you'll log into Basecamp to see your welcome project.",
        0.28,
        5.5,
    )
    titles = _doc(
        "titles-for-designers.md",
        "Titles for Designers",
        "In the first year a designer learns what happens when work ships.",
        0.02,
        9.0,
    )
    assert lexically_agreed("What happens on my first day?", [onboarding, titles])
    # a document further down that names every word is the one to show, not this one
    whole = _doc("rituals.md", "Rituals", "What happens on your first day: a call.", 0.1, 4.0)
    assert not lexically_agreed("What happens on my first day?", [onboarding, titles, whole])
    # two words of three are not enough when the first is not the dense search's first
    assert not lexically_agreed("What happens on my first day?", [titles, onboarding])
