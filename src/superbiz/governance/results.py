"""What a governed lookup returns, as values: the model's view (``LookupResult``), the
scores kept for the record (``RetrievalDetails``) and one tool call's whole outcome
(``ToolOutcome``).

Kept apart from the code that computes them (``lookup``, ``tool``) so that whatever reads
an outcome — the runtime's tracing (``CallObserver``), the API, the recorder — depends on
the shapes only, not on the lookup.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from superbiz.governance.verdicts import Constraint, DedupReason, Verdict, WaterLevel
from superbiz.retrieval.relevance import RelevanceLevel

#: who asked for a call: the model, the plan (code, before the model's first step) or a
#: person (``superbiz lookup``)
Origin = Literal["model", "plan", "user"]


@dataclass(frozen=True, slots=True)
class PrimaryResult:
    title: str
    domain: str
    path: str
    heading: str
    content: str
    #: for a PDF, the page its best passage starts on (cited as ``path#page=N``)
    page: int | None = None


@dataclass(frozen=True, slots=True)
class SupplementResult:
    title: str
    domain: str
    path: str
    excerpt: str
    page: int | None = None


@dataclass(frozen=True, slots=True)
class LookupResult:
    """What the model sees after ``lookup_knowledge`` (docs/design.md §3.1)."""

    found: bool
    relevance_level: RelevanceLevel | None
    completeness_hint: str
    retrieved_domains_this_session: list[str]
    message: str
    primary: PrimaryResult | None = None
    supplement: list[SupplementResult] = field(default_factory=list)
    dedup_reason: DedupReason | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # a page only where there is one: the model reads no ``"page": null`` per document
        for doc in [data["primary"], *data["supplement"]]:
            if doc is not None and doc["page"] is None:
                del doc["page"]
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievalDetails:
    """Scores behind a result (docs/design.md §3.2), kept for recording, never shown to
    the model. The API's ``RetrievalRecord`` is derived from these fields, in this order."""

    #: the level's inputs (``relevance_level``), over the documents the session has not
    #: retrieved; the titles and the ``l1_`` lists below are of the whole ranking
    l0_match_count: int
    l0_titles: list[str]
    l1_top_score: float | None
    l1_top_similarity: float | None
    l1_match_count: int
    l1_scores: list[float | None]  # raw backend scores (squared L2); None: BM25-only hit
    l1_similarities: list[float] = field(default_factory=list)
    l1_fused_scores: list[float] = field(default_factory=list)
    #: the answer model's cosines of the same documents (``retrieval.answers``; None where
    #: it did not rank, empty without an answer model)
    answer_similarities: list[float | None] = field(default_factory=list)
    #: ``advanced.retrieval.levels: evidence``: the probability that the primary answers the query
    primary_probability: float | None = None
    relevance_level: str | None
    completeness_hint: str
    retrieved_domains: list[str]
    dedup_reason: DedupReason | None
    already_retrieved: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    #: the documents the session holds that this lookup would have shown (shown by it in
    #: a session holding nothing, or ranked above the last document it showed), in
    #: ranking order; ``held_ahead``: those ranked above the first document it showed
    #: (all of them, when it showed none)
    withheld: list[str] = field(default_factory=list)
    held_ahead: list[str] = field(default_factory=list)
    #: when the session holds a ranked document: the level the lookup would have had
    #: holding none (a DEDUPED result whose held documents answer has a good one)
    held_level: str | None = None
    #: the lookup named a domain that had no answer and searched the whole KB instead
    widened: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call did, for the model (``model_view``) and for the caller."""

    call_id: str
    arguments: dict[str, Any]
    executed: bool
    domain: str | None
    result: LookupResult | None
    details: RetrievalDetails | None
    error: str | None
    #: the water level the call was admitted at; ``constraint`` (its verdict, budget and
    #: water level) is what the governor says after it, for the model's next step
    water_level: WaterLevel
    constraint: Constraint
    latency_ms: float
    origin: Origin = "model"
    #: the call could not be a lookup at all (arguments not a JSON object, no query,
    #: another tool): the model's mistake, unlike an unknown domain or a blocked call
    malformed: bool = False

    @property
    def level(self) -> RelevanceLevel | None:
        return self.result.relevance_level if self.result else None

    @property
    def dedup_reason(self) -> DedupReason | None:
        return self.result.dedup_reason if self.result else None

    @property
    def verdict(self) -> Verdict:
        return self.constraint.verdict

    @property
    def shown(self) -> list[str]:
        """Documents this call put in front of the model."""
        return self.details.shown if self.details else []

    @property
    def redundant(self) -> bool:
        """Executed, yet it brought nothing new: only already-retrieved documents."""
        return self.executed and self.dedup_reason == DedupReason.DOC_RETRIEVED

    def model_view(self) -> dict[str, Any]:
        if self.error is not None:
            return {"error": self.error}
        assert self.result is not None
        return self.result.as_dict()
