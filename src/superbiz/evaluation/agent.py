"""``superbiz eval agent``: the executor loop under a behaviour profile, governed or not.

Per question: executed lookups, blocked calls, redundant executed lookups (ones that
returned only documents already retrieved), LLM steps, and evidence recall (a gold
document was put in front of the model before it answered). ``--governance off`` runs
the same loop without the governor: the plain ReAct baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.agents.executor import TurnResult
from superbiz.agents.planner import PlanRequest
from superbiz.agents.runtime import open_runtime
from superbiz.config import Settings
from superbiz.evaluation.metrics import mean, percentile
from superbiz.evaluation.profiles import make_profile
from superbiz.evaluation.retrieval import load_queries, prepare_dataset

ISS003_DOMAINS = {"infrastructure", "api"}


def builtin_dataset() -> Path:
    """The example knowledge base shipped with the package (payment, infrastructure,
    api, database; Chinese and English) with its own questions."""
    return Path(str(resources.files("superbiz") / "examples"))


def _metrics(turn: TurnResult, gold: list[str]) -> dict[str, float]:
    return {
        "executed": turn.executed,
        "blocked": turn.blocked,
        "redundant_executed": sum(o.redundant for o in turn.lookups),
        "steps": turn.steps,
        "evidence_recall": float(any(doc in gold for doc in turn.evidence)),
    }


def evaluate_agent(
    dataset_dir: Path,
    settings: Settings,
    *,
    profile: str,
    governance: bool = True,
    limit: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    dataset = dataset_dir
    kb = prepare_dataset(dataset, settings)
    if profile == "iss003_replay" and not set(kb.domains()) >= ISS003_DOMAINS:
        kb.close()
        dataset = builtin_dataset()
        # Its own stores, whatever the dataset's are: pruning must never touch the dataset.
        settings = settings.model_copy(
            update={
                "data_dir": settings.data_dir / "builtin",
                "database_url": None,
                "vector": settings.vector.model_copy(update={"uri": None}),
            }
        )
        if on_notice:
            on_notice(
                f"{dataset_dir} has no 'infrastructure' and 'api' domains: iss003_replay "
                f"runs on the built-in example knowledge base ({dataset})"
            )
        kb = prepare_dataset(dataset, settings)
    settings = settings.model_copy(
        update={"governance": settings.governance.model_copy(update={"enabled": governance})}
    )
    try:
        model = make_profile(profile, list(kb.domains()))
    except ValueError:
        kb.close()
        raise
    # A profile is an extractive policy, so the runtime plans from the map, as the
    # extractive assistant does.
    with open_runtime(settings, model=model, kb=kb) as runtime:
        queries = load_queries(dataset, limit)
        runtime.warm_up()
        map_started = time.perf_counter()
        kmap = runtime.knowledge_map()
        map_build_s = time.perf_counter() - map_started
        if on_total:
            on_total(len(queries))
        rows: list[dict[str, float]] = []
        step_ms: list[float] = []
        blocked_ms: list[float] = []
        plan_hits: list[float] = []
        planned_counts: list[float] = []
        governance_ms: list[float] = []
        started = time.perf_counter()
        for item in queries:
            session = f"eval-agent:{profile}:{item.id}"
            runtime.clear_session(session)
            t0 = time.perf_counter()
            turn = runtime.executor.run(session, item.query, turn=1)
            step_ms.append((time.perf_counter() - t0) * 1000 / max(turn.steps, 1))
            rows.append(_metrics(turn, item.gold))
            plan = runtime.planner.plan(PlanRequest(item.query, kmap))
            gold_domains = (
                {g.split("/")[0] for g in item.gold} if not item.category else {item.category}
            )
            plan_hits.append(float(bool(gold_domains & set(plan.domain_ids))))
            planned_counts.append(len(plan.domain_ids))
            blocked_ms += [o.latency_ms for o in turn.lookups if not o.executed and not o.error]
            governance_ms.append(turn.governance_ms / max(turn.steps, 1))
            runtime.tracker.clear_session(session)
            if on_progress:
                on_progress(item.id)
        elapsed = time.perf_counter() - started

    def column(key: str) -> list[float]:
        return [row[key] for row in rows]

    return {
        "dataset": str(dataset),
        "profile": profile,
        "governance": "on" if governance else "off",
        "questions": len(rows),
        "executed_lookups_mean": round(mean(column("executed")), 3),
        "executed_lookups_p95": percentile(column("executed"), 95),
        "blocked_mean": round(mean(column("blocked")), 3),
        "blocked_p95": percentile(column("blocked"), 95),
        "redundant_executed_mean": round(mean(column("redundant_executed")), 3),
        "redundant_executed_p95": percentile(column("redundant_executed"), 95),
        "steps_mean": round(mean(column("steps")), 3),
        "steps_p95": percentile(column("steps"), 95),
        "evidence_recall": round(mean(column("evidence_recall")), 4),
        "plan_domain_recall": round(mean(plan_hits), 4),
        "map_build_s": round(map_build_s, 3),
        "planned_domains_mean": round(mean(planned_counts), 3),
        "ms_per_step_p50": round(percentile(step_ms, 50), 2),
        "blocked_call_ms": {
            "p50": round(percentile(blocked_ms, 50), 3) if blocked_ms else None,
            "p95": round(percentile(blocked_ms, 95), 3) if blocked_ms else None,
        },
        "governance_ms_per_step": {
            "p50": round(percentile(governance_ms, 50), 4),
            "p95": round(percentile(governance_ms, 95), 4),
        },
        "seconds": round(elapsed, 2),
    }


def render_agent_report(report: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"{report['profile']} · governance {report['governance']} · "
        f"{report['questions']} questions"
    )
    for column in ("metric", "mean", "p95"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for key in ("executed_lookups", "blocked", "redundant_executed", "steps"):
        table.add_row(key, f"{report[f'{key}_mean']:.3f}", str(report[f"{key}_p95"]))
    table.add_row("evidence_recall", f"{report['evidence_recall']:.3f}", "")
    table.add_row(
        "plan_domain_recall",
        f"{report['plan_domain_recall']:.3f}",
        f"{report['planned_domains_mean']:.2f} domains/plan",
    )
    console.print(table)
    blocked, governance = report["blocked_call_ms"], report["governance_ms_per_step"]
    console.print(
        f"{report['ms_per_step_p50']} ms per step (p50); blocked call p50 {blocked['p50']} ms, "
        f"p95 {blocked['p95']} ms; governance {governance['p50']} ms per step (p50, "
        f"p95 {governance['p95']}); {report['seconds']} s in all"
    )
