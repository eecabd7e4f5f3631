"""The Planner: sees the knowledge map, decides which domains to consult.

``LLMPlanner`` asks the chat model (validated JSON, one repair retry, then a fallback
plan); ``MapPlanner`` plans deterministically from the same map, for extractive mode and
as that fallback. Neither sees retrieval results: only the map and which documents the
session already holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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
from superbiz.agents.context import PLAN_HEADER, Citation, context_message, read_context
from superbiz.agents.prompts import load_prompt
from superbiz.config import PlannerSettings
from superbiz.exceptions import LLMError
from superbiz.knowledge.documents import normalize_domain
from superbiz.knowledge.map import KnowledgeMap, MapDocument
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import Message, SystemMessage, UserMessage
from superbiz.llm.structured import ask_structured
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex

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


class MapPlanner:
    """Deterministic planning from the map.

    Each map document is an entry (title, covers, when_to_retrieve); a domain scores the
    best cosine of its entries with the question, and an exact title/cover match in the
    question scores 1. The best domain is planned, with the others scoring at least
    ``relative_cutoff`` of it (up to ``max_domains``). When the best entry is a document
    the session already holds, the plan is to answer from that evidence.
    """

    def __init__(self, embedder: Embedder, settings: PlannerSettings) -> None:
        self.embedder = embedder
        self.settings = settings
        self._entries: dict[tuple[str, str], np.ndarray] = {}
        # (map, its exact index), swapped whole: turns of several sessions plan at once
        self._exact_built: tuple[KnowledgeMap, ExactIndex] | None = None

    def plan(self, request: PlanRequest) -> Plan:
        kmap = request.knowledge_map
        documents = [
            (domain.domain_id, doc)
            for domain in kmap.domains
            if domain.domain_id not in request.exclude
            for doc in domain.documents
        ]
        if not documents:
            return Plan(False, source="map", note="no domain left to consult")
        vectors = self._vectors([doc for _, doc in documents])
        question = self.embedder.embed_query(request.question)
        scores = vectors @ question
        best_doc = int(np.argmax(scores))
        held = {item.path for item in request.evidence}
        if not request.exclude and documents[best_doc][1].path in held:
            return Plan(
                False, source="evidence", note=f"answer from {documents[best_doc][1].title}"
            )

        domain_score: dict[str, float] = {}
        for (domain, _), score in zip(documents, scores, strict=True):
            domain_score[domain] = max(domain_score.get(domain, -1.0), float(score))
        for match in ExactIndex.naming(self._exact(kmap).match(request.question)):
            if match.domain in domain_score:  # not an excluded domain
                domain_score[match.domain] = 1.0
        ranked = sorted(domain_score.items(), key=lambda item: item[1], reverse=True)
        top = ranked[0][1]
        cutoff = top * self.settings.relative_cutoff if top > 0 else top
        chosen = [d for d, s in ranked if s >= cutoff][: self.settings.max_domains]
        return Plan(
            True,
            tuple(PlannedDomain(d, request.question) for d in chosen),
            source="map",
        )

    def _exact(self, kmap: KnowledgeMap) -> ExactIndex:
        """The map's titles and covers as an exact index, built once per map."""
        built = self._exact_built
        if built is None or built[0] is not kmap:
            index = ExactIndex(
                (
                    ExactEntry(doc.path, doc.title, domain.domain_id, covers=doc.covers)
                    for domain in kmap.domains
                    for doc in domain.documents
                ),
                kmap.key_frequency,  # the lookup's rule: a key many documents use names none
            )
            self._exact_built = built = (kmap, index)
        return built[1]

    def _vectors(self, docs: list[MapDocument]) -> np.ndarray:
        """Entry vectors, embedded once per (path, text) and reused across turns."""
        texts = [_entry_text(d) for d in docs]
        missing = [
            (d.path, t)
            for d, t in zip(docs, texts, strict=True)
            if (d.path, t) not in self._entries
        ]
        if missing:
            for (path, text), vector in zip(
                missing, self.embedder.embed([t for _, t in missing]), strict=True
            ):
                self._entries[(path, text)] = vector
        return np.stack([self._entries[(d.path, t)] for d, t in zip(docs, texts, strict=True)])


def _entry_text(doc: MapDocument) -> str:
    return "\n".join([doc.title, *doc.covers, doc.when_to_retrieve or ""]).strip()


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

    def __init__(self, model: ChatModel, fallback: MapPlanner, settings: PlannerSettings) -> None:
        self.model = model
        self.fallback = fallback
        self.settings = settings

    def plan(self, request: PlanRequest) -> Plan:
        language: Language = asker_language(request.question)
        kmap = request.knowledge_map
        allowed = set(kmap.domain_ids) - request.exclude
        system = load_prompt("chat-planner-prompt", language).format(
            knowledge_map=kmap.to_yaml(self.settings.map_token_budget).strip(),
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
        return reply.value.to_plan(request.question, self.settings.max_domains, source)


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
