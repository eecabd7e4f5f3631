"""The governed lookup: L0 exact + L1 hybrid → normalised level → session dedup.

``LookupResult`` is what the model sees (no raw scores); ``RetrievalDetails`` is what
the recorder keeps (raw scores and similarities, never shown to the model).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from superbiz._messages import localized
from superbiz._text import Language, detect_language
from superbiz.governance.tracker import SessionTracker
from superbiz.knowledge.base import KnowledgeBase
from superbiz.retrieval.exact_index import ExactIndex, ExactMatch
from superbiz.retrieval.relevance import RelevanceLevel, completeness_hint, relevance_level
from superbiz.retrieval.search import DocHit


@dataclass(frozen=True, slots=True)
class PrimaryResult:
    title: str
    domain: str
    path: str
    heading: str
    content: str


@dataclass(frozen=True, slots=True)
class SupplementResult:
    title: str
    domain: str
    path: str
    excerpt: str


@dataclass(frozen=True, slots=True)
class LookupResult:
    """What the model sees after ``lookup_knowledge`` (seed 000 §2)."""

    found: bool
    relevance_level: RelevanceLevel | None
    completeness_hint: str
    retrieved_domains_this_session: list[str]
    message: str
    primary: PrimaryResult | None = None
    supplement: list[SupplementResult] = field(default_factory=list)
    dedup_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RetrievalDetails:
    """Scores behind a result (seed 000 §4), kept for recording, never shown to the model."""

    l0_match_count: int
    l0_titles: list[str]
    l1_top_score: float | None
    l1_top_similarity: float | None
    l1_match_count: int
    l1_scores: list[float | None]  # raw backend scores (squared L2); None: BM25-only hit
    relevance_level: str | None
    completeness_hint: str
    retrieved_domains: list[str]
    dedup_reason: str | None
    l1_similarities: list[float] = field(default_factory=list)
    l1_fused_scores: list[float] = field(default_factory=list)
    already_retrieved: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LookupOutcome:
    """A lookup's full outcome: the model's view, the record, and the ranking used."""

    result: LookupResult
    details: RetrievalDetails
    ranked: list[DocHit]
    l0: list[ExactMatch]
    language: Language

    @property
    def shown_docs(self) -> list[str]:
        return self.details.shown


#: a supplement below the reference cosine still qualifies with this share of the
#: primary document's fused score
SUPPLEMENT_SCORE_SHARE = 0.5


def supplements(top: DocHit, rest: list[DocHit], reference: float, limit: int) -> list[DocHit]:
    """The documents shown beside ``top``: the first ``limit`` of ``rest`` (in hybrid-ranking
    order) that qualify by cosine (≥ ``reference``) or by fused score (at least half of
    ``top``'s). The fused rank carries the BM25 evidence that cosine misses: on dev, gold
    runbooks ranked 2nd with cosines of 0.12–0.23, under the 0.3 reference threshold.

    >>> hit = lambda path, score, sim: DocHit(path, path, "ops", score, sim, None)
    >>> top = hit("a", 1.0, 0.35)
    >>> rest = [hit("b", 0.7, 0.12), hit("c", 0.3, 0.31), hit("d", 0.2, 0.05)]
    >>> [d.doc_path for d in supplements(top, rest, reference=0.3, limit=4)]
    ['b', 'c']
    """
    floor = top.score * SUPPLEMENT_SCORE_SHARE
    return [d for d in rest if d.similarity >= reference or d.score >= floor][:limit]


def _titles(titles: list[str], language: Language) -> str:
    quoted = [localized("common.title", language).format(title=t) for t in titles]
    return localized("common.title_separator", language).join(quoted)


class GovernedLookup:
    """``lookup()`` runs one governed retrieval for a session."""

    def __init__(self, kb: KnowledgeBase, tracker: SessionTracker) -> None:
        self.kb = kb
        self.tracker = tracker

    def lookup(
        self,
        session_id: str,
        query: str,
        domain: str | None = None,
        missing_dimension: str | None = None,
    ) -> LookupOutcome:
        if domain:
            domain = self.kb.require_domain(domain)
        text = f"{query} {missing_dimension}" if missing_dimension else query
        language = detect_language(query)
        thresholds = self.kb.thresholds
        settings = self.kb.settings.retrieval

        l0 = self.kb.exact_index.match(text, domain)
        naming = ExactIndex.naming(l0)
        vector, ranked = self.kb.searcher.search(text, domain)
        retrieved = self.tracker.retrieved_docs(session_id)
        fresh_l0 = [m for m in naming if m.doc_path not in retrieved]
        if len(fresh_l0) == 1:
            ranked = self._promote(ranked, fresh_l0[0], vector)
        fresh = [doc for doc in ranked if doc.doc_path not in retrieved]
        top = fresh[0] if fresh else None
        l0_count = len(fresh_l0)
        if l0_count == 1 and (top is None or top.doc_path != fresh_l0[0].doc_path):
            l0_count = 0  # the exact match has no chunks (index being repaired)
        level = relevance_level(l0_count, top.similarity if top else None, thresholds)

        shown: list[DocHit] = []
        dedup_reason = None
        if level is not None and top is not None:
            limit = (
                settings.reference_supplements
                if level is RelevanceLevel.REFERENCE
                else settings.max_supplements
            )
            shown = [top, *supplements(top, fresh[1:], thresholds.reference, limit)]
        else:
            would_show = [
                d
                for d in ranked
                if d.doc_path in retrieved
                and (
                    d.similarity >= thresholds.reference
                    or any(m.doc_path == d.doc_path for m in naming)
                )
            ]
            if would_show:
                level, dedup_reason = RelevanceLevel.DEDUPED, "doc_retrieved"
                already = [d.title for d in would_show]

        if shown:
            self.tracker.mark_many(session_id, [(d.domain, d.doc_path) for d in shown])
        domains = list(dict.fromkeys([*retrieved.values(), *(d.domain for d in shown)]))
        hint = completeness_hint(level, language)

        if shown:
            message = localized("lookup.found", language).format(
                n=len(shown), titles=_titles([d.title for d in shown], language)
            )
        elif dedup_reason:
            message = localized("lookup.deduped", language).format(
                titles=_titles(already, language)
            )
        else:
            message = localized("lookup.none", language)

        result = LookupResult(
            found=bool(shown),
            relevance_level=level,
            completeness_hint=hint,
            retrieved_domains_this_session=domains,
            message=message,
            primary=self._primary(shown[0]) if shown else None,
            supplement=[self._supplement(d) for d in shown[1:]],
            dedup_reason=dedup_reason,
        )
        head = ranked[0] if ranked else None
        details = RetrievalDetails(
            l0_match_count=len(naming),
            l0_titles=[m.title for m in naming],
            l1_top_score=head.raw_dense if head else None,
            l1_top_similarity=head.similarity if head else None,
            l1_match_count=len(ranked),
            l1_scores=[d.raw_dense for d in ranked[:10]],
            l1_fused_scores=[round(d.score, 6) for d in ranked[:10]],
            l1_similarities=[round(d.similarity, 6) for d in ranked[:10]],
            relevance_level=level.value if level else None,
            completeness_hint=hint,
            retrieved_domains=domains,
            dedup_reason=dedup_reason,
            already_retrieved=[d.doc_path for d in ranked if d.doc_path in retrieved][:10],
            shown=[d.doc_path for d in shown],
        )
        return LookupOutcome(result, details, ranked, l0, language)

    def infer_domain(self, query: str) -> str | None:
        """The domain a lookup without one is about, decided cheaply and before any
        result is shown: the exact matches' domain when they agree, else the domain of
        the nearest chunks (majority of the top 3)."""
        matches = self.kb.exact_index.match(query)
        domains = {m.domain for m in ExactIndex.naming(matches) or matches}
        if len(domains) == 1:
            return domains.pop()
        hits = self.kb.store.search_dense(self.kb.searcher.embed(query), 3)
        if not hits:
            return None
        votes = Counter(hit.domain for hit in hits)
        best = max(votes.values())
        return next(hit.domain for hit in hits if votes[hit.domain] == best)

    def _promote(self, ranked: list[DocHit], match: ExactMatch, vector: np.ndarray) -> list[DocHit]:
        """Move the unique exact match to the top, fetching it when L1 missed it."""
        for i, doc in enumerate(ranked):
            if doc.doc_path == match.doc_path:
                return [doc, *ranked[:i], *ranked[i + 1 :]]
        score = ranked[0].score if ranked else 1.0
        doc = self.kb.searcher.document_hit(vector, match.doc_path, score)
        return [doc, *ranked] if doc else ranked

    def _primary(self, doc: DocHit) -> PrimaryResult:
        best = doc.chunks[:2]
        best = sorted(best, key=lambda c: c.hit.chunk_index)
        content = "\n\n".join(c.hit.text for c in best)
        limit = self.kb.settings.retrieval.excerpt_chars
        return PrimaryResult(
            title=doc.title,
            domain=doc.domain,
            path=doc.doc_path,
            heading=doc.chunks[0].hit.heading,
            content=content if len(content) <= limit * 2 else content[: limit * 2] + "…",
        )

    def _supplement(self, doc: DocHit) -> SupplementResult:
        text = doc.chunks[0].hit.text
        limit = self.kb.settings.retrieval.excerpt_chars // 2
        return SupplementResult(
            title=doc.title,
            domain=doc.domain,
            path=doc.doc_path,
            excerpt=text if len(text) <= limit else text[:limit] + "…",
        )
