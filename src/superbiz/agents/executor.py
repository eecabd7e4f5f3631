"""The Executor: a ReAct loop whose lookups are governed by code.

The plan's lookups are run by code before the model's first step (``origin: plan``):
governed like any call and shown to the model as its own calls and results, so a model
that would answer without looking anything up still answers over the documents, and the
first lookup costs no model step. Between every two LLM steps the governor's constraint
is injected as a system message and decides whether ``lookup_knowledge`` is offered at
all; calls the model makes anyway are answered without a retrieval. A hard step cap ends
the turn with one last call, tools stripped. The answer's citations are then checked
(:mod:`superbiz.agents.grounding`). The executor never sees the knowledge map: only its
own action memory, through tool results.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from opentelemetry.trace import SpanKind, Tracer

from superbiz._messages import localized
from superbiz._text import Language, asker_language, key_terms, normalize, unescape_entities
from superbiz.access import Reader
from superbiz.agents.context import Citation, evidence_message
from superbiz.agents.extractive import ExtractiveChatModel, TurnView, compose_answer
from superbiz.agents.grounding import AnswerSource, CopyKind, Source, ground
from superbiz.agents.planner import Plan, lookup_query
from superbiz.agents.prompts import load_prompt
from superbiz.config import GovernanceConfig
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tool import LOOKUP_KNOWLEDGE, TOOL_NAME, LookupTurn, ToolOutcome
from superbiz.llm.base import ChatModel, quotes_documents
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
from superbiz.retrieval.relevance import RelevanceLevel
from superbiz.storage.invocations import InvocationRepository
from superbiz.telemetry import (
    GEN_AI_FINISH_REASONS,
    GEN_AI_INPUT_TOKENS,
    GEN_AI_OPERATION,
    GEN_AI_OUTPUT_TOKENS,
    GEN_AI_REQUEST_MODEL,
    default_tracer,
    set_attributes,
)

#: how a turn's model loop ended: an answer, the step cap, or the tool withdrawn after
#: ``MALFORMED_STEPS`` steps in a row whose every call was malformed
StopReason = Literal["answer", "step_cap", "malformed_calls"]
#: Steps in a row whose calls were all malformed (not JSON, no query, another tool) after
#: which the tool is withdrawn and the model must answer: it was told the error twice and
#: kept sending calls that cannot run, so more steps would only spend the turn's budget
#: (it took all ``governance.max-steps`` before, then the extractive answer anyway).
MALFORMED_STEPS = 3


@dataclass(slots=True)
class TurnResult:
    session_id: str
    turn: int
    question: str
    language: Language
    answer: str = ""
    citations: list[Citation] = field(default_factory=list)
    lookups: list[ToolOutcome] = field(default_factory=list)
    steps: int = 0
    stopped_by: StopReason = "answer"
    model: str = ""
    governance_ms: float = 0.0
    #: missing dimensions a supplement was asked for but could not fill
    unfilled: list[str] = field(default_factory=list)
    #: citations that came from earlier turns' evidence
    reused: list[str] = field(default_factory=list)
    #: the turn's governed tool: a re-plan resumes it, so the budget is the turn's
    governed: LookupTurn | None = field(default=None, repr=False)
    #: the answer cites documents shown to the model and draws on them
    grounded: bool = False
    #: ``[n]`` markers removed from the model's text because they named no document
    invalid_citations: int = 0
    #: who wrote the answer: the model, the model after a repair turn, or the extractive
    #: composition from the same documents (see ``superbiz.agents.grounding``)
    answer_source: AnswerSource = "model"
    #: the model's answer stopped at its output token limit (``finish_reason: length``):
    #: it ends mid-sentence, so a note says so (``executor.length_cut``)
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: the OpenTelemetry trace of the turn (32 hex digits); None when none was recording
    trace_id: str | None = None
    #: the model's answer copied an earlier answer of the session (``turn``) or pasted
    #: the documents (``documents``) instead of answering, so it was not taken as one
    copied: CopyKind | None = None

    @property
    def relabelled(self) -> bool:
        """A model wrote an answer, and the extractive one, labelled so, replaced it."""
        return self.answer_source == "extractive" and self.model != ExtractiveChatModel.name

    @property
    def evidence(self) -> list[str]:
        """Documents put in front of the model this turn, in citation order."""
        return [c.path for c in self.citations]

    @property
    def executed(self) -> int:
        return sum(o.executed for o in self.lookups)

    @property
    def blocked(self) -> int:
        return sum(not o.executed and o.error is None for o in self.lookups)

    @property
    def extractive(self) -> bool:
        """The answer is quoted from the documents, not written by a model."""
        return self.model == "extractive" or self.answer_source == "extractive"

    @property
    def recorded_source(self) -> str:
        """The answer's source as the chat store keeps it: a model's answer replaced by
        quoting (its text was not grounded) is a ``fallback``, told apart from the
        extractive answers of a service without an LLM (the knowledge-gaps report
        counts the first, not the second)."""
        if self.answer_source == "extractive" and self.model != ExtractiveChatModel.name:
            return "fallback"
        return self.answer_source

    def count(self, response: ChatResponse) -> None:
        """One model call of the turn: a step, and the tokens it cost when reported."""
        self.steps += 1
        if response.usage:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens

    def add_cost(self, earlier: TurnResult) -> None:
        """Add what an earlier run of the same turn spent (a re-plan runs the turn again)."""
        self.steps += earlier.steps
        self.prompt_tokens += earlier.prompt_tokens
        self.completion_tokens += earlier.completion_tokens
        self.invalid_citations += earlier.invalid_citations


OnLookup = Callable[[ToolOutcome], None]


class Executor:
    def __init__(
        self,
        model: ChatModel,
        lookup: GovernedLookup,
        governance: GovernanceConfig,
        recorder: InvocationRepository | None = None,
        tracer: Tracer | None = None,
        reader: Reader | None = None,
    ) -> None:
        self.model = model
        self.lookup = lookup
        #: whose turns these are (None: an unrestricted reader; see ``LookupTurn``)
        self.reader = reader
        self.governance = governance
        self.recorder = recorder
        #: each model call is a span (``gen_ai.*`` attributes) under the turn's
        self.tracer = tracer or default_tracer()
        #: the model quotes the documents itself (the extractive policy, the behaviour
        #: profiles): its citations are checked, its answers never repaired. Declared by
        #: the model and forwarded by every wrapper (store lock, metering, streaming).
        self.quotes = quotes_documents(model)

    def run(
        self,
        session_id: str,
        question: str,
        *,
        turn: int,
        history: Sequence[Message] = (),
        plan: Plan | None = None,
        evidence: Sequence[Citation] = (),
        on_lookup: OnLookup | None = None,
        resume: LookupTurn | None = None,
    ) -> TurnResult:
        """Turn number ``turn`` of ``session_id`` (``Runtime.next_turn`` counts them).
        ``plan`` (the planner's domains) and ``evidence`` (documents retrieved in earlier
        turns) reach the model as system messages, never the knowledge map."""
        language = asker_language(question)
        tool = resume or LookupTurn(
            self.lookup,
            self.governance,
            session_id=session_id,
            turn=turn,
            language=language,
            recorder=self.recorder,
            reader=self.reader,
        )
        result = TurnResult(session_id, turn, question, language, model=self.model.name)
        refs = {doc.path: replace(doc, ref=i) for i, doc in enumerate(_unique(evidence), 1)}
        earlier = set(refs)
        messages = self._opening(question, language, history, plan, list(refs.values()))
        if plan is not None:
            asked = [m.content for m in history if isinstance(m, UserMessage)]
            self._run_planned(plan, question, tool, messages, refs, on_lookup, asked)
        finish: str | None = None  # the finish reason of the step that answered
        stop: StopReason = "step_cap"
        malformed_steps = 0
        for step in range(1, self.governance.max_steps + 1):
            constraint = tool.constraint()
            extra = [SystemMessage(constraint.message)] if constraint.message else []
            tools = [LOOKUP_KNOWLEDGE] if constraint.tools_allowed else []
            response = self._complete(result, tool, [*messages, *extra], tools)
            reply = response.message
            messages.append(reply)
            if not reply.tool_calls:
                result.answer = unescape_entities(reply.content).strip()
                finish = response.finish_reason
                stop = "answer"
                break
            malformed = True
            for call in reply.tool_calls:
                outcome = tool.call(
                    call.arguments,
                    call_id=call.id,
                    step=step,
                    tool_name=call.name,
                    error=call.error,
                    raw_arguments=call.raw_arguments,
                )
                malformed = malformed and outcome.malformed
                messages.append(ToolMessage(call.id, call.name, self._render(outcome, refs)))
                if on_lookup:
                    on_lookup(outcome)
            malformed_steps = malformed_steps + 1 if malformed else 0
            if malformed_steps >= MALFORMED_STEPS and step < self.governance.max_steps:
                stop = "malformed_calls"
                break
        if stop != "answer":
            finish = self._force_answer(result, tool, messages, on_lookup, stop)
        answers = _answers_to_other_questions(history, question)
        cited = self._ground(result, tool, messages, refs, finish, earlier, answers)
        self._settle(result, tool, refs, earlier, cited)
        return result

    def _complete(
        self,
        result: TurnResult,
        tool: LookupTurn,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> ChatResponse:
        """One model call, counted as a step with its tokens (the water level's too), in
        a span with the ``gen_ai`` attributes (model, tokens, finish reason)."""
        name = self.model.name
        with self.tracer.start_as_current_span(f"chat {name}", kind=SpanKind.CLIENT) as span:
            set_attributes(
                span,
                {
                    GEN_AI_OPERATION: "chat",
                    GEN_AI_REQUEST_MODEL: name,
                    "superbiz.step": result.steps + 1,
                    "superbiz.tools_offered": bool(tools),
                },
            )
            response = self.model.complete(messages, tools)
            set_attributes(
                span,
                {
                    GEN_AI_FINISH_REASONS: [response.finish_reason or "unknown"],
                    GEN_AI_INPUT_TOKENS: response.usage.prompt_tokens if response.usage else None,
                    GEN_AI_OUTPUT_TOKENS: response.usage.completion_tokens
                    if response.usage
                    else None,
                    "superbiz.tool_calls": len(response.message.tool_calls),
                },
            )
        result.count(response)
        if response.usage:
            tool.governor.add_tokens(response.usage.total_tokens)
        return response

    def _run_planned(
        self,
        plan: Plan,
        question: str,
        tool: LookupTurn,
        messages: list[Message],
        refs: dict[str, Citation],
        on_lookup: OnLookup | None,
        asked: Sequence[str] = (),
    ) -> None:
        """Each planned domain's sub-question, looked up by code (step 0, ``origin: plan``)
        and handed to the model as its own calls and their results. A lookup searches the
        sub-question with the user's question beside it when the rewrite lost part of it
        (``lookup_query``); an unscoped plan (the map could not tell its domains apart)
        searches the whole knowledge base, once per distinct query.

        In a conversation (``asked``: the session's earlier questions), when every planned
        query dropped some of the question's own words, those words are looked up too,
        across the knowledge base, after them: a planner that misread the follow-up (the
        live transcript's "那 max-active 应该调到多少？" became a MySQL question planned
        into ``database``) must not decide alone what the turn sees; so are they when the
        planned lookups found nothing (the map planned the follow-up into ``api``). A
        follow-up with no words of its own ("那怎么办？") is asked together with the
        question before it."""
        if not plan.need_retrieval or not plan.domains:
            return
        arguments: list[dict[str, str]] = []
        for entry in plan.domains:
            planned = {"query": lookup_query(question, entry.sub_question)}
            if plan.scoped:
                planned["domain"] = entry.domain
            if planned not in arguments:
                arguments.append(planned)
        own = set(key_terms(question))
        rewritten = not own or all(not own <= set(key_terms(a["query"])) for a in arguments)
        follow_up = {"query": question if own else f"{asked[-1]}\n{question}"} if asked else None
        if follow_up and rewritten and follow_up not in arguments:
            arguments.append(follow_up)
        found = self._run_calls(arguments, tool, messages, refs, on_lookup)
        if follow_up and not rewritten and not found:
            self._run_calls([follow_up], tool, messages, refs, on_lookup)

    def _run_calls(
        self,
        arguments: Sequence[dict[str, str]],
        tool: LookupTurn,
        messages: list[Message],
        refs: dict[str, Citation],
        on_lookup: OnLookup | None,
    ) -> bool:
        """Planned calls, run by code as the model's own; whether any found a document
        (or one the session already holds)."""
        calls = tuple(
            ToolCall.of(f"plan_{uuid.uuid4().hex[:12]}", TOOL_NAME, dict(args))
            for args in arguments
        )
        messages.append(AssistantMessage("", calls))
        found = False
        for call in calls:
            outcome = tool.call(call.arguments, call_id=call.id, step=0, origin="plan")
            messages.append(ToolMessage(call.id, call.name, self._render(outcome, refs)))
            # DEDUPED: what it found, the session already holds
            held = outcome.level == RelevanceLevel.DEDUPED or outcome.redundant
            found = found or held or bool(outcome.result and outcome.result.found)
            if on_lookup:
                on_lookup(outcome)
        return found

    def _ground(
        self,
        result: TurnResult,
        tool: LookupTurn,
        messages: list[Message],
        refs: dict[str, Citation],
        finish: str | None,
        carried: set[str],
        earlier_answers: Sequence[str],
    ) -> tuple[int, ...]:
        """Check the answer's citations; repair once or quote the documents instead
        (see :func:`superbiz.agents.grounding.ground`). Returns the refs it cites.

        ``finish`` is the answering step's finish reason: a model answer (first or
        repaired) cut at the token limit keeps its text, marked as cut, so no one takes
        half a runbook step for the whole of it. ``carried``: paths of the documents
        carried from earlier turns; ``earlier_answers``: the session's answers the model
        saw (an answer copying one is no answer)."""
        repaired: list[str | None] = []  # the repair turn's finish reason

        def repair(prompt: str) -> str:
            response = self._complete(result, tool, [*messages, SystemMessage(prompt)], [])
            repaired.append(response.finish_reason)
            return unescape_entities(response.message.content)

        def quote() -> str:
            label = localized("extractive.fallback_label", result.language)
            return compose_answer(TurnView.of(messages, []), label=label)

        sources = [
            Source(c.ref, c.title, c.path, c.content, c.path in carried) for c in refs.values()
        ]
        grounding = ground(
            result.answer,
            result.question,
            result.language,
            sources,
            repair=None if self.quotes else repair,
            extractive=quote,
            earlier=earlier_answers,
        )
        result.copied = grounding.copied
        result.answer = grounding.answer or localized("executor.no_answer", result.language)
        result.grounded = grounding.grounded
        result.invalid_citations = grounding.invalid_citations
        # without an LLM the answer is quoted from the documents from the start
        no_llm = grounding.source == "model" and result.model == ExtractiveChatModel.name
        result.answer_source = "extractive" if no_llm else grounding.source
        if grounding.source == "repaired":
            finish = repaired[-1] if repaired else None
        elif grounding.source == "extractive":
            finish = None  # quoted by code, whole
        if grounding.answer and finish == "length":
            result.truncated = True
            result.answer += localized("executor.length_cut", result.language)
        return grounding.cited

    @staticmethod
    def _opening(
        question: str,
        language: Language,
        history: Sequence[Message],
        plan: Plan | None,
        evidence: list[Citation],
    ) -> list[Message]:
        """Prompt, earlier evidence, plan, recent history, question; never the map."""
        messages: list[Message] = [SystemMessage(load_prompt("chat-executor-prompt", language))]
        if evidence:
            messages.append(evidence_message(evidence))
        if plan is not None:
            messages.append(plan.to_message())
        return [*messages, *history, UserMessage(question)]

    def _force_answer(
        self,
        result: TurnResult,
        tool: LookupTurn,
        messages: list[Message],
        on_lookup: OnLookup | None,
        stop: StopReason,
    ) -> str | None:
        """The step cap, or the tool withdrawn after malformed calls (``stop``): one last
        call without tools; calls it makes anyway are recorded as errors and never run.
        Returns the call's finish reason."""
        result.stopped_by = stop
        cap = SystemMessage(localized(f"executor.{stop}", result.language))
        final = self._complete(result, tool, [*messages, cap], [])
        for call in final.message.tool_calls:
            outcome = tool.call(
                call.arguments,
                call_id=call.id,
                step=result.steps,
                tool_name=call.name,
                error=call.error or _STOP_ERRORS[stop],
                raw_arguments=call.raw_arguments,
            )
            if on_lookup:
                on_lookup(outcome)
        result.answer = unescape_entities(final.message.content).strip()
        return final.finish_reason

    @staticmethod
    def _settle(
        result: TurnResult,
        tool: LookupTurn,
        refs: dict[str, Citation],
        earlier: set[str],
        cited_refs: tuple[int, ...],
    ) -> None:
        """Fill in what the turn did: lookups, citations (earlier evidence only when the
        answer cites it), reused evidence and the dimensions left unfilled."""
        result.lookups = list(tool.outcomes)
        result.governed = tool
        cited = {path for path, c in refs.items() if c.ref in cited_refs}
        result.citations = [c for c in refs.values() if c.path not in earlier or c.path in cited]
        result.reused = [c.path for c in result.citations if c.path in earlier]
        result.governance_ms = tool.governance_ms
        # a dimension the lookup found only in documents already retrieved (DEDUPED,
        # doc_retrieved) is in hand, not missing: re-planning other domains for it found
        # nothing in the example KB, three lookups for a word of the question ("keeps")
        # only a dimension the tool took as one: a model may send a list, a number…
        result.unfilled = [
            dimension
            for o in tool.outcomes
            if isinstance(dimension := o.arguments.get("missing_dimension"), str)
            and dimension
            and not (o.result and (o.result.found or o.redundant))
        ]

    @staticmethod
    def _render(outcome: ToolOutcome, refs: dict[str, Citation]) -> str:
        """The tool result as the model reads it: JSON, each document numbered for citing."""
        view = outcome.model_view()
        documents = [view.get("primary"), *(view.get("supplement") or [])]
        for doc in documents:
            if not doc:
                continue
            content = doc.get("content") or doc.get("excerpt") or ""
            citation = refs.setdefault(
                doc["path"],
                Citation(
                    len(refs) + 1,
                    doc["title"],
                    doc["path"],
                    doc["domain"],
                    content,
                    doc.get("page"),
                ),
            )
            doc["ref"] = citation.ref
        return json.dumps(view, ensure_ascii=False)


_STOP_ERRORS: dict[StopReason, str] = {
    "step_cap": "the step limit is reached",
    "malformed_calls": "the tool is withdrawn for this turn after malformed calls",
}


def _answers_to_other_questions(history: Sequence[Message], question: str) -> list[str]:
    """The earlier answers of the conversation, but those to this very question: asked
    again, the same answer is an answer, not a copy."""
    asked, answers = "", []
    for message in history:
        if isinstance(message, UserMessage):
            asked = message.content
        elif isinstance(message, AssistantMessage) and normalize(asked) != normalize(question):
            answers.append(message.content)
    return answers


def _unique(evidence: Sequence[Citation]) -> list[Citation]:
    """Each document once, at its first place."""
    first: dict[str, Citation] = {}
    for doc in evidence:
        first.setdefault(doc.path, doc)
    return list(first.values())
