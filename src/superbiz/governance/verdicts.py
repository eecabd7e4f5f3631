"""What the turn governor decides, as values: the water level, verdicts, domain states,
an admission before a lookup, the constraint before the next model step, and the breaker
prompts that tell the model (docs/design.md §5).

The vocabulary of ``superbiz.governance.decision``, apart from the matrix that decides:
the tool, the lookup, the recorder and the API read these values without the governor.
Pure values and wording, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from superbiz._messages import LANGUAGES, localized
from superbiz._text import Language
from superbiz.retrieval.relevance import RelevanceLevel


class WaterLevel(StrEnum):
    """How much of the turn's retrieval budget is spent (docs/design.md §5.2, 水位)."""

    LOW = "low"
    MID = "mid"
    HIGH = "high"


def water_level(value: int, low_max: int, high_min: int) -> WaterLevel:
    """``value ≤ low_max`` → LOW, ``value ≥ high_min`` → HIGH, else MID.

    Where the bounds overlap HIGH wins, as in docs/design.md §5.2 (mid 4–8, high ≥ 8).

    >>> [water_level(v, 3, 8).value for v in (3, 4, 7, 8)]
    ['low', 'mid', 'mid', 'high']
    """
    if value >= high_min:
        return WaterLevel.HIGH
    if value <= low_max:
        return WaterLevel.LOW
    return WaterLevel.MID


class DedupReason(StrEnum):
    """Why a lookup was not run; recorded in ``tool_invocation.dedup_reason``."""

    DOC_RETRIEVED = "doc_retrieved"
    DOMAIN_RETRIEVED = "domain_retrieved"
    BUDGET_EXHAUSTED = "budget_exhausted"
    SUPPLEMENT_NEEDS_DIMENSION = "supplement_needs_dimension"


class Verdict(StrEnum):
    """What the next executor step may do."""

    CONTINUE = "continue"  # lookups in open domains allowed
    SUPPLEMENT = "supplement"  # some domain may get its one targeted supplement
    ANSWER = "answer"  # the result is good: answer; only unretrieved domains stay open
    STOP = "stop"  # the tool is withheld from the next LLM call


class DomainState(StrEnum):
    """A domain's state within the turn."""

    OPEN = "open"
    RETRY = "retry"  # lookups naming no domain found nothing: reworded retries at low water
    SUPPLEMENT = "supplement"  # REFERENCE / no result: one targeted supplement left
    CLOSED = "closed"


class Situation(StrEnum):
    """Which breaker prompt the next step gets (keys of ``BREAKER_TEXTS``)."""

    HIGH_ANSWER = "high_answer"
    HIGH_LIMITED = "high_limited"
    SUPPLEMENT = "supplement"
    RETRY = "retry"
    BLOCKED = "blocked"
    BLOCKED_NEEDS_DIMENSION = "blocked_needs_dimension"
    ANSWER = "answer"
    CONTINUE = "continue"
    WITHHELD = "withheld"


@dataclass(frozen=True)
class LookupRequest:
    """A ``lookup_knowledge`` call as the governor sees it.

    ``domain`` is the one the call names, else the one the caller inferred; ``None``
    when nothing could be inferred (then only the water level and withholding apply).
    """

    domain: str | None
    missing_dimension: str | None = None
    #: the call named ``domain`` itself (``False``: inferred, the search is unscoped)
    named: bool = False


@dataclass(frozen=True)
class Admission:
    """The decision taken before a lookup runs; ``dedup_reason`` is set when blocked.
    ``paging``: it runs as a page of a turn no lookup answered yet (see
    ``TurnGovernor``), so it shows the next documents of its ranking."""

    allowed: bool
    dedup_reason: DedupReason | None
    water_level: WaterLevel
    domain: str | None
    paging: bool = False


@dataclass(frozen=True)
class Constraint:
    """What the executor injects before the next LLM step, and whether the tool is offered.

    ``budget_left`` counts lookup calls left before high water by the calls count or, in
    a planned turn, by the lookups that found documents, whichever is nearer; ``calls``
    is the turn's calls so far (executed and blocked), for a gauge.
    """

    verdict: Verdict
    tools_allowed: bool
    message: str | None
    water_level: WaterLevel
    closed_domains: tuple[str, ...]
    supplement_domains: tuple[str, ...]
    budget_left: int
    calls: int = 0


# The breaker prompts of docs/design.md §5.3 (first four rows) and the situations it left open.
BREAKER_TEXTS: dict[Situation, dict[Language, str]] = {
    situation: {
        language: localized(f"decision.breaker.{situation}", language) for language in LANGUAGES
    }
    for situation in Situation
}
_LAYOUT = "{body}\n{footer}"

#: results that answer: their domain closes
GOOD_LEVELS = frozenset({RelevanceLevel.PRECISE, RelevanceLevel.HIGHLY_RELEVANT})


def breaker_message(
    situation: Situation,
    language: Language,
    *,
    closed_domains: Sequence[str],
    budget_left: int,
    supplement_domains: Sequence[str] = (),
) -> str:
    """The prompt for ``situation``; it always names the closed domains and the budget left,
    so the model can see exactly what is still allowed."""
    none = localized("decision.none", language)
    supplement = ", ".join(supplement_domains) or none
    footer = localized("decision.footer", language).format(
        closed=", ".join(closed_domains) or none, budget=max(0, budget_left)
    )
    if supplement_domains and situation not in _STOP_SITUATIONS:
        footer += localized("decision.supplement_footer", language).format(supplement=supplement)
    body = BREAKER_TEXTS[situation][language].format(supplement=supplement)
    return _LAYOUT.format(body=body, footer=footer)


_STOP_SITUATIONS = frozenset({Situation.HIGH_ANSWER, Situation.HIGH_LIMITED, Situation.WITHHELD})
