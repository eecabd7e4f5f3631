"""``superbiz eval retrieval``: ranking quality, level precision, supplements and latency."""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz._text import detect_language
from superbiz.agents.runtime import open_lookup
from superbiz.config import Settings
from superbiz.evaluation.access_latency import access_line, measure_access
from superbiz.evaluation.metrics import (
    gold_rank,
    mean,
    percentile,
    recall_at,
    reciprocal_rank,
    wilson_interval,
)
from superbiz.exceptions import ConfigError, SuperbizError
from superbiz.knowledge.ingest.discovery import gone
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

#: digits kept for a ratio in the JSON: the report prints three (or a percentage with one),
#: and printing three from four would round twice (392/462 = 0.848485 → 0.8485 → 0.849)
_DIGITS = 6


@dataclass(frozen=True, slots=True)
class EvalQuery:
    id: str
    query: str
    lang: str
    gold: list[str]
    kind: str | None = None
    category: str | None = None
    #: questions with the same ``session`` are turns of one conversation (``eval answers``)
    session: str | None = None


#: the shuffle of ``running_sessions``: the same sessions on every run
RUNNING_SEED = 7


def running_sessions(queries: Sequence[EvalQuery], size: int) -> list[list[EvalQuery]]:
    """``queries`` asked ``size`` to a session, in a seeded shuffle: unrelated questions
    one after the other, as one person asks them through a day.

    >>> asked = [EvalQuery(str(i), f"q{i}", "en", ["a.md"]) for i in range(5)]
    >>> [len(s) for s in running_sessions(asked, 2)]
    [2, 2, 1]
    """
    if size < 1:
        raise ConfigError(f"running sessions hold at least one question, not {size}")
    shuffled = list(queries)
    random.Random(RUNNING_SEED).shuffle(shuffled)
    return [shuffled[i : i + size] for i in range(0, len(shuffled), size)]


def load_queries(dataset_dir: Path, limit: int | None = None) -> list[EvalQuery]:
    path = dataset_dir / "queries.jsonl"
    if not path.is_file():
        raise SuperbizError(f"{path} does not exist: a dataset needs corpus/ and queries.jsonl")
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row["query"], str) or not row["query"].strip():
                raise TypeError(f"its query is {row['query']!r}, not a question")
            queries.append(
                EvalQuery(
                    id=str(row["id"]),
                    query=row["query"],
                    lang=row.get("lang", "en"),
                    gold=list(row["gold"]),
                    kind=row.get("kind"),
                    category=row.get("category"),
                    session=str(row["session"]) if row.get("session") is not None else None,
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SuperbizError(f"{path}:{number}: not a query line ({exc})") from exc
    return queries[:limit] if limit else queries


def is_answer_only(dataset_dir: Path) -> bool:
    """Whether the dataset's README marks it answer-only in its title (its questions do
    not appear in their gold documents), so that its numbers are read apart from dev's."""
    readme = dataset_dir / "README.md"
    if not readme.is_file():
        return False
    for line in readme.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return "answer-only" in line.lower()
    return False


def prepare_dataset(dataset_dir: Path, settings: Settings) -> KnowledgeBase:
    """Open the evaluation KB and ingest ``corpus/`` (a no-op when nothing changed). A
    data directory that holds another dataset's KB is refused before anything is
    ingested: dev2 pointed at dev2-answer-only's had added the five files the two do not
    share to it, then stopped on the others, and its later figures were another KB's."""
    corpus = dataset_dir / "corpus"
    if not corpus.is_dir():
        raise SuperbizError(f"{corpus} does not exist: a dataset needs corpus/ and queries.jsonl")
    kb = KnowledgeBase(settings)
    other = _another_corpus(kb, corpus)
    if other is not None:
        kb.close()
        raise SuperbizError(
            f"{settings.data_dir} holds another knowledge base ({other} is in it, not in "
            f"{corpus}): give each dataset a data directory of its own"
        )
    report = Ingestor(kb).ingest([corpus], prune=True)
    parts = set(report.parts)  # skipped as part of another page: no fault
    failed = [(path, reason) for path, reason in report.skipped if path not in parts]
    if failed:
        first = "; ".join(f"{p}: {r}" for p, r in failed[:3])
        raise SuperbizError(f"{len(failed)} corpus files could not be ingested ({first})")
    return kb


def _another_corpus(kb: KnowledgeBase, corpus: Path) -> str | None:
    """A file outside ``corpus`` that ``kb`` holds a document of and that is still there
    (a moved dataset's old files are gone, and its ingest replaces them), if any."""
    outside = kb.documents.files_outside(str(corpus.resolve()))
    return next((file for file in outside if not gone(file)), None)


def _ranking_scores(ranked: list[str], gold: list[str], k: int) -> dict[str, float]:
    return {
        "recall@1": recall_at(ranked, gold, 1),
        "recall@5": recall_at(ranked, gold, 5),
        "recall@10": recall_at(ranked, gold, min(10, k)),
        "mrr@10": reciprocal_rank(ranked, gold, min(10, k)),
    }


def _summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = ("recall@1", "recall@5", "recall@10", "mrr@10")
    summary = {key: round(mean([row[key] for row in rows]), _DIGITS) for key in keys}
    return {**summary, "queries": len(rows)}


def evaluate_retrieval(
    dataset_dir: Path,
    settings: Settings,
    *,
    k: int = 10,
    limit: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
    access_probe: bool = False,
) -> dict[str, Any]:
    """``access_probe``: also time the lookups through a permission filter
    (``superbiz.evaluation.access_latency``)."""
    queries = load_queries(dataset_dir, limit)
    started = time.perf_counter()
    kb = prepare_dataset(dataset_dir, settings)
    ingest_s = time.perf_counter() - started
    with open_lookup(settings, kb=kb) as runtime:
        tracker, governed = runtime.tracker, runtime.lookup
        runtime.warm_up()
        if on_total:
            on_total(len(queries))

        per_query: list[dict[str, float]] = []
        outcomes: list[dict[str, Any]] = []
        by_group: dict[str, dict[str, list[dict[str, float]]]] = {
            "lang": defaultdict(list),
            "kind": defaultdict(list),
        }
        level_counts: Counter[str] = Counter()
        level_hits: Counter[str] = Counter()
        level_supplements: Counter[str] = Counter()
        level_foreign: Counter[str] = Counter()
        gold_shown = 0
        latencies: list[float] = []
        for item in queries:
            session = f"eval:{item.id}"
            tracker.clear_session(session)
            t0 = time.perf_counter()
            outcome = governed.lookup(session, item.query)
            latencies.append((time.perf_counter() - t0) * 1000)
            tracker.clear_session(session)

            ranked = [doc.doc_path for doc in outcome.ranked][:k]
            scores = _ranking_scores(ranked, item.gold, k)
            per_query.append(scores)
            by_group["lang"][item.lang].append(scores)
            if item.kind:
                by_group["kind"][item.kind].append(scores)
            level = outcome.result.relevance_level
            name = level.value if level else "NONE"
            level_counts[name] += 1
            primary = outcome.result.primary
            if primary and primary.path in item.gold:
                level_hits[name] += 1
            shown = [primary.path, *(d.path for d in outcome.result.supplement)] if primary else []
            gold_shown += any(path in item.gold for path in shown)
            for supplement in outcome.result.supplement:
                level_supplements[name] += 1
                text = f"{supplement.title}\n{supplement.excerpt}"
                level_foreign[name] += detect_language(text) != item.lang
            outcomes.append(
                {
                    "id": item.id,
                    "lang": item.lang,
                    "kind": item.kind,
                    "gold_rank": gold_rank(ranked, item.gold),
                    "level": name,
                    "shown": shown,
                    "gold_shown": any(path in item.gold for path in shown),
                }
            )
            if on_progress:
                on_progress(item.id)

    return {
        "dataset": str(dataset_dir),
        "queries": len(queries),
        "k": k,
        "embedder": settings.embedding.model
        if settings.embedding.provider != "use"
        else "use-multilingual-v3",
        "fusion": settings.advanced.retrieval.fusion,
        "answers": settings.retrieval.answers.model,
        "level_rule": settings.advanced.retrieval.levels,
        "overall": _summarise(per_query),
        "by_lang": {lang: _summarise(rows) for lang, rows in sorted(by_group["lang"].items())},
        "by_kind": {kind: _summarise(rows) for kind, rows in sorted(by_group["kind"].items())},
        "answer_only": is_answer_only(dataset_dir),
        "levels": {
            name: {
                "count": count,
                "precision": round(level_hits[name] / count, _DIGITS) if count else None,
                # 95 % Wilson interval: a precision over a few dozen lookups is a range
                "precision_95": list(wilson_interval(level_hits[name], count) or ())
                if name != "NONE"
                else None,
                **_supplement_stats(count, level_supplements[name], level_foreign[name]),
            }
            for name, count in sorted(level_counts.items())
        },
        "supplements": _supplement_stats(
            sum(n for name, n in level_counts.items() if name != "NONE"),
            sum(level_supplements.values()),
            sum(level_foreign.values()),
        ),
        # a gold document among the primary and its supplements: what fewer supplements risk
        "gold_shown": round(gold_shown / len(queries), _DIGITS) if queries else None,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
            "mean": round(mean(latencies), 2),
        },
        "ingest_s": round(ingest_s, 2),
        **(
            {"access_probe": measure_access([q.query for q in queries], settings)}
            if access_probe
            else {}
        ),
        # each query's outcome, to see which questions two settings rank differently
        "per_query": outcomes,
    }


def _supplement_stats(lookups: int, supplements: int, foreign: int) -> dict[str, float | None]:
    """Supplements shown per lookup, and the share in another language than the query's
    (noise: a Chinese FAQ beside an English alert costs tokens and invites a wrong cite)."""
    return {
        "supplements_per_lookup": round(supplements / lookups, _DIGITS) if lookups else None,
        "cross_language_share": round(foreign / supplements, _DIGITS) if supplements else None,
    }


def render_report(report: dict[str, Any], console: Console) -> None:
    answers = report.get("answers", "none")
    model = "" if answers == "none" else f", answer model {answers}"
    if report.get("level_rule", "cosine") != "cosine":
        model += f", levels {report['level_rule']}"
    table = Table(title=f"retrieval on {report['dataset']} ({report['queries']} queries{model})")
    for column in ("slice", "n", "R@1", "R@5", "R@10", "MRR@10"):
        table.add_column(column, justify="right" if column != "slice" else "left")
    slices = [("overall", report["overall"])]
    slices += [(f"lang={k}", v) for k, v in report["by_lang"].items()]
    slices += [(f"kind={k}", v) for k, v in report["by_kind"].items()]
    for name, row in slices:
        table.add_row(
            name,
            str(row["queries"]),
            *(f"{row[key]:.3f}" for key in ("recall@1", "recall@5", "recall@10", "mrr@10")),
        )
    console.print(table)
    levels = Table(
        title="relevance levels (precision = primary document is gold, with its 95 % interval)"
    )
    for column in ("level", "count", "precision [95 %]", "supplements/lookup", "other language"):
        levels.add_column(column, justify="right" if column != "level" else "left")
    rows = [*report["levels"].items(), ("all found", report["supplements"])]
    for name, row in rows:
        levels.add_row(
            name,
            str(row.get("count", "")),
            _precision(row),
            _fixed(row["supplements_per_lookup"], 2),
            _fixed(row["cross_language_share"]),
        )
    console.print(levels)
    console.print(f"gold document shown (primary or supplement): {_fixed(report['gold_shown'])}")
    if report.get("answer_only"):
        console.print(_answer_only_line(report))
    latency = report["latency_ms"]
    console.print(
        f"lookup latency: p50 {latency['p50']} ms, p95 {latency['p95']} ms "
        f"(mean {latency['mean']} ms); ingest/check {report['ingest_s']} s"
    )
    if "access_probe" in report:
        console.print(access_line(report["access_probe"]))


def render_reports(report: dict[str, Any], console: Console) -> None:
    """One dataset's report, or several (``{"datasets": [...]}``) each in full and then
    side by side: dev and its answer-only variant are read together."""
    if "datasets" not in report:
        render_report(report, console)
        return
    for each in report["datasets"]:
        render_report(each, console)
    console.print(_comparison(report["datasets"]))


def _comparison(reports: list[dict[str, Any]]) -> Table:
    """Each report's summary in a column (answer-only sets marked ``*``)."""
    table = Table(title="side by side (* answer-only)")
    table.add_column("")
    for report in reports:
        mark = " *" if report.get("answer_only") else ""
        table.add_column(Path(report["dataset"]).name + mark, justify="right")
    rows: dict[str, Callable[[dict[str, Any]], str]] = {
        "R@1": lambda r: f"{r['overall']['recall@1']:.3f}",
        "R@5": lambda r: f"{r['overall']['recall@5']:.3f}",
        "MRR@10": lambda r: f"{r['overall']['mrr@10']:.3f}",
        "PRECISE precision [95 %]": lambda r: _precision(r["levels"].get("PRECISE", {})),
        "HIGHLY_RELEVANT precision [95 %]": lambda r: _precision(
            r["levels"].get("HIGHLY_RELEVANT", {})
        ),
        "PRECISE / HIGHLY_RELEVANT lookups": lambda r: " / ".join(
            str(r["levels"].get(name, {}).get("count", 0))
            for name in ("PRECISE", "HIGHLY_RELEVANT")
        ),
        "supplements/lookup": lambda r: _fixed(r["supplements"]["supplements_per_lookup"], 2),
        "gold shown": lambda r: _fixed(r["gold_shown"]),
        "lookup p50 ms": lambda r: str(r["latency_ms"]["p50"]),
    }
    for name, cell in rows.items():
        table.add_row(name, *(cell(report) for report in reports))
    return table


def _precision(row: dict[str, Any]) -> str:
    """A level's precision and its 95 % interval: ``0.977 [0.882–0.996]``."""
    interval = row.get("precision_95")
    if row.get("precision") is None or not interval:
        return _fixed(row.get("precision"))
    return f"{row['precision']:.3f} [{interval[0]:.3f}–{interval[1]:.3f}]"


def _fixed(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _answer_only_line(report: dict[str, Any]) -> str:
    """One line with what an answer-only dataset is for: how well questions find answers
    that do not repeat them, per language, and how far a HIGHLY_RELEVANT level holds."""
    parts = [
        f"{lang} R@1 {row['recall@1']:.3f} R@5 {row['recall@5']:.3f} MRR@10 {row['mrr@10']:.3f}"
        for lang, row in report["by_lang"].items()
    ]
    high = report["levels"].get("HIGHLY_RELEVANT", {}).get("precision")
    return (
        f"answer-only: {'; '.join(parts)}; HIGHLY_RELEVANT precision {_fixed(high)}; "
        f"supplements/lookup {_fixed(report['supplements']['supplements_per_lookup'], 2)}; "
        f"gold shown {_fixed(report['gold_shown'])}"
    )
