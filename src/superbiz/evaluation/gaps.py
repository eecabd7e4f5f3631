"""``superbiz eval gaps``: how long the knowledge-gaps report takes on a large record.

It writes ``--lookups`` recorded lookups of generated traffic into a fresh database (a
temporary SQLite file, or the PostgreSQL URL given), then times the report as the
service computes it (embedder loaded) a few times over. The traffic looks like a
team's: chat turns of one to three lookups and MCP lookups, about a third of them
finding nothing or only REFERENCE, questions drawn from a few thousand wordings (people
ask the same things), some answers rated.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from sqlalchemy import insert

from superbiz.config import Settings
from superbiz.knowledge.coverage.gaps import GapReport, gap_report
from superbiz.retrieval.embedders import make_embedder
from superbiz.storage.db import open_database
from superbiz.storage.invocations import TOOL_NAME
from superbiz.storage.models import ChatMessageRow, ToolInvocationRow, TurnFeedbackRow, utcnow
from superbiz.storage.repository import DocumentRepository

RUNS = 5
_TOPICS = (
    "kafka consumer lag",
    "tls certificate rotation",
    "elasticsearch shard allocation",
    "dns resolution failures",
    "cron job not running",
    "payment refund stuck",
    "redis eviction storm",
    "mysql failover",
    "node disk full",
    "api rate limit 429",
    "vault token expiry",
    "s3 bucket permissions",
    "grafana dashboard missing",
    "oauth login loop",
    "terraform state lock",
)
_ASKS = (
    "how do I fix {t}",
    "what to do about {t}",
    "{t} runbook",
    "steps for {t} in {e}",
    "why does {t} happen in {e}",
    "{t} after the {e} deploy",
)
_ENVIRONMENTS = tuple(f"cluster-{n}" for n in range(40))
_LEVELS = ("PRECISE", "HIGHLY_RELEVANT", "REFERENCE", None)


def _wording(rng: random.Random) -> str:
    return rng.choice(_ASKS).format(t=rng.choice(_TOPICS), e=rng.choice(_ENVIRONMENTS))


def generate_traffic(engine: Any, lookups: int, seed: int = 0) -> dict[str, int]:
    """``lookups`` recorded lookups of chat and MCP traffic over the last 30 days."""
    rng = random.Random(seed)
    now = utcnow()
    calls: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    ratings: list[dict[str, Any]] = []
    session = turn = 0
    while len(calls) < lookups:
        session += 1
        mcp = rng.random() < 0.3
        sid = f"{'mcp' if mcp else 'web'}-{session}"
        for turn in range(1, rng.randint(2, 6)):
            question = _wording(rng)
            when = now - timedelta(minutes=rng.randint(0, 30 * 24 * 60))
            level = rng.choices(_LEVELS, weights=(4, 3, 2, 1))[0]
            for step in range(rng.randint(1, 3)):
                shown = [f"ops/doc-{rng.randint(1, 300)}.md"] if level else []
                calls.append(
                    {
                        "session_id": sid,
                        "turn": 1 if mcp else turn,
                        "step": step,
                        "tool_name": TOOL_NAME,
                        "arguments": {"query": question if step == 0 else _wording(rng)},
                        "domain": "ops",
                        "relevance_level": level,
                        "dedup_reason": None,
                        "retrieval_details": {"shown": shown, "l1_scores": [0.4] * 10},
                        "executed": True,
                        "verdict": "continue",
                        "water_level": "low",
                        "latency_ms": 12.0,
                        "error": None,
                        "origin": "model",
                        "created_at": when,
                    }
                )
            if not mcp:
                for role, text in (("user", question), ("assistant", "an answer [1]")):
                    messages.append(
                        {
                            "session_id": sid,
                            "turn": turn,
                            "role": role,
                            "content": text,
                            "answer_source": "model" if role == "assistant" else None,
                            "created_at": when,
                        }
                    )
                if rng.random() < 0.05:
                    rating = "up" if level in ("PRECISE", "HIGHLY_RELEVANT") else "down"
                    ratings.append(
                        {
                            "session_id": sid,
                            "turn": turn,
                            "rating": rating,
                            "comment": None,
                            "created_at": when,
                            "updated_at": when,
                        }
                    )
    calls = calls[:lookups]
    with engine.begin() as connection:
        for table, rows in (
            (ToolInvocationRow, calls),
            (ChatMessageRow, messages),
            (TurnFeedbackRow, ratings),
        ):
            for start in range(0, len(rows), 5000):
                connection.execute(insert(table), rows[start : start + 5000])
        # what autovacuum (PostgreSQL) or a long-lived database has: the planners' statistics
        connection.exec_driver_sql("ANALYZE")
    return {"lookups": len(calls), "chat_messages": len(messages), "ratings": len(ratings)}


def benchmark_gaps(
    settings: Settings, *, lookups: int, database_url: str | None = None, seed: int = 0
) -> dict[str, Any]:
    """Generate the record, then time ``gap_report`` ``RUNS`` times (the first run
    included: the embedder is loaded beforehand, as a running service has it)."""
    with tempfile.TemporaryDirectory(prefix="superbiz-gaps-") as folder:
        url = database_url or f"sqlite:///{Path(folder) / 'gaps.db'}"
        engine = open_database(url)
        try:
            started = time.perf_counter()
            written = generate_traffic(engine, lookups, seed)
            insert_s = time.perf_counter() - started
            started = time.perf_counter()
            embedder = make_embedder(settings.embedding_config)
            embedder.embed(["warm up"])
            load_s = time.perf_counter() - started
            documents = DocumentRepository(engine)
            runs: list[float] = []
            cpu: list[float] = []
            reports: list[GapReport] = []
            for _ in range(RUNS):
                started, used = time.perf_counter(), time.process_time()
                reports.append(gap_report(engine, embedder, documents, settings.gap_config))
                runs.append(time.perf_counter() - started)
                cpu.append(time.process_time() - used)
        finally:
            engine.dispose()
    report = reports[-1]
    return {
        "database": engine.dialect.name,
        **written,
        "questions": report.questions,
        "gaps": report.gaps,
        "clusters": len(report.clusters),
        "unclustered": report.unclustered,
        "max_questions": settings.advanced.gaps.max_questions,
        "insert_s": round(insert_s, 2),
        "embedder_load_s": round(load_s, 2),
        "report_s": {
            "first": round(runs[0], 3),
            "median": round(statistics.median(runs), 3),
            "max": round(max(runs), 3),
        },
        # CPU seconds of this process (SQLite runs in it): what the report costs on an idle
        # machine, where the wall time above is this plus waiting for a core
        "report_cpu_s": {"median": round(statistics.median(cpu), 3), "max": round(max(cpu), 3)},
        "query_ms_last": report.timing_ms["query"],
        # the machine's load while it ran: on a shared machine every time above grows with it
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "top_cluster": report.clusters[0].examples if report.clusters else [],
    }


def render_gaps_benchmark(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"gaps report on {report['lookups']:,} lookups ({report['database']})")
    columns = ("questions", "gaps", "clusters", "unclustered", "first s", "median s", "max s")
    for column in (*columns, "CPU s (median)"):
        table.add_column(column, justify="right")
    times = report["report_s"]
    table.add_row(
        f"{report['questions']:,}",
        f"{report['gaps']:,}",
        str(report["clusters"]),
        f"{report['unclustered']:,}",
        f"{times['first']:.3f}",
        f"{times['median']:.3f}",
        f"{times['max']:.3f}",
        f"{report['report_cpu_s']['median']:.3f}",
    )
    console.print(table)
    console.print(
        f"SQL query {report['query_ms_last']:.0f} ms of the last run; embedder load "
        f"{report['embedder_load_s']:.2f} s (once per process); record written in "
        f"{report['insert_s']:.1f} s; load average {report['load_average'][0]}"
    )
