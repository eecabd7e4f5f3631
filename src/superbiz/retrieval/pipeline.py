"""The retrieval pipeline: L0 exact match + L1 hybrid search → ranked, levelled evidence.

With ``advanced.retrieval.ranker: learned`` the gathered candidates are re-scored by the
learned ranker (``superbiz.retrieval.ranker``) before the exact-match promotion and the level.

``Retriever.retrieve`` is the one call the governed lookup makes. Session dedup stays
with governance: it passes the documents a session already has as ``exclude``, and
the level and the documents to show are decided on the fresh ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from superbiz._text import Language, detect_language
from superbiz.config import RetrievalConfig
from superbiz.retrieval.copies import one_format
from superbiz.retrieval.exact_index import ExactIndex, ExactMatch
from superbiz.retrieval.lexical_agreement import lexically_agreed
from superbiz.retrieval.ranker import load_rankers, rerank
from superbiz.retrieval.relevance import (
    EVIDENCE_LEVELS,
    EvidenceLevels,
    PrimaryEvidence,
    RelevanceLevel,
    Thresholds,
    relevance_level,
    with_answer_evidence,
)
from superbiz.retrieval.search import DocHit, HybridSearcher, document_language
from superbiz.retrieval.title_match import UNIFORM, TitleVocabulary
from superbiz.retrieval.visibility import Visibility

#: a supplement below the reference cosine still qualifies with this share of the
#: primary document's fused score
SUPPLEMENT_SCORE_SHARE = 0.5


class Candidates(NamedTuple):
    """A query's L0 matches, its vector and the hybrid search's documents, fused order."""

    matches: list[ExactMatch]
    vector: np.ndarray
    ranked: list[DocHit]


@dataclass(frozen=True, slots=True)
class Retrieval:
    """One query's evidence, ranked and levelled on the documents not excluded."""

    #: every document found, best first; a unique fresh exact match is promoted to the top
    ranked: list[DocHit]
    #: the L0 matches of the strongest field (the ones that name a document)
    naming: list[ExactMatch]
    #: the level's inputs: naming matches outside ``exclude`` that count (a match whose
    #: document has no chunks does not), and the first fresh document (its cosine)
    exact_count: int
    top: DocHit | None
    level: RelevanceLevel | None
    #: the primary document and its supplements; empty when ``level`` is None
    shown: list[DocHit]
    #: excluded documents that would otherwise be evidence: named, or, when holding nothing
    #: the ranking has a level, its first and those clearing the reference
    withheld: list[DocHit]
    #: with ``advanced.retrieval.levels: evidence``, the probability that the primary answers
    primary_probability: float | None = None
    #: when the session holds a ranked document: the level the lookup would have had if
    #: it held none (whether what the session holds answers the query); else None
    held_level: RelevanceLevel | None = None

    @property
    def top_similarity(self) -> float | None:
        """The first fresh document's cosine: what the cosine level rule reads
        (docs/design.md §2.2)."""
        return self.top.similarity if self.top else None


def supplements(
    top: DocHit,
    rest: list[DocHit],
    thresholds: Thresholds,
    limit: int,
    *,
    language: Language,
    margin: float | None,
    answer_reference: float | None = None,
) -> list[DocHit]:
    """The documents shown beside ``top``: the first ``limit`` of ``rest`` (in hybrid-ranking
    order) that are relevant on their own evidence.

    A document qualifies by cosine when it is at least ``reference`` and, unless ``margin``
    is None, within ``margin`` of the primary's (a document far below a confident primary
    is a neighbour, not an answer), or by fused score, at least half of ``top``'s: the
    fused rank carries the BM25 evidence that cosine misses (on dev, gold runbooks ranked
    2nd with cosines of 0.12–0.23). A cosine under ``highly_relevant`` needs a second
    witness: BM25 found the document too, or the answer model matches its opening at
    ``answer_reference``. A dense neighbour alone was never the answer: none of the 197
    supplements that qualified by cosine alone without BM25 was gold (dev and answer-only);
    without them 2.12 → 1.97 supplements a lookup on answer-only, 1.18 → 1.07 on dev, and
    the same lookups show a gold document (README). A document in another language needs
    more: a highly-relevant cosine, or the fused score *and* a BM25 match of the query's
    own terms. A cosine alone crosses languages loosely: the English NTP alert got Chinese
    replication FAQs because "synchronising" ≈ 同步. Measured on dev: 2.48 → 1.62
    supplements per lookup, 6.5 % → 1.2 % in the other language, the same share of
    lookups with a gold document shown (README).

    >>> hit = lambda path, score, sim, answer=None: DocHit(
    ...     path, "TiDB 同步" if "zh" in path else path, "ops", score, sim, None, answer=answer)
    >>> top = hit("a", 1.0, 0.45)
    >>> rest = [hit("b", 0.7, 0.12), hit("c", 0.3, 0.31), hit("d", 0.3, 0.4),
    ...         hit("e", 0.3, 0.4, answer=0.9), hit("zh", 0.9, 0.5)]
    >>> t = Thresholds(highly_relevant=0.6, reference=0.3)
    >>> kept = supplements(top, rest, t, 4, language="en", margin=0.1, answer_reference=0.85)
    >>> [d.doc_path for d in kept]  # d: a cosine near the primary's, but nothing else
    ['b', 'e']
    """
    floor = _hybrid(top) * SUPPLEMENT_SCORE_SHARE
    near = (
        thresholds.reference
        if margin is None
        else max(thresholds.reference, top.similarity - margin)
    )
    chosen: list[DocHit] = []
    for doc in rest:
        if len(chosen) == limit:
            break
        by_score = _hybrid(doc) >= floor
        lexical = any(c.raw_bm25 is not None for c in doc.chunks)
        by_cosine = doc.similarity >= near and (
            doc.similarity >= thresholds.highly_relevant
            or lexical
            or _answers(doc, answer_reference)
        )
        if not (by_score or by_cosine):
            continue
        if (
            doc.similarity < thresholds.highly_relevant
            and not (by_score and lexical)
            and document_language(doc) != language
        ):
            continue
        chosen.append(doc)
    return chosen


def hidden_answer(fresh: list[DocHit], thresholds: Thresholds, depth: int) -> DocHit | None:
    """The first of the ``depth`` documents after ``fresh[0]`` whose cosine clears the
    reference, when ``fresh[0]``'s does not: a REFERENCE answer the level would hide.

    The level reads the first document's cosine, and BM25 can rank first a page that
    only names the question's words: npm's manual, asked the difference between
    dependencies and devDependencies, put a page of cosine 0.14 first and the
    package.json reference (0.61) second, and the lookup said nothing was relevant. Shown
    beside the first document at REFERENCE, on all four sets a gold document is shown
    more often (dev-answer-only 0.870 → 0.883, dev2-answer-only 0.831 → 0.854; README).

    >>> hit = lambda path, sim: DocHit(path, path, "ops", 1.0, sim, None)
    >>> t = Thresholds(highly_relevant=0.6, reference=0.3)
    >>> hidden_answer([hit("a", 0.14), hit("b", 0.2), hit("c", 0.61)], t, 3).doc_path
    'c'
    >>> hidden_answer([hit("a", 0.35), hit("b", 0.61)], t, 3) is None  # a is an answer
    True
    """
    if not fresh or fresh[0].similarity >= thresholds.reference:
        return None
    return next((d for d in fresh[1 : 1 + depth] if d.similarity >= thresholds.reference), None)


def ranked_first_of_its_key(match: ExactMatch, ranked: list[DocHit]) -> bool:
    """Whether ``match``'s document comes first in the hybrid ranking among the documents
    whose text uses its key (``ExactMatch.others``): a key a few documents share names
    the one the question is about, and which one that is the ranking decides (a runbook
    that mentions another alert by name, asked with that alert's text, is not the other's).

    >>> from superbiz.retrieval.exact_index import MatchField
    >>> match = ExactMatch("a.md", "A", "ops", MatchField.ALIAS, "a", others=("b.md",))
    >>> hit = lambda path: DocHit(path, path, "ops", 1.0, 0.5, None)
    >>> ranked_first_of_its_key(match, [hit("c.md"), hit("a.md"), hit("b.md")])
    True
    >>> ranked_first_of_its_key(match, [hit("b.md"), hit("a.md")])
    False
    """
    if not match.others:
        return True
    users = {match.doc_path, *match.others}
    first = next((d.doc_path for d in ranked if d.doc_path in users), match.doc_path)
    return first == match.doc_path


def _lead(fresh: list[DocHit]) -> float | None:
    """How far the first document's cosine leads the best of the next four (None alone):
    what a calibrated HIGHLY_RELEVANT also asks for (``Thresholds.highly_relevant_lead``)."""
    if len(fresh) < 2:
        return None
    return fresh[0].similarity - max(d.similarity for d in fresh[1:5])


def primary_evidence(ranked: list[DocHit]) -> PrimaryEvidence | None:
    """What ``ranked`` says of its first document; None when the answer model did not rank
    the query (it failed, or the query named one document)."""
    top, rest = ranked[0], ranked[1:]
    if top.answer is None:
        return None
    best_other = max((d.answer for d in rest if d.answer is not None), default=0.0)
    return PrimaryEvidence(
        similarity=top.similarity,
        similarity_lead=top.similarity - max((d.similarity for d in rest[:4]), default=0.0),
        answer=top.answer,
        answer_lead=top.answer - best_other,
        answer_best=top.answer >= best_other,
    )


def _answered(ranked: list[DocHit]) -> bool:
    """Whether the answer model ranked this lookup (its cosines are on the documents)."""
    return any(doc.answer is not None for doc in ranked)


def _answers(doc: DocHit, answer_reference: float | None) -> bool:
    """Whether the answer model matches ``doc``'s opening at the reference level."""
    if answer_reference is None or doc.answer is None:
        return False
    return doc.answer >= answer_reference


def _hybrid(doc: DocHit) -> float:
    """The hybrid fused score, also where the answer model re-ranked: its scores are
    mostly answer cosine, and half the primary's let in 2.58 supplements a lookup instead
    of 2.15 on answer-only."""
    return doc.score if doc.hybrid is None else doc.hybrid


class Retriever:
    """Ranks and levels evidence for a query; ``exact_index`` is called on every query
    because the KB rebuilds its index after documents change; ``sizes`` (each document's
    chunk count) and ``titles`` are the KB's, as ``HybridSearcher.search`` reads them."""

    def __init__(
        self,
        searcher: HybridSearcher,
        exact_index: Callable[[], ExactIndex],
        thresholds: Thresholds,
        settings: RetrievalConfig,
        titles: TitleVocabulary = UNIFORM,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        self._searcher = searcher
        self._titles = titles
        self._sizes = sizes
        self._exact_index = exact_index
        self._thresholds = thresholds
        self._settings = settings
        fitted = settings.evidence_levels
        self._evidence_levels = EvidenceLevels(**fitted.model_dump()) if fitted else EVIDENCE_LEVELS
        self._rankers = load_rankers(settings.ranker_file) if settings.ranker == "learned" else None

    @property
    def titles(self) -> TitleVocabulary:
        """The words of the KB's titles, which the title signal weighs by their rarity."""
        return self._titles

    def candidates(
        self,
        query: str,
        domain: str | None = None,
        *,
        exclude: Collection[str] = (),
        visibility: Visibility | None = None,
    ) -> Candidates:
        """What the learned ranker re-scores for ``query``: the L0 matches (every field)
        and the documents the hybrid search (and the answer model, unless the query names
        one document) found, in the fused order; none ``visibility`` hides."""
        hidden = visibility.hidden if visibility else frozenset()
        matches = self._exact_index().match(query, domain, hidden)
        fresh = [m for m in ExactIndex.naming(matches) if m.doc_path not in exclude]
        vector, ranked = self._searcher.search(
            query,
            domain,
            answers=len(fresh) != 1,
            visibility=visibility,
            titles=self._titles,
            sizes=self._sizes,
        )
        return Candidates(matches, vector, ranked)

    def retrieve(
        self,
        query: str,
        domain: str | None = None,
        *,
        exclude: Collection[str] = (),
        page: bool = False,
        visibility: Visibility | None = None,
    ) -> Retrieval:
        """Exact matches, the hybrid ranking, the level and what to show for ``query``.

        ``page``: the lookup is a page of a turn nothing answered yet (the governor's
        ``Admission.paging``): when this one does not answer either (REFERENCE or no
        result), it shows the next ``1 + reference_supplements`` documents of the ranking
        the session has not seen, whatever their cosine, as REFERENCE. Without it a
        paraphrase shows only what clears the thresholds, often nothing new (DEDUPED),
        and the turn runs out of lookups before reaching the answer ranked 5th to 10th
        (answer-only sets: evidence recall 0.922 → 0.952 and 0.897 → 0.920, README).

        ``visibility``: what the reader may see; every search (exact, vector, BM25, answer
        model) leaves the rest out before anything is ranked, counted or levelled."""
        excluded = frozenset(exclude)
        # a query that names one document has its answer: the answer model is not asked
        exact, vector, ranked = self.candidates(
            query, domain, exclude=excluded, visibility=visibility
        )
        naming = ExactIndex.naming(exact)
        fresh_exact = [m for m in naming if m.doc_path not in excluded]
        model = self._rankers.for_lookup(_answered(ranked)) if self._rankers else None
        if model is not None:
            ranked = rerank(query, ranked, exact, model)
        if len(fresh_exact) == 1 and not ranked_first_of_its_key(fresh_exact[0], ranked):
            fresh_exact = []  # another document using the key answers better: no name
        if len(fresh_exact) == 1:
            ranked = self._promote(ranked, fresh_exact[0], vector)
        ranked = one_format(ranked, excluded)
        fresh = [doc for doc in ranked if doc.doc_path not in excluded]
        top = fresh[0] if fresh else None
        exact_count = len(fresh_exact)
        if exact_count == 1 and (top is None or top.doc_path != fresh_exact[0].doc_path):
            exact_count = 0  # the exact match has no chunks (index being repaired)
        level, probability, hidden = self._level(query, fresh, ranked, exact_count)
        held_level = None
        if any(doc.doc_path in excluded for doc in ranked):
            held_level = self._level_holding_nothing(query, ranked, naming)

        shown: list[DocHit] = []
        if page and top is not None and level in (None, RelevanceLevel.REFERENCE):
            level, shown = (
                RelevanceLevel.REFERENCE,
                fresh[: 1 + self._settings.reference_supplements],
            )
        elif level is not None and top is not None:
            limit = (
                self._settings.reference_supplements
                if level is RelevanceLevel.REFERENCE
                else self._settings.max_supplements
            )
            # a REFERENCE primary is uncertain: its neighbours get a margin of their own
            margin = (
                self._settings.reference_supplement_margin
                if level is RelevanceLevel.REFERENCE
                else self._settings.supplement_margin
            )
            extra = supplements(
                top,
                fresh[1:],
                self._thresholds,
                limit,
                language=detect_language(query),
                margin=margin,
                answer_reference=self._settings.answers.reference,
            )
            shown = [top, *extra]
            if hidden is not None:  # beside the supplements, in the ranking's order
                kept = {d.doc_path for d in shown} | {hidden.doc_path}
                shown = [d for d in fresh if d.doc_path in kept]
        named = {m.doc_path for m in naming}
        # what a lookup holding nothing would have shown: nothing when its ranking has no
        # level, else its first document (also one the level raised above its cosine:
        # lexical agreement, a hidden answer) and those clearing the reference
        first = ranked[0].doc_path if held_level is not None else None
        withheld = [
            d
            for d in ranked
            if d.doc_path in excluded
            and (
                d.doc_path in named
                or d.doc_path == first
                or (first is not None and d.similarity >= self._thresholds.reference)
            )
        ]
        return Retrieval(
            ranked=ranked,
            naming=naming,
            exact_count=exact_count,
            top=top,
            level=level,
            shown=shown,
            withheld=withheld,
            primary_probability=probability,
            held_level=held_level,
        )

    def _level_holding_nothing(
        self, query: str, ranked: list[DocHit], naming: list[ExactMatch]
    ) -> RelevanceLevel | None:
        """The level of ``ranked`` in a session holding none of it: PRECISE when the query
        names one document of it (a fresh lookup promotes that one), else its first's."""
        one = naming[0] if len(naming) == 1 else None
        if (
            one is not None
            and ranked_first_of_its_key(one, ranked)
            and any(doc.doc_path == one.doc_path for doc in ranked)
        ):
            return RelevanceLevel.PRECISE
        return self._level(query, ranked, ranked, 0)[0]

    def _level(
        self, query: str, fresh: list[DocHit], ranked: list[DocHit], exact_count: int
    ) -> tuple[RelevanceLevel | None, float | None, DocHit | None]:
        """The level of ``fresh``'s first document (``ranked``: the whole ranking), the
        evidence model's probability that it answers, and a REFERENCE answer it hides."""
        top = fresh[0] if fresh else None
        level = relevance_level(
            exact_count, top.similarity if top else None, self._thresholds, _lead(fresh)
        )
        if top is None:
            return level, None, None
        probability = hidden = None
        level = with_answer_evidence(level, top.answer, self._settings.answers.reference)
        # on the whole ranking: when the session holds its first document, the lexical
        # evidence is about that one (DEDUPED), not the next
        if level is None and ranked[0] is top and lexically_agreed(query, ranked):
            level = RelevanceLevel.REFERENCE
        if level is None and ranked[0] is top:
            hidden = hidden_answer(fresh, self._thresholds, self._settings.reference_supplements)
            level = RelevanceLevel.REFERENCE if hidden else None
        evidence = primary_evidence(fresh) if self._settings.levels == "evidence" else None
        if evidence is not None and level is not RelevanceLevel.PRECISE:
            probability = self._evidence_levels.probability(evidence)
            level = self._evidence_levels.level(level, evidence)
        return level, probability, hidden

    def infer_domain(self, query: str, visibility: Visibility | None = None) -> str | None:
        """The domain a query without one is about, decided cheaply: the exact matches'
        domain when they agree, else the domain of the nearest chunks (majority of the
        top 3, the nearer chunk breaking a tie); among what ``visibility`` shows."""
        hidden = visibility.hidden if visibility else frozenset()
        matches = self._exact_index().match(query, None, hidden)
        domains = {m.domain for m in ExactIndex.naming(matches) or matches}
        if len(domains) == 1:
            return domains.pop()
        hits = self._searcher.nearest_chunks(query, 3, visibility)
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
        found = self._searcher.document_hit(vector, match.doc_path, score)
        return [found, *ranked] if found else ranked
