"""What one turn did, as the executor returns it: the answer, its citations and the
documents shown, the lookups and steps it took, and who wrote the answer.

Apart from the loop that fills it (``superbiz.agents.executor``): the supervisor, the
runtime's tracing, the API and the benchmarks read a turn's result without the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from superbiz._text import Language
from superbiz.agents.context import Citation
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.grounding import AnswerSource, CopyKind
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tool import LookupTurn
from superbiz.llm.messages import ChatResponse

#: how a turn's model loop ended: an answer, the step cap, or the tool withdrawn after
#: ``MALFORMED_STEPS`` steps in a row whose every call was malformed
StopReason = Literal["answer", "step_cap", "malformed_calls"]


@dataclass(slots=True)
class TurnResult:
    session_id: str
    turn: int
    question: str
    language: Language
    answer: str = ""
    #: what the answer quotes (a model's answer: cites), in the order it quotes them
    citations: list[Citation] = field(default_factory=list)
    #: documents that bear on the question but are not quoted: listed after the answer
    related: list[Citation] = field(default_factory=list)
    #: every document put in front of the model this turn (and those of earlier turns
    #: the answer used), in the order shown: what evidence recall counts
    shown: list[Citation] = field(default_factory=list)
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
        """Documents put in front of the model this turn, in the order shown."""
        return [c.path for c in self.shown]

    @property
    def kept(self) -> list[Citation]:
        """What the session keeps of the turn: quoted, related, then the documents only
        shown (marked so, with no number: a later turn may still answer from them)."""
        listed = {c.path for c in (*self.citations, *self.related)}
        others = [replace(c, ref=0, use="shown") for c in self.shown if c.path not in listed]
        return [*self.citations, *self.related, *others]

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
