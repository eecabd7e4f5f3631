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
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any, NamedTuple, NotRequired, TypedDict

from superbiz._messages import localized
from superbiz._text import Language, asker_language, has_cjk, key_terms, normalize
from superbiz.agents.answer_selection import AnswerSelection, question_terms, select_answer
from superbiz.agents.context import Citation, read_evidence
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

PASSAGE_CHARS = 700


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
        """Question terms that no passage retrieved this turn mentions."""
        turn_docs = [d for d in self.documents() if d.path not in self._evidence_paths]
        seen = normalize(" ".join(d.title + " " + d.content for d in turn_docs))
        return [term for term in key_terms(self.question) if term not in seen]


@dataclass(frozen=True, slots=True)
class _Section:
    """A heading and the paragraphs under it, up to the next heading (any level)."""

    heading: str
    paragraphs: tuple[str, ...]

    @property
    def title(self) -> str:
        """The heading's words, without its ``#`` marks."""
        return self.heading.lstrip("#").strip()

    def hits(self, terms: Sequence[str]) -> tuple[int, int]:
        """How many of ``terms`` it mentions, then how often in all."""
        counts = [self._text.count(term) for term in terms]
        return sum(c > 0 for c in counts), sum(counts)

    def named(self, terms: Sequence[str]) -> set[str]:
        """Which of ``terms`` it mentions as words (``_names``)."""
        text = self._text
        return {term for term in terms if _names(term, text)}

    @property
    def _text(self) -> str:
        return normalize(self.heading + "\n" + "\n".join(self.paragraphs))


def _names(term: str, text: str) -> bool:
    """Whether ``text`` (normalised) names ``term``: a Chinese term anywhere, a Latin one
    as a word or its inflection, not inside a longer word ("option" is not "optional").

    >>> _names("option", "save-optional"), _names("report", "it reports"), _names("连接", "连接池")
    (False, True, True)
    """
    if has_cjk(term):
        return term in text
    return (
        re.search(rf"(?<![a-z0-9]){re.escape(term)}(?:s|es|d|ed|ing)?(?![a-z0-9])", text)
        is not None
    )


_HEADING = re.compile(r"#{1,6}\s")
_FENCE = re.compile(r"\s*(```|~~~)")


def _sections(text: str) -> list[_Section]:
    """``text`` cut at its Markdown headings, each section into paragraphs at blank lines.
    A fenced code block is code: a ``#`` line in it is no heading and a blank line in it
    ends no paragraph, so a quote never holds half a block."""
    sections: list[tuple[str, list[list[str]]]] = [("", [[]])]
    fenced = False
    for line in text.splitlines():
        fence = bool(_FENCE.match(line))
        if not fenced and not fence and _HEADING.match(line):
            sections.append((line, [[]]))
        elif not fenced and not line.strip():
            sections[-1][1].append([])
        else:
            sections[-1][1][-1].append(line)
        fenced ^= fence
    result = []
    for heading, runs in sections:
        paragraphs = tuple(p for run in runs if (p := "\n".join(run).strip()))
        if heading or paragraphs:
            result.append(_Section(heading, paragraphs))
    return result


class QuotedPassage(NamedTuple):
    """What an extractive answer quotes of a passage: the heading of the section the quote
    starts in ("" when that is the passage's own, which its stored heading names) and the
    quoted text."""

    heading: str
    text: str


def best_passage(text: str, terms: Sequence[str], limit: int = PASSAGE_CHARS) -> QuotedPassage:
    r"""The passage of ``text`` that answers ``terms``: the section (heading to heading)
    that mentions the most of them (ties: the most mentions), then any other section
    mentioning more than half as many and one the quote does not name yet, best first,
    each by its paragraphs naming one, under its heading (all of them, from its start,
    when only its heading names any: an FAQ's question, answered by what follows it).
    Quoting the document's opening because it names the product once is what this
    avoids; with no term anywhere, the opening it is. A section that only repeats the
    quote's words (the next command of a reference page, under words every section
    uses) is left out.

    >>> best_passage("# T\n\nintro\n\nredis pool is full\n\nother", ["redis"], 100).text
    'redis pool is full'
    >>> best_passage("# T\n\nuses redis\n\n## Full pool\n\nredis pool is full", ["redis", "pool"])
    QuotedPassage(heading='Full pool', text='redis pool is full')
    >>> best_passage("## Why is the pool full?\n\nClients leak connections.", ["pool", "full"])
    QuotedPassage(heading='Why is the pool full?', text='Clients leak connections.')
    >>> best_passage("# RedisPoolFull\n\n## Meaning\n\nThe pool is full.", ["redis", "pool"])
    QuotedPassage(heading='Meaning', text='The pool is full.')
    """
    sections = _sections(text)
    # a heading with nothing under it before the next one (a page's title) has nothing
    # to quote: "etcdGRPCReadRequestsSlow" named every word of its alert and was quoted empty
    hits = [s.hits(terms) if s.paragraphs else (0, 0) for s in sections]
    best = max(hits, default=(0, 0))[0]
    if not best:
        return QuotedPassage("", _within([p for s in sections for p in s.paragraphs], limit))
    ranked = sorted(range(len(sections)), key=lambda i: (-hits[i][0], -hits[i][1], i))
    quoted: list[int] = []
    named: set[str] = set()
    for i in ranked:
        names = sections[i].named(terms)
        if 2 * hits[i][0] > best and (not quoted or names - named):
            quoted.append(i)
            named |= names
    paragraphs: list[str] = []
    for i in quoted:
        # a section that names the question only in its heading (an FAQ's question) is
        # answered by what follows it: read from its start (its paragraphs naming none of
        # the terms, the quote had been the heading alone)
        own = _reading(sections[i].paragraphs, terms) or list(sections[i].paragraphs)
        if paragraphs and own and sections[i].heading:
            own.insert(0, f"› {sections[i].title}")
        paragraphs += own
    return QuotedPassage(sections[quoted[0]].title, _within(paragraphs, limit))


def _reading(paragraphs: Sequence[str], terms: Sequence[str]) -> list[str]:
    r"""The ``paragraphs`` that name one of ``terms``, with what they read with: one that
    introduces the next with a colon keeps it, and a paragraph between two of them is kept
    (CMake's "For example, the code:", its code block, then "will run ``someHasher``": the
    quote had lost the code).

    >>> _reading(["Run it:", "```\nmake\n```", "It builds.", "Other."], ["run", "builds"])
    ['Run it:', '```\nmake\n```', 'It builds.']
    """
    named = [any(t in normalize(p) for t in terms) for p in paragraphs]
    last = len(paragraphs) - 1
    return [
        paragraph
        for i, paragraph in enumerate(paragraphs)
        if named[i]
        or (i > 0 and named[i - 1] and paragraphs[i - 1].rstrip().endswith((":", "：")))
        or (0 < i < last and named[i - 1] and named[i + 1])
    ]


def _within(paragraphs: Sequence[str], limit: int) -> str:
    """The first of ``paragraphs`` that fit in ``limit`` characters (at least one, cut with
    "…" when it alone is longer), a section's heading never last."""
    chosen: list[str] = []
    size = 0
    for paragraph in paragraphs:
        if chosen and size + len(paragraph) > limit:
            break
        chosen.append(paragraph)
        size += len(paragraph)
    if len(chosen) > 1 and chosen[-1].startswith("› "):
        chosen.pop()
    passage = _cut("\n\n".join(chosen), limit)
    # a block cut by the window or by the limit is closed, so the answer after it is text
    unclosed = sum(1 for line in passage.splitlines() if _FENCE.match(line)) % 2
    return passage + "\n```" if unclosed else passage


#: a sentence's end: a full stop after a word (not "e.g."), or a Chinese one
_SENTENCE_END = re.compile(r"(?:(?<=[^\W\d_]{2})|(?<=[)\]`'\"”]))[.!?;](?=\s)|[。！？；]")


def _cut(passage: str, limit: int) -> str:
    r"""``passage`` cut to ``limit`` characters where a reader expects a cut: after its last
    whole line that fits, else its last sentence, else its last word, each only when it
    keeps half the room (a long line is still quoted); then "…", and an inline code span
    the cut left open is closed (a word or a command cut in two reads as a typo).

    >>> _cut("1. Restart the pod.\n2. Check `kubectl logs pay-callback` for errors", 36)
    '1. Restart the pod.\n…'
    >>> _cut("Restart the failing pod. Then read its logs for the request", 40)
    'Restart the failing pod. …'
    >>> _cut("Check whether the backend `auth-service` is healthy now", 40)
    'Check whether the backend `auth-service`…'
    >>> _cut("Check whether `kubectl describe node` says DiskPressure", 30)
    'Check whether `kubectl`…'
    """
    if len(passage) <= limit:
        return passage
    room, least = passage[: limit + 1], limit // 2
    line = room.rfind("\n")
    if line >= least:
        return passage[:line].rstrip() + "\n…"
    ends = [m.end() for m in _SENTENCE_END.finditer(room)]
    if ends and ends[-1] >= least:
        return passage[: ends[-1]] + " …"
    space = max(room.rfind(" "), room.rfind("\t"))
    head = passage[:space].rstrip() if space >= least else passage[:limit].rstrip()
    last = head.rsplit("\n", 1)[-1]
    if last.count("`") % 2 and not _FENCE.match(last):
        head += "`"
    return head + "…"


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
        if not related:
            return label + "\n\n" + localized("extractive.nothing", language)
        listed = "\n".join(f"[{c.ref}] {c.title} ({c.location})" for c in related)
        return f"{label}\n\n{localized('extractive.no_answer', language)}\n{listed}"
    terms = question_terms(question)
    parts = [label]
    for quote, citation in zip(selection.quoted, quoted, strict=True):
        title = localized("common.title", language).format(title=citation.title)
        passage = best_passage(as_rendered(quote.passage), terms)
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
