"""The Planner: sees the knowledge map, decides which domains to consult.

``LLMPlanner`` asks the chat model (validated JSON, one repair retry, then a fallback
plan); ``MapPlanner`` plans deterministically from the same map, for extractive mode and
as that fallback. Neither sees retrieval results: only the map and which documents the
session already holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import (
    BaseModel,
    StrictBool,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from superbiz._messages import localized
from superbiz._text import Language, asker_language
from superbiz.agents import _domain_margin
from superbiz.agents.context import PLAN_HEADER, Citation, context_message, read_context
from superbiz.agents.grounding import copied_from
from superbiz.agents.prompts import load_prompt
from superbiz.config import PlannerConfig
from superbiz.exceptions import LLMError
from superbiz.knowledge.coverage.map import KnowledgeMap, MapDocument
from superbiz.knowledge.documents.domains import normalize_domain
from superbiz.knowledge.kb.map_vectors import MapEntry
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import Message, SystemMessage, UserMessage
from superbiz.llm.structured import ask_structured
from superbiz.retrieval.embedders import Embedder

PlanSource = Literal["llm", "llm-repaired", "fallback", "map", "evidence"]


@dataclass(frozen=True, slots=True)
class PlannedDomain:
    domain: str
    sub_question: str


@dataclass(frozen=True, slots=True)
class Plan:
    need_retrieval: bool
    domains: tuple[PlannedDomain, ...] = ()
    direct_answer: str | None = None
    source: PlanSource = "map"
    note: str | None = None
    #: the planned lookups search only their domains; ``False`` when the map cannot tell
    #: the best domain from the next (see ``MapPlanner``): the lookup then searches the
    #: whole knowledge base, and ``domains`` are only the candidates
    scoped: bool = True

    @property
    def domain_ids(self) -> list[str]:
        return [d.domain for d in self.domains]

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON output (CLI, API, chat store) and the plan message carry it."""
        data: dict[str, Any] = _PLAN.dump_python(self, mode="json")
        return data

    def to_message(self) -> SystemMessage:
        """The plan as the executor's model reads it."""
        return context_message(PLAN_HEADER, self.as_dict())

    @classmethod
    def from_messages(cls, messages: Sequence[Message]) -> Plan | None:
        """The plan the executor handed the model, or ``None`` without a readable one."""
        text = read_context(messages, PLAN_HEADER)
        if text is None:
            return None
        try:
            return _PLAN.validate_json(text)
        except ValidationError:
            return None


_PLAN: TypeAdapter[Plan] = TypeAdapter(Plan)


@dataclass(frozen=True, slots=True)
class PlanRequest:
    question: str
    knowledge_map: KnowledgeMap
    #: documents already retrieved in this session
    evidence: Sequence[Citation] = ()
    #: domains already consulted this turn (for a re-plan)
    exclude: frozenset[str] = field(default_factory=frozenset)
    missing: Sequence[str] = ()
    #: the session's earlier questions, oldest first: a follow-up ("那 max-active 应该调到
    #: 多少？") is read in their light
    conversation: Sequence[str] = ()


class Planner(Protocol):
    def plan(self, request: PlanRequest) -> Plan: ...


class EntryVectors(Protocol):
    """The vectors of map entries (``MapEntry``: path, entry text, title): a matrix of
    entry vectors and one of title vectors (``KeptMapVectors`` keeps them in the
    knowledge base's store)."""

    def vectors(self, entries: Sequence[MapEntry]) -> tuple[np.ndarray, np.ndarray]: ...


class _Embedded:
    """Map entries embedded every time they are asked for: a planner with nowhere to
    keep them."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def vectors(self, entries: Sequence[MapEntry]) -> tuple[np.ndarray, np.ndarray]:
        embed = self.embedder.embed
        return embed([e for _, e, _ in entries]), embed([t for _, _, t in entries])


class MapPlanner:
    """Deterministic planning from the map.

    Each map document is an entry (title, covers, when_to_retrieve); a domain scores the
    best cosine of its entries with the question. An exact title or cover match no longer
    scores 1: on dev2, where titles are product names and common words, an exact match
    decided 61 % of the plans and named the right domain for 82 % of them; the domain
    with the best cosine alone is right more often on all four benchmark sets (README).
    The best domain is planned. The plan is scoped to it only when it leads the next
    domain by that domain's clear margin (``_domain_margin.clear_margins``: the lead at
    which the KB's own titles put in it are its own with ``scope_precision``); otherwise
    the plan is unscoped and lists the domains within that margin of the best (up to
    ``max_domains``) as candidates (the best alone where the margin could not be
    measured). When the best entry is a document the session already holds, the plan is
    to answer from that evidence.
    """

    def __init__(
        self, embedder: Embedder, settings: PlannerConfig, kept: EntryVectors | None = None
    ) -> None:
        self.embedder = embedder
        self.settings = settings
        #: where entry vectors outlive this process (None: embedded by each process)
        self.kept = kept or _Embedded(embedder)
        # (map, its clear margins), swapped whole: turns of several sessions plan at once
        self._margin_built: tuple[KnowledgeMap, dict[str, float]] | None = None
        # (map, its entries' and titles' vectors in two matrices), likewise: a plan
        # multiplies, never stacks; the next map reuses the rows of entries it still has
        self._indexed: tuple[KnowledgeMap, _MapIndex] | None = None

    def plan(self, request: PlanRequest) -> Plan:
        entries, scores = self._scored(request)
        if not entries.documents:
            return Plan(False, source="map", note="no domain left to consult")
        best_doc = int(np.argmax(scores))
        held = {item.path for item in request.evidence}
        if not request.exclude and entries.documents[best_doc][1].path in held:
            return Plan(
                False,
                source="evidence",
                note=f"answer from {entries.documents[best_doc][1].title}",
            )
        chosen, scoped = self._choose(request, entries, scores)
        return Plan(
            True,
            tuple(PlannedDomain(d, request.question) for d in chosen),
            source="map",
            scoped=scoped,
        )

    def scope(self, request: PlanRequest) -> bool:
        """Whether the map clearly points to one domain for this question: a plan whose
        lookups search only their domains cannot hide the answer from it."""
        if self.settings.scope != "measured":
            return self.settings.scope == "always"
        entries, scores = self._scored(request)
        if not entries.documents:
            return False
        return self._choose(request, entries, scores)[1]

    def domain_scores(self, question: str, kmap: KnowledgeMap) -> dict[str, float]:
        """Each domain's best entry cosine with ``question``, in the map's order: how near
        the question each domain is (``KnowledgeMap.nearest``)."""
        entries, scores = self._scored(PlanRequest(question, kmap))
        return entries.domain_scores(scores)

    def clear_margins(self, kmap: KnowledgeMap) -> dict[str, float]:
        """Per domain, the lead over the next domain at which this map's titles put in
        it are its own with ``scope_precision`` (``inf``: not measurable, never scoped)."""
        built = self._margin_built
        if built is None or built[0] is not kmap:
            index = self._index_of(kmap)
            margins: dict[str, float] = {}
            if index.entries.documents:
                margins = _domain_margin.clear_margins(
                    index.titles,
                    index.matrix,
                    index.entries.domains,
                    self.settings.scope_precision,
                )
            self._margin_built = built = (kmap, margins)
        return built[1]

    def _index_of(self, kmap: KnowledgeMap) -> _MapIndex:
        """The map's documents and their vectors, once per map: the rows of entries the
        last map had are reused, the others asked of ``kept``."""
        indexed = self._indexed
        if indexed is None or indexed[0] is not kmap:
            entries = _MapEntries(
                [(domain.domain_id, doc) for domain in kmap.domains for doc in domain.documents]
            )
            index = _MapIndex.of(
                entries, self.embedder.dimension, indexed[1] if indexed else None, self.kept
            )
            self._indexed = indexed = (kmap, index)
        return indexed[1]

    def _scored(self, request: PlanRequest) -> tuple[_MapEntries, np.ndarray]:
        """The entries the plan may choose from (the excluded domains' left out) and each
        one's cosine with the question."""
        index = self._index_of(request.knowledge_map)
        entries = index.entries
        if not entries.documents:
            return entries, np.zeros(0, dtype=np.float32)
        scores: np.ndarray = index.matrix @ self.embedder.embed_query(request.question)
        if not request.exclude:
            return entries, scores
        keep = [
            i for i, (domain, _) in enumerate(entries.documents) if domain not in request.exclude
        ]
        return entries.subset(keep), scores[keep]

    def _choose(
        self,
        request: PlanRequest,
        entries: _MapEntries,
        scores: np.ndarray,
    ) -> tuple[list[str], bool]:
        """The planned domains, best first, and whether the plan is scoped to them."""
        domain_score = entries.domain_scores(scores)
        ranked = sorted(domain_score.items(), key=lambda item: item[1], reverse=True)
        best = ranked[0][0]
        if self.settings.scope != "measured":
            return [best], self.settings.scope == "always"
        margin = self.clear_margins(request.knowledge_map).get(best, _domain_margin.UNMEASURED)
        if _domain_margin.lead(domain_score) >= margin:
            return [best], True
        if margin == _domain_margin.UNMEASURED:  # nothing measured: no other candidate either
            return [best], False
        top = ranked[0][1]
        near = [d for d, s in ranked if top - s < margin]
        return near[: self.settings.max_domains], False


class _MapEntries:
    """A map's documents, each with its domain, in the map's order."""

    def __init__(self, documents: list[tuple[str, MapDocument]]) -> None:
        self.documents = documents
        self.domains = [domain for domain, _ in documents]
        # a map lists each domain's documents together: each run of a domain is one
        starts = [i for i, d in enumerate(self.domains) if i == 0 or d != self.domains[i - 1]]
        self._names = [self.domains[i] for i in starts]
        grouped = len(self._names) == len(set(self._names))
        self._starts = np.array(starts) if grouped and starts else None

    def subset(self, keep: list[int]) -> _MapEntries:
        """The entries at ``keep``, in that order."""
        return _MapEntries([self.documents[i] for i in keep])

    def domain_scores(self, scores: np.ndarray) -> dict[str, float]:
        """Each domain's best score among its entries, in the order of the documents."""
        if self._starts is None:
            return _domain_margin.domain_scores(scores, self.domains)
        best = np.maximum.reduceat(scores, self._starts)
        return dict(zip(self._names, best.astype(float).tolist(), strict=True))


class _MapIndex:
    """A map's entries and their entry and title vectors, a row each (``matrix``,
    ``titles``): held once, 0.2 GB at 50,000 documents."""

    def __init__(self, entries: _MapEntries, matrix: np.ndarray, titles: np.ndarray) -> None:
        self.entries = entries
        self.matrix = matrix
        self.titles = titles

    @classmethod
    def of(
        cls, entries: _MapEntries, dimension: int, previous: _MapIndex | None, kept: EntryVectors
    ) -> _MapIndex:
        """``entries`` with their vectors: ``previous``'s rows where an entry's text and
        title are unchanged, ``kept``'s for the rest."""
        keys = [doc.entry for _, doc in entries.documents]
        matrix = np.empty((len(keys), dimension), dtype=np.float32)
        titles = np.empty((len(keys), dimension), dtype=np.float32)
        had = previous.rows() if previous is not None else {}
        old = [(i, had[key]) for i, key in enumerate(keys) if key in had]
        if old and previous is not None:
            new_rows, old_rows = (list(rows) for rows in zip(*old, strict=True))
            matrix[new_rows] = previous.matrix[old_rows]
            titles[new_rows] = previous.titles[old_rows]
        missing = [i for i, key in enumerate(keys) if key not in had]
        if missing:
            matrix[missing], titles[missing] = kept.vectors([keys[i] for i in missing])
        return cls(entries, matrix, titles)

    def rows(self) -> dict[MapEntry, int]:
        """Each entry's row."""
        return {doc.entry: i for i, (_, doc) in enumerate(self.entries.documents)}


class PlanReplyDomain(BaseModel):
    """One planned domain as the model writes it."""

    domain: str
    sub_question: str | None = None

    @field_validator("domain")
    @classmethod
    def _normalise(cls, domain: str) -> str:
        """As the knowledge base spells domains: "Payment Ops" is ``payment-ops``."""
        return normalize_domain(domain) if domain.strip() else ""


class PlanReply(BaseModel):
    """The planner's JSON as the model writes it; validation needs ``context["allowed"]``,
    the domains this plan may name."""

    need_retrieval: StrictBool
    domains: list[PlanReplyDomain] = []
    direct_answer: str | None = None

    @model_validator(mode="after")
    def _known_domains(self, info: ValidationInfo) -> PlanReply:
        if not self.need_retrieval:
            return self
        if not self.domains:
            raise ValueError("'domains' must list at least one domain when retrieval is needed")
        allowed: set[str] = (info.context or {}).get("allowed", set())
        for entry in self.domains:
            if entry.domain not in allowed:
                known = ", ".join(sorted(allowed))
                raise ValueError(f"unknown domain {entry.domain!r}; known: {known}")
        return self

    def to_plan(self, question: str, max_domains: int, source: PlanSource) -> Plan:
        """Each domain once, at most ``max_domains``; a sub-question with no word in it
        (a copied ``"..."``) becomes the question itself."""
        if not self.need_retrieval:
            return Plan(False, (), (self.direct_answer or "").strip() or None, source)
        planned = [
            PlannedDomain(e.domain, _sub_question(e.sub_question) or question) for e in self.domains
        ]
        unique = list({p.domain: p for p in planned}.values())
        return Plan(True, tuple(unique[:max_domains]), source=source)


def _sub_question(text: str | None) -> str:
    text = (text or "").strip()
    return text if any(ch.isalnum() for ch in text) else ""


class LLMPlanner:
    """Plans with the chat model; malformed output → one repair → the map planner."""

    def __init__(self, model: ChatModel, fallback: MapPlanner, settings: PlannerConfig) -> None:
        self.model = model
        self.fallback = fallback
        self.settings = settings

    def plan(self, request: PlanRequest) -> Plan:
        language: Language = asker_language(request.question)
        kmap = request.knowledge_map
        allowed = set(kmap.domain_ids) - request.exclude
        system = load_prompt("chat-planner-prompt", language).format(
            knowledge_map=shown_map(kmap, request.question, self.fallback, self.settings)
            .to_yaml(self.settings.map_token_budget)
            .strip(),
            session_evidence=_evidence_list(request.evidence, language),
            conversation=_conversation(request.conversation, language),
            max_domains=self.settings.max_domains,
        )
        question = request.question
        if request.exclude or request.missing:
            question += "\n\n" + _replan_note(request, language)
        messages: list[Message] = [SystemMessage(system), UserMessage(question)]
        try:
            reply = ask_structured(
                self.model, messages, PlanReply, what="plan", context={"allowed": allowed}
            )
        except LLMError as exc:
            plan = self.fallback.plan(request)
            return Plan(
                plan.need_retrieval,
                plan.domains,
                plan.direct_answer,
                "fallback",
                f"planner output rejected: {exc}",
            )
        source: PlanSource = "llm-repaired" if reply.repaired else "llm"
        plan = reply.value.to_plan(request.question, self.settings.max_domains, source)
        plan = _without_copies(plan, request.question, [system, *request.conversation])
        if plan.need_retrieval and not self.fallback.scope(request):
            # the model chose among domains the map cannot tell apart: its lookups search
            # the whole knowledge base (its words and domains still lead them)
            return replace(plan, scoped=False)
        return plan


#: A sub-question that copies this many characters of the planner's prompt (the map's
#: when-to-retrieve sentences, an earlier question), beyond what it repeats of the
#: user's question, was copied, not written for the question: the live run's planner
#: gave "When a node reports DiskPressure, pods are evicted, …" (133 characters of the
#: map) to a load-balancer question and to a MySQL ERROR 1290 one. A title or a cover
#: ("PostgreSQL replication lag") is shorter: naming a document is no copy.
COPIED_CHARS = 40


def _without_copies(plan: Plan, question: str, prompt: Sequence[str]) -> Plan:
    """``plan`` with each copied sub-question (``COPIED_CHARS``) replaced by the question."""
    entries = tuple(
        replace(entry, sub_question=question)
        if copied_from(entry.sub_question, prompt, besides=question) >= COPIED_CHARS
        else entry
        for entry in plan.domains
    )
    return replace(plan, domains=entries)


def shown_map(
    kmap: KnowledgeMap, question: str, planner: MapPlanner, settings: PlannerConfig
) -> KnowledgeMap:
    """The map an LLM planner is shown for ``question``: the whole map while it fits the
    budget, else the domains nearest the question by the map planner's scores."""
    budget = settings.map_token_budget
    if kmap.nearest({}, budget) is kmap:
        return kmap
    return kmap.nearest(planner.domain_scores(question, kmap), budget)


def _evidence_list(evidence: Sequence[Citation], language: Language) -> str:
    if not evidence:
        return localized("planner.no_evidence", language)
    return "\n".join(f"- {e.title} [{e.domain}]" for e in evidence)


def _conversation(questions: Sequence[str], language: Language) -> str:
    if not questions:
        return localized("planner.no_evidence", language)
    return "\n".join(f"- {q}" for q in questions)


def _replan_note(request: PlanRequest, language: Language) -> str:
    consulted = ", ".join(sorted(request.exclude)) or "-"
    missing = "; ".join(request.missing) or "-"
    return localized("planner.replan", language).format(consulted=consulted, missing=missing)
