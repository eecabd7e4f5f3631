"""The Executor: a ReAct loop whose lookups are governed by code.

Between every two LLM steps the governor's constraint is injected as a system message
and decides whether ``lookup_knowledge`` is offered at all; calls the model makes anyway
are answered without a retrieval. A hard step cap ends the turn with one last call,
tools stripped. The executor never sees the knowledge map: only its own action memory,
through tool results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from superbiz._messages import localized
from superbiz._text import Language, detect_language
from superbiz.agents.context import Citation, evidence_message
from superbiz.agents.planner import Plan
from superbiz.agents.prompts import load_prompt
from superbiz.config import GovernanceSettings
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tool import LOOKUP_KNOWLEDGE, LookupTurn, ToolOutcome
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import (
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from superbiz.storage.invocations import InvocationRepository


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
    stopped_by: Literal["answer", "step_cap"] = "answer"
    model: str = ""
    governance_ms: float = 0.0
    #: missing dimensions a supplement was asked for but could not fill
    unfilled: list[str] = field(default_factory=list)
    #: citations that came from earlier turns' evidence
    reused: list[str] = field(default_factory=list)
    #: the turn's governed tool: a re-plan resumes it, so the budget is the turn's
    governed: LookupTurn | None = field(default=None, repr=False)

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "turn": self.turn,
            "question": self.question,
            "answer": self.answer,
            "extractive": self.model == "extractive",
            "citations": [c.as_dict() for c in self.citations],
            "lookups": [lookup_summary(o) for o in self.lookups],
            "steps": self.steps,
            "stopped_by": self.stopped_by,
        }


def lookup_summary(outcome: ToolOutcome) -> dict[str, Any]:
    """One lookup as the CLI and API report it."""
    return {
        "arguments": outcome.arguments,
        "domain": outcome.domain,
        "executed": outcome.executed,
        "relevance_level": outcome.level.value if outcome.level else None,
        "dedup_reason": outcome.dedup_reason,
        "verdict": outcome.verdict.value,
        "water_level": outcome.water_level.value,
        "budget_left": outcome.constraint.budget_left,
        "documents": outcome.shown,
        "latency_ms": round(outcome.latency_ms, 2),
        "error": outcome.error,
    }


OnLookup = Callable[[ToolOutcome], None]


class Executor:
    def __init__(
        self,
        model: ChatModel,
        lookup: GovernedLookup,
        governance: GovernanceSettings,
        recorder: InvocationRepository | None = None,
    ) -> None:
        self.model = model
        self.lookup = lookup
        self.governance = governance
        self.recorder = recorder
        # Turns counted here too: a turn without tool calls leaves no recorded row.
        self._turns: dict[str, int] = {}

    def run(
        self,
        session_id: str,
        question: str,
        *,
        turn: int | None = None,
        history: Sequence[Message] = (),
        plan: Plan | None = None,
        evidence: Sequence[Citation] = (),
        on_lookup: OnLookup | None = None,
        resume: LookupTurn | None = None,
    ) -> TurnResult:
        """One turn. ``plan`` (the planner's domains) and ``evidence`` (documents retrieved
        in earlier turns) reach the model as system messages, never the knowledge map."""
        language = detect_language(question)
        if turn is None:
            recorded = self.recorder.last_turn(session_id) if self.recorder else 0
            turn = max(recorded, self._turns.get(session_id, 0)) + 1
        self._turns[session_id] = max(turn, self._turns.get(session_id, 0))
        tool = resume or LookupTurn(
            self.lookup,
            self.governance,
            session_id=session_id,
            turn=turn,
            language=language,
            recorder=self.recorder,
        )
        result = TurnResult(session_id, turn, question, language, model=self.model.name)
        refs = {doc.path: replace(doc, ref=i) for i, doc in enumerate(_unique(evidence), 1)}
        earlier = set(refs)
        messages = self._opening(question, language, history, plan, list(refs.values()))
        for step in range(1, self.governance.max_steps + 1):
            constraint = tool.constraint()
            extra = [SystemMessage(constraint.message)] if constraint.message else []
            tools = [LOOKUP_KNOWLEDGE] if constraint.tools_allowed else []
            response = self.model.complete([*messages, *extra], tools)
            result.steps = step
            if response.usage:
                tool.governor.add_tokens(response.usage.total_tokens)
            reply = response.message
            messages.append(reply)
            if not reply.tool_calls:
                result.answer = reply.content.strip() or localized("executor.no_answer", language)
                break
            for call in reply.tool_calls:
                outcome = tool.call(
                    call.arguments,
                    call_id=call.id,
                    step=step,
                    tool_name=call.name,
                    error=call.error,
                )
                messages.append(ToolMessage(call.id, call.name, self._render(outcome, refs)))
                if on_lookup:
                    on_lookup(outcome)
        else:
            self._force_answer(result, tool, messages, on_lookup)
        self._settle(result, tool, refs, earlier)
        return result

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
    ) -> None:
        """The step cap: one last call without tools; calls it makes anyway are recorded
        as errors and never run."""
        result.stopped_by = "step_cap"
        final = self.model.complete(
            [*messages, SystemMessage(localized("executor.step_cap", result.language))], []
        )
        result.steps += 1
        for call in final.message.tool_calls:
            outcome = tool.call(
                call.arguments,
                call_id=call.id,
                step=result.steps,
                tool_name=call.name,
                error=call.error or "the step limit is reached",
            )
            if on_lookup:
                on_lookup(outcome)
        result.answer = final.message.content.strip() or localized(
            "executor.no_answer", result.language
        )

    @staticmethod
    def _settle(
        result: TurnResult, tool: LookupTurn, refs: dict[str, Citation], earlier: set[str]
    ) -> None:
        """Fill in what the turn did: lookups, citations (earlier evidence only when the
        answer cites it), reused evidence and the dimensions left unfilled."""
        result.lookups = list(tool.outcomes)
        result.governed = tool
        cited = _cited(result.answer, refs)
        result.citations = [c for c in refs.values() if c.path not in earlier or c.path in cited]
        result.reused = [c.path for c in result.citations if c.path in earlier]
        result.governance_ms = tool.governance_ms
        result.unfilled = [
            o.arguments["missing_dimension"]
            for o in tool.outcomes
            if o.arguments.get("missing_dimension") and not (o.result and o.result.found)
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
                Citation(len(refs) + 1, doc["title"], doc["path"], doc["domain"], content),
            )
            doc["ref"] = citation.ref
        return json.dumps(view, ensure_ascii=False)


def _cited(answer: str, refs: dict[str, Citation]) -> set[str]:
    """Paths whose ``[ref]`` the answer uses."""
    used = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    return {path for path, c in refs.items() if c.ref in used}


def _unique(evidence: Sequence[Citation]) -> list[Citation]:
    """Each document once, at its first place."""
    first: dict[str, Citation] = {}
    for doc in evidence:
        first.setdefault(doc.path, doc)
    return list(first.values())
