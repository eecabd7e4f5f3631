"""``lookup_knowledge`` as a governed tool: admission → lookup → matrix → record.

``LookupTurn`` holds the governance state of one user turn. The executor and the MCP
server both call it; neither can run a retrieval around it. Every call is recorded,
blocked and malformed ones included, with its origin: ``model`` (the model asked for it)
or ``plan`` (the executor ran a planned lookup before the model's first step; a normal
governed call all the same, counted in the water level).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from superbiz._messages import localized
from superbiz._text import CONTROL_CHARACTERS, MAX_QUESTION_CHARS, Language, clip, key_terms
from superbiz.access import Reader
from superbiz.config import GovernanceConfig
from superbiz.exceptions import UnknownDomainError
from superbiz.governance.decision import TurnGovernor
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.observer import GovernedCall
from superbiz.governance.results import LookupResult, Origin, RetrievalDetails, ToolOutcome
from superbiz.governance.verdicts import (
    GOOD_LEVELS,
    Constraint,
    DedupReason,
    LookupRequest,
    WaterLevel,
)
from superbiz.llm import deadline
from superbiz.llm.messages import ToolSpec
from superbiz.retrieval.relevance import RelevanceLevel, completeness_hint
from superbiz.storage.invocations import TOOL_NAME, Invocation, InvocationRepository
from superbiz.storage.models import DOMAIN_MAX

T = TypeVar("T")
#: share of an earlier query's key terms a new query must repeat to count as its paraphrase
PARAPHRASE_OVERLAP = 0.6
#: the key under which a malformed call's text is recorded, and how much of it
RAW_ARGUMENTS = "_raw"
RAW_ARGUMENT_CHARS = 500
#: the longest text each argument may be: a query as long as a question, a domain as long
#: as a stored one, a missing dimension a phrase (it is added to the query's search text)
ARGUMENT_CHARS = {
    "query": MAX_QUESTION_CHARS,
    "domain": DOMAIN_MAX,
    "missing_dimension": 500,
}
#: arguments whose JSON is longer than this are recorded as ``{"_raw": …}``, cut
RECORD_CHARS = 2 * MAX_QUESTION_CHARS

LOOKUP_KNOWLEDGE = ToolSpec(
    name=TOOL_NAME,
    description=(
        "Look up the operations knowledge base. Returns the best document with a "
        "relevance_level (PRECISE, HIGHLY_RELEVANT, REFERENCE, DEDUPED), a completeness_hint "
        "and the domains this session already retrieved. Do not repeat a lookup with new "
        "words; after a REFERENCE result you may make one targeted supplement naming "
        "missing_dimension."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look up, in the user's words."},
            "domain": {
                "type": "string",
                "description": "Optional knowledge domain to search in (e.g. payment, api).",
            },
            "missing_dimension": {
                "type": "string",
                "description": "For a targeted supplement: the specific missing dimension.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
)


class LookupTurn:
    """The governed ``lookup_knowledge`` for one turn of one session."""

    def __init__(
        self,
        lookup: GovernedLookup,
        governance: GovernanceConfig,
        *,
        session_id: str,
        turn: int,
        language: Language,
        recorder: InvocationRepository | None = None,
        reader: Reader | None = None,
    ) -> None:
        self.lookup = lookup
        self.session_id = session_id
        self.turn = turn
        self.language: Language = language
        self.recorder = recorder
        #: whose turn it is (None: an unrestricted reader): every lookup searches, and
        #: every answer names, only what this reader may read
        self.reader = reader
        earlier = lookup.retrieved_domains(session_id, reader)  # in the order retrieved
        self.governor = TurnGovernor(governance, language, earlier)
        self.outcomes: list[ToolOutcome] = []
        self._asked: list[tuple[frozenset[str], str]] = []  # key terms → domain, this turn
        self.governance_ms = 0.0  # time spent deciding (admission, matrix, constraint)

    def constraint(self) -> Constraint:
        started = time.perf_counter()
        constraint = self.governor.constraint()
        self.governance_ms += (time.perf_counter() - started) * 1000
        return constraint

    def _timed(self, decide: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return decide()
        finally:
            self.governance_ms += (time.perf_counter() - started) * 1000

    def call(
        self,
        arguments: dict[str, Any] | None,
        *,
        call_id: str = "",
        step: int = 0,
        tool_name: str = TOOL_NAME,
        error: str | None = None,
        origin: Origin = "model",
        raw_arguments: str = "",
    ) -> ToolOutcome:
        """Run one call, watched by the lookup's observer (the runtime traces it; its
        record keeps the trace id). ``raw_arguments``: the text the model sent, recorded
        as ``{"_raw": …}`` when it did not parse (``arguments`` is ``None``), so the
        record shows what the model wrote, not an empty object."""
        observed = GovernedCall(self.session_id, self.turn, step, tool_name, call_id, origin)
        return self.lookup.observer.around(
            observed,
            lambda: self._call(arguments, call_id, step, tool_name, error, origin, raw_arguments),
        )

    def _call(
        self,
        arguments: dict[str, Any] | None,
        call_id: str,
        step: int,
        tool_name: str,
        error: str | None,
        origin: Origin,
        raw_arguments: str,
    ) -> ToolOutcome:
        started = time.perf_counter()
        args = bounded_record(arguments) if arguments is not None else raw_record(raw_arguments)
        finish = partial(self._finish, call_id, step, tool_name, args, started, origin)
        problem = error or _validate(tool_name, arguments)
        malformed = problem is not None
        domain: str | None = None
        if problem is None and (args.get("domain") or "").strip():
            try:
                domain = self.lookup.require_domain(args["domain"], self.reader)
            except UnknownDomainError as exc:
                problem = str(exc)
        if problem is not None:
            return finish(executed=False, error=problem, malformed=malformed)
        # a chat turn's deadline holds between its lookups too, not only in model calls
        deadline.check()

        query = args["query"].strip()
        missing = (args.get("missing_dimension") or "").strip() or None
        # When every call is blocked anyway, do not spend an embedding on the domain.
        governed_domain = domain or (None if self.governor.stopped else self._infer_domain(query))
        request = LookupRequest(governed_domain, missing, named=domain is not None)
        admission = self._timed(lambda: self.governor.admit(request))
        if not admission.allowed:
            assert admission.dedup_reason is not None
            if governed_domain and domain is None:  # its paraphrases need no new inference
                self._asked.append((frozenset(key_terms(query)), governed_domain))
            result = self._blocked(admission.dedup_reason, governed_domain)
            return finish(
                executed=False, domain=governed_domain, result=result, water=admission.water_level
            )
        planned = origin == "plan"
        # a planned domain is the planner's guess: with no answer there, the same lookup
        # searches the whole knowledge base (``GovernedLookup.lookup``, ``widen``)
        # a page of an unanswered turn (the model's own call) shows the next documents
        page = admission.paging and origin == "model"
        outcome = self.lookup.lookup(
            self.session_id, query, domain, missing, widen=planned, page=page, reader=self.reader
        )
        level = outcome.result.relevance_level
        primary = outcome.result.primary
        # the matrix works per domain: the domain of the document shown, not the one the
        # call named or was inferred to be about (they differ for an unscoped or widened
        # search); without a document, the domain searched or inferred
        recorded_domain = (primary.domain if primary else None) or governed_domain
        named = domain is not None
        searched = domain if outcome.details.widened else None
        held = outcome.details.held_level
        self._timed(
            lambda: self.governor.record(
                recorded_domain,
                level,
                named=named,
                planned=planned,
                searched=searched,
                held_level=RelevanceLevel(held) if held else None,
            )
        )
        # A planned lookup's domain is the planner's guess: the model's paraphrases are
        # attributed to it only when it answered there (else the knowledge base infers)
        if recorded_domain and (origin == "model" or level in GOOD_LEVELS):
            self._asked.append((frozenset(key_terms(query)), recorded_domain))
        return finish(
            executed=True,
            domain=recorded_domain,
            result=outcome.result,
            details=outcome.details,
            water=admission.water_level,
        )

    def _infer_domain(self, query: str) -> str | None:
        """The domain of a call that names none, cheapest evidence first: a paraphrase
        of a query already run this turn (most of its key terms) belongs to that query's
        domain; otherwise the lookup core infers it (exact matches, nearest chunks)."""
        terms = frozenset(key_terms(query))
        for earlier, domain in reversed(self._asked):
            if terms and earlier and len(terms & earlier) / len(earlier) >= PARAPHRASE_OVERLAP:
                return domain
        return self.lookup.infer_domain(query, self.reader)

    def _blocked(self, reason: DedupReason, domain: str | None) -> LookupResult:
        language = self.language
        return LookupResult(
            found=False,
            relevance_level=RelevanceLevel.DEDUPED,
            completeness_hint=completeness_hint(RelevanceLevel.DEDUPED, language),
            retrieved_domains_this_session=self.lookup.retrieved_domains(
                self.session_id, self.reader
            ),
            message=localized(f"tool.blocked.{reason}", language).format(domain=domain or "-"),
            dedup_reason=reason,
        )

    def _finish(
        self,
        call_id: str,
        step: int,
        tool_name: str,
        args: dict[str, Any],
        started: float,
        origin: Origin,
        *,
        executed: bool,
        domain: str | None = None,
        result: LookupResult | None = None,
        details: RetrievalDetails | None = None,
        error: str | None = None,
        water: WaterLevel | None = None,
        malformed: bool = False,
    ) -> ToolOutcome:
        latency = (time.perf_counter() - started) * 1000
        constraint = self.constraint()
        outcome = ToolOutcome(
            call_id=call_id,
            arguments=args,
            executed=executed,
            domain=domain,
            result=result,
            details=details,
            error=error,
            water_level=water or self.governor.water_level,
            constraint=constraint,
            latency_ms=latency,
            origin=origin,
            malformed=malformed,
        )
        self.outcomes.append(outcome)
        if self.recorder is not None:
            self.recorder.add(
                Invocation(
                    session_id=self.session_id,
                    turn=self.turn,
                    step=step,
                    tool_name=(tool_name or "?")[:64],
                    arguments=args,
                    domain=domain,
                    relevance_level=result.relevance_level.value
                    if result and result.relevance_level
                    else None,
                    dedup_reason=result.dedup_reason if result else None,
                    retrieval_details=details.as_dict() if details else None,
                    executed=executed,
                    verdict="error" if error else constraint.verdict.value,
                    water_level=outcome.water_level.value,
                    latency_ms=round(latency, 3),
                    error=error,
                    origin=origin,
                    trace_id=self.lookup.observer.trace_id(),
                )
            )
        return outcome


def raw_record(raw_arguments: str) -> dict[str, Any]:
    """The arguments to record for a call whose text is no JSON object: the text itself,
    cut at ``RAW_ARGUMENT_CHARS`` (``{}`` when the model sent none)."""
    if not raw_arguments:
        return {}
    if len(raw_arguments) > RAW_ARGUMENT_CHARS:
        raw_arguments = raw_arguments[:RAW_ARGUMENT_CHARS] + "…"
    return {RAW_ARGUMENTS: raw_arguments}


def bounded_record(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments to record and report: as sent, or, when their JSON is over
    ``RECORD_CHARS`` (a 475,000-character query), its opening as ``{"_raw": …}``."""
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return dict(arguments) if len(text) <= RECORD_CHARS else raw_record(text)


def _validate(tool_name: str, arguments: dict[str, Any] | None) -> str | None:
    """A reason the call is malformed, said to the model; ``None`` when it is fine."""
    if tool_name != TOOL_NAME:
        return f"unknown tool {clip(tool_name, 64)!r}; the only tool is {TOOL_NAME}"
    if arguments is None:
        return "arguments must be a JSON object"
    unknown = set(arguments) - {"query", "domain", "missing_dimension"}
    if unknown:
        return clip(f"unknown arguments: {', '.join(sorted(unknown))}", RAW_ARGUMENT_CHARS)
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        return "'query' is required and must be a non-empty string"
    for key in ("domain", "missing_dimension"):
        if arguments.get(key) is not None and not isinstance(arguments[key], str):
            return f"'{key}' must be a string"
    for key, limit in ARGUMENT_CHARS.items():
        value = arguments.get(key)
        if not isinstance(value, str):
            continue
        if len(value) > limit:
            return f"'{key}' is {len(value)} characters long; it takes at most {limit}"
        if match := CONTROL_CHARACTERS.search(value):
            return f"'{key}' contains the control character U+{ord(match.group()):04X}"
    return None
