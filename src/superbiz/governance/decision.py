"""The turn governor: the quality × water-level decision matrix, enforced in code.

The matrix, the water level and the breaker prompts are docs/design.md §5.

Prompts alone did not stop the ISS-003 loop (10 lookups, 8 redundant), so the decision
whether another ``lookup_knowledge`` may run is taken here, between two executor steps
of one user turn, and the model is told the outcome in its own language.

The matrix is read *per domain*:

==============================  =====================  ====================  ==========
result in domain D              low water              mid water             high water
==============================  =====================  ====================  ==========
PRECISE / HIGHLY_RELEVANT       D closed, answer       D closed, answer      stop
REFERENCE / no result           one targeted supplement naming            stop
                                ``missing_dimension``, then D closed
DEDUPED                         D closed               D closed              stop
==============================  =====================  ====================  ==========

The matrix has no row for a lookup that found nothing. When the call named its domain, D
has nothing for the question and takes the REFERENCE row. When it named none, D is only
the nearest guess and the wording may be what missed: while the water is low (the matrix's
"budget ample") D may be retried in other words (``RETRY``); from mid water on it takes
the REFERENCE row. A lookup the executor ran from the plan is the planner's domain and
words, not the model's: when it did not answer (REFERENCE or nothing) at low water, the
model keeps its own first lookup (``RETRY``), searching the whole knowledge base, or the
planned domain again as a page (below). A plan of several domains hedges: the planner
could not tell which one answers and searched each. When one of them answered (PRECISE /
HIGHLY_RELEVANT), the hedge is resolved and the other planned domains close (no
supplement, no retry). When none answered, the model's first call naming one of them may
run as its page (below); any further named repeat needs ``missing_dimension``.
Domains not yet retrieved stay open at low and mid water. In a turn that ran the plan's
lookups (one question), however the indicator reads, ``high_min_found`` lookups that
found documents (3) are high water: the matrix decides which lookups run and when to
stop, and never puts more evidence in front of the model than the peer frameworks' plain
cap of 3 lookups could (lookups that found nothing add nothing; the retry row exists for
them). Nor less: while no lookup of such a turn has answered, its first ``high_min_found``
calls run as pages (``Admission.paging``) when they name no domain, and so does the
turn's first call naming a domain the plan searched or showed a document of: each shows
the next documents of that ranking (the whole knowledge base's, or the named domain's)
past what the session has, whatever their level, where the cap's next lookup would show
only what clears the thresholds. A page never shows a document twice, and a named repeat
pages once a turn (in the ISS-003 log the first lookup answered, so nothing pages). A
turn without a plan (an MCP session: many questions, one long turn) keeps the indicator's
water level alone. Plan B (``mode: domain-limit``) allows one lookup per domain per session
and no supplement, retry or page.

``mode: cap`` is not governance but its peer baseline, the plain count cap agent
frameworks offer (max iterations / max tool calls): any ``cap_calls`` lookups run,
whatever they bring, with no prompt; then the tool is withdrawn and the model is told to
answer. Its water level is low below the cap and high at it. Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from superbiz._text import Language
from superbiz.config import GovernanceConfig
from superbiz.governance.verdicts import (
    GOOD_LEVELS,
    Admission,
    Constraint,
    DedupReason,
    DomainState,
    LookupRequest,
    Situation,
    Verdict,
    WaterLevel,
    breaker_message,
    water_level,
)
from superbiz.retrieval.relevance import RelevanceLevel

__all__ = ["TurnGovernor"]


_CLOSING = GOOD_LEVELS | {RelevanceLevel.DEDUPED}
#: results that put documents in front of the model (DEDUPED and no result do not)
_FOUND = GOOD_LEVELS | {RelevanceLevel.REFERENCE}


def _clean(domain: str | None) -> str | None:
    """Blank domains count as unknown."""
    if domain is None:
        return None
    return domain.strip() or None


class TurnGovernor:
    """Governs the lookups of ONE user turn; build a new one per turn.

    Call ``admit`` before every lookup (blocked calls included), ``record`` after every
    *executed* lookup (never for a blocked one: that would close a domain that still has
    its supplement), and ``constraint`` before every LLM step.
    """

    def __init__(
        self,
        settings: GovernanceConfig,
        language: Language,
        retrieved_domains: Iterable[str] = (),
    ) -> None:
        self._settings = settings
        self._language: Language = language
        # Ordered sets (dicts): messages list domains in the order they were retrieved
        # (``retrieved_domains`` in the session's order, earlier turns first).
        self._retrieved: dict[str, None] = dict.fromkeys(
            d for d in (_clean(x) for x in retrieved_domains) if d
        )
        earlier = list(self._retrieved)
        self._states: dict[str, DomainState] = {}
        # Domains whose planned lookup did not answer: an unscoped retry, or one page
        self._plan_unanswered: set[str] = set()
        if settings.mode == "domain-limit":
            self._states.update(dict.fromkeys(earlier, DomainState.CLOSED))
        # Domains the plan's lookups searched
        self._planned: set[str] = set()
        # domains of the documents widened planned lookups showed without answering
        self._plan_shown: set[str] = set()
        # a named call ran as a page: the turn's one (see _pages_unanswered)
        self._paged_named = False
        self._calls = 0
        self._found = 0  # executed lookups that found documents
        self._plan_answered = False  # a planned lookup was PRECISE or HIGHLY_RELEVANT
        self._answered = False  # some lookup of this turn was PRECISE or HIGHLY_RELEVANT
        self._tokens = 0
        self._blocked_in_a_row = 0
        self._withheld = False
        self._has_result = False
        self._last_level: RelevanceLevel | None = None
        self._last_block: DedupReason | None = None

    # -- state -------------------------------------------------------------------------

    @property
    def calls(self) -> int:
        """Lookup calls this turn, executed and blocked."""
        return self._calls

    @property
    def found(self) -> int:
        """Lookups this turn that found documents (PRECISE, HIGHLY_RELEVANT, REFERENCE)."""
        return self._found

    @property
    def tokens(self) -> int:
        return self._tokens

    @property
    def withheld(self) -> bool:
        """True once the model kept calling after being blocked: no tool for the turn."""
        return self._withheld

    @property
    def retrieved_domains(self) -> frozenset[str]:
        """Domains retrieved in the session, earlier turns included."""
        return frozenset(self._retrieved)

    @property
    def capped(self) -> bool:
        """The plain count cap (``mode: cap``) instead of the matrix."""
        return self._settings.mode == "cap"

    @property
    def water_level(self) -> WaterLevel:
        """The level of the configured indicator now (the cap's, in ``mode: cap``)."""
        s = self._settings
        if self.capped:
            return WaterLevel.HIGH if self._calls >= s.cap_calls else WaterLevel.LOW
        if self._planned and self._found >= s.high_min_found:
            return WaterLevel.HIGH
        if s.indicator == "tokens":
            return water_level(self._tokens, s.low_max_tokens, s.high_min_tokens)
        if s.indicator == "domains":
            return water_level(len(self._retrieved), s.low_max_domains, s.high_min_domains)
        return water_level(self._calls, s.low_max_calls, s.high_min_calls)

    @property
    def stopped(self) -> bool:
        """Every call is blocked now (tool withheld or high water), whatever its domain."""
        return self._settings.enabled and (self._withheld or self.water_level is WaterLevel.HIGH)

    @property
    def budget_left(self) -> int:
        """Lookup calls left before high water by the calls count or, in a planned turn,
        the lookups that found documents, whichever is nearer (before the cap, in
        ``mode: cap``)."""
        s = self._settings
        if self.capped:
            return max(0, s.cap_calls - self._calls)
        left = s.high_min_calls - self._calls
        if self._planned:
            left = min(left, s.high_min_found - self._found)
        return max(0, left)

    def domain_state(self, domain: str) -> DomainState:
        """The domain's state now: a ``RETRY`` domain is a ``SUPPLEMENT`` one from mid
        water; once a planned lookup answered, the other planned domains are ``CLOSED``."""
        domain = domain.strip()
        state = self._states.get(domain, DomainState.OPEN)
        if self._plan_answered and domain in self._planned and state is not DomainState.OPEN:
            return DomainState.CLOSED
        if state is DomainState.RETRY and self.water_level is not WaterLevel.LOW:
            return DomainState.SUPPLEMENT
        return state

    # -- events ------------------------------------------------------------------------

    def admit(self, request: LookupRequest) -> Admission:
        """Decide before the lookup runs, at the water level of the calls made so far."""
        level = self.water_level
        domain = _clean(request.domain)
        reason = None
        paging = self._settings.enabled and self._pages_unanswered(request, domain)
        if self._settings.enabled:
            reason = self._block_reason(
                domain, request.missing_dimension, level, request.named, paging
            )
            paging = paging and reason is None
            self._paged_named = self._paged_named or (paging and request.named)
        self._calls += 1
        self._last_block = reason
        if reason is None:
            self._blocked_in_a_row = 0
        else:
            self._blocked_in_a_row += 1
            # Each block was explained to the model; calling again after
            # ``withhold_after_blocked`` explained blocks in a row means it ignores them.
            if self._blocked_in_a_row > self._settings.withhold_after_blocked:
                self._withheld = True
        return Admission(reason is None, reason, level, domain, paging)

    def record(
        self,
        domain: str | None,
        level: RelevanceLevel | None,
        tokens: int = 0,
        *,
        named: bool = True,
        planned: bool = False,
        searched: str | None = None,
        held_level: RelevanceLevel | None = None,
    ) -> None:
        """After an executed lookup: move its domain along the matrix (``None`` = no result).

        ``domain`` is the domain of the document the lookup showed (else the one searched
        or inferred). ``named``: the call named ``domain`` itself (``False``: the caller
        inferred it). ``planned``: the executor ran it from the plan. The planner chose the
        domain and the words, so at low water a planned lookup that did not answer
        (REFERENCE or no result) leaves the model its own first lookup: RETRY for lookups
        naming no domain (they search the whole knowledge base); naming the domain again
        runs as a page while nothing answered (``_pages_unanswered``), and past the pages
        needs a ``missing_dimension``, as a supplement does. ``searched``: the planned
        domain, when it had no answer and the lookup showed a document of another domain
        (it searched the whole knowledge base instead): the planned domain is the one that
        did not answer, the document's own domain the one that holds the result.
        ``held_level``: the level the lookup would have had had the session held nothing.
        A planned DEDUPED result whose held documents would not have answered is a plan
        that found nothing: the session holds no answer there, so the domain is not closed
        (in a running session the plan's lookup ranked first a held document of an
        earlier question, and closing its domain blocked the page that found the answer).
        """
        if level is RelevanceLevel.DEDUPED and planned and held_level not in GOOD_LEVELS:
            level = None
        if searched is not None and _clean(searched) != _clean(domain) and planned:
            self._record_unanswered_plan(_clean(searched), level)
            shown = _clean(domain)
            if shown is not None and level not in GOOD_LEVELS:
                self._plan_shown.add(shown)
            planned = False  # the result's domain was not the planner's choice
            named = False  # it was found by searching the whole knowledge base
        self.add_tokens(tokens)
        if level in _FOUND:
            self._found += 1
        self._answered = self._answered or level in GOOD_LEVELS
        self._has_result = True
        self._last_level = level
        self._last_block = None
        domain = _clean(domain)
        if domain is None:
            return
        self._retrieved[domain] = None
        if self.capped:  # the cap knows no domains
            return
        state = self.domain_state(domain)
        if planned:
            self._planned.add(domain)
            self._plan_answered = self._plan_answered or level in GOOD_LEVELS
        if planned and self._retries_plan(state, level):
            self._plan_unanswered.add(domain)
            self._states[domain] = DomainState.RETRY
            return
        self._states[domain] = self._next_state(state, level, named)

    def _record_unanswered_plan(self, domain: str | None, level: RelevanceLevel | None) -> None:
        """A planned domain searched without an answer, whose lookup showed another
        domain's documents: planned, unanswered there (so naming it again repeats the
        plan's search), and answered by the plan when the other domain's result is."""
        if domain is None:
            return
        self._retrieved[domain] = None
        if self.capped:
            return
        self._planned.add(domain)
        self._plan_answered = self._plan_answered or level in GOOD_LEVELS
        state = self.domain_state(domain)
        if self._retries_plan(state, None):
            self._plan_unanswered.add(domain)
            self._states[domain] = DomainState.RETRY
        else:
            self._states[domain] = self._next_state(state, None, True)

    def add_tokens(self, n: int) -> None:
        """Tokens spent this turn, for ``indicator: tokens``."""
        if n < 0:
            raise ValueError("tokens cannot be negative")
        self._tokens += n

    # -- decisions ---------------------------------------------------------------------

    def constraint(self) -> Constraint:
        """The verdict, the breaker prompt and whether the tool is offered to the next step."""
        level = self.water_level
        closed = self._domains_in(DomainState.CLOSED)
        supplement = self._domains_in(DomainState.SUPPLEMENT)
        budget = self.budget_left
        if not self._settings.enabled:
            return Constraint(
                Verdict.CONTINUE, True, None, level, closed, supplement, budget, self._calls
            )
        if self._withheld or level is WaterLevel.HIGH:
            verdict = Verdict.STOP
        elif self.capped:
            verdict = Verdict.CONTINUE
        elif self._has_result and self._last_level in GOOD_LEVELS:
            verdict = Verdict.ANSWER
        elif supplement:
            verdict = Verdict.SUPPLEMENT
        else:
            verdict = Verdict.CONTINUE
        situation = self.situation()
        message = None
        if situation is not None:
            message = breaker_message(
                situation,
                self._language,
                closed_domains=closed,
                budget_left=budget,
                supplement_domains=supplement,
            )
        return Constraint(
            verdict,
            verdict is not Verdict.STOP,
            message,
            level,
            closed,
            supplement,
            budget,
            self._calls,
        )

    def situation(self) -> Situation | None:
        """Which breaker prompt applies now; ``None`` on a fresh turn with budget left."""
        if not self._settings.enabled:
            return None
        if self._withheld:
            return Situation.WITHHELD
        high = self.water_level is WaterLevel.HIGH
        if not self._has_result and self._last_block is None:
            # A fresh turn needs no prompt, unless the tool is already taken away.
            return Situation.HIGH_LIMITED if high else None
        if high:
            good = self._has_result and self._last_level in GOOD_LEVELS
            return Situation.HIGH_ANSWER if good else Situation.HIGH_LIMITED
        if self.capped:  # below the cap it says nothing, like the frameworks' counters
            return None
        if self._last_block is DedupReason.SUPPLEMENT_NEEDS_DIMENSION:
            return Situation.BLOCKED_NEEDS_DIMENSION
        if self._last_block is not None or self._last_level is RelevanceLevel.DEDUPED:
            return Situation.BLOCKED
        if self._last_level in GOOD_LEVELS:
            return Situation.ANSWER
        if self._last_level is None and self._domains_in(DomainState.RETRY):
            return Situation.RETRY
        if self._domains_in(DomainState.SUPPLEMENT):
            return Situation.SUPPLEMENT
        return Situation.CONTINUE

    def _block_reason(
        self,
        domain: str | None,
        missing_dimension: str | None,
        level: WaterLevel,
        named: bool,
        paging: bool,
    ) -> DedupReason | None:
        """Checks in order: budget, a page (never blocked below it), closed domain,
        supplement without a dimension (a retry naming a domain whose planned lookup did
        not answer is one)."""
        if self._withheld or level is WaterLevel.HIGH:
            return DedupReason.BUDGET_EXHAUSTED
        if domain is None or paging:
            return None
        state = self.domain_state(domain)
        if state is DomainState.CLOSED:
            return DedupReason.DOMAIN_RETRIEVED
        repeats_plan = state is DomainState.RETRY and named and domain in self._plan_unanswered
        needs_dimension = state is DomainState.SUPPLEMENT or repeats_plan
        if needs_dimension and not (missing_dimension or "").strip():
            return DedupReason.SUPPLEMENT_NEEDS_DIMENSION
        return None

    def _pages_unanswered(self, request: LookupRequest, domain: str | None) -> bool:
        """In a planned turn where no lookup answered yet, the first ``high_min_found``
        calls run as pages when they name no domain (whatever their inferred domain's
        state), and so does one call a turn that names, without a dimension, a domain of
        the plan's unanswered results (the planned domain, or that of a document its
        widened lookup showed). Each shows the next documents of its ranking past what the
        session has (``Retriever.retrieve``, ``page``), so the matrix never shows less than
        the plain cap of that many lookups. The matrix's dimension had blocked that named
        repeat where the cap ran it and found the answer (domain_hopper, dev-answer-only:
        0.913 against the cap's 0.916; README). Only one a turn: further repeats are
        asked for a dimension (the ISS-003 replay on the example KB: 2.75 executed lookups
        of 10, none redundant)."""
        plan_result = domain in self._plan_unanswered or domain in self._plan_shown
        repeat = (
            plan_result and not self._paged_named and not (request.missing_dimension or "").strip()
        )
        return (
            self._settings.mode == "matrix"
            and bool(self._planned)
            and (not request.named or repeat)
            and not self._answered
            and self._calls < self._settings.high_min_found
        )

    def _retries_plan(self, state: DomainState, level: RelevanceLevel | None) -> bool:
        """A planned lookup's result leaves the domain to the model's own retry."""
        return (
            self._settings.mode == "matrix"
            and state is DomainState.OPEN
            and level not in _CLOSING
            and self.water_level is WaterLevel.LOW
        )

    def _next_state(
        self, state: DomainState, level: RelevanceLevel | None, named: bool
    ) -> DomainState:
        """Plan A: no result from a call naming no domain → RETRY (at low water); OPEN or
        RETRY + REFERENCE/no result → SUPPLEMENT; anything else → CLOSED. Plan B: CLOSED."""
        if self._settings.mode != "matrix" or level in _CLOSING:
            return DomainState.CLOSED
        if state in (DomainState.OPEN, DomainState.RETRY):
            if level is None and not named and self.water_level is WaterLevel.LOW:
                return DomainState.RETRY
            return DomainState.SUPPLEMENT
        return DomainState.CLOSED

    def _domains_in(self, state: DomainState) -> tuple[str, ...]:
        return tuple(d for d in self._states if self.domain_state(d) is state)
