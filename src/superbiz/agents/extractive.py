"""The extractive chat model: answers without any LLM, deterministically.

It plays the same governed loop as a real model: one ``lookup_knowledge`` call for the
question, one targeted supplement after a REFERENCE result (naming the question's terms
the first result did not cover), then an answer quoted from the retrieved passages,
with citations, clearly labelled as extractive.

It is an agent policy, not an LLM client: it reads the planner's ``Plan`` and the
session's ``Citation`` evidence from the turn context, which is why it lives next to the
agents (the runtime picks it when no LLM is configured). ``TurnView`` reads a
conversation the way such a deterministic player needs it; the behaviour profiles used
by the benchmarks build on it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any, NotRequired, TypedDict

from superbiz._messages import localized
from superbiz._text import Language, asker_language, key_terms, normalize, without_measure
from superbiz.agents.answer_selection import AnswerSelection, question_terms, select_answer
from superbiz.agents.context import Citation, read_evidence
from superbiz.agents.passage_quote import best_passage
from superbiz.agents.planner import Plan, PlannedDomain
from superbiz.knowledge.documents.ingested import as_rendered
from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from superbiz.retrieval.relevance import RelevanceLevel
from superbiz.storage.invocations import TOOL_NAME


class LookupArguments(TypedDict):
    """The arguments of a ``lookup_knowledge`` call a deterministic player makes."""

    query: str
    domain: NotRequired[str]
    missing_dimension: NotRequired[str]


@dataclass(slots=True)
class TurnView:
    """The current turn as a deterministic player sees it."""

    question: str
    language: Language
    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    tools_offered: bool = False
    plan: Plan | None = None
    evidence: list[Citation] = field(default_factory=list)

    @classmethod
    def of(cls, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> TurnView:
        start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
        question = messages[start].content if start >= 0 else ""
        view = cls(
            question,
            asker_language(question),
            tools_offered=any(t.name == TOOL_NAME for t in tools),
            plan=Plan.from_messages(messages),
            evidence=read_evidence(messages),
        )
        for message in messages[start + 1 :]:
            if isinstance(message, AssistantMessage):
                view.calls.extend(c.arguments or {} for c in message.tool_calls)
            elif isinstance(message, ToolMessage):
                try:
                    data = json.loads(message.content)
                except json.JSONDecodeError:
                    data = {"error": message.content}
                view.results.append(data if isinstance(data, dict) else {})
        return view

    @property
    def last_level(self) -> str | None:
        """The last result's ``relevance_level``, a ``RelevanceLevel`` value."""
        return self.results[-1].get("relevance_level") if self.results else None

    @property
    def supplemented(self) -> bool:
        return any(call.get("missing_dimension") for call in self.calls)

    @property
    def planned(self) -> tuple[PlannedDomain, ...]:
        """The domains the plan scopes its lookups to (empty without a plan, and for an
        unscoped plan, whose domains are only candidates: its lookup searched them all)."""
        plan = self.plan
        return plan.domains if plan and plan.need_retrieval and plan.scoped else ()

    @property
    def _evidence_paths(self) -> set[str]:
        return {item.path for item in self.evidence}

    @property
    def answer_from_evidence(self) -> bool:
        return self.plan is not None and not self.plan.need_retrieval

    def evidence_documents(self) -> list[Citation]:
        """Earlier evidence that mentions the question's terms, most mentions first."""
        terms = key_terms(self.question)
        scored = [
            (sum(term in normalize(f"{item.title} {item.content}") for term in terms), item)
            for item in self.evidence
        ]
        return [item for hits, item in sorted(scored, key=lambda pair: -pair[0]) if hits]

    def documents(self) -> list[Citation]:
        """Documents shown this turn, primary first, each once; earlier evidence when the
        plan says to answer from it or the turn found nothing."""
        docs: dict[str, Citation] = {}
        for result in self.results:
            primary = result.get("primary")
            items = ([primary] if primary else []) + list(result.get("supplement") or [])
            for item in items:
                text = item.get("content") or item.get("excerpt") or ""
                docs.setdefault(
                    item["path"],
                    Citation(
                        item.get("ref") or 0,
                        item["title"],
                        item["path"],
                        item["domain"],
                        text,
                        item.get("page"),
                    ),
                )
        if self.answer_from_evidence or not docs:
            for doc in self.evidence_documents():
                docs.setdefault(doc.path, doc)
        return list(docs.values())

    def missing_terms(self) -> list[str]:
        """Question terms that no passage retrieved this turn mentions (a measure, "how
        many", is what it asks for: no dimension a supplement could find)."""
        turn_docs = [d for d in self.documents() if d.path not in self._evidence_paths]
        seen = normalize(" ".join(d.title + " " + d.content for d in turn_docs))
        return [term for term in key_terms(without_measure(self.question)) if term not in seen]


def compose_answer(view: TurnView, *, label: str | None = None) -> str:
    """The extractive answer from the messages alone (no stored passages, no vectors):
    this turn's documents chosen by the question's terms in what they showed. The
    executor quotes from the knowledge base's passages instead (``quote_answer``)."""
    documents = view.documents()
    selection = select_answer(view.question, documents, {})
    return quote_answer(selection, view.question, view.language, label=label)


def quote_answer(
    selection: AnswerSelection,
    question: str,
    language: Language,
    *,
    label: str | None = None,
) -> str:
    """The answer quoted from ``selection``, under ``label`` (default: the extractive
    mode's, which says no LLM is configured): each quoted document by its passage that
    answers, best first, numbered ``[1]``, ``[2]`` in that order; then the sources, then
    the related documents (title and location, not quoted). A document shown in an
    earlier turn says so. When nothing answers well it says that, listing the related
    documents if any (see ``numbered``)."""
    label = label or localized("extractive.label", language)
    quoted, related = numbered(selection)
    if not quoted:
        never = ""
        if selection.unknown:
            names = ", ".join(selection.unknown)
            never = localized("extractive.never_mentions", language).format(names=names) + "\n"
        if not related:
            return f"{label}\n\n{never}{localized('extractive.nothing', language)}"
        listed = "\n".join(f"[{c.ref}] {c.title} ({c.location})" for c in related)
        return f"{label}\n\n{never}{localized('extractive.no_answer', language)}\n{listed}"
    terms = question_terms(question)
    parts = [label]
    for quote, citation in zip(selection.quoted, quoted, strict=True):
        title = localized("common.title", language).format(title=citation.title)
        passage = best_passage(as_rendered(quote.passage), terms, from_start=quote.from_start)
        section = passage.heading or (quote.heading.split(" > ")[-1] if quote.heading else "")
        if section and section != citation.title:
            title += f" › {section}"
        if quote.earlier:
            title += " " + localized("extractive.earlier", language)
        parts.append(f"[{citation.ref}] {title}\n{passage.text}")
    sources = "\n".join(f"[{c.ref}] {c.title} ({c.location})" for c in quoted)
    parts.append(localized("extractive.sources", language) + "\n" + sources)
    if related:
        listed = "\n".join(f"[{c.ref}] {c.title} ({c.location})" for c in related)
        parts.append(localized("extractive.related", language) + "\n" + listed)
    return "\n\n".join(parts)


def numbered(selection: AnswerSelection) -> tuple[list[Citation], list[Citation]]:
    """The quoted documents numbered 1, 2 … in the order they are quoted, then the
    related ones after them: the numbers the extractive answer shows."""
    quoted = [replace(q.citation, ref=i) for i, q in enumerate(selection.quoted, 1)]
    start = len(quoted)
    related = [replace(c, ref=start + i) for i, c in enumerate(selection.related, 1)]
    return quoted, related


class ExtractiveChatModel:
    """A deterministic ``ChatModel``: one lookup, one supplement after REFERENCE, answer."""

    name = "extractive"
    #: its answers quote the documents (``superbiz.llm.base.quotes_documents``)
    quotes_documents = True

    def __init__(self) -> None:
        self._ids = count(1)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        view = TurnView.of(messages, tools)
        arguments = self.next_call(view, messages)
        if arguments is not None:
            return self._call(arguments)
        return ChatResponse(AssistantMessage(compose_answer(view)), None, "stop")

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        response = self.complete(messages, tools)
        text = response.message.content
        for start in range(0, len(text), 24):
            yield TextDelta(text[start : start + 24])
        yield ResponseDone(response)

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> LookupArguments | None:
        """The next lookup to make, or ``None`` to answer."""
        if not view.tools_offered or not view.question.strip() or view.answer_from_evidence:
            return None
        consulted = {call.get("domain") for call in view.calls}
        for entry in view.planned:
            if entry.domain not in consulted:
                return {"query": entry.sub_question or view.question, "domain": entry.domain}
        if not view.calls:
            return {"query": view.question}
        if view.last_level == RelevanceLevel.REFERENCE and not view.supplemented:
            missing = view.missing_terms()
            if missing:
                primary = view.results[-1].get("primary") or {}
                call: LookupArguments = {
                    "query": view.question,
                    "missing_dimension": " ".join(missing),
                }
                if primary.get("domain"):
                    call["domain"] = primary["domain"]
                return call
        return None

    def _call(self, arguments: LookupArguments) -> ChatResponse:
        call = ToolCall.of(f"call_{next(self._ids)}", TOOL_NAME, arguments)
        return ChatResponse(AssistantMessage("", (call,)), None, "tool_calls")
