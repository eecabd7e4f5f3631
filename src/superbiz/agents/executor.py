"""The Executor: a ReAct loop whose lookups are governed by code.

The plan's lookups are run by code before the model's first step (``origin: plan``):
governed like any call and shown to the model as its own calls and results, so a model
that would answer without looking anything up still answers over the documents, and the
first lookup costs no model step. Between every two LLM steps the governor's constraint
is injected as a system message and decides whether ``lookup_knowledge`` is offered at
all; calls the model makes anyway are answered without a retrieval. A hard step cap ends
the turn with one last call, tools stripped. The answer's citations are then checked
(:mod:`superbiz.agents.grounding`) against what the answer selection
(:mod:`superbiz.agents.answer_selection`) found to bear on the question: the passages
that answer it, best first, from this turn's documents and the session's. A player that
quotes (the extractive policy, the behaviour profiles) gets its answer quoted from that
selection; a model's answer is grounded only by a document that bears on the question,
repaired with the selection's passages, or replaced by the quoted answer. The executor
never sees the knowledge map: only its own action memory, through tool results.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import numpy as np

from superbiz._messages import localized
from superbiz._text import Language, asker_language, key_terms, normalize, unescape_entities
from superbiz.access import Reader
from superbiz.agents.answer_selection import AnswerSelection, PassageSource
from superbiz.agents.context import Citation, evidence_message, tool_result_text
from superbiz.agents.extractive import ExtractiveChatModel, numbered, quote_answer
from superbiz.agents.follow_up import lookup_words, referent
from superbiz.agents.grounding import AnswerSource, Source, ground
from superbiz.agents.planner import Plan
from superbiz.agents.prompts import load_prompt
from superbiz.agents.turn_result import StopReason, TurnResult
from superbiz.agents.turn_selection import select_for_turn
from superbiz.config import GovernanceConfig
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tool import LOOKUP_KNOWLEDGE, LookupTurn
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
from superbiz.storage.invocations import TOOL_NAME, InvocationRepository

#: Steps in a row whose calls were all malformed (not JSON, no query, another tool) after
#: which the tool is withdrawn and the model must answer: it was told the error twice and
#: kept sending calls that cannot run, so more steps would only spend the turn's budget
#: (it took all ``governance.max-steps`` before, then the extractive answer anyway).
MALFORMED_STEPS = 3
#: A sub-question in another language than the question bears on it from this cosine
#: (the embedder's; USE puts a question and its translation at 0.6-0.8). Not tuned on
#: the benchmarks: their plans come from the map, whose sub-question is the question.
SUB_QUESTION_COSINE = 0.5


OnLookup = Callable[[ToolOutcome], None]


class Executor:
    def __init__(
        self,
        model: ChatModel,
        lookup: GovernedLookup,
        governance: GovernanceConfig,
        recorder: InvocationRepository | None = None,
        passages: PassageSource | None = None,
        reader: Reader | None = None,
    ) -> None:
        self.model = model
        self.lookup = lookup
        #: where the answer selection reads the shown documents' passages (the knowledge
        #: base the lookup searches, unless given); without one it scores what was shown
        knowledge = lookup.knowledge
        if passages is None and isinstance(knowledge, PassageSource):
            passages = knowledge
        self.passages = passages
        #: whose turns these are (None: an unrestricted reader; see ``LookupTurn``)
        self.reader = reader
        self.governance = governance
        self.recorder = recorder
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
        this_turn: Collection[str] = (),
    ) -> TurnResult:
        """Turn number ``turn`` of ``session_id`` (``Runtime.next_turn`` counts them).
        ``plan`` (the planner's domains) and ``evidence`` (documents retrieved in earlier
        turns) reach the model as system messages, never the knowledge map. ``resume``
        and ``this_turn``: a re-plan's second run goes on with the first's lookup turn,
        and the documents the first showed (``this_turn``, among ``evidence``) are not
        re-quoted as an earlier turn's."""
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
                messages.append(ToolMessage(call.id, call.name, tool_result_text(outcome, refs)))
                if on_lookup:
                    on_lookup(outcome)
            malformed_steps = malformed_steps + 1 if malformed else 0
            if malformed_steps >= MALFORMED_STEPS and step < self.governance.max_steps:
                stop = "malformed_calls"
                break
        if stop != "answer":
            finish = self._force_answer(result, tool, messages, on_lookup, stop)
        answers = _answers_to_other_questions(history, question)
        asked = [m.content for m in history if isinstance(m, UserMessage)]
        selection = select_for_turn(
            question,
            list(refs.values()),
            tool.outcomes,
            self.passages,
            earlier=earlier,
            previous=referent(asked),
            reader=self.reader,
        ).first_shown_in(this_turn)
        cited = self._ground(result, tool, messages, refs, finish, answers, selection)
        self._settle(result, tool, refs, earlier, cited, selection)
        return result

    def _complete(
        self,
        result: TurnResult,
        tool: LookupTurn,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
    ) -> ChatResponse:
        """One model call, counted as a step with its tokens (the water level's too)."""
        response = self.model.complete(messages, tools)
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
        """The plan's lookups, run by code (step 0, ``origin: plan``) and handed to the
        model as its own calls and their results: the user's question in its own words,
        in each planned domain (an unscoped plan: once, across the knowledge base), as
        the no-model path asks it; then each sub-question that adds to the question,
        as a lookup of its own (``adds_to``). A plan adds to what was asked, never
        replaces or dilutes it: the live run's planner wrote the same sub-question,
        copied from the map, for two unrelated questions, and appending it to the
        question put the disk-full runbook above the MySQL failover one.

        A follow-up with no words of its own ("那怎么办？", ``asked``: the session's
        earlier questions), or in English naming no thing ("What do I check first?",
        ``names_nothing``), or asking the question before of something else ("And for a
        lead?" after the senior designer's expectations, ``asks_instead``), is asked
        together with what it points back at (``follow_up.lookup_words``).

        A plan to answer from the session's evidence (no retrieval, no direct answer)
        still runs the question once across the knowledge base, as a plain turn would:
        the session's documents stay out of it (dedup: DEDUPED when one of them ranks
        first), and the answer reads a held document where the lookup ranked it
        (``select_for_turn``). On npm's docs the map's best entry for "How do I
        deprecate a version of my package?" was the held package.json page, and the
        turn quoted its "version" section with no lookup; the lookup ranks
        npm-deprecate first."""
        words = lookup_words(question, asked)
        if not plan.need_retrieval:
            if plan.direct_answer is None:
                self._run_calls([{"query": words}], tool, messages, refs, on_lookup)
            return
        if not plan.domains:
            return
        arguments: list[dict[str, str]] = []
        for entry in plan.domains:
            own = {"query": words} | ({"domain": entry.domain} if plan.scoped else {})
            if own not in arguments:
                arguments.append(own)
        for entry in plan.domains:
            if not self._adds_to(entry.sub_question, question):
                continue
            sub = {"query": entry.sub_question} | ({"domain": entry.domain} if plan.scoped else {})
            if sub not in arguments:
                arguments.append(sub)
        self._run_calls(arguments, tool, messages, refs, on_lookup)

    def _adds_to(self, sub_question: str, question: str) -> bool:
        """Whether a planner's sub-question is worth a lookup beside the question: it names
        something the question does not ("PostgreSQL replication lag" for "Postgres 从库
        延迟越来越大…": the question's own words rank other runbooks first), and it bears
        on it — shares one of its terms, or (another language) embeds within
        ``SUB_QUESTION_COSINE`` of it. One that only repeats part of the question adds
        nothing the question's own lookup does not search; one that does not bear (the
        planner's own drift) is dropped."""
        asked = set(key_terms(question))
        own = set(key_terms(sub_question))
        if not own - asked or normalize(sub_question) == normalize(question):
            return False
        if own & asked or any(term in normalize(sub_question) for term in asked):
            return True
        if self.passages is None:
            return False
        first = self.passages.embed_question(question)
        second = self.passages.embed_question(sub_question)
        cosine = float(first @ second) / max(
            float(np.linalg.norm(first) * np.linalg.norm(second)), 1e-9
        )
        return cosine >= SUB_QUESTION_COSINE

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
            messages.append(ToolMessage(call.id, call.name, tool_result_text(outcome, refs)))
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
        earlier_answers: Sequence[str],
        selection: AnswerSelection,
    ) -> tuple[int, ...] | None:
        """Check the answer's citations; repair once or quote the selection instead
        (see :func:`superbiz.agents.grounding.ground`). Returns the refs the model's
        answer cites, or ``None`` when the answer is quoted from the selection.

        A player that quotes gets its answer quoted from the selection (grounded when a
        passage answers; ``no_evidence`` when none does). ``finish`` is the answering
        step's finish reason: a model answer (first or repaired) cut at the token limit
        keeps its text, marked as cut, so no one takes half a runbook step for the whole
        of it. ``earlier_answers``: the session's answers the model saw (an answer
        copying one is no answer)."""
        language = result.language
        if self.quotes:
            result.answer = quote_answer(selection, result.question, language)
            result.grounded = selection.answered
            # without an LLM the answer is quoted from the start; a behaviour profile's
            # quote is its own answer (it was never a model's answer relabelled)
            extractive = result.model == ExtractiveChatModel.name
            source: AnswerSource = "extractive" if extractive else "model"
            result.answer_source = source if selection.answered else "no_evidence"
            return None
        repaired: list[str | None] = []  # the repair turn's finish reason

        def repair(prompt: str) -> str:
            response = self._complete(result, tool, [*messages, SystemMessage(prompt)], [])
            repaired.append(response.finish_reason)
            return unescape_entities(response.message.content)

        def quote() -> str:
            label = localized("extractive.fallback_label", language)
            return quote_answer(selection, result.question, language, label=label)

        passage = {q.citation.path: q.passage for q in selection.quoted}
        bearing = {c.path for c in selection.evidence}
        sources = [
            Source(c.ref, c.title, c.path, c.content, c.path in bearing, passage.get(c.path, ""))
            for c in sorted(refs.values(), key=lambda c: _selection_order(c, selection))
        ]
        grounding = ground(
            result.answer,
            result.question,
            language,
            sources,
            repair=repair,
            extractive=quote,
            earlier=earlier_answers,
        )
        result.copied = grounding.copied
        result.answer = grounding.answer or localized("executor.no_answer", language)
        result.grounded = grounding.grounded
        result.invalid_citations = grounding.invalid_citations
        result.answer_source = grounding.source
        if grounding.source == "extractive":
            if not selection.answered:  # nothing answers: what it says is no evidence
                result.answer_source = "no_evidence"
            return None
        if grounding.source == "repaired":
            finish = repaired[-1] if repaired else None
        if grounding.answer and finish == "length":
            result.truncated = True
            result.answer += localized("executor.length_cut", language)
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
        cited_refs: tuple[int, ...] | None,
        selection: AnswerSelection,
    ) -> None:
        """Fill in what the turn did: lookups, citations (what the answer quotes, in
        quote order: the selection's, numbered anew, or what the model cites), related
        documents, the documents shown, reused evidence and the dimensions left unfilled."""
        result.lookups = list(tool.outcomes)
        result.governed = tool
        if cited_refs is None:
            result.citations, result.related = numbered(selection)
        else:
            by_ref = {c.ref: c for c in refs.values()}
            result.citations = [by_ref[ref] for ref in cited_refs if ref in by_ref]
            cited = {c.path for c in result.citations}
            result.related = [
                replace(c, use="related") for c in selection.bearing if c.path not in cited
            ]
        result.related = [replace(c, use="related") for c in result.related]
        used = {c.path for c in (*result.citations, *result.related)}
        result.shown = [c for c in refs.values() if c.path not in earlier or c.path in used]
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


def _selection_order(citation: Citation, selection: AnswerSelection) -> int:
    """Quoted documents first, in quote order, then related, then the others."""
    order = {c.path: i for i, c in enumerate(selection.bearing)}
    return order.get(citation.path, len(order))


def _unique(evidence: Sequence[Citation]) -> list[Citation]:
    """Each document once, at its first place."""
    first: dict[str, Citation] = {}
    for doc in evidence:
        first.setdefault(doc.path, doc)
    return list(first.values())
