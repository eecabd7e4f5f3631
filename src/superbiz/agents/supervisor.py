"""The Supervisor routes each turn: a direct answer, or plan → executor → answer.

It owns the conversation: history and evidence of earlier turns come from the chat
store, so a follow-up about a document the session already retrieved is answered from
it (no new lookup is needed, and dedup cannot starve it). It passes the planned domains
to the executor, never the map, and re-plans once when the executor reports a missing
dimension it could not fill.

A turn has one deadline for all its model calls (``llm.turn-timeout-s``). A turn that
fails leaves its session as it was: the documents it marked retrieved are unmarked, so
the next turn can retrieve them again instead of being told they were already shown.
What goes back to the model stays bounded: earlier turns within
``chat.history-token-budget`` (oldest dropped first), answers cut at
``chat.max-answer-chars``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from superbiz._text import CONTROL_CHARACTERS, MAX_QUESTION_CHARS, asker_language
from superbiz.agents.context import Citation, dump_evidence, load_evidence
from superbiz.agents.executor import Executor, OnLookup
from superbiz.agents.planner import Plan, Planner, PlanRequest
from superbiz.agents.turn_result import TurnResult
from superbiz.config import ChatSettings
from superbiz.exceptions import QuestionError
from superbiz.knowledge.coverage.map import KnowledgeMap, estimate_tokens
from superbiz.knowledge.kb.withheld import readable_messages
from superbiz.llm.deadline import turn_deadline
from superbiz.llm.messages import AssistantMessage, Message, UserMessage
from superbiz.storage.chat import ChatMessage, ChatRepository, evidence_of

log = logging.getLogger(__name__)

HISTORY_TURNS = 3
#: what replaces the end of an answer over ``chat.max-answer-chars``
CUT_NOTE = "\n\n[… answer cut at {limit} characters (chat.max-answer-chars)]"


@dataclass(slots=True)
class SupervisedTurn:
    """A turn as the caller sees it: the executor's result plus the plan(s)."""

    result: TurnResult
    plan: Plan
    replan: Plan | None = None


OnPlan = Callable[[Plan], None]


class Supervisor:
    def __init__(
        self,
        planner: Planner,
        executor: Executor,
        chats: ChatRepository,
        knowledge_map: Callable[[], KnowledgeMap],
        *,
        settings: ChatSettings | None = None,
        turn_timeout_s: float | None = None,
        may_read: Callable[[str], bool] | None = None,
        trace_id: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.planner = planner
        self.executor = executor
        self.chats = chats
        self.knowledge_map = knowledge_map
        self.settings = settings or ChatSettings()
        self.turn_timeout_s = turn_timeout_s
        #: a restricted reader's rule (None: it reads everything): the session's earlier
        #: turns that used anything else are left out of its history and evidence
        self.may_read = may_read
        #: the trace the turn runs in, for its stored answer (the runtime's tracing)
        self.trace_id = trace_id

    def handle(
        self,
        session_id: str,
        question: str,
        *,
        turn: int,
        on_plan: OnPlan | None = None,
        on_lookup: OnLookup | None = None,
    ) -> SupervisedTurn:
        """Turn number ``turn`` (``Runtime.next_turn``: chat turns and a person's lookups
        share one count), within the turn deadline (the runtime undoes a failed one).
        Control characters are taken out of the question (PostgreSQL cannot store a NUL);
        a question with nothing left is refused, as the API refuses it, not answered."""
        question = CONTROL_CHARACTERS.sub("", question)
        if not question.strip():
            raise QuestionError("the question is empty: ask about a symptom, an error or a task")
        if len(question) > MAX_QUESTION_CHARS:
            raise QuestionError(
                f"the question is {len(question)} characters long; a turn takes at most "
                f"{MAX_QUESTION_CHARS}: ask about one thing, or put the text in a document"
            )
        if self.turn_timeout_s is None:
            return self._handle(session_id, question, turn, on_plan, on_lookup)
        with turn_deadline(self.turn_timeout_s):
            return self._handle(session_id, question, turn, on_plan, on_lookup)

    def _handle(
        self,
        session_id: str,
        question: str,
        turn: int,
        on_plan: OnPlan | None,
        on_lookup: OnLookup | None,
    ) -> SupervisedTurn:
        messages = self.chats.messages(session_id)
        if self.may_read is not None:
            messages = readable_messages(messages, self.may_read)
        evidence = load_evidence(evidence_of(messages))
        kmap = self.knowledge_map()
        asked = [m.content for m in messages if m.role == "user"][-HISTORY_TURNS:]
        plan = self.planner.plan(PlanRequest(question, kmap, evidence, conversation=asked))
        if on_plan:
            on_plan(plan)

        if not plan.need_retrieval and plan.direct_answer:
            result = TurnResult(
                session_id,
                turn,
                question,
                asker_language(question),
                answer=plan.direct_answer,
                model=self.executor.model.name,
            )
            supervised = SupervisedTurn(result, plan)
        else:
            history = _history(messages, self.settings.history_token_budget)
            result = self.executor.run(
                session_id,
                question,
                turn=turn,
                history=history,
                plan=plan,
                evidence=evidence,
                on_lookup=on_lookup,
            )
            supervised = SupervisedTurn(result, plan)
            if result.unfilled and plan.need_retrieval:
                supervised = self._replan(
                    supervised, kmap, evidence, asked, history, on_plan, on_lookup
                )
        # the chat store keeps a model's text without NUL (PostgreSQL cannot hold one):
        # the answer returned is the one stored, on every store
        answer = supervised.result.answer.replace("\x00", "")
        supervised.result.answer = _capped(answer, self.settings.max_answer_chars)
        supervised.result.trace_id = self.trace_id()
        self.chats.add_turn(
            session_id,
            turn,
            question,
            ChatMessage(
                session_id,
                turn,
                "assistant",
                supervised.result.answer,
                dump_evidence(supervised.result.kept),
                supervised.plan.as_dict(),
                supervised.result.recorded_source,
                supervised.result.trace_id,
            ),
        )
        return supervised

    def _replan(
        self,
        first: SupervisedTurn,
        kmap: KnowledgeMap,
        evidence: list[Citation],
        asked: list[str],
        history: list[Message],
        on_plan: OnPlan | None,
        on_lookup: OnLookup | None,
    ) -> SupervisedTurn:
        """One more plan for what the executor could not fill, in domains not yet tried,
        run with the same conversation (a follow-up's referent, the model's history)."""
        result = first.result
        tried = frozenset(o.domain for o in result.lookups if o.domain)
        request = PlanRequest(result.question, kmap, evidence, tried, result.unfilled, asked)
        replan = self.planner.plan(request)
        if on_plan:
            on_plan(replan)
        if not replan.need_retrieval or not replan.domains:
            return first
        this_turn = {c.path for c in result.shown}
        second = self.executor.run(
            result.session_id,
            result.question,
            turn=result.turn,
            history=history,
            plan=replan,
            evidence=[*evidence, *result.shown],
            on_lookup=on_lookup,
            resume=result.governed,  # same turn, same water level and budget
            this_turn=this_turn,
        )
        second.add_cost(result)
        second.reused = [p for p in second.reused if p not in this_turn]
        # the first run's documents were chosen among by the second run's selection
        # (they were its evidence): what it did not quote or list was only shown
        kept = {c.path for c in second.shown}
        second.shown += [c for c in result.shown if c.path not in kept]
        return SupervisedTurn(second, first.plan, replan)


def _history(messages: list[ChatMessage], token_budget: int) -> list[Message]:
    """The last few chat turns as plain user/assistant messages (evidence travels
    separately), whole turns only, newest first kept, within ``token_budget`` estimated
    tokens. Turns are counted by the messages stored, not by number: a person's lookups
    take numbers of the same count (``Runtime.next_turn``) and leave gaps."""
    turns: dict[int, list[ChatMessage]] = {}
    for m in messages:
        turns.setdefault(m.turn, []).append(m)
    kept: list[ChatMessage] = []
    used = 0
    for number in sorted(turns, reverse=True)[:HISTORY_TURNS]:
        cost = sum(estimate_tokens(m.content) for m in turns[number])
        if used + cost > token_budget:
            break
        used += cost
        kept = turns[number] + kept
    return [
        UserMessage(m.content) if m.role == "user" else AssistantMessage(m.content) for m in kept
    ]


def _capped(answer: str, limit: int) -> str:
    """``answer``, cut with a note when it is longer than ``limit`` characters."""
    if len(answer) <= limit:
        return answer
    note = CUT_NOTE.format(limit=limit)
    return answer[: max(0, limit - len(note))].rstrip() + note
