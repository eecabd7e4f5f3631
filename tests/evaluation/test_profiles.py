"""Behaviour profiles through the real Executor on the small KB, governed and ungoverned.

``iss003_replay`` on the built-in example KB (the one ``eval agent`` falls back to) is
tested in ``test_agent.py``, where that KB is ingested.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from superbiz.agents.executor import Executor
from superbiz.agents.turn_result import TurnResult
from superbiz.config import GovernanceConfig
from superbiz.evaluation.profiles import ISS003_SCRIPT, PROFILES, make_profile, paraphrase
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.kb.base import KnowledgeBase

QUESTION = "Redis 连接池耗尽"
REDIS = "infrastructure/redis-pool.md"


def run_profile(kb: KnowledgeBase, name: str, question: str, **governance: Any) -> TurnResult:
    model = make_profile(name, list(kb.domains()))
    lookup = GovernedLookup(kb, InMemorySessionTracker())
    executor = Executor(model, lookup, GovernanceConfig(**governance))
    return executor.run(f"profile-{uuid.uuid4().hex[:8]}", question, turn=1)


def executed(result: TurnResult) -> list[bool]:
    return [o.executed for o in result.lookups]


def redundant(result: TurnResult) -> int:
    return sum(o.redundant for o in result.lookups)


def test_make_profile_knows_every_profile_and_refuses_others() -> None:
    assert PROFILES == ("obedient", "over_cautious", "domain_hopper", "iss003_replay", "defiant")
    assert [make_profile(name, ["a", "b"]).name for name in PROFILES] == list(PROFILES)
    with pytest.raises(ValueError, match="unknown profile 'chatty'; choose one of obedient"):
        make_profile("chatty")


# -- obedient ------------------------------------------------------------------------------


def test_obedient_looks_up_once_and_answers(governed_kb: KnowledgeBase) -> None:
    result = run_profile(governed_kb, "obedient", QUESTION)

    assert executed(result) == [True]
    assert (result.steps, result.stopped_by, result.blocked) == (2, "answer", 0)
    assert result.evidence == [REDIS]


def test_obedient_stops_when_told(governed_kb: KnowledgeBase) -> None:
    question = "redis slow query and API 429"  # REFERENCE with missing terms: wants a supplement
    free = run_profile(governed_kb, "obedient", question)
    told = run_profile(governed_kb, "obedient", question, low_max_calls=0, high_min_calls=1)

    assert executed(free) == [True, True]
    assert "missing_dimension" in free.lookups[1].arguments
    assert executed(told) == [True]  # the tool was withheld: it answered, no blocked call
    assert (told.blocked, told.stopped_by) == (0, "answer")


# -- over_cautious -------------------------------------------------------------------------


def test_over_cautious_governed_reasks_until_the_tool_is_withheld(
    governed_kb: KnowledgeBase,
) -> None:
    result = run_profile(governed_kb, "over_cautious", QUESTION)

    assert executed(result) == [True, False, False, False]
    assert [o.dedup_reason for o in result.lookups[1:]] == ["domain_retrieved"] * 3
    queries = [o.arguments["query"] for o in result.lookups]
    assert queries == [paraphrase(QUESTION, "zh", n) for n in range(4)]
    assert not result.lookups[-1].constraint.tools_allowed  # withheld: then it answered
    assert result.stopped_by == "answer" and result.steps == 5
    assert result.answer.startswith("【抽取式回答】")


def test_over_cautious_ungoverned_runs_to_the_step_cap(governed_kb: KnowledgeBase) -> None:
    result = run_profile(governed_kb, "over_cautious", QUESTION, enabled=False, max_steps=6)

    assert executed(result) == [True] * 6
    assert (result.stopped_by, result.steps) == ("step_cap", 7)
    assert redundant(result) == 5  # every re-ask returned the same document


# -- domain_hopper -------------------------------------------------------------------------


def test_domain_hopper_alternates_domains_and_is_stopped(governed_kb: KnowledgeBase) -> None:
    governed = run_profile(governed_kb, "domain_hopper", QUESTION)
    ungoverned = run_profile(governed_kb, "domain_hopper", QUESTION, enabled=False, max_steps=6)

    hops = ["infrastructure", "api"] * 3
    assert [o.domain for o in ungoverned.lookups] == hops
    assert executed(ungoverned) == [True] * 6
    assert ungoverned.stopped_by == "step_cap"

    assert [o.domain for o in governed.lookups] == hops[: len(governed.lookups)]
    assert executed(governed)[:2] == [True, True]  # each domain once
    assert not any(executed(governed)[2:]) and governed.blocked >= 2
    assert governed.stopped_by == "answer"
    assert redundant(governed) == 0


# -- defiant -------------------------------------------------------------------------------


def test_defiant_keeps_calling_whatever_it_is_told(governed_kb: KnowledgeBase) -> None:
    result = run_profile(governed_kb, "defiant", QUESTION, max_steps=6)

    assert len(result.lookups) == 7  # one per step, and one more in the step cap's final call
    assert executed(result) == [True] + [False] * 6
    assert result.stopped_by == "step_cap"
    last = result.lookups[-1]
    assert last.error == "the step limit is reached"
    reasons = [o.dedup_reason for o in result.lookups[1:-1]]
    assert "budget_exhausted" in reasons  # it called on after the tool was withheld
    assert result.evidence == [REDIS]


# -- iss003_replay -------------------------------------------------------------------------


def check_iss003(result: TurnResult, governed: bool) -> None:
    """The seed 002 log replayed: governed, only the first infrastructure and the first api
    call run (2 executed, 8 blocked, 0 redundant); ungoverned, all 10 run."""
    assert [(o.arguments["domain"]) for o in result.lookups] == [d for d, _ in ISS003_SCRIPT]
    assert len(result.lookups) == 10
    if governed:
        assert executed(result) == [i in (0, 3) for i in range(10)]  # first infra, first api
        assert (result.executed, result.blocked, redundant(result)) == (2, 8, 0)
    else:
        assert executed(result) == [True] * 10
        assert result.blocked == 0 and redundant(result) > 0


@pytest.mark.parametrize("governed", [True, False], ids=["governed", "ungoverned"])
def test_iss003_replay_on_the_small_kb(governed_kb: KnowledgeBase, governed: bool) -> None:
    result = run_profile(governed_kb, "iss003_replay", QUESTION, enabled=governed)

    check_iss003(result, governed)
