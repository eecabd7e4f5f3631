"""The extractive chat model: answers without any LLM, deterministically.

It plays the same governed loop as a real model: one ``lookup_knowledge`` call for the
question, one targeted supplement after a REFERENCE result (naming the question's terms
the first result did not cover), then an answer quoted from the retrieved passages,
with citations, clearly labelled as extractive.

``TurnView`` reads a conversation the way such a deterministic player needs it; the
behaviour profiles used by the benchmarks build on it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from superbiz._text import Language, detect_language, key_terms, normalize
from superbiz.llm.base import ResponseDone, StreamEvent, TextDelta
from superbiz.llm.messages import (
    AssistantMessage,
    ChatResponse,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

LOOKUP = "lookup_knowledge"
PASSAGE_CHARS = 700

_LABEL: dict[Language, str] = {
    "zh": "【抽取式回答】未配置大模型，以下内容直接摘自知识库，请以原文为准。",
    "en": "[Extractive answer] No LLM is configured; the passages below are quoted "
    "from the knowledge base.",
}
_NOTHING: dict[Language, str] = {
    "zh": "知识库中没有找到与该问题相关的内容。可以换一种说法描述现象，或联系相关负责人补充文档。",
    "en": "The knowledge base has nothing relevant to this question. Try describing the "
    "symptom differently, or ask the owning team to add a runbook.",
}
_SOURCES: dict[Language, str] = {"zh": "来源：", "en": "Sources:"}


@dataclass(slots=True)
class RetrievedDoc:
    ref: int | None
    title: str
    path: str
    domain: str
    text: str


@dataclass(slots=True)
class TurnView:
    """The current turn as a deterministic player sees it."""

    question: str
    language: Language
    calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    tools_offered: bool = False

    @classmethod
    def of(cls, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> TurnView:
        start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1)
        question = messages[start].content if start >= 0 else ""
        view = cls(
            question, detect_language(question), tools_offered=any(t.name == LOOKUP for t in tools)
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
        return self.results[-1].get("relevance_level") if self.results else None

    @property
    def supplemented(self) -> bool:
        return any(call.get("missing_dimension") for call in self.calls)

    def documents(self) -> list[RetrievedDoc]:
        """Documents shown this turn, primary first, each once."""
        docs: dict[str, RetrievedDoc] = {}
        for result in self.results:
            primary = result.get("primary")
            items = ([primary] if primary else []) + list(result.get("supplement") or [])
            for item in items:
                text = item.get("content") or item.get("excerpt") or ""
                docs.setdefault(
                    item["path"],
                    RetrievedDoc(
                        item.get("ref"), item["title"], item["path"], item["domain"], text
                    ),
                )
        return list(docs.values())

    def missing_terms(self) -> list[str]:
        """Question terms that no retrieved passage mentions."""
        seen = normalize(" ".join(d.title + " " + d.text for d in self.documents()))
        return [term for term in key_terms(self.question) if term not in seen]


def best_passage(text: str, terms: Sequence[str], limit: int = PASSAGE_CHARS) -> str:
    """The paragraphs of ``text`` that mention the most ``terms``, in document order.

    >>> best_passage("# T\\n\\nintro\\n\\nredis pool is full\\n\\nother", ["redis"], 100)
    'redis pool is full'
    """
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    paragraphs = [p for p in paragraphs if not re.fullmatch(r"#{1,6}\s.*", p)] or paragraphs
    if not paragraphs:
        return ""
    hits = [sum(t in normalize(p) for t in terms) for p in paragraphs]
    ranked = sorted(range(len(paragraphs)), key=lambda i: (-hits[i], i))
    if hits[ranked[0]]:  # only paragraphs that mention the question, when some do
        ranked = [i for i in ranked if hits[i]]
    chosen: list[int] = []
    size = 0
    for i in ranked:
        if chosen and size + len(paragraphs[i]) > limit:
            break
        chosen.append(i)
        size += len(paragraphs[i])
    passage = "\n\n".join(paragraphs[i] for i in sorted(chosen))
    return passage if len(passage) <= limit else passage[:limit].rstrip() + "…"


def compose_answer(view: TurnView) -> str:
    """An answer quoted from this turn's documents, with ``[ref]`` citations."""
    language = view.language
    docs = view.documents()
    if not docs:
        return f"{_LABEL[language]}\n\n{_NOTHING[language]}"
    terms = key_terms(view.question)
    parts = [_LABEL[language]]
    sources = []
    for number, doc in enumerate(docs, start=1):
        ref = doc.ref or number
        title = f"《{doc.title}》" if language == "zh" else f'"{doc.title}"'
        parts.append(f"[{ref}] {title}\n{best_passage(doc.text, terms)}")
        sources.append(f"[{ref}] {doc.title} ({doc.path})")
    parts.append(_SOURCES[language] + "\n" + "\n".join(sources))
    return "\n\n".join(parts)


class ExtractiveChatModel:
    """A deterministic ``ChatModel``: one lookup, one supplement after REFERENCE, answer."""

    name = "extractive"

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

    def next_call(self, view: TurnView, messages: Sequence[Message]) -> dict[str, Any] | None:
        """The next lookup to make, or ``None`` to answer."""
        if not view.tools_offered or not view.question.strip():
            return None
        if not view.calls:
            return {"query": view.question}
        if view.last_level == "REFERENCE" and not view.supplemented:
            missing = view.missing_terms()
            if missing:
                primary = view.results[-1].get("primary") or {}
                call: dict[str, Any] = {
                    "query": view.question,
                    "missing_dimension": " ".join(missing),
                }
                if primary.get("domain"):
                    call["domain"] = primary["domain"]
                return call
        return None

    def _call(self, arguments: dict[str, Any]) -> ChatResponse:
        call = ToolCall.of(f"call_{next(self._ids)}", LOOKUP, arguments)
        return ChatResponse(AssistantMessage("", (call,)), None, "tool_calls")


def system_texts(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, SystemMessage)]
