"""``evaluate_agent``: the executor loop over a dataset under a behaviour profile.

Real KBs (USE + Milvus Lite + SQLite). The datasets live in the session's
``agent_eval_workspace``, whose built-in example KB is already ingested, so the
iss003_replay fallback finds it unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from superbiz.config import GovernanceSettings, Settings
from superbiz.evaluation.agent import builtin_dataset, evaluate_agent
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

NUMBER_KEYS = {
    "executed_lookups_mean",
    "executed_lookups_p95",
    "blocked_mean",
    "blocked_p95",
    "redundant_executed_mean",
    "redundant_executed_p95",
    "steps_mean",
    "steps_p95",
    "evidence_recall",
    "ms_per_step_p50",
    "seconds",
}
REPORT_KEYS = NUMBER_KEYS | {
    "dataset",
    "profile",
    "governance",
    "questions",
    "blocked_call_ms",
    "governance_ms_per_step",
}


@pytest.fixture(scope="module", autouse=True)
def _shared_embedder(use_embedder: Embedder) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("superbiz.knowledge.base.make_embedder", lambda settings: use_embedder)
        yield


def evaluate(
    workspace: dict[str, Path], profile: str, *, max_steps: int = 10, **options: Any
) -> dict[str, Any]:
    settings = Settings(
        data_dir=workspace["data_dir"], governance=GovernanceSettings(max_steps=max_steps)
    )
    return evaluate_agent(workspace["no_api"], settings, profile=profile, **options)


def check_report(report: dict[str, Any]) -> None:
    assert set(report) >= REPORT_KEYS
    for key in NUMBER_KEYS:
        assert isinstance(report[key], int | float) and math.isfinite(report[key]), key
    assert set(report["blocked_call_ms"]) == {"p50", "p95"}
    assert set(report["governance_ms_per_step"]) == {"p50", "p95"}
    assert 0 <= report["evidence_recall"] <= 1


def test_governed_and_ungoverned_side_by_side(agent_eval_workspace: dict[str, Path]) -> None:
    progress: list[str] = []
    totals: list[int] = []

    governed = evaluate(
        agent_eval_workspace,
        "over_cautious",
        max_steps=5,
        on_total=totals.append,
        on_progress=progress.append,
    )
    ungoverned = evaluate(agent_eval_workspace, "over_cautious", max_steps=5, governance=False)

    for report in (governed, ungoverned):
        check_report(report)
        assert report["dataset"] == str(agent_eval_workspace["no_api"])
        assert report["profile"] == "over_cautious" and report["questions"] == 2
        assert report["evidence_recall"] == 1.0
        assert report["redundant_executed_mean"] == (0 if report is governed else 4)
    assert (governed["governance"], ungoverned["governance"]) == ("on", "off")
    assert totals == [2] and progress == ["q1", "q2"]

    assert governed["executed_lookups_mean"] == 1.0
    assert governed["blocked_mean"] == 3.0
    assert governed["steps_mean"] == 5.0
    assert governed["blocked_call_ms"]["p50"] is not None
    assert ungoverned["executed_lookups_mean"] == 5.0  # one per step up to the step cap
    assert ungoverned["blocked_mean"] == 0.0 and ungoverned["steps_mean"] == 6.0
    assert ungoverned["blocked_call_ms"] == {"p50": None, "p95": None}
    assert governed["executed_lookups_mean"] <= 0.3 * ungoverned["executed_lookups_mean"]
    assert governed["evidence_recall"] >= 0.98 * ungoverned["evidence_recall"]


def test_iss003_replay_falls_back_to_the_builtin_kb_with_a_notice(
    agent_eval_workspace: dict[str, Path],
) -> None:
    notices: list[str] = []

    governed = evaluate(agent_eval_workspace, "iss003_replay", limit=2, on_notice=notices.append)
    ungoverned = evaluate(agent_eval_workspace, "iss003_replay", limit=2, governance=False)

    [notice] = notices
    assert str(agent_eval_workspace["no_api"]) in notice
    assert "no 'infrastructure' and 'api' domains" in notice
    assert "built-in example knowledge base" in notice
    for report in (governed, ungoverned):
        check_report(report)
        assert report["dataset"] == str(builtin_dataset())
        assert report["questions"] == 2
    assert governed["executed_lookups_mean"] == 2.0  # seed target: ≤ 2 executed
    assert governed["blocked_mean"] == 8.0
    assert governed["redundant_executed_mean"] == 0.0
    assert ungoverned["executed_lookups_mean"] == 10.0
    assert ungoverned["blocked_mean"] == 0.0


def test_iss003_replay_without_fallback_when_the_dataset_has_both_domains(
    agent_eval_workspace: dict[str, Path],
) -> None:
    notices: list[str] = []
    report = evaluate_agent(
        builtin_dataset(),
        Settings(data_dir=agent_eval_workspace["builtin"]),
        profile="iss003_replay",
        limit=1,
        on_notice=notices.append,
    )

    assert notices == []
    assert report["dataset"] == str(builtin_dataset())
    assert (report["executed_lookups_mean"], report["blocked_mean"]) == (2.0, 8.0)


def test_a_dataset_without_queries_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "corpus").mkdir()
    with pytest.raises(SuperbizError, match=r"queries\.jsonl"):
        evaluate_agent(tmp_path, Settings(data_dir=tmp_path / "data"), profile="obedient")


@pytest.mark.xfail(
    reason="evaluation/agent.py evaluate_agent: load_queries runs before the try/finally, so "
    "the KB that prepare_dataset opened is never closed when queries.jsonl is missing or bad",
    strict=True,
)
def test_the_kb_is_closed_when_the_queries_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[KnowledgeBase] = []
    closed: list[KnowledgeBase] = []
    original_init, original_close = KnowledgeBase.__init__, KnowledgeBase.close

    def init(self: KnowledgeBase, *args: Any, **kwargs: Any) -> None:
        opened.append(self)
        original_init(self, *args, **kwargs)

    def close(self: KnowledgeBase) -> None:
        closed.append(self)
        original_close(self)

    monkeypatch.setattr(KnowledgeBase, "__init__", init)
    monkeypatch.setattr(KnowledgeBase, "close", close)
    (tmp_path / "corpus").mkdir()
    try:
        with pytest.raises(SuperbizError, match=r"queries\.jsonl"):
            evaluate_agent(tmp_path, Settings(data_dir=tmp_path / "data"), profile="obedient")
        leaked = [kb for kb in opened if not any(kb is c for c in closed)]
    finally:
        for kb in opened:
            if not any(kb is c for c in closed):
                original_close(kb)

    assert opened and leaked == []
