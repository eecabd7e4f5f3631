"""``superbiz eval answers``: what the user reads, scored against the gold documents.

Everything else measured stops at the documents put in front of the model (recall,
levels, evidence recall). This scores the answer: per question one turn through the
whole assistant (planner, governed executor, grounding), in a fresh session, or in the
session the dataset groups it into (a ``session`` key in ``queries.jsonl``: its questions
run in file order, each a turn of that session). Per answer: whether a gold document is
in it at all (quoted, or listed as related), whether the first document it quotes is
gold, the share of the documents it quotes that are gold, and how many it quotes. By
language, and per turn of a session (the first question, the first follow-up, …).

``running``: the questions asked ``running`` to a session instead, in a seeded shuffle
(unrelated questions, as one person asks them through a day). A question must be
answered as well in a running session as in a fresh one: what the session already
holds is evidence, never a reason to find less (the per-turn figures show it).

The player is the configured assistant: the extractive answer without an LLM (the
default), a behaviour profile of ``eval agent`` (``--profile``: it quotes like the
extractive policy and looks up as the profile does), or ``--model llm``.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.agents.runtime import open_runtime
from superbiz.agents.turn_result import TurnResult
from superbiz.config import Settings
from superbiz.evaluation.metrics import mean
from superbiz.evaluation.profiles import make_profile
from superbiz.evaluation.retrieval import (
    EvalQuery,
    is_answer_only,
    load_queries,
    prepare_dataset,
    running_sessions,
)
from superbiz.exceptions import ConfigError
from superbiz.llm import ChatModel, make_chat_model

_DIGITS = 4
#: the figures one answer is scored on, in the order the tables show them
FIGURES = (
    "gold_in_answer",
    "gold_quoted",
    "first_quoted_gold",
    "first_gold_when_held",
    "quoted_gold_share",
    "quoted_per_answer",
    "related_per_answer",
    "only_earlier_quoted",
)


def score_answer(turn: TurnResult, gold: Sequence[str]) -> dict[str, Any]:
    """One answer's figures: ``citations`` are what it quotes (in quote order),
    ``related`` what it only lists.

    >>> from superbiz.agents.context import Citation
    >>> quoted = [Citation(1, "A", "a"), Citation(2, "B", "b")]
    >>> turn = TurnResult("s", 1, "q", "en", citations=quoted)
    >>> row = score_answer(turn, ["b"])
    >>> row["gold_in_answer"], row["first_quoted_gold"], row["quoted_gold_share"], row["quoted"]
    (True, False, 0.5, 2)
    """
    quoted = [c.path for c in turn.citations]
    related = [c.path for c in turn.related]
    golden = set(gold)
    earlier = set(turn.reused)
    gold_quoted = [p for p in quoted if p in golden]
    return {
        "gold_in_answer": bool(golden & {*quoted, *related}),
        "gold_quoted": bool(gold_quoted),
        "first_quoted_gold": bool(quoted) and quoted[0] in golden,
        "quoted_gold_share": len(gold_quoted) / len(quoted) if quoted else 0.0,
        "quoted": len(quoted),
        "related": len(related),
        # every quote is a document an earlier turn of the session was shown: in a running
        # session of unrelated questions, an answer from another question's documents
        "only_earlier_quoted": bool(quoted) and earlier.issuperset(quoted),
        "quoted_paths": quoted,
        "related_paths": related,
        # what the user reads: which passage of a document is quoted shows only here
        "answer": turn.answer,
        "answer_source": turn.answer_source,
        "grounded": turn.grounded,
    }


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures over ``rows``. ``first_gold_when_held``: of the answers holding a gold
    document at all, the share that quote one first (the target is 0.9);
    ``quoted_gold_share``: the mean share over all answers (0 for one quoting nothing)."""
    if not rows:
        return {"answers": 0}
    held = [r for r in rows if r["gold_in_answer"]]
    return {
        "answers": len(rows),
        "gold_in_answer": round(mean([float(r["gold_in_answer"]) for r in rows]), _DIGITS),
        "gold_quoted": round(mean([float(r["gold_quoted"]) for r in rows]), _DIGITS),
        "first_quoted_gold": round(mean([float(r["first_quoted_gold"]) for r in rows]), _DIGITS),
        "first_gold_when_held": round(mean([float(r["first_quoted_gold"]) for r in held]), _DIGITS)
        if held
        else None,
        "quoted_gold_share": round(mean([r["quoted_gold_share"] for r in rows]), _DIGITS),
        "quoted_per_answer": round(mean([float(r["quoted"]) for r in rows]), 3),
        "related_per_answer": round(mean([float(r["related"]) for r in rows]), 3),
        "only_earlier_quoted": round(
            mean([float(r["only_earlier_quoted"]) for r in rows]), _DIGITS
        ),
        "nothing_quoted": sum(1 for r in rows if not r["quoted"]),
        "answer_sources": dict(Counter(r["answer_source"] for r in rows)),
    }


def _sessions(queries: Sequence[EvalQuery], running: int | None = None) -> list[list[EvalQuery]]:
    """The questions grouped into sessions, in file order (one each without ``session``);
    with ``running``, ``running`` to a session (``running_sessions``)."""
    if running is not None:
        return running_sessions(queries, running)
    grouped: dict[str, list[EvalQuery]] = {}
    for item in queries:
        grouped.setdefault(item.session or f"\x00{item.id}", []).append(item)
    return list(grouped.values())


def evaluate_answers(
    dataset_dir: Path,
    settings: Settings,
    *,
    profile: str | None = None,
    use_llm: bool = False,
    limit: int | None = None,
    running: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every question of ``dataset_dir`` asked of the assistant, its answer scored
    (``running``: that many questions to a session, see the module docstring)."""
    queries = load_queries(dataset_dir, limit)
    sessions = _sessions(queries, running)
    kb = prepare_dataset(dataset_dir, settings)
    model: ChatModel | None = None
    try:
        if use_llm:
            model = make_chat_model(settings.llm)
            if model is None:
                raise ConfigError("--model llm needs llm.model (and llm.base-url) configured")
        elif profile is not None:
            model = make_profile(profile, list(kb.domains()))
    except (ValueError, ConfigError):
        kb.close()
        raise
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with open_runtime(settings, model=model, kb=kb) as runtime:
        runtime.warm_up()
        if on_total:
            on_total(len(queries))
        for number, session in enumerate(sessions):
            session_id = f"eval-answers:{number}:{session[0].id}"
            runtime.clear_session(session_id)
            for turn_number, item in enumerate(session, start=1):
                turn = runtime.ask(session_id, item.query).result
                row = score_answer(turn, item.gold)
                rows.append({"id": item.id, "lang": item.lang, "turn": turn_number, **row})
                if on_progress:
                    on_progress(item.id)
            runtime.clear_session(session_id)
    seconds = time.perf_counter() - started
    by_lang: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_turn: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_lang[row["lang"]].append(row)
        by_turn[row["turn"]].append(row)
    return {
        "dataset": str(dataset_dir),
        "answer_only": is_answer_only(dataset_dir),
        "player": "llm" if use_llm else (profile or "extractive"),
        "questions": len(rows),
        "sessions": len(sessions),
        "running": running,
        "overall": summarise(rows),
        "by_lang": {lang: summarise(items) for lang, items in sorted(by_lang.items())},
        # only when questions share sessions: turn 2 is the first follow-up (or, running,
        # the second question of the session)
        "by_turn": {str(t): summarise(items) for t, items in sorted(by_turn.items())}
        if len(by_turn) > 1
        else {},
        "seconds": round(seconds, 2),
        "load_average": round(os.getloadavg()[0], 2),
        "per_question": rows,
    }


_LABELS = {
    "gold_in_answer": "gold in the answer (quoted or related)",
    "gold_quoted": "gold quoted",
    "first_quoted_gold": "first quoted document is gold",
    "first_gold_when_held": "  … of the answers holding gold",
    "quoted_gold_share": "share of quoted documents that are gold",
    "quoted_per_answer": "documents quoted per answer",
    "related_per_answer": "documents listed as related per answer",
    "only_earlier_quoted": "answers quoting only earlier turns' documents",
}


def _fixed(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _slices(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    slices = [("overall", report["overall"])]
    slices += [(f"lang={k}", v) for k, v in report["by_lang"].items()]
    slices += [(f"turn {k}", v) for k, v in report["by_turn"].items()]
    return slices


def render_report(report: dict[str, Any], console: Console) -> None:
    slices = _slices(report)
    table = Table(
        title=f"answers on {report['dataset']} ({report['questions']} questions, "
        f"{report['player']})"
    )
    table.add_column("figure")
    for name, part in slices:
        table.add_column(f"{name} ({part['answers']})", justify="right")
    for key in FIGURES:
        table.add_row(_LABELS[key], *(_fixed(part.get(key)) for _, part in slices))
    console.print(table)
    overall = report["overall"]
    sources = ", ".join(f"{k} {v}" for k, v in sorted(overall["answer_sources"].items()))
    console.print(
        f"answers quoting nothing: {overall['nothing_quoted']}; sources: {sources}; "
        f"{report['seconds']} s (load average {report['load_average']})"
    )


def render_reports(report: dict[str, Any], console: Console) -> None:
    """One dataset's report, or several (``{"datasets": [...]}``) each in full, then
    their overall figures side by side."""
    if "datasets" not in report:
        render_report(report, console)
        return
    for each in report["datasets"]:
        render_report(each, console)
    table = Table(title="side by side (* answer-only)")
    table.add_column("")
    for each in report["datasets"]:
        mark = " *" if each.get("answer_only") else ""
        table.add_column(Path(each["dataset"]).name + mark, justify="right")
    for key in FIGURES:
        table.add_row(_LABELS[key], *(_fixed(r["overall"].get(key)) for r in report["datasets"]))
    console.print(table)
