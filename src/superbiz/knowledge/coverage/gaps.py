"""Knowledge gaps: the questions the knowledge base could not answer, clustered by meaning.

A question is a gap when a person rated its answer down, or, unless they rated it up,
when its lookups found nothing or only REFERENCE-level documents, or its answer fell
back to quoting the documents (``fallback``) or had none to quote (``no_evidence``).
A question whose lookups found nothing because the governance blocked them all searched
nothing and is left out. Gaps are clustered by meaning with the knowledge base's own
embedder, and clusters sorted so the first is the runbook most worth writing: the most
questions (a thumbs-down counts twice), then the most sessions, then the latest.

Cost stays bounded however much traffic is recorded: the record is aggregated in SQL
(``superbiz.storage.gaps``), only distinct questions are embedded, and only the
``advanced.gaps.max-questions`` most asked of them (the rest are counted as ``unclustered``).

The report's shape is defined here once (``GapReport``): ``superbiz gaps --json`` prints
it, ``GET /api/gaps`` returns it and ``/openapi.json`` describes it.
"""

from __future__ import annotations

import time
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from superbiz.access import Reader
from superbiz.config import GapConfig
from superbiz.knowledge.coverage._clusters import leader_clusters
from superbiz.knowledge.documents.domains import normalize_domain
from superbiz.knowledge.kb.access_rules import ReaderLimits, reader_limits
from superbiz.knowledge.kb.withheld import visible_turns
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.chat import ChatRepository
from superbiz.storage.feedback import Feedback, FeedbackRepository
from superbiz.storage.gaps import AskedQuestion, asked_questions, chat_question
from superbiz.storage.invocations import InvocationRepository
from superbiz.storage.repository import DocumentRepository

if TYPE_CHECKING:
    from superbiz.knowledge.kb.base import KnowledgeBase

#: how many documents a cluster lists as the closest
CLOSEST_DOCUMENTS = 3
#: why a question is a gap, in the order the report lists them
REASONS = ("thumbs_down", "no_result", "reference", "fallback", "no_evidence")


class ClosestDocument(BaseModel):
    path: str
    title: str | None = Field(description="Null when the document is gone since.")
    times: int = Field(description="How many of the cluster's questions were shown it.")


class GapCluster(BaseModel):
    """Questions of one meaning that found no good evidence."""

    domain: str | None = Field(description="The domain most of its lookups were in.")
    count: int = Field(description="Questions (chat turns, MCP lookups) in the cluster.")
    weight: int = Field(description="The sort key: count, a thumbs-down counted twice.")
    sessions: int
    thumbs_down: int
    reasons: dict[str, int] = Field(
        description="thumbs_down, no_result, reference, fallback, no_evidence: how many "
        "questions each reason applies to."
    )
    examples: list[str] = Field(description="The most asked wordings, most asked first.")
    questions: int = Field(description="Distinct wordings in the cluster.")
    last_asked: str = Field(json_schema_extra={"format": "date-time"})
    closest_documents: list[ClosestDocument] = Field(
        description="Documents shown for these questions (the evidence that came closest)."
    )
    comments: list[str] = Field(description="Comments of thumbs-down ratings.")


class GapReport(BaseModel):
    """``GET /api/gaps``: the first cluster is the runbook most worth writing."""

    since: str | None
    domain: str | None
    questions: int = Field(description="Questions that could be gaps, in the window.")
    gaps: int = Field(description="Questions that are gaps.")
    unclustered: int = Field(
        description="Rarest wordings left out of clustering (`advanced.gaps.max-questions`)."
    )
    clusters: list[GapCluster]
    timing_ms: dict[str, float]


@dataclass(slots=True)
class Gap:
    """One question that found no good evidence, and why."""

    question: str
    domain: str | None
    session_id: str
    turn: int
    last_asked: datetime
    reasons: tuple[str, ...]
    closest: str | None = None
    comment: str | None = None

    @property
    def weight(self) -> int:
        """A thumbs-down says more than a weak lookup: it counts twice."""
        return 2 if "thumbs_down" in self.reasons else 1


@dataclass(slots=True)
class _Question:
    """One distinct wording (normalised) and every gap asked with it."""

    text: str
    gaps: list[Gap] = field(default_factory=list)

    @property
    def weight(self) -> int:
        return sum(g.weight for g in self.gaps)

    @property
    def last(self) -> datetime:
        return max(g.last_asked for g in self.gaps)


def normalise(question: str) -> str:
    """The key that makes two wordings one question: NFKC, case-folded, spaces collapsed,
    closing punctuation dropped.

    >>> normalise("  How do I  rotate TLS certs？ "), normalise("how do i rotate tls certs")
    ('how do i rotate tls certs', 'how do i rotate tls certs')
    """
    text = " ".join(unicodedata.normalize("NFKC", question).casefold().split())
    return text.rstrip("?!.。？！ ")


_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: where a window reaching back past the calendar's first day starts: everything recorded
EARLIEST = datetime.min.replace(tzinfo=UTC)


def parse_since(text: str, now: datetime) -> datetime:
    """``7d``, ``24h``, ``30m``, ``2w`` back from ``now``, or an ISO date or time (UTC
    when it names no zone); ``ValueError`` says what is accepted. A duration longer
    than the calendar (``1000000d``) covers everything: it starts at ``EARLIEST``.

    >>> from datetime import UTC
    >>> now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    >>> parse_since("7d", now).isoformat(), parse_since("2026-11-30", now).isoformat()
    ('2026-11-24T12:00:00+00:00', '2026-11-30T00:00:00+00:00')
    >>> parse_since("1000000d", now) == EARLIEST
    True
    """
    value = text.strip()
    number, unit = value[:-1], value[-1:].lower()
    if unit in _UNITS and number.isascii() and number.isdigit():
        try:
            return now - timedelta(**{_UNITS[unit]: int(number)})
        except OverflowError:  # before 1 January of year 1: every recorded question
            return EARLIEST
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"since {text!r} is neither a duration (30m, 24h, 7d, 2w) nor an ISO date "
            "(2026-11-30 or 2026-11-30T08:00)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def gap_of(asked: AskedQuestion, rating: Feedback | None) -> Gap | None:
    """``asked`` as a gap, or ``None`` when its answer was good or rated up."""
    if rating is not None and rating.rating == "up":
        return None
    reasons: list[str] = []
    if rating is not None and rating.rating == "down":
        reasons.append("thumbs_down")
    if asked.searched and asked.evidence == "none":
        reasons.append("no_result")
    elif asked.searched and asked.evidence == "reference":
        reasons.append("reference")
    if asked.answer_source in ("fallback", "no_evidence"):
        reasons.append(asked.answer_source)
    if not reasons:
        return None
    return Gap(
        question=asked.question,
        domain=asked.domain,
        session_id=asked.session_id,
        turn=asked.turn,
        last_asked=asked.last_asked,
        reasons=tuple(reasons),
        closest=asked.closest,
        comment=rating.comment if rating else None,
    )


def find_gaps(
    asked: Iterable[AskedQuestion], ratings: dict[tuple[str, int], Feedback]
) -> list[Gap]:
    """The gaps among ``asked``; a rating belongs to a chat turn (an MCP session's
    lookups, each its own question, share their turn's rating)."""
    gaps = []
    for question in asked:
        gap = gap_of(question, ratings.get((question.session_id, question.turn)))
        if gap is not None:
            gaps.append(gap)
    return gaps


def cluster_gaps(
    gaps: list[Gap], embedder: Embedder, settings: GapConfig
) -> tuple[list[list[_Question]], int]:
    """Gaps grouped by wording, the ``max_questions`` most asked wordings clustered by
    meaning; returns the clusters and how many wordings were left out."""
    wordings: dict[str, _Question] = {}
    for gap in gaps:
        wordings.setdefault(normalise(gap.question), _Question(gap.question)).gaps.append(gap)
    ranked = sorted(wordings.values(), key=lambda q: (q.weight, q.last), reverse=True)
    kept, left = ranked[: settings.max_questions], len(ranked) - settings.max_questions
    if not kept:
        return [], 0
    vectors = embedder.embed([q.text for q in kept])
    clusters = leader_clusters(vectors, settings.cluster_similarity)
    return [[kept[i] for i in members] for members in clusters], max(0, left)


def _cluster_view(questions: list[_Question], titles: dict[str, str], examples: int) -> GapCluster:
    gaps = [g for q in questions for g in q.gaps]
    domains = Counter(g.domain for g in gaps if g.domain)
    reasons = Counter(r for g in gaps for r in g.reasons)
    closest = Counter(g.closest for g in gaps if g.closest)
    comments = [g.comment for g in gaps if g.comment]
    return GapCluster(
        domain=domains.most_common(1)[0][0] if domains else None,
        count=len(gaps),
        weight=sum(g.weight for g in gaps),
        sessions=len({g.session_id for g in gaps}),
        thumbs_down=reasons.get("thumbs_down", 0),
        reasons={r: reasons[r] for r in REASONS if reasons.get(r)},
        examples=[q.text for q in questions[:examples]],
        questions=len(questions),
        last_asked=max(g.last_asked for g in gaps).isoformat(),
        closest_documents=[
            ClosestDocument(path=path, title=titles.get(path), times=times)
            for path, times in closest.most_common(CLOSEST_DOCUMENTS)
        ],
        comments=comments[:examples],
    )


def gap_report(
    engine: Any,
    embedder: Embedder,
    documents: DocumentRepository,
    settings: GapConfig,
    *,
    since: datetime | None = None,
    domain: str | None = None,
    limits: ReaderLimits | None = None,
) -> GapReport:
    """The report ``superbiz gaps`` prints and ``GET /api/gaps`` returns; with ``limits``
    (a restricted reader's), of the questions about what that reader may read: a
    question whose turn used anything it may not (``superbiz.knowledge.kb.withheld``) is
    left out before anything is counted or clustered."""
    started = time.perf_counter()
    asked = recorded = asked_questions(engine, since, weak_only=True)
    if limits is not None:
        asked = _about_readable(engine, recorded, limits)
    queried = time.perf_counter()
    feedback = FeedbackRepository(engine)
    ratings = {(f.session_id, f.turn): f for f in feedback.since(None)}
    gaps = find_gaps(asked, ratings)
    gaps += _rated_down_without_lookups(engine, recorded, ratings, since, limits)
    if domain is not None:
        gaps = [g for g in gaps if g.domain == domain]
    clusters, unclustered = cluster_gaps(gaps, embedder, settings)
    titles = documents.titles(g.closest for c in clusters for q in c for g in q.gaps if g.closest)
    views = [_cluster_view(c, titles, settings.examples) for c in clusters]
    views.sort(key=lambda v: (v.weight, v.sessions, v.last_asked), reverse=True)
    return GapReport(
        since=since.isoformat() if since else None,
        domain=domain,
        questions=len(asked),
        gaps=len(gaps),
        unclustered=unclustered,
        clusters=views,
        timing_ms={
            "query": round((queried - started) * 1000, 1),
            "total": round((time.perf_counter() - started) * 1000, 1),
        },
    )


def reader_gap_report(
    kb: KnowledgeBase,
    settings: GapConfig,
    reader: Reader | None,
    *,
    since: datetime | None = None,
    domain: str | None = None,
) -> GapReport:
    """``gap_report`` over ``kb`` as ``reader`` may see it (``superbiz gaps --as-group``,
    ``GET /api/gaps``); ``domain`` as a person writes it (normalised as stored)."""
    return gap_report(
        kb.engine,
        kb.embedder,
        kb.documents,
        settings,
        since=since,
        domain=normalize_domain(domain) if domain else None,
        limits=reader_limits(kb, reader),
    )


def _about_readable(
    engine: Any, asked: list[AskedQuestion], limits: ReaderLimits
) -> list[AskedQuestion]:
    """The questions of turns the reader may see, read session by session."""
    chats, calls = ChatRepository(engine), InvocationRepository(engine)
    shown: dict[str, Collection[int]] = {}
    for session in {a.session_id for a in asked}:
        shown[session] = visible_turns(chats.messages(session), calls.for_session(session), limits)
    return [
        a
        for a in asked
        if a.turn in shown[a.session_id]
        and (a.domain is None or a.domain not in limits.hidden_domains)
        and (a.closest is None or limits.may_read(a.closest))
    ]


def _rated_down_without_lookups(
    engine: Any,
    asked: list[AskedQuestion],
    ratings: dict[tuple[str, int], Feedback],
    since: datetime | None,
    limits: ReaderLimits | None = None,
) -> list[Gap]:
    """Chat turns rated down that made no lookup (a direct answer, or one from earlier
    evidence): not in the lookup record, yet a person said the answer was wrong. With
    ``limits``, not one whose answer cited a document the reader may not read (these
    made no lookup: their answer's evidence is all there is to go by)."""
    chats = ChatRepository(engine) if limits is not None else None
    seen = {(a.session_id, a.turn) for a in asked}
    gaps = []
    for key, rating in ratings.items():
        if rating.rating != "down" or key in seen:
            continue
        if since is not None and rating.updated_at < since:
            continue
        found = chat_question(engine, *key)
        if found is None:
            continue
        if chats is not None and limits is not None and not _cites_readable(chats, key, limits):
            continue
        text, asked_at = found
        gaps.append(
            Gap(text, None, key[0], key[1], asked_at, ("thumbs_down",), comment=rating.comment)
        )
    return gaps


def _cites_readable(chats: ChatRepository, key: tuple[str, int], limits: ReaderLimits) -> bool:
    """Whether the answer of turn ``key`` cites only documents ``limits`` lets be read."""
    session_id, turn = key
    return all(
        limits.may_read(str(item.get("path", "")))
        for message in chats.messages(session_id)
        if message.turn == turn
        for item in message.evidence
    )
