"""The governed lookup: retrieval's levelled evidence + session dedup, wording, record.

Retrieval (``KnowledgeBase.retrieve``) ranks and levels; this module withholds what
the session already has, words the result and keeps the scores for the record.
``LookupResult`` is what the model sees (no raw scores); ``RetrievalDetails`` is what
the recorder keeps (raw scores and similarities, never shown to the model).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from superbiz._messages import localized
from superbiz._text import Language, asker_language
from superbiz.access import Reader
from superbiz.governance.observer import UNOBSERVED, CallObserver
from superbiz.governance.results import (
    LookupResult,
    PrimaryResult,
    RetrievalDetails,
    SupplementResult,
)
from superbiz.governance.tracker import SessionTracker
from superbiz.governance.verdicts import GOOD_LEVELS, DedupReason
from superbiz.knowledge.documents.ingested import as_rendered, cited_page
from superbiz.knowledge.kb.access_rules import ReaderView
from superbiz.retrieval.pipeline import Retrieval
from superbiz.retrieval.relevance import RelevanceLevel, completeness_hint
from superbiz.retrieval.search import DocHit


@dataclass(frozen=True, slots=True)
class LookupOutcome:
    """A lookup's full outcome: the model's view, the record, and the ranking used."""

    result: LookupResult
    details: RetrievalDetails
    ranked: list[DocHit]
    language: Language


_RANK = {RelevanceLevel.PRECISE: 3, RelevanceLevel.HIGHLY_RELEVANT: 2, RelevanceLevel.REFERENCE: 1}


def level_rank(level: RelevanceLevel | None) -> int:
    """How much a level says the primary answers: PRECISE 3 … REFERENCE 1, nothing 0."""
    return _RANK.get(level, 0) if level is not None else 0


def _titles(titles: list[str], language: Language) -> str:
    quoted = [localized("common.title", language).format(title=t) for t in titles]
    return localized("common.title_separator", language).join(quoted)


class SearchedKnowledge(Protocol):
    """What a governed lookup needs from the knowledge base (``KnowledgeBase`` is one)."""

    @property
    def excerpt_chars(self) -> int:
        """The excerpt unit: a primary document shows up to twice this (its two best
        chunks), a supplement up to half of it."""
        ...

    def retrieve(
        self,
        query: str,
        domain: str | None = None,
        *,
        exclude: Collection[str] = (),
        page: bool = False,
        reader: Reader | None = None,
    ) -> Retrieval:
        """Ranked, levelled evidence among the documents not in ``exclude`` that
        ``reader`` may read (None: an unrestricted reader); ``page``: when nothing
        answers, the next documents of the ranking, whatever their level."""
        ...

    def infer_domain(self, query: str, reader: Reader | None = None) -> str | None: ...

    def require_domain(self, domain: str, reader: Reader | None = None) -> str:
        """The normalised domain; raises ``UnknownDomainError`` when no document of it
        is one ``reader`` may read."""
        ...

    def view(self, reader: Reader | None) -> ReaderView:
        """What ``reader`` may see (its documents and domains)."""
        ...


class GovernedLookup:
    """``lookup()`` runs one governed retrieval for a session. ``observer`` watches each
    governed call (``LookupTurn``) of every entry point that uses this lookup (the
    runtime installs its tracing there)."""

    def __init__(
        self,
        knowledge: SearchedKnowledge,
        tracker: SessionTracker,
        observer: CallObserver = UNOBSERVED,
    ) -> None:
        self.knowledge = knowledge
        self.tracker = tracker
        self.observer = observer

    def lookup(
        self,
        session_id: str,
        query: str,
        domain: str | None = None,
        missing_dimension: str | None = None,
        *,
        widen: bool = False,
        page: bool = False,
        reader: Reader | None = None,
    ) -> LookupOutcome:
        """One governed retrieval. ``widen``: a ``domain`` that has no answer (nothing
        PRECISE or HIGHLY_RELEVANT) is not the end of it: the same lookup searches the
        whole knowledge base and shows what it finds there unless the domain's result is
        the better level (a planned domain is the planner's guess, and a wrong guess must
        not hide what one unscoped lookup finds). ``page``: the turn's lookups have not
        answered and the governor admitted this one as a page (``Admission.paging``).
        ``reader``: whose lookup it is (None: an unrestricted reader); it searches what
        the reader may read, and the session's memory of anything else stays out of it."""
        if domain:
            domain = self.knowledge.require_domain(domain, reader)
        text = f"{query} {missing_dimension}" if missing_dimension else query
        language = asker_language(query)
        # all the session retrieved is excluded (what the reader may not read is not
        # searched anyway); what it is told it retrieved is what it may read, decided
        # after the search brought the knowledge base up to date
        seen = self.tracker.retrieved_docs(session_id)
        found = self.knowledge.retrieve(text, domain, exclude=seen, page=page, reader=reader)
        widened = False
        if domain and widen and found.level not in GOOD_LEVELS:
            whole = self.knowledge.retrieve(text, None, exclude=seen, reader=reader)
            if level_rank(whole.level) >= level_rank(found.level):
                found, widened = whole, True
        ranked, shown, level = found.ranked, found.shown, found.level
        retrieved = self._readable(seen, reader)
        withheld, held_ahead = _held(ranked, shown, found.withheld, retrieved)

        dedup_reason: DedupReason | None = None
        if not shown and found.withheld:
            level, dedup_reason = RelevanceLevel.DEDUPED, DedupReason.DOC_RETRIEVED

        if shown:
            self.tracker.mark_many(session_id, [(d.domain, d.doc_path) for d in shown])
        domains = list(dict.fromkeys([*retrieved.values(), *(d.domain for d in shown)]))
        hint = completeness_hint(level, language)

        if shown:
            message = localized("lookup.found", language).format(
                n=len(shown), titles=_titles([d.title for d in shown], language)
            )
        elif dedup_reason:
            already = [d.title for d in found.withheld]
            # what the session holds is the answer only when it would have been one
            key = "lookup.deduped" if found.held_level in GOOD_LEVELS else "lookup.deduped_weak"
            message = localized(key, language).format(titles=_titles(already, language))
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
        # the level's inputs, as ``relevance_level`` read them: over the documents not
        # retrieved before (a DEDUPED result's cosine is the best fresh document's)
        details = RetrievalDetails(
            l0_match_count=found.exact_count,
            l0_titles=[m.title for m in found.naming],
            l1_top_score=found.top.raw_dense if found.top else None,
            l1_top_similarity=found.top_similarity,
            l1_match_count=len(ranked),
            l1_scores=[d.raw_dense for d in ranked[:10]],
            l1_fused_scores=[round(d.score, 6) for d in ranked[:10]],
            l1_similarities=[round(d.similarity, 6) for d in ranked[:10]],
            answer_similarities=[
                None if d.answer is None else round(d.answer, 6) for d in ranked[:10]
            ]
            if any(d.answer is not None for d in ranked)
            else [],
            primary_probability=None
            if found.primary_probability is None
            else round(found.primary_probability, 4),
            relevance_level=level.value if level else None,
            completeness_hint=hint,
            retrieved_domains=domains,
            dedup_reason=dedup_reason,
            already_retrieved=[d.doc_path for d in ranked if d.doc_path in retrieved][:10],
            shown=[d.doc_path for d in shown],
            withheld=withheld,
            held_ahead=held_ahead,
            held_level=found.held_level.value if found.held_level else None,
            widened=widened,
        )
        return LookupOutcome(result, details, ranked, language)

    def infer_domain(self, query: str, reader: Reader | None = None) -> str | None:
        """The domain a lookup without one is about, decided before any result is shown."""
        return self.knowledge.infer_domain(query, reader)

    def require_domain(self, domain: str, reader: Reader | None = None) -> str:
        """``domain`` normalised, or ``UnknownDomainError`` listing the ones ``reader``
        may read."""
        return self.knowledge.require_domain(domain, reader)

    def retrieved_docs(self, session_id: str, reader: Reader | None = None) -> dict[str, str]:
        """What the session retrieved (doc_path → domain) that ``reader`` may read: a
        document another reader of the session retrieved, or one the reader may no longer
        read, is neither withheld as seen nor named among the session's domains."""
        return self._readable(self.tracker.retrieved_docs(session_id), reader)

    def _readable(self, retrieved: dict[str, str], reader: Reader | None) -> dict[str, str]:
        view = self.knowledge.view(reader)
        if not view.restricted:
            return retrieved
        return {path: domain for path, domain in retrieved.items() if view.may_read(path)}

    def retrieved_domains(self, session_id: str, reader: Reader | None = None) -> list[str]:
        """The domains of ``retrieved_docs``, in the order the session first retrieved them."""
        return list(dict.fromkeys(self.retrieved_docs(session_id, reader).values()))

    def _primary(self, doc: DocHit) -> PrimaryResult:
        """The document's two best chunks in document order, within twice the excerpt
        unit, as the page shows them (``as_rendered``: no shortcode or layout markup for
        the model to read or copy). The best one is cut last: when it came second,
        cutting the two joined dropped the end of the very section the heading names
        (the Redis runbook's ``max-active`` advice, under "排查步骤 > 处理", behind its
        opening)."""
        budget = self.knowledge.excerpt_chars * 2
        best, *rest = doc.chunks[:2]
        texts = {best.hit.chunk_index: _cut(as_rendered(best.hit.text), budget)}
        for chunk in rest:
            room = budget - len(texts[best.hit.chunk_index]) - 2
            if room > 0:
                texts[chunk.hit.chunk_index] = _cut(as_rendered(chunk.hit.text), room)
        return PrimaryResult(
            title=doc.title,
            domain=doc.domain,
            path=doc.doc_path,
            heading=as_rendered(best.hit.heading),
            content="\n\n".join(texts[i] for i in sorted(texts)),
            page=cited_page(doc.doc_path, best.hit.heading),
        )

    def _supplement(self, doc: DocHit) -> SupplementResult:
        text = as_rendered(doc.chunks[0].hit.text)
        limit = self.knowledge.excerpt_chars // 2
        return SupplementResult(
            title=doc.title,
            domain=doc.domain,
            path=doc.doc_path,
            excerpt=text if len(text) <= limit else text[:limit] + "…",
            page=cited_page(doc.doc_path, doc.chunks[0].hit.heading),
        )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _held(
    ranked: list[DocHit], shown: list[DocHit], withheld: list[DocHit], retrieved: Collection[str]
) -> tuple[list[str], list[str]]:
    """The documents of ``retrieved`` (held by the session) that this lookup would have
    shown were they not held, in ranking order: those it shows in a session holding
    nothing (``Retrieval.withheld``) and those ranked above the last document it showed
    (a page shows documents whatever their cosine); and, of them, those ranked above the
    first document it showed (all of them, when it showed none).

    >>> from types import SimpleNamespace as Hit
    >>> ranked = [Hit(doc_path=p) for p in ("a.md", "b.md", "c.md", "d.md", "e.md")]
    >>> held = {"b.md", "d.md", "e.md"}
    >>> _held(ranked, [ranked[2]], [ranked[4]], held)  # type: ignore[arg-type]
    (['b.md', 'e.md'], ['b.md'])
    """
    first = shown[0].doc_path if shown else None
    last = shown[-1].doc_path if shown else None
    passing = {d.doc_path for d in withheld}
    recalled: list[str] = []
    ahead: list[str] = []
    above_first, above_last = True, last is not None
    for doc in ranked:
        above_first = above_first and doc.doc_path != first
        above_last = above_last and doc.doc_path != last
        if doc.doc_path in retrieved and (above_last or doc.doc_path in passing):
            recalled.append(doc.doc_path)
            if above_first:
                ahead.append(doc.doc_path)
    return recalled, ahead
