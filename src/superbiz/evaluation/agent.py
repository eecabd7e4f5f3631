"""``superbiz eval agent``: the executor loop under a behaviour profile or a real model,
governed, count-capped or not.

Per question: executed lookups, blocked calls, redundant executed lookups (ones that
returned only documents already retrieved), model steps, evidence recall (a gold document
was put in front of the model before it answered), whether the answer was grounded, how
many model answers were copies (of an earlier answer, or of the documents wholesale) and
how many were relabelled (replaced by the extractive answer), the invalid citations
removed, model calls and the tokens they cost (planner included).
``--governance off`` runs the same loop without the governor (the plain ReAct baseline),
``cap:N`` with the plain count cap of peer frameworks; several variants run over the
same plans and report as one table.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.agents.context import Citation
from superbiz.agents.executor import Executor
from superbiz.agents.planner import PlanRequest
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.turn_result import TurnResult
from superbiz.config import GovernanceConfig, Settings
from superbiz.evaluation.metrics import mean, percentile
from superbiz.evaluation.profiles import Profile, make_profile
from superbiz.evaluation.retrieval import load_queries, prepare_dataset, running_sessions
from superbiz.exceptions import ConfigError
from superbiz.llm import ChatModel, make_chat_model
from superbiz.llm.base import ResponseDone, StreamEvent, quotes_documents
from superbiz.llm.messages import ChatResponse, Message, ToolSpec

ISS003_DOMAINS = {"infrastructure", "api"}


def builtin_dataset() -> Path:
    """The example knowledge base shipped with the package (payment, infrastructure,
    api, database; Chinese and English) with its own questions."""
    return Path(str(resources.files("superbiz") / "examples"))


def governance_settings(spec: str, base: GovernanceConfig) -> GovernanceConfig:
    """``on``: the governor as configured; ``off``: the plain ReAct loop; ``cap:N``: the
    plain count cap peer frameworks offer (N lookups per turn, then answer)."""
    spec = spec.strip()
    if spec in ("on", "off"):
        return base.model_copy(update={"enabled": spec == "on"})
    match = re.fullmatch(r"cap:(\d+)", spec)
    if match is None:
        raise ConfigError(f"governance must be on, off or cap:N (e.g. cap:3), not {spec!r}")
    return base.model_copy(update={"enabled": True, "mode": "cap", "cap_calls": int(match[1])})


class MeteredModel:
    """The configured LLM, counting its calls and the tokens the endpoint reports."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.quotes_documents = quotes_documents(inner)
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def _count(self, response: ChatResponse) -> ChatResponse:
        self.calls += 1
        if response.usage:
            self.prompt_tokens += response.usage.prompt_tokens
            self.completion_tokens += response.usage.completion_tokens
        return response

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        return self._count(self.inner.complete(messages, tools))

    def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> Iterator[StreamEvent]:
        for event in self.inner.stream(messages, tools):
            if isinstance(event, ResponseDone):
                self._count(event.response)
            yield event

    def reading(self) -> tuple[int, int, int]:
        return self.calls, self.prompt_tokens, self.completion_tokens


def _metrics(turn: TurnResult, gold: list[str], planning: tuple[int, int, int]) -> dict[str, float]:
    calls, prompt, completion = planning
    return {
        "executed": turn.executed,
        "blocked": turn.blocked,
        "redundant_executed": sum(o.redundant for o in turn.lookups),
        "steps": turn.steps,
        "evidence_recall": float(any(doc in gold for doc in turn.evidence)),
        "grounded": float(turn.grounded),
        "copied_turn": float(turn.copied == "turn"),
        "copied_documents": float(turn.copied == "documents"),
        "relabelled": float(turn.relabelled),
        "invalid_citations": turn.invalid_citations,
        "model_calls": calls + turn.steps,
        "prompt_tokens": prompt + turn.prompt_tokens,
        "completion_tokens": completion + turn.completion_tokens,
    }


def _trace(question_id: str, turn: TurnResult, gold: list[str]) -> dict[str, Any]:
    """One question's lookups in short: origin, domain named or inferred, supplement,
    level, executed or why blocked, and whether it showed a gold document."""
    return {
        "id": question_id,
        "evidence_recall": any(doc in gold for doc in turn.evidence),
        "grounded": turn.grounded,
        "answer_source": turn.answer_source,
        "copied": turn.copied,
        "invalid_citations": turn.invalid_citations,
        "lookups": [
            {
                "origin": o.origin,
                "domain": o.domain,
                "named": bool((o.arguments.get("domain") or "").strip()),
                "query": o.arguments.get("query"),
                "missing_dimension": o.arguments.get("missing_dimension"),
                "level": o.level.value if o.level else None,
                "executed": o.executed,
                "dedup_reason": o.dedup_reason,
                "gold": any(doc in gold for doc in o.shown),
            }
            for o in turn.lookups
        ],
    }


@dataclass
class _Variant:
    """One governance variant's executor and what its turns measured."""

    label: str
    executor: Executor
    rows: list[dict[str, float]] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)
    step_ms: list[float] = field(default_factory=list)
    blocked_ms: list[float] = field(default_factory=list)
    governance_ms: list[float] = field(default_factory=list)
    #: per question: what each lookup did, to see where two variants differ
    traces: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def evaluate_agent(
    dataset_dir: Path,
    settings: Settings,
    *,
    profile: str = "obedient",
    governance: str | Sequence[str] = "on",
    use_llm: bool = False,
    limit: int | None = None,
    running: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every question planned, then run by the executor under each ``governance`` variant.

    The player is the behaviour ``profile`` (planning from the map, as the extractive
    assistant does), or with ``use_llm`` the configured OpenAI-compatible model, which
    then plans too. One variant gives its report; several give ``{"runs": [report, …]}``
    over the same plans, for one table.

    ``running``: the questions asked ``running`` to a session (``running_sessions``),
    each variant in sessions of its own: a later question is planned with the documents
    its session's earlier turns kept and sees them as evidence, as in a chat; the plan
    figures stay those of a fresh plan. A governed turn must find no less there either.
    """
    labels = [governance] if isinstance(governance, str) else list(governance)
    variants_settings = [governance_settings(label, settings.governance_config) for label in labels]
    dataset = dataset_dir
    kb = prepare_dataset(dataset, settings)
    if profile == "iss003_replay" and not use_llm and not set(kb.domains()) >= ISS003_DOMAINS:
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
    meter: MeteredModel | None = None
    player: Profile | None = None
    try:
        if use_llm:
            llm = make_chat_model(settings.llm)
            if llm is None:
                raise ConfigError("--model llm needs llm.model (and llm.base-url) configured")
            meter = MeteredModel(llm)
            model: ChatModel = meter
        else:
            model = player = make_profile(profile, list(kb.domains()))
    except (ValueError, ConfigError):
        kb.close()
        raise
    # A profile is an extractive policy, so the runtime plans from the map, as the
    # extractive assistant does; a configured LLM plans itself.
    with open_runtime(settings, model=model, kb=kb) as runtime:
        queries = load_queries(dataset, limit)
        sessions = (
            running_sessions(queries, running) if running is not None else [[q] for q in queries]
        )
        runtime.warm_up()
        map_started = time.perf_counter()
        kmap = runtime.knowledge_map()
        map_build_s = time.perf_counter() - map_started
        variants = [
            _Variant(label, Executor(model, runtime.lookup, governed, runtime.invocations))
            for label, governed in zip(labels, variants_settings, strict=True)
        ]
        if on_total:
            on_total(len(queries))
        plan_hits: list[float] = []
        planned_counts: list[float] = []
        scoped: list[float] = []
        scoped_hits: list[float] = []
        one_lookup: list[float] = []
        for number, asked in enumerate(sessions):
            # per variant, what its session kept of each document (the latest turn's)
            held: dict[str, dict[str, Citation]] = {v.label: {} for v in variants}
            for turn_number, item in enumerate(asked, start=1):
                before = meter.reading() if meter else (0, 0, 0)
                plan = runtime.planner.plan(PlanRequest(item.query, kmap))
                after = meter.reading() if meter else (0, 0, 0)
                planning = (after[0] - before[0], after[1] - before[1], after[2] - before[2])
                gold_domains = (
                    {g.split("/")[0] for g in item.gold} if not item.category else {item.category}
                )
                hit = float(bool(gold_domains & set(plan.domain_ids)))
                plan_hits.append(hit)
                planned_counts.append(len(plan.domain_ids))
                if plan.need_retrieval:
                    scoped.append(float(plan.scoped))
                    if plan.scoped:
                        scoped_hits.append(hit)
                one_lookup.append(_one_lookup_gold_shown(runtime, item.id, item.query, item.gold))
                scripted = player.scripted_plan(item.query) if player else None
                for variant in variants:
                    session = f"eval-agent:{profile}:{variant.label}:{number}:{asked[0].id}"
                    if turn_number == 1:
                        runtime.clear_session(session)
                    evidence = list(held[variant.label].values())
                    own = plan
                    if evidence:  # planned in the light of what the session holds
                        own = runtime.planner.plan(PlanRequest(item.query, kmap, evidence))
                    t0 = time.perf_counter()
                    turn = variant.executor.run(
                        session,
                        item.query,
                        turn=turn_number,
                        plan=scripted or own,
                        evidence=evidence,
                    )
                    elapsed = time.perf_counter() - t0
                    variant.seconds += elapsed
                    variant.step_ms.append(elapsed * 1000 / max(turn.steps, 1))
                    variant.rows.append(_metrics(turn, item.gold, planning))
                    variant.traces.append(_trace(item.id, turn, item.gold))
                    variant.sources[turn.answer_source] += 1
                    variant.blocked_ms += [
                        o.latency_ms for o in turn.lookups if not o.executed and not o.error
                    ]
                    variant.governance_ms.append(turn.governance_ms / max(turn.steps, 1))
                    held[variant.label].update((c.path, c) for c in turn.kept)
                    if turn_number == len(asked):
                        runtime.tracker.clear_session(session)
                if on_progress:
                    on_progress(item.id)

    common = {
        "dataset": str(dataset),
        "profile": "llm" if use_llm else profile,
        "model": model.name,
        "questions": len(queries),
        "plan_domain_recall": round(mean(plan_hits), 4),
        # plans whose lookups search only their domains, and how often those hold the
        # gold domain (the rest search the whole knowledge base: they cannot hide it)
        "scoped_plans": round(mean(scoped), 4) if scoped else None,
        "scoped_plan_domain_recall": round(mean(scoped_hits), 4) if scoped_hits else None,
        "map_build_s": round(map_build_s, 3),
        "planned_domains_mean": round(mean(planned_counts), 3),
        # one unscoped lookup of the question in a fresh session: what a turn must not
        # find less often than (``gold_shown`` of ``eval retrieval``)
        "one_lookup_gold_shown": round(mean(one_lookup), 4),
        "running": running,
    }
    reports = [{**common, **_report(variant)} for variant in variants]
    if len(reports) == 1:
        return reports[0]
    return {**common, "runs": reports}


def _one_lookup_gold_shown(
    runtime: Runtime, question_id: str, query: str, gold: list[str]
) -> float:
    """Whether one unscoped governed lookup of ``query`` shows a gold document."""
    session = f"eval-agent:one-lookup:{question_id}"
    runtime.tracker.clear_session(session)
    try:
        outcome = runtime.lookup.lookup(session, query)
    finally:
        runtime.tracker.clear_session(session)
    return float(any(path in gold for path in outcome.details.shown))


def _report(variant: _Variant) -> dict[str, Any]:
    rows = variant.rows

    def column(key: str) -> list[float]:
        return [row[key] for row in rows]

    report: dict[str, Any] = {"governance": variant.label}
    for key in ("executed_lookups", "blocked", "redundant_executed", "steps"):
        values = column("executed" if key == "executed_lookups" else key)
        report[f"{key}_mean"] = round(mean(values), 3)
        report[f"{key}_p95"] = percentile(values, 95)
    report.update(
        {
            "evidence_recall": round(mean(column("evidence_recall")), 4),
            "grounded_rate": round(mean(column("grounded")), 4),
            # model answers that were no answer: a copy of an earlier answer of the session
            # (or the extractive label worn), the documents pasted wholesale
            "copies": {
                "turn": int(sum(column("copied_turn"))),
                "documents": int(sum(column("copied_documents"))),
            },
            # model answers replaced by the extractive answer, labelled so
            "relabelled": int(sum(column("relabelled"))),
            "answer_sources": {
                key: variant.sources[key]
                for key in ("model", "repaired", "extractive", "no_evidence")
            },
            "invalid_citations_mean": round(mean(column("invalid_citations")), 3),
            "invalid_citations_total": int(sum(column("invalid_citations"))),
            "model_calls_mean": round(mean(column("model_calls")), 3),
            "prompt_tokens_mean": round(mean(column("prompt_tokens")), 1),
            "completion_tokens_mean": round(mean(column("completion_tokens")), 1),
            "ms_per_step_p50": round(percentile(variant.step_ms, 50), 2),
            "blocked_call_ms": {
                "p50": round(percentile(variant.blocked_ms, 50), 3) if variant.blocked_ms else None,
                "p95": round(percentile(variant.blocked_ms, 95), 3) if variant.blocked_ms else None,
            },
            "governance_ms_per_step": {
                "p50": round(percentile(variant.governance_ms, 50), 4),
                "p95": round(percentile(variant.governance_ms, 95), 4),
            },
            "seconds": round(variant.seconds, 2),
            "per_question": variant.traces,
        }
    )
    return report


#: the rows of the agent table: (label, report key of the mean, report key of the p95)
_ROWS: tuple[tuple[str, str, str | None], ...] = (
    ("executed_lookups", "executed_lookups_mean", "executed_lookups_p95"),
    ("blocked", "blocked_mean", "blocked_p95"),
    ("redundant_executed", "redundant_executed_mean", "redundant_executed_p95"),
    ("steps (model, executor)", "steps_mean", "steps_p95"),
    ("evidence_recall", "evidence_recall", None),
    ("grounded_rate", "grounded_rate", None),
    ("copies: earlier turn/documents", "copies", None),
    ("relabelled extractive", "relabelled", None),
    ("answers: model/repaired/extractive/no evidence", "answer_sources", None),
    ("invalid_citations", "invalid_citations_mean", None),
    ("model_calls (with planner)", "model_calls_mean", None),
    ("prompt_tokens", "prompt_tokens_mean", None),
    ("completion_tokens", "completion_tokens_mean", None),
)


def _cell(report: dict[str, Any], mean_key: str, p95_key: str | None) -> str:
    value = report[mean_key]
    if isinstance(value, dict):
        return "/".join(str(v) for v in value.values())
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    if p95_key is not None and report[p95_key] != value:
        text += f" ({report[p95_key]})"
    return text


def render_agent_report(report: dict[str, Any], console: Console) -> None:
    runs = report.get("runs", [report])
    table = Table(
        title=f"{report['profile']} ({report['model']}) · {report['questions']} questions · "
        "means (p95)"
    )
    table.add_column("metric")
    for run in runs:
        table.add_column(f"governance {run['governance']}", justify="right")
    for label, mean_key, p95_key in _ROWS:
        table.add_row(label, *(_cell(run, mean_key, p95_key) for run in runs))
        if mean_key == "evidence_recall":
            one = f"{report['one_lookup_gold_shown']:.3f}"
            table.add_row("  one unscoped lookup: gold_shown", *(one for _ in runs))
    console.print(table)
    scoped = report["scoped_plans"]
    scoped_recall = report["scoped_plan_domain_recall"]
    console.print(
        f"plan_domain_recall {report['plan_domain_recall']:.3f} "
        f"({report['planned_domains_mean']:.2f} domains/plan); scoped plans "
        + (f"{scoped:.3f}" if scoped is not None else "-")
        + ", their domain recall "
        + (f"{scoped_recall:.3f}" if scoped_recall is not None else "-")
    )
    for run in runs:
        blocked, governance = run["blocked_call_ms"], run["governance_ms_per_step"]
        blocked_text = (
            f"blocked call p50 {blocked['p50']} ms, p95 {blocked['p95']} ms"
            if blocked["p50"] is not None
            else "no call blocked"
        )
        console.print(
            f"governance {run['governance']}: {run['ms_per_step_p50']} ms per step (p50); "
            f"{blocked_text}; governance {governance['p50']} ms per step (p50, p95 "
            f"{governance['p95']}); {run['seconds']} s in all"
        )
