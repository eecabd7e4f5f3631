"""The retrieval pipeline on an in-memory store with chosen vectors, so every cosine is
known: levels, exact-match promotion, supplements, exclusion and domain inference."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fakes.embedders import TableEmbedder
from fakes.records import chunk_record
from superbiz.config import RetrievalConfig
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.memory_store import InMemoryChunkStore
from superbiz.retrieval.pipeline import Retriever
from superbiz.retrieval.records import ChunkRecord
from superbiz.retrieval.relevance import RelevanceLevel, Thresholds
from superbiz.retrieval.search import DocHit, HybridSearcher

REDIS, KAFKA, LIMIT, GHOST = "ops/redis.md", "ops/kafka.md", "api/limit.md", "ops/ghost.md"
THRESHOLDS = Thresholds(highly_relevant=0.6, reference=0.3)
# axes: redis, kafka-ish, limit, "anything else"
VECTORS = {
    REDIS: (1.0, 0.0, 0.0, 0.0),
    KAFKA: (0.7, float(np.sqrt(1 - 0.49)), 0.0, 0.0),  # cosine 0.7 with REDIS
    LIMIT: (0.0, 0.0, 1.0, 0.0),
}
QUERIES = {
    "pool exhausted": (1.0, 0.0, 0.0, 0.0),  # cosine 1.0 with REDIS, 0.7 with KAFKA
    "cache trouble": (0.45, 0.0, 0.0, float(np.sqrt(1 - 0.45**2))),  # 0.45 with REDIS
    "Rate limiting how-to": (1.0, 0.0, 0.0, 0.0),  # names LIMIT; L1 prefers REDIS
    # 0.45 with REDIS, 0.33 with KAFKA, 0.25 with LIMIT: KAFKA's fused score is under half
    "pool or queue trouble": (
        0.45,
        0.021,
        0.25,
        float(np.sqrt(1 - 0.45**2 - 0.021**2 - 0.25**2)),
    ),
    # a keyword query: cosine 0.2 with LIMIT, whose text holds both its words
    "tenant quota": (0.0, 0.0, 0.2, float(np.sqrt(1 - 0.04))),
    # BM25 puts LIMIT (two of its words, cosine 0.2) above REDIS (one word, cosine 0.4)
    "tenant quota pool": (0.4, 0.0, 0.2, float(np.sqrt(1 - 0.16 - 0.04))),
}
TEXTS = {REDIS: "pool exhausted", KAFKA: "consumer backlog", LIMIT: "tenant quota"}


def chunk(doc: str, domain: str) -> ChunkRecord:
    return chunk_record(doc, VECTORS[doc], TEXTS[doc], domain=domain)


def make_searcher(retrieval: RetrievalConfig) -> HybridSearcher:
    store = InMemoryChunkStore()
    store.ensure_collection(4)
    for doc, domain in ((REDIS, "ops"), (KAFKA, "ops"), (LIMIT, "api")):
        store.replace_document(doc, [chunk(doc, domain)])
    return HybridSearcher(TableEmbedder(QUERIES, 4), store, retrieval)


def make_retriever(**settings: float | None) -> Retriever:
    index = ExactIndex(
        [
            ExactEntry(REDIS, "Redis pool", "ops"),
            ExactEntry(KAFKA, "Kafka lag", "ops"),
            ExactEntry(LIMIT, "Rate limiting", "api"),
            ExactEntry(GHOST, "Ghost runbook", "ops"),  # no chunks: index being repaired
        ]
    )
    retrieval = RetrievalConfig(**settings)
    return Retriever(make_searcher(retrieval), lambda: index, THRESHOLDS, retrieval)


@pytest.fixture
def retriever() -> Retriever:
    return make_retriever()


def paths(docs: list[DocHit]) -> list[str]:
    return [d.doc_path for d in docs]


def test_high_cosine_is_highly_relevant_with_qualifying_supplements(retriever: Retriever) -> None:
    found = retriever.retrieve("pool exhausted")
    assert found.level is RelevanceLevel.HIGHLY_RELEVANT
    assert found.exact_count == 0 and found.top_similarity == pytest.approx(1.0)
    # KAFKA's cosine 0.7 is 0.3 below the primary's and its fused score under half
    assert paths(found.shown) == [REDIS]
    assert paths(found.ranked)[:2] == [REDIS, KAFKA] and found.withheld == []
    # within a wider margin KAFKA qualifies by cosine; LIMIT (cosine 0) by neither rule
    found = make_retriever(supplement_margin=0.4).retrieve("pool exhausted")
    assert paths(found.shown) == [REDIS, KAFKA]


def test_middle_cosine_is_reference() -> None:
    found = make_retriever(reference_supplements=0).retrieve("cache trouble")
    assert found.level is RelevanceLevel.REFERENCE
    assert found.top_similarity == pytest.approx(0.45, abs=1e-6)
    assert paths(found.shown) == [REDIS]  # reference_supplements=0: the primary only


def test_a_reference_primary_shows_a_neighbour_by_fused_score(retriever: Retriever) -> None:
    found = retriever.retrieve("cache trouble")
    assert found.level is RelevanceLevel.REFERENCE
    # KAFKA's cosine 0.315 is 0.135 below the primary's, outside every margin, but its
    # fused score is over half the primary's
    assert paths(found.shown) == [REDIS, KAFKA]


def test_a_dense_neighbour_alone_is_not_shown_whatever_the_margin() -> None:
    # KAFKA's cosine (0.33 ≥ reference 0.3) is its only evidence: BM25 did not find it
    # ("consumer backlog" shares no term with the query) and its fused score is under half
    found = make_retriever().retrieve("pool or queue trouble")
    assert found.level is RelevanceLevel.REFERENCE
    kafka = found.ranked[1]
    assert kafka.doc_path == KAFKA and kafka.score < found.ranked[0].score / 2
    assert all(c.raw_bm25 is None for c in kafka.chunks)
    for margin in (0.1, 0.15, None):  # within a wider margin, or none, it still needs BM25
        found = make_retriever(reference_supplement_margin=margin).retrieve("pool or queue trouble")
        assert paths(found.shown) == [REDIS]


def test_nothing_above_reference_is_no_result(retriever: Retriever) -> None:
    found = retriever.retrieve("unrelated words")
    assert found.level is None and found.shown == []
    assert found.top_similarity is not None and found.top_similarity < THRESHOLDS.reference


def test_a_page_shows_the_next_documents_whatever_their_cosine(retriever: Retriever) -> None:
    """A page of a turn nothing answered: no result becomes the ranking's next documents."""
    found = retriever.retrieve("unrelated words", page=True)
    assert found.level is RelevanceLevel.REFERENCE
    assert paths(found.shown) == paths(found.ranked)[:4] and len(found.shown) == 3
    first = found.ranked[0].doc_path
    # past what the session holds: the next ones, never DEDUPED while any is left
    later = retriever.retrieve("unrelated words", exclude={first}, page=True)
    assert paths(later.shown) == [d for d in paths(found.ranked) if d != first]


def test_a_page_with_a_reference_primary_shows_a_full_page() -> None:
    plain = make_retriever(reference_supplements=1).retrieve("pool or queue trouble")
    assert paths(plain.shown) == [REDIS]  # KAFKA qualifies by neither cosine nor fused score
    paged = make_retriever(reference_supplements=1).retrieve("pool or queue trouble", page=True)
    assert paged.level is RelevanceLevel.REFERENCE
    assert paths(paged.shown) == paths(paged.ranked)[:2]


def test_a_page_that_answers_is_shown_as_any_lookup(retriever: Retriever) -> None:
    found = retriever.retrieve("pool exhausted", page=True)
    assert found.level is RelevanceLevel.HIGHLY_RELEVANT and paths(found.shown) == [REDIS]


def test_a_keyword_query_under_the_cosine_threshold_is_reference(retriever: Retriever) -> None:
    """Every key term of the query is in the top document, which both lists put first."""
    found = retriever.retrieve("tenant quota")
    assert found.top_similarity == pytest.approx(0.2, abs=1e-6)
    assert found.level is RelevanceLevel.REFERENCE and paths(found.shown) == [LIMIT]


def test_a_unique_exact_match_is_promoted_and_precise(retriever: Retriever) -> None:
    found = retriever.retrieve("Rate limiting how-to")
    assert [m.doc_path for m in found.naming] == [LIMIT]
    assert found.exact_count == 1 and found.level is RelevanceLevel.PRECISE
    assert paths(found.ranked)[0] == LIMIT and paths(found.shown)[0] == LIMIT


def test_an_exact_match_outside_the_candidates_is_fetched() -> None:
    retriever = make_retriever(candidates=1, bm25_candidates=1)
    found = retriever.retrieve("Rate limiting how-to")
    assert paths(found.ranked) == [LIMIT, REDIS]
    assert found.ranked[0].score == found.ranked[1].score  # scored like the L1 top
    assert found.ranked[0].similarity == pytest.approx(0.0)
    assert found.level is RelevanceLevel.PRECISE


def test_an_exact_match_without_chunks_does_not_count(retriever: Retriever) -> None:
    found = retriever.retrieve("Ghost runbook")
    assert [m.doc_path for m in found.naming] == [GHOST]
    assert found.exact_count == 0 and found.level is None


def test_excluded_documents_are_withheld_and_the_level_is_on_the_rest(
    retriever: Retriever,
) -> None:
    found = retriever.retrieve("pool exhausted", exclude=[REDIS])
    assert paths(found.ranked)[0] == REDIS  # the ranking itself is unchanged
    assert found.level is RelevanceLevel.HIGHLY_RELEVANT
    assert found.top_similarity == pytest.approx(0.7, abs=1e-6)
    assert paths(found.shown) == [KAFKA] and paths(found.withheld) == [REDIS]

    found = retriever.retrieve("pool exhausted", exclude=[REDIS, KAFKA])
    assert found.level is None and found.shown == []
    assert paths(found.withheld) == [REDIS, KAFKA]


def test_the_level_the_held_documents_would_have_had_is_kept(retriever: Retriever) -> None:
    """Whether what the session holds answers the query: a DEDUPED lookup closes its
    domain only when it does (``TurnGovernor.record``)."""
    held = retriever.retrieve("pool exhausted", exclude=[REDIS, KAFKA])
    assert held.shown == [] and held.held_level is RelevanceLevel.HIGHLY_RELEVANT
    weak = retriever.retrieve("cache trouble", exclude=[REDIS, KAFKA])
    assert weak.shown == [] and paths(weak.withheld) == [REDIS, KAFKA]
    assert weak.held_level is RelevanceLevel.REFERENCE
    assert retriever.retrieve("pool exhausted").held_level is None  # the session holds none


def test_a_held_first_document_the_level_raises_is_withheld(retriever: Retriever) -> None:
    """Under the reference, LIMIT holds both words of a keyword query: holding nothing the
    lookup shows it (REFERENCE); held, it is what the session has, not nothing."""
    assert retriever.retrieve("tenant quota").level is RelevanceLevel.REFERENCE
    held = retriever.retrieve("tenant quota", exclude=[LIMIT])
    assert held.held_level is RelevanceLevel.REFERENCE and paths(held.withheld) == [LIMIT]


def test_a_held_document_is_withheld_only_if_a_lookup_holding_nothing_showed_it() -> None:
    """REDIS clears the reference but ranks under LIMIT, which does not and hides no answer
    within reach (no reference supplements): holding nothing, the lookup shows nothing, so
    holding REDIS it is not DEDUPED either (npm's manual, "How do I undo a publish?", had
    quoted a held page ranked 5th as the answer where a fresh session found nothing)."""
    retriever = make_retriever(reference_supplements=0)
    assert retriever.retrieve("tenant quota pool").level is None
    found = retriever.retrieve("tenant quota pool", exclude=[REDIS])
    assert found.ranked[1].doc_path == REDIS
    assert found.ranked[1].similarity >= THRESHOLDS.reference
    assert found.held_level is None and found.withheld == []


def test_one_page_in_two_formats_is_one_document() -> None:
    """Node.js ships its API docs as .md and .html: both versions of a page were shown,
    two slots for one page; held in one format, the other came back as new."""
    html = "ops/redis.html"
    store = InMemoryChunkStore()
    store.ensure_collection(4)
    for path, source, title in ((REDIS, REDIS, "Redis pool"), (html, REDIS, "Redis pool"),
                                (KAFKA, KAFKA, "Kafka lag")):  # fmt: skip
        record = replace(chunk(source, "ops"), id=f"{path}#0", doc_path=path, title=title)
        store.replace_document(path, [record])
    retrieval = RetrievalConfig()
    searcher = HybridSearcher(TableEmbedder(QUERIES, 4), store, retrieval)
    retriever = Retriever(searcher, lambda: ExactIndex([]), THRESHOLDS, retrieval)

    found = retriever.retrieve("pool exhausted")
    assert len(found.ranked) == 2 and paths(found.ranked)[1] == KAFKA
    assert len({REDIS, html} & set(paths(found.shown))) == 1
    held = retriever.retrieve("pool exhausted", exclude=[html])
    assert paths(held.ranked) == [html, KAFKA]  # the page is held, in the format held
    assert paths(held.shown) == [KAFKA] and paths(held.withheld) == [html]


def test_an_excluded_exact_match_is_neither_promoted_nor_precise(retriever: Retriever) -> None:
    found = retriever.retrieve("Rate limiting how-to", exclude=[LIMIT])
    assert found.exact_count == 0 and paths(found.ranked)[0] == REDIS
    assert found.level is RelevanceLevel.HIGHLY_RELEVANT
    assert LIMIT in paths(found.withheld)  # named, though its cosine is 0
    assert found.held_level is RelevanceLevel.PRECISE  # what a fresh lookup would say


def test_domain_filter(retriever: Retriever) -> None:
    found = retriever.retrieve("pool exhausted", "api")
    assert {d.domain for d in found.ranked} == {"api"}
    assert found.level is None


def test_infer_domain_from_exact_matches_then_nearest_chunks(retriever: Retriever) -> None:
    assert retriever.infer_domain("Rate limiting how-to") == "api"
    assert retriever.infer_domain("pool exhausted") == "ops"  # REDIS, KAFKA, LIMIT


def test_a_first_document_under_the_reference_does_not_hide_one_above_it(
    retriever: Retriever,
) -> None:
    found = retriever.retrieve("tenant quota pool")
    assert paths(found.ranked)[:2] == [LIMIT, REDIS]
    assert found.ranked[0].similarity < THRESHOLDS.reference <= found.ranked[1].similarity
    # the level no longer reads the first document alone: REFERENCE, both shown in order
    assert found.level is RelevanceLevel.REFERENCE
    assert paths(found.shown) == [LIMIT, REDIS]


def test_a_long_document_pays_for_its_many_chunks() -> None:
    """The best of a long page's chunks is the best of many draws: fusion takes
    ``length_weight`` × ln(chunks) off its score, so a page of 400 chunks that matches
    best by one chunk ranks under a one-chunk page that matches nearly as well."""
    sizes = {REDIS: 400, KAFKA: 1, LIMIT: 1}

    def first(weight: float) -> str:
        searcher = make_searcher(RetrievalConfig(length_weight=weight))
        return searcher.search("pool exhausted", sizes=sizes)[1][0].doc_path

    assert first(0.0) == REDIS
    assert first(0.2) == KAFKA
