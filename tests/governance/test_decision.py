"""The turn governor: every matrix cell, every domain transition, the ISS-003 replay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from superbiz.config import GovernanceConfig
from superbiz.governance.decision import TurnGovernor
from superbiz.governance.verdicts import (
    BREAKER_TEXTS,
    Admission,
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

P = RelevanceLevel.PRECISE
HR = RelevanceLevel.HIGHLY_RELEVANT
REF = RelevanceLevel.REFERENCE
DD = RelevanceLevel.DEDUPED
LOW, MID, HIGH = WaterLevel.LOW, WaterLevel.MID, WaterLevel.HIGH
DOMAIN = DedupReason.DOMAIN_RETRIEVED
BUDGET = DedupReason.BUDGET_EXHAUSTED
NEEDS_DIM = DedupReason.SUPPLEMENT_NEEDS_DIMENSION
ALL_LEVELS: list[RelevanceLevel | None] = [P, HR, REF, None, DD]


def make(language: str = "en", retrieved: Iterable[str] = (), **settings: Any) -> TurnGovernor:
    return TurnGovernor(GovernanceConfig(**settings), language, retrieved)  # type: ignore[arg-type]


def lookup(
    gov: TurnGovernor,
    domain: str | None,
    level: RelevanceLevel | None,
    missing_dimension: str | None = None,
) -> Admission:
    """One tool call: admit it, and record its result when it ran."""
    admission = gov.admit(LookupRequest(domain, missing_dimension))
    if admission.allowed:
        gov.record(domain, level)
    return admission


def spend(gov: TurnGovernor, n: int) -> None:
    """Raise the calls count with lookups whose domain is unknown (no domain state moves)."""
    for _ in range(n):
        assert gov.admit(LookupRequest(None)).allowed


# -- water levels -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "low_max", "high_min", "expected"),
    [
        (0, 3, 8, LOW),
        (3, 3, 8, LOW),
        (4, 3, 8, MID),
        (7, 3, 8, MID),
        (8, 3, 8, HIGH),
        (100, 3, 8, HIGH),
        (4000, 4000, 12000, LOW),
        (4001, 4000, 12000, MID),
        (11999, 4000, 12000, MID),
        (12000, 4000, 12000, HIGH),
        (2, 2, 4, LOW),
        (3, 2, 4, MID),
        (4, 2, 4, HIGH),
        (3, 3, 4, LOW),
        (5, 5, 5, HIGH),  # overlapping bounds: high wins, as in the seed's "4-8" / "≥ 8"
    ],
)
def test_water_level(value: int, low_max: int, high_min: int, expected: WaterLevel) -> None:
    assert water_level(value, low_max, high_min) is expected


@pytest.mark.parametrize(("calls", "expected"), [(0, LOW), (3, LOW), (4, MID), (7, MID), (8, HIGH)])
def test_calls_indicator_with_defaults(calls: int, expected: WaterLevel) -> None:
    gov = make()
    spend(gov, calls)
    assert gov.calls == calls
    assert gov.water_level is expected


def test_blocked_calls_raise_the_calls_water_level() -> None:
    gov = make(withhold_after_blocked=100)
    lookup(gov, "infrastructure", HR)
    for _ in range(3):
        assert not gov.admit(LookupRequest("infrastructure")).allowed
    assert gov.calls == 4
    assert gov.water_level is MID


def test_admission_uses_the_water_level_before_the_call() -> None:
    gov = make()
    spend(gov, 7)
    eighth = gov.admit(LookupRequest("api"))
    assert (eighth.allowed, eighth.water_level) == (True, MID)
    assert gov.water_level is HIGH
    ninth = gov.admit(LookupRequest("db"))
    assert (ninth.allowed, ninth.dedup_reason, ninth.water_level) == (False, BUDGET, HIGH)


@pytest.mark.parametrize(
    ("tokens", "bounds", "expected"),
    [
        (3, {"low_max_tokens": 3, "high_min_tokens": 8}, LOW),
        (4, {"low_max_tokens": 3, "high_min_tokens": 8}, MID),
        (7, {"low_max_tokens": 3, "high_min_tokens": 8}, MID),
        (8, {"low_max_tokens": 3, "high_min_tokens": 8}, HIGH),
        (4000, {}, LOW),
        (4001, {}, MID),
        (11999, {}, MID),
        (12000, {}, HIGH),
    ],
)
def test_tokens_indicator(tokens: int, bounds: dict[str, int], expected: WaterLevel) -> None:
    gov = make(indicator="tokens", **bounds)
    gov.add_tokens(tokens - 1)
    gov.record(None, HR, tokens=1)  # record feeds tokens too
    assert gov.tokens == tokens
    assert gov.water_level is expected


def test_tokens_indicator_ignores_the_calls_count() -> None:
    gov = make(indicator="tokens")
    spend(gov, 20)
    assert gov.water_level is LOW
    assert gov.admit(LookupRequest("api")).allowed


def test_negative_tokens_are_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        make().add_tokens(-1)


@pytest.mark.parametrize(
    ("earlier", "this_turn", "bounds", "expected"),
    [
        (3, 0, {"low_max_domains": 3, "high_min_domains": 8}, LOW),
        (3, 1, {"low_max_domains": 3, "high_min_domains": 8}, MID),
        (6, 1, {"low_max_domains": 3, "high_min_domains": 8}, MID),
        (7, 1, {"low_max_domains": 3, "high_min_domains": 8}, HIGH),
        (2, 0, {}, LOW),
        (2, 1, {}, MID),
        (0, 3, {}, MID),
        (1, 3, {}, HIGH),
    ],
)
def test_domains_indicator_counts_the_session(
    earlier: int, this_turn: int, bounds: dict[str, int], expected: WaterLevel
) -> None:
    gov = make(
        indicator="domains", retrieved=frozenset(f"old{i}" for i in range(earlier)), **bounds
    )
    for i in range(this_turn):
        gov.record(f"new{i}", HR)
    gov.record("old0" if earlier else None, HR)  # a domain counted twice is one domain
    assert len(gov.retrieved_domains) == earlier + this_turn
    assert gov.water_level is expected


def test_domains_indicator_high_at_turn_start_stops_and_says_why() -> None:
    gov = make(indicator="domains", retrieved=frozenset({"a", "b", "c", "d"}))
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed) == (Verdict.STOP, False)
    assert gov.situation() is Situation.HIGH_LIMITED
    assert constraint.message is not None and "restricted" in constraint.message
    assert gov.admit(LookupRequest("e")).dedup_reason is BUDGET


# -- the matrix, cell by cell -------------------------------------------------------------

# (level, water after the lookup) → verdict, situation, and what the next call gets:
# in the same domain, in the same domain naming a missing dimension, in another open domain.
# ``None`` in the last three columns means "allowed".
MATRIX: list[
    tuple[
        RelevanceLevel | None,
        WaterLevel,
        Verdict,
        Situation,
        DedupReason | None,
        DedupReason | None,
        DedupReason | None,
    ]
] = [
    (P, LOW, Verdict.ANSWER, Situation.ANSWER, DOMAIN, DOMAIN, None),
    (P, MID, Verdict.ANSWER, Situation.ANSWER, DOMAIN, DOMAIN, None),
    (P, HIGH, Verdict.STOP, Situation.HIGH_ANSWER, BUDGET, BUDGET, BUDGET),
    (HR, LOW, Verdict.ANSWER, Situation.ANSWER, DOMAIN, DOMAIN, None),
    (HR, MID, Verdict.ANSWER, Situation.ANSWER, DOMAIN, DOMAIN, None),
    (HR, HIGH, Verdict.STOP, Situation.HIGH_ANSWER, BUDGET, BUDGET, BUDGET),
    (REF, LOW, Verdict.SUPPLEMENT, Situation.SUPPLEMENT, NEEDS_DIM, None, None),
    (REF, MID, Verdict.SUPPLEMENT, Situation.SUPPLEMENT, NEEDS_DIM, None, None),
    (REF, HIGH, Verdict.STOP, Situation.HIGH_LIMITED, BUDGET, BUDGET, BUDGET),
    (None, LOW, Verdict.SUPPLEMENT, Situation.SUPPLEMENT, NEEDS_DIM, None, None),
    (None, MID, Verdict.SUPPLEMENT, Situation.SUPPLEMENT, NEEDS_DIM, None, None),
    (None, HIGH, Verdict.STOP, Situation.HIGH_LIMITED, BUDGET, BUDGET, BUDGET),
    (DD, LOW, Verdict.CONTINUE, Situation.BLOCKED, DOMAIN, DOMAIN, None),
    (DD, MID, Verdict.CONTINUE, Situation.BLOCKED, DOMAIN, DOMAIN, None),
    (DD, HIGH, Verdict.STOP, Situation.HIGH_LIMITED, BUDGET, BUDGET, BUDGET),
]
# Calls made before the cell's own lookup, so that the water after it is LOW / MID / HIGH.
CALLS_BEFORE = {LOW: 0, MID: 4, HIGH: 7}


def cell(level: RelevanceLevel | None, water: WaterLevel) -> TurnGovernor:
    gov = make(withhold_after_blocked=100)
    spend(gov, CALLS_BEFORE[water])
    assert lookup(gov, "infrastructure", level).allowed
    assert gov.water_level is water
    return gov


@pytest.mark.parametrize(("level", "water", "verdict", "situation", "_s", "_d", "_o"), MATRIX)
def test_matrix_cell_verdict(
    level: RelevanceLevel | None,
    water: WaterLevel,
    verdict: Verdict,
    situation: Situation,
    _s: object,
    _d: object,
    _o: object,
) -> None:
    gov = cell(level, water)
    assert gov.situation() is situation
    constraint = gov.constraint()
    assert constraint.verdict is verdict
    assert constraint.tools_allowed is (verdict is not Verdict.STOP)
    assert constraint.water_level is water
    assert constraint.message is not None
    assert constraint.message.startswith(BREAKER_TEXTS[situation]["en"][:40])


@pytest.mark.parametrize(("level", "water", "_v", "_sit", "same", "with_dim", "other"), MATRIX)
@pytest.mark.parametrize("target", ["same", "same with missing dimension", "other open domain"])
def test_matrix_cell_next_call(
    level: RelevanceLevel | None,
    water: WaterLevel,
    _v: object,
    _sit: object,
    same: DedupReason | None,
    with_dim: DedupReason | None,
    other: DedupReason | None,
    target: str,
) -> None:
    gov = cell(level, water)
    request, expected = {
        "same": (LookupRequest("infrastructure"), same),
        "same with missing dimension": (
            LookupRequest("infrastructure", "HikariCP pool parameters"),
            with_dim,
        ),
        "other open domain": (LookupRequest("api"), other),
    }[target]
    admission = gov.admit(request)
    assert admission == Admission(expected is None, expected, water, request.domain)


@pytest.mark.parametrize(("level", "water", "_v", "_sit", "_s", "_d", "_o"), MATRIX)
def test_matrix_cell_domain_state(
    level: RelevanceLevel | None,
    water: WaterLevel,
    _v: object,
    _sit: object,
    _s: object,
    _d: object,
    _o: object,
) -> None:
    gov = cell(level, water)
    expected = DomainState.SUPPLEMENT if level in (REF, None) else DomainState.CLOSED
    assert gov.domain_state("infrastructure") is expected
    assert gov.domain_state("api") is DomainState.OPEN
    constraint = gov.constraint()
    assert constraint.closed_domains == (
        ("infrastructure",) if expected is DomainState.CLOSED else ()
    )
    assert constraint.supplement_domains == (
        ("infrastructure",) if expected is DomainState.SUPPLEMENT else ()
    )


# -- per-domain transitions ---------------------------------------------------------------


@pytest.mark.parametrize("level", [P, HR, DD])
def test_open_to_closed(level: RelevanceLevel) -> None:
    gov = make()
    assert gov.domain_state("api") is DomainState.OPEN
    lookup(gov, "api", level)
    assert gov.domain_state("api") is DomainState.CLOSED
    assert gov.admit(LookupRequest("api", "some dimension")).dedup_reason is DOMAIN


@pytest.mark.parametrize("first", [REF, None])
@pytest.mark.parametrize("supplement_result", ALL_LEVELS)
def test_open_to_supplement_to_closed(
    first: RelevanceLevel | None, supplement_result: RelevanceLevel | None
) -> None:
    gov = make()
    lookup(gov, "api", first)
    assert gov.domain_state("api") is DomainState.SUPPLEMENT
    assert gov.constraint().verdict is Verdict.SUPPLEMENT
    assert lookup(gov, "api", supplement_result, "refund error codes").allowed
    assert gov.domain_state("api") is DomainState.CLOSED
    again = gov.admit(LookupRequest("api", "another dimension"))
    assert again.dedup_reason is DOMAIN


@pytest.mark.parametrize("missing", [None, "", "   \t"])
def test_supplement_without_missing_dimension_is_blocked(missing: str | None) -> None:
    gov = make()
    lookup(gov, "api", REF)
    admission = gov.admit(LookupRequest("api", missing))
    assert (admission.allowed, admission.dedup_reason) == (False, NEEDS_DIM)
    assert gov.domain_state("api") is DomainState.SUPPLEMENT  # the supplement is still there
    assert gov.situation() is Situation.BLOCKED_NEEDS_DIMENSION
    assert gov.admit(LookupRequest("api", "timeout values")).allowed


def test_supplement_at_high_water_is_blocked() -> None:
    gov = make()
    lookup(gov, "api", REF)
    spend(gov, 7)
    assert gov.water_level is HIGH
    admission = gov.admit(LookupRequest("api", "timeout values"))
    assert (admission.allowed, admission.dedup_reason) == (False, BUDGET)


def test_supplement_at_mid_water_is_allowed() -> None:
    gov = make()
    spend(gov, 5)
    lookup(gov, "api", REF)
    assert gov.water_level is MID
    assert gov.admit(LookupRequest("api", "timeout values")).allowed


def test_supplement_in_one_domain_leaves_the_others_alone() -> None:
    gov = make()
    lookup(gov, "infrastructure", HR)
    lookup(gov, "api", REF)
    assert gov.constraint().verdict is Verdict.SUPPLEMENT
    lookup(gov, "billing", HR)
    constraint = gov.constraint()
    assert constraint.verdict is Verdict.ANSWER  # the latest result decides
    assert constraint.closed_domains == ("infrastructure", "billing")
    assert constraint.supplement_domains == ("api",)
    assert gov.admit(LookupRequest("api", "error codes")).allowed


def test_supplement_returning_reference_ends_in_continue() -> None:
    gov = make()
    lookup(gov, "api", REF)
    lookup(gov, "api", REF, "error codes")
    assert gov.constraint().verdict is Verdict.CONTINUE
    assert gov.situation() is Situation.CONTINUE
    assert gov.admit(LookupRequest("billing")).allowed


def test_unknown_domain_is_governed_only_by_water_and_withholding() -> None:
    gov = make()
    lookup(gov, "api", HR)
    assert gov.admit(LookupRequest(None)) == Admission(True, None, LOW, None)
    assert gov.admit(LookupRequest("  ")) == Admission(True, None, LOW, None)
    gov.record(None, REF)
    assert gov.constraint().closed_domains == ("api",)
    assert gov.retrieved_domains == frozenset({"api"})
    spend(gov, 5)
    assert gov.admit(LookupRequest(None)).dedup_reason is BUDGET


# -- earlier turns of the session -----------------------------------------------------------


def test_matrix_mode_reopens_earlier_turn_domains() -> None:
    gov = make(retrieved=frozenset({"infrastructure", "api"}))
    assert gov.domain_state("infrastructure") is DomainState.OPEN
    assert gov.constraint().closed_domains == ()
    assert lookup(gov, "infrastructure", REF).allowed
    assert gov.domain_state("infrastructure") is DomainState.SUPPLEMENT
    assert gov.retrieved_domains == frozenset({"infrastructure", "api"})


def test_domain_limit_mode_keeps_earlier_turn_domains_closed() -> None:
    gov = make(mode="domain-limit", retrieved=["infrastructure", "api"])  # in that order
    assert gov.domain_state("api") is DomainState.CLOSED
    assert gov.constraint().closed_domains == ("infrastructure", "api")
    assert gov.constraint().message is None  # fresh turn
    assert gov.admit(LookupRequest("api", "a dimension")).dedup_reason is DOMAIN
    assert gov.situation() is Situation.BLOCKED
    assert gov.admit(LookupRequest("billing")).allowed


# -- no result from a call that named no domain: one reworded retry first ----------------


def guessed(gov: TurnGovernor, domain: str, level: RelevanceLevel | None) -> Admission:
    """A call that names no domain; ``domain`` is the caller's inference."""
    admission = gov.admit(LookupRequest(domain))
    if admission.allowed:
        gov.record(domain, level, named=False)
    return admission


def test_unnamed_no_result_opens_reworded_retries() -> None:
    gov = make()
    guessed(gov, "kubernetes", None)
    assert gov.domain_state("kubernetes") is DomainState.RETRY
    assert gov.situation() is Situation.RETRY
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed) == (Verdict.CONTINUE, True)
    assert constraint.message is not None
    assert constraint.message.startswith(BREAKER_TEXTS[Situation.RETRY]["en"][:40])
    assert constraint.closed_domains == constraint.supplement_domains == ()
    assert guessed(gov, "kubernetes", REF).allowed  # no missing_dimension needed
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT


@pytest.mark.parametrize(
    ("retry_result", "state"),
    [
        (P, DomainState.CLOSED),
        (HR, DomainState.CLOSED),
        (DD, DomainState.CLOSED),
        (REF, DomainState.SUPPLEMENT),
        (None, DomainState.RETRY),
    ],
)
def test_retry_then_the_matrix_row_of_its_result(
    retry_result: RelevanceLevel | None, state: DomainState
) -> None:
    gov = make()
    guessed(gov, "kubernetes", None)
    guessed(gov, "kubernetes", retry_result)
    assert gov.domain_state("kubernetes") is state
    expected = {DomainState.CLOSED: DOMAIN, DomainState.SUPPLEMENT: NEEDS_DIM}.get(state)
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is expected


def test_retries_last_while_the_water_is_low() -> None:
    gov = make()
    for _ in range(3):  # calls 1-3: low water
        assert guessed(gov, "kubernetes", None).allowed
        assert gov.domain_state("kubernetes") is DomainState.RETRY
    assert guessed(gov, "kubernetes", None).allowed  # admitted at low water (3 calls before)
    assert gov.water_level is MID
    assert gov.domain_state("kubernetes") is DomainState.CLOSED  # REFERENCE row, spent
    assert gov.admit(LookupRequest("kubernetes", "a dimension")).dedup_reason is DOMAIN
    assert gov.admit(LookupRequest("api")).allowed  # other domains stay open


def test_a_retry_domain_takes_the_supplement_row_from_mid_water() -> None:
    gov = make(withhold_after_blocked=100)
    guessed(gov, "kubernetes", None)
    spend(gov, 3)  # other calls raise the water to mid
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    assert gov.constraint().supplement_domains == ("kubernetes",)
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is NEEDS_DIM
    assert lookup(gov, "kubernetes", None, "timeouts").allowed
    assert gov.domain_state("kubernetes") is DomainState.CLOSED


def test_named_no_result_goes_straight_to_the_supplement_row() -> None:
    gov = make()
    lookup(gov, "kubernetes", None)
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is NEEDS_DIM


@pytest.mark.parametrize("level", [P, HR, REF, DD])
def test_unnamed_results_other_than_none_follow_the_matrix(level: RelevanceLevel) -> None:
    gov = make()
    guessed(gov, "kubernetes", level)
    expected = DomainState.SUPPLEMENT if level is REF else DomainState.CLOSED
    assert gov.domain_state("kubernetes") is expected


def test_no_retry_at_high_water() -> None:
    gov = make(withhold_after_blocked=100)
    spend(gov, 7)
    guessed(gov, "kubernetes", None)
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is BUDGET


def test_plan_b_has_no_retry() -> None:
    gov = make(mode="domain-limit")
    guessed(gov, "kubernetes", None)
    assert gov.domain_state("kubernetes") is DomainState.CLOSED


# -- plan B ---------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_plan_b_one_lookup_per_domain(level: RelevanceLevel | None) -> None:
    gov = make(mode="domain-limit")
    assert lookup(gov, "api", level).allowed
    assert gov.domain_state("api") is DomainState.CLOSED
    assert gov.constraint().verdict is not Verdict.SUPPLEMENT
    assert gov.constraint().supplement_domains == ()
    assert gov.admit(LookupRequest("api", "missing dimension")).dedup_reason is DOMAIN
    assert gov.admit(LookupRequest("billing")).allowed


def test_plan_b_has_no_pages() -> None:
    """Pages are the matrix's: in plan B a planned domain is closed like any other."""
    gov = make(mode="domain-limit")
    planned(gov, "kubernetes", REF)
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is DOMAIN
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is DOMAIN
    assert gov.admit(LookupRequest("billing")).allowed


def test_plan_b_water_levels_still_apply() -> None:
    gov = make(mode="domain-limit")
    for i in range(8):
        assert lookup(gov, f"domain{i}", HR).allowed
    assert gov.water_level is HIGH
    assert gov.admit(LookupRequest("domain8")).dedup_reason is BUDGET
    assert gov.constraint().verdict is Verdict.STOP


# -- withholding ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_withheld_when_the_model_keeps_calling_after_n_blocks(n: int) -> None:
    gov = make(withhold_after_blocked=n)
    lookup(gov, "api", HR)
    for _ in range(n):
        assert gov.admit(LookupRequest("api")).dedup_reason is DOMAIN
        assert not gov.withheld  # each block was explained to the model
    assert gov.admit(LookupRequest("api")).dedup_reason is DOMAIN
    assert gov.withheld
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed) == (Verdict.STOP, False)
    assert gov.situation() is Situation.WITHHELD
    # Withheld for the rest of the turn, even for an open domain below high water.
    assert gov.water_level is not HIGH
    assert gov.admit(LookupRequest("billing")).dedup_reason is BUDGET
    gov.record("billing", HR)
    assert gov.constraint().verdict is Verdict.STOP


def test_an_allowed_call_resets_the_blocked_counter() -> None:
    gov = make(withhold_after_blocked=2, low_max_calls=10, high_min_calls=20)
    lookup(gov, "api", HR)
    for domain in ("billing", "search", "auth"):
        gov.admit(LookupRequest("api"))
        gov.admit(LookupRequest("api"))
        assert not gov.withheld
        assert lookup(gov, domain, HR).allowed
    gov.admit(LookupRequest("api"))
    gov.admit(LookupRequest("api"))
    gov.admit(LookupRequest("api"))
    assert gov.withheld


def test_blocks_of_any_reason_count_towards_withholding() -> None:
    gov = make(withhold_after_blocked=2)
    lookup(gov, "api", HR)
    lookup(gov, "infrastructure", REF)
    assert gov.admit(LookupRequest("api")).dedup_reason is DOMAIN
    assert gov.admit(LookupRequest("infrastructure")).dedup_reason is NEEDS_DIM
    assert not gov.withheld
    assert gov.admit(LookupRequest("api")).dedup_reason is DOMAIN
    assert gov.withheld


# -- disabled: the ungoverned baseline ------------------------------------------------------


def test_disabled_governor_admits_everything() -> None:
    gov = make(enabled=False, mode="domain-limit", retrieved=frozenset({"api"}))
    for level in ALL_LEVELS:
        for _ in range(3):
            admission = lookup(gov, "api", level)
            assert (admission.allowed, admission.dedup_reason) == (True, None)
    assert gov.water_level is HIGH
    assert not gov.withheld
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed, constraint.message) == (
        Verdict.CONTINUE,
        True,
        None,
    )
    assert constraint.water_level is HIGH
    assert gov.situation() is None


# -- cap: the peer frameworks' plain count cap ----------------------------------------------


@pytest.mark.parametrize("cap", [0, 1, 3])
def test_cap_runs_any_n_lookups_then_withdraws_the_tool(cap: int) -> None:
    gov = make(mode="cap", cap_calls=cap, retrieved=frozenset({"api"}))
    for i in range(cap):
        constraint = gov.constraint()
        assert (constraint.verdict, constraint.tools_allowed, constraint.message) == (
            Verdict.CONTINUE,
            True,
            None,
        )
        assert constraint.budget_left == cap - i
        assert lookup(gov, "api", P).allowed  # a closed domain, a PRECISE result: no matter
    assert gov.water_level is HIGH and gov.stopped
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed, constraint.budget_left) == (
        Verdict.STOP,
        False,
        0,
    )
    assert constraint.message is not None and "lookup_knowledge" in constraint.message
    assert gov.admit(LookupRequest("payment")).dedup_reason is BUDGET


def test_cap_knows_no_domain_states_or_prompts() -> None:
    gov = make(mode="cap", cap_calls=5)
    lookup(gov, "api", REF)
    lookup(gov, "api", None)  # no supplement rule: a second REFERENCE-row call runs
    assert gov.domain_state("api") is DomainState.OPEN
    assert gov.situation() is None
    assert gov.water_level is LOW
    assert gov.retrieved_domains == frozenset({"api"})


def test_iss_003_replay_under_cap_3() -> None:
    gov = make(mode="cap", cap_calls=3)
    admissions = replay(gov)
    assert [a.allowed for a in admissions] == [True] * 3 + [False] * 7
    assert [a.domain for a in admissions if a.allowed] == ["infrastructure"] * 3


# -- breaker prompts ------------------------------------------------------------------------

SEED_TEXTS = {
    Situation.HIGH_ANSWER: "水位已高，请直接给出最终结论，不要再调用 lookup_knowledge",
    Situation.HIGH_LIMITED: "水位已高，lookup_knowledge 已被限制，直接基于已有信息回答",
    Situation.SUPPLEMENT: "水位充足，可针对缺少的维度定向补充检索一次",
    Situation.BLOCKED: "该内容已检索过，禁止重复调用 lookup_knowledge",
    Situation.BLOCKED_NEEDS_DIMENSION: "该内容已检索过，禁止重复调用 lookup_knowledge",
}


def test_every_situation_has_both_languages() -> None:
    assert set(BREAKER_TEXTS) == set(Situation)
    for texts in BREAKER_TEXTS.values():
        assert set(texts) == {"zh", "en"}


@pytest.mark.parametrize("situation", list(Situation))
@pytest.mark.parametrize(
    ("language", "footer"),
    [
        ("zh", "已关闭的知识域：infrastructure, api；剩余检索预算：2 次"),
        ("en", "Closed domains: infrastructure, api; lookup budget left: 2"),
    ],
)
def test_breaker_message_names_closed_domains_and_budget(
    situation: Situation, language: str, footer: str
) -> None:
    message = breaker_message(
        situation,
        language,  # type: ignore[arg-type]
        closed_domains=("infrastructure", "api"),
        budget_left=2,
    )
    assert footer in message
    if language == "zh" and situation in SEED_TEXTS:
        assert SEED_TEXTS[situation] in message
    if situation is Situation.SUPPLEMENT:
        assert "missing_dimension" in message


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("zh", "已关闭的知识域：无；剩余检索预算：0 次"),
        ("en", "Closed domains: none; lookup budget left: 0"),
    ],
)
def test_breaker_message_with_nothing_closed(language: str, expected: str) -> None:
    message = breaker_message(
        Situation.WITHHELD,
        language,  # type: ignore[arg-type]
        closed_domains=(),
        budget_left=-3,
    )
    assert message.endswith(expected)


def test_withheld_message_says_unavailable_and_asks_for_limitations() -> None:
    zh = BREAKER_TEXTS[Situation.WITHHELD]["zh"]
    en = BREAKER_TEXTS[Situation.WITHHELD]["en"]
    assert "不可用" in zh and "局限性" in zh
    assert "no longer available" in en and "limitations" in en


@pytest.mark.parametrize("language", ["zh", "en"])
def test_governor_message_in_the_turn_language(language: str) -> None:
    gov = make(language)
    assert gov.constraint().message is None  # fresh turn
    lookup(gov, "infrastructure", HR)
    lookup(gov, "api", P)
    spend(gov, 4)
    constraint = gov.constraint()
    assert constraint.budget_left == 2
    assert constraint.closed_domains == ("infrastructure", "api")
    expected = {
        "zh": "已关闭的知识域：infrastructure, api；剩余检索预算：2 次",
        "en": "Closed domains: infrastructure, api; lookup budget left: 2",
    }[language]
    assert constraint.message is not None and constraint.message.endswith(expected)


@pytest.mark.parametrize(
    ("language", "fragment"),
    [("zh", "可定向补充一次的知识域：api"), ("en", "one targeted supplement: api")],
)
def test_supplement_message_names_the_domain(language: str, fragment: str) -> None:
    gov = make(language)
    lookup(gov, "api", REF)
    message = gov.constraint().message
    assert message is not None
    assert fragment in message
    assert "missing_dimension" in message


def test_stop_messages_do_not_offer_a_supplement() -> None:
    gov = make("zh")
    spend(gov, 7)
    lookup(gov, "api", REF)
    constraint = gov.constraint()
    assert constraint.supplement_domains == ("api",)
    assert constraint.message is not None
    assert SEED_TEXTS[Situation.HIGH_LIMITED] in constraint.message
    assert "可定向补充一次" not in constraint.message
    assert constraint.message.endswith("剩余检索预算：0 次")


def test_budget_left_never_negative() -> None:
    gov = make(withhold_after_blocked=100)
    spend(gov, 8)
    gov.admit(LookupRequest("api"))
    assert gov.constraint().budget_left == 0


# -- ISS-003 replay -------------------------------------------------------------------------

ISS_003 = [
    "infrastructure",
    "infrastructure",
    "infrastructure",
    "api",
    "api",
    "infrastructure",
    "infrastructure",
    "infrastructure",
    "infrastructure",
    "api",
]
FIRST_RESULT = {"infrastructure": HR, "api": REF}


def replay(gov: TurnGovernor) -> list[Admission]:
    """The 10-call log of seed 002; no call names a missing dimension."""
    admissions = []
    for domain in ISS_003:
        admission = gov.admit(LookupRequest(domain))
        if admission.allowed:
            gov.record(domain, FIRST_RESULT[domain])
        admissions.append(admission)
    return admissions


def test_iss_003_replay_matrix_only() -> None:
    admissions = replay(make(withhold_after_blocked=100))
    assert [a.dedup_reason for a in admissions] == [
        None,
        DOMAIN,
        DOMAIN,
        None,
        NEEDS_DIM,
        DOMAIN,
        DOMAIN,
        DOMAIN,
        BUDGET,
        BUDGET,
    ]
    assert [a.water_level for a in admissions] == [LOW] * 4 + [MID] * 4 + [HIGH] * 2
    assert sum(a.allowed for a in admissions) == 2
    assert [a.domain for a in admissions if a.allowed] == ["infrastructure", "api"]


def test_iss_003_replay_with_default_withholding() -> None:
    gov = make()
    admissions = replay(gov)
    assert [a.dedup_reason for a in admissions] == [
        None,
        DOMAIN,
        DOMAIN,
        None,
        NEEDS_DIM,
        DOMAIN,
        DOMAIN,  # the third block in a row: the model ignored two explained blocks
        BUDGET,
        BUDGET,
        BUDGET,
    ]
    assert gov.withheld
    assert sum(a.allowed for a in admissions) == 2
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed) == (Verdict.STOP, False)
    assert constraint.closed_domains == ("infrastructure",)
    assert constraint.supplement_domains == ("api",)


def test_iss_003_replay_ungoverned() -> None:
    assert all(a.allowed for a in replay(make(enabled=False)))


def test_iss_003_constraints_step_by_step() -> None:
    gov = make(withhold_after_blocked=100)
    verdicts = []
    for domain in ISS_003:
        if gov.admit(LookupRequest(domain)).allowed:
            gov.record(domain, FIRST_RESULT[domain])
        verdicts.append(gov.constraint().verdict)
    assert verdicts == [Verdict.ANSWER] * 3 + [Verdict.SUPPLEMENT] * 4 + [Verdict.STOP] * 3


# -- a planned lookup that did not answer: the planner's scope and words, not the model's --


def planned(
    gov: TurnGovernor,
    domain: str,
    level: RelevanceLevel | None,
    held_level: RelevanceLevel | None = HR,
) -> Admission:
    """A lookup the executor ran from the plan (it names the planner's domain); a DEDUPED
    one's held documents answer unless ``held_level`` says otherwise."""
    admission = gov.admit(LookupRequest(domain, named=True))
    if admission.allowed:
        gov.record(domain, level, planned=True, held_level=held_level)
    return admission


@pytest.mark.parametrize("level", [REF, None])
def test_an_unanswered_plan_leaves_the_model_a_retry_or_a_page(
    level: RelevanceLevel | None,
) -> None:
    gov = make()
    planned(gov, "kubernetes", level)
    assert gov.domain_state("kubernetes") is DomainState.RETRY
    assert gov.situation() is (Situation.RETRY if level is None else Situation.CONTINUE)
    # naming the domain again shows its next documents, past those the plan showed
    named = gov.admit(LookupRequest("kubernetes", named=True))
    assert named.allowed and named.paging
    gov.record("kubernetes", REF)
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    # a call naming no domain searches the whole knowledge base, in the model's words
    assert guessed(gov, "kubernetes", REF).allowed


def test_planned_no_result_admits_a_named_retry_with_a_dimension() -> None:
    gov = make()
    planned(gov, "kubernetes", None)
    assert gov.admit(LookupRequest("kubernetes", "exit code", named=True)).allowed


def test_planned_no_result_takes_the_reference_row_from_mid_water() -> None:
    gov = make()
    spend(gov, 3)
    planned(gov, "kubernetes", None)
    assert gov.water_level is MID
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    assert gov.admit(LookupRequest("kubernetes")).dedup_reason is NEEDS_DIM


def test_an_unanswered_planned_turn_pages_like_the_cap() -> None:
    """No lookup answered: the model's whole-KB lookups run up to the cap's three, where
    the matrix alone would have asked the second for a missing dimension."""
    gov = make()
    planned(gov, "kubernetes", REF)
    assert guessed(gov, "kubernetes", REF).allowed
    assert gov.domain_state("kubernetes") is DomainState.SUPPLEMENT
    assert guessed(gov, "kubernetes", REF).allowed  # the third, as the cap's
    assert guessed(gov, "kubernetes", REF).dedup_reason is BUDGET  # three found: high water
    assert gov.found == 3


def test_the_pages_are_marked_on_their_admission() -> None:
    gov = make()
    plan = gov.admit(LookupRequest("kubernetes", named=True))
    assert not plan.paging  # the plan's own lookup is no page
    gov.record("kubernetes", REF, planned=True)
    own = gov.admit(LookupRequest("monitoring", named=True))
    assert own.allowed and not own.paging  # a domain the plan did not search: a lookup
    gov.record("monitoring", REF)
    # a supplement naming its dimension is the matrix's own call, and runs as one
    supplement = gov.admit(LookupRequest("kubernetes", "exit code", named=True))
    assert supplement.allowed and not supplement.paging


def test_no_page_once_a_lookup_answered() -> None:
    gov = make()
    planned(gov, "kubernetes", REF)
    assert gov.admit(LookupRequest("monitoring")).paging
    gov.record("monitoring", HR, named=False)
    after = gov.admit(LookupRequest("database"))  # an open domain: runs, as no page
    assert after.allowed and not after.paging


def test_paging_ends_with_the_cap_even_when_lookups_find_nothing() -> None:
    gov = make()
    planned(gov, "kubernetes", REF)
    assert guessed(gov, "kubernetes", DD).allowed
    assert guessed(gov, "kubernetes", DD).allowed
    # three calls, one found: the matrix again (DEDUPED closed the domain)
    assert guessed(gov, "kubernetes", REF).dedup_reason is DOMAIN


@pytest.mark.parametrize(
    ("shown", "level"),
    [("kubernetes", REF), ("kubernetes", None), ("application", REF)],
    ids=["planned-reference", "planned-nothing", "widened-to-another-domain"],
)
def test_one_named_call_a_turn_pages_through_the_plans_result(
    shown: str, level: RelevanceLevel | None
) -> None:
    """Naming the planned domain again (or the domain of the document its widened lookup
    showed) runs where the cap would have run it, as a page (it never shows a document
    twice); once a turn, so a loop of repeats is still asked for a dimension (the ISS-003
    replay on the example KB: 2.75 executed lookups of 10)."""
    gov = make()
    widened(gov, "kubernetes", shown, level)
    repeat = gov.admit(LookupRequest(shown, named=True))
    assert repeat.allowed and repeat.paging
    gov.record(shown, None)
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is NEEDS_DIM


def test_a_named_repeat_outside_the_plan_follows_the_matrix() -> None:
    gov = make()
    planned(gov, "kubernetes", REF)
    assert lookup(gov, "monitoring", REF).allowed
    assert gov.admit(LookupRequest("monitoring", named=True)).dedup_reason is NEEDS_DIM


@pytest.mark.parametrize("level", [P, HR])
def test_paging_ends_once_a_lookup_answered(level: RelevanceLevel) -> None:
    gov = make()
    planned(gov, "kubernetes", REF)
    assert guessed(gov, "monitoring", level).allowed
    assert guessed(gov, "monitoring", REF).dedup_reason is DOMAIN


def test_a_turn_without_a_plan_does_not_page() -> None:
    """An MCP session's turn holds many questions: the matrix alone, as before."""
    gov = make()
    assert guessed(gov, "kubernetes", REF).allowed
    assert guessed(gov, "kubernetes", REF).dedup_reason is NEEDS_DIM


@pytest.mark.parametrize(
    ("level", "state"),
    [(P, DomainState.CLOSED), (HR, DomainState.CLOSED), (DD, DomainState.CLOSED)],
)
def test_planned_results_follow_the_matrix(
    level: RelevanceLevel | None, state: DomainState
) -> None:
    gov = make()
    planned(gov, "kubernetes", level)
    assert gov.domain_state("kubernetes") is state


@pytest.mark.parametrize("held_level", [REF, None])
def test_a_planned_lookup_holding_no_answer_leaves_the_model_its_page(
    held_level: RelevanceLevel | None,
) -> None:
    """The plan's lookup ranked first a document of an earlier question that does not
    answer this one (DEDUPED, though it would only have been REFERENCE): the session holds
    no answer in that domain, so it is not closed; the model's call naming it again runs
    as the turn's page (in a fresh session the same lookup is REFERENCE and it does)."""
    gov = make()
    planned(gov, "kubernetes", DD, held_level)
    assert gov.domain_state("kubernetes") is DomainState.RETRY
    page = gov.admit(LookupRequest("kubernetes", named=True))
    assert page.allowed and page.paging
    assert gov.situation() is not Situation.BLOCKED


def test_a_planned_lookup_holding_the_answer_closes_its_domain() -> None:
    gov = make()
    planned(gov, "kubernetes", DD, P)
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is DOMAIN
    assert gov.situation() is Situation.BLOCKED


# -- a plan of several domains hedges: an answer resolves it, else one named page -------------


@pytest.mark.parametrize("order", ["answer first", "answer last"])
def test_a_planned_answer_closes_the_other_planned_domains(order: str) -> None:
    gov = make()
    plan = [("kubernetes", HR), ("monitoring", REF)]
    for domain, level in plan if order == "answer first" else plan[::-1]:
        planned(gov, domain, level)
    assert gov.domain_state("monitoring") is DomainState.CLOSED
    # no supplement, no retry in a hedge the answer resolved
    supplement = gov.admit(LookupRequest("monitoring", "alert rules", named=True))
    assert supplement.dedup_reason is DOMAIN
    assert guessed(gov, "monitoring", REF).dedup_reason is DOMAIN
    # a domain the plan did not search stays open, for a question that spans it
    assert gov.admit(LookupRequest("database", named=True)).allowed


def test_the_models_own_answer_leaves_a_planned_supplement_alone() -> None:
    """Only the plan hedges: an answer the model found elsewhere is the seed's per-domain
    reading, and the planned domain keeps its targeted supplement."""
    gov = make()
    planned(gov, "monitoring", REF)
    assert lookup(gov, "kubernetes", HR).allowed
    assert gov.domain_state("monitoring") is DomainState.RETRY
    assert gov.admit(LookupRequest("monitoring", "alert rules", named=True)).allowed


@pytest.mark.parametrize("second", [REF, None])
def test_a_hedged_plan_pages_the_first_named_return_to_it(second: RelevanceLevel | None) -> None:
    """Nothing answered in a plan of two domains: the model's first call naming one of them
    pages there, as the cap would have run it; the next named repeat needs a dimension."""
    gov = make()
    planned(gov, "kubernetes", REF)
    planned(gov, "monitoring", second)
    chosen = gov.admit(LookupRequest("kubernetes", named=True))
    assert chosen.allowed and chosen.paging
    gov.record("kubernetes", None)
    assert gov.admit(LookupRequest("monitoring", named=True)).dedup_reason is NEEDS_DIM
    assert gov.admit(LookupRequest("monitoring", "scrape config", named=True)).allowed


def test_past_the_pages_a_named_repeat_of_the_plan_needs_a_dimension() -> None:
    """Whatever else the turn searched (domain_hopper's own hedge), once the pages are spent
    naming a planned domain again repeats the planner's search."""
    gov = make(withhold_after_blocked=100, high_min_found=4, low_max_calls=10)
    planned(gov, "kubernetes", REF)
    assert lookup(gov, "database", REF).allowed
    spend(gov, 2)  # the rest of the pages: high_min_found is 4 here
    assert gov.water_level is LOW
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is NEEDS_DIM
    assert gov.admit(LookupRequest("kubernetes", "exit code", named=True)).allowed


@pytest.mark.parametrize("own", [HR, P])
def test_a_named_repeat_needs_a_dimension_once_the_models_own_lookup_answered(
    own: RelevanceLevel,
) -> None:
    gov = make(high_min_found=10)
    planned(gov, "kubernetes", REF)
    assert lookup(gov, "database", own).allowed
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is NEEDS_DIM


def test_a_named_repeat_of_the_plan_needs_a_dimension_from_mid_water() -> None:
    gov = make()
    spend(gov, 2)
    planned(gov, "kubernetes", None)
    planned(gov, "monitoring", None)
    assert gov.water_level is MID
    assert gov.admit(LookupRequest("kubernetes", named=True)).dedup_reason is NEEDS_DIM


# -- never more evidence than the plain cap: three lookups that found documents ------------


def test_three_planned_references_are_high_water() -> None:
    """A plan of three domains that all found something has shown what cap:3 would."""
    gov = make()
    for domain in ("kubernetes", "monitoring", "database"):
        planned(gov, domain, REF)
    assert (gov.found, gov.calls) == (3, 3)
    assert gov.water_level is HIGH
    constraint = gov.constraint()
    assert (constraint.verdict, constraint.tools_allowed) == (Verdict.STOP, False)
    assert (constraint.budget_left, constraint.calls) == (0, 3)  # a gauge shows 3 calls
    assert gov.situation() is Situation.HIGH_LIMITED
    supplement = gov.admit(LookupRequest("database", "replication lag", named=True))
    assert supplement.dedup_reason is BUDGET


@pytest.mark.parametrize("nothing", [None, DD])
def test_lookups_that_found_nothing_do_not_raise_the_found_count(
    nothing: RelevanceLevel | None,
) -> None:
    gov = make(low_max_calls=10, high_min_calls=20)
    assert planned(gov, "api", REF).allowed
    for _ in range(4):  # unscoped calls, nothing inferred: only the water level governs
        assert gov.admit(LookupRequest(None)).allowed
        gov.record(None, nothing, named=False)
    assert (gov.found, gov.water_level) == (1, LOW)
    assert gov.constraint().budget_left == 2
    assert lookup(gov, "billing", HR).allowed
    assert lookup(gov, "search", REF).allowed
    assert (gov.found, gov.water_level) == (3, HIGH)
    assert gov.admit(LookupRequest("auth")).dedup_reason is BUDGET


@pytest.mark.parametrize("indicator", ["calls", "tokens", "domains"])
def test_the_found_count_is_high_water_whatever_the_indicator(indicator: str) -> None:
    gov = make(indicator=indicator, high_min_found=2)
    planned(gov, "api", REF)
    assert gov.water_level is LOW
    lookup(gov, "billing", REF)
    assert gov.water_level is HIGH


def test_without_a_plan_only_the_indicator_counts() -> None:
    """An MCP session runs no plan and spans many questions: one long turn whose water
    level is the indicator's alone."""
    gov = make()
    for domain in ("a", "b", "c", "d"):
        assert lookup(gov, domain, HR).allowed
    assert (gov.found, gov.water_level) == (4, MID)
    assert gov.constraint().budget_left == 4


def test_the_cap_ignores_the_found_count() -> None:
    gov = make(mode="cap", cap_calls=5)
    for domain in ("a", "b", "c", "d"):
        assert planned(gov, domain, HR).allowed
    assert (gov.found, gov.water_level) == (4, LOW)


# -- a planned lookup that searched the whole KB (its domain had no answer) ------------------


def widened(gov: TurnGovernor, planned: str, shown: str, level: RelevanceLevel | None) -> None:
    """The executor's planned lookup of ``planned``: nothing answered there, so it showed
    ``shown``'s document from the whole knowledge base at ``level``."""
    assert gov.admit(LookupRequest(planned, named=True)).allowed
    gov.record(shown, level, planned=True, searched=planned)


@pytest.mark.parametrize("level", [P, HR])
def test_an_answer_found_outside_the_planned_domain_closes_both(level: RelevanceLevel) -> None:
    gov = make()
    widened(gov, "database", "application", level)

    assert gov.domain_state("application") is DomainState.CLOSED  # the document's own
    assert gov.domain_state("database") is DomainState.CLOSED  # the plan is answered
    assert gov.constraint().verdict is Verdict.ANSWER
    assert gov.found == 1 and gov.calls == 1


def test_a_reference_found_outside_the_planned_domain() -> None:
    """The planned domain did not answer: naming it again pages there; the document's
    domain takes the REFERENCE row."""
    gov = make()
    widened(gov, "database", "application", REF)

    assert gov.domain_state("database") is DomainState.RETRY
    assert gov.domain_state("application") is DomainState.SUPPLEMENT
    repeat = gov.admit(LookupRequest("database", named=True))
    assert repeat.allowed and repeat.paging
    assert gov.admit(LookupRequest("application", "pool size", named=True)).allowed
    assert gov.retrieved_domains == {"database", "application"}


def test_a_widened_lookup_in_its_own_domain_is_a_planned_lookup() -> None:
    plain, wide = make(), make()
    plain.admit(LookupRequest("database", named=True))
    plain.record("database", REF, planned=True)

    widened(wide, "database", "database", REF)

    assert wide.domain_state("database") is plain.domain_state("database") is DomainState.RETRY
