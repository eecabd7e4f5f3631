"""The scale benchmark's report on a terminal: one row a size (ingest rates, peak memory,
disk, lookup times, recall, the planner's map and time, the gaps report's time), then a
line a size of what the row's figures were measured against (``scale.benchmark_scale``
writes the report).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from superbiz.evaluation._scale_searches import described


def render_scale_report(report: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"scale ({report['profile']} profile, seed {', '.join(report['seed'])}, "
        f"{report['cpus']} CPUs; lookups: the median of {report.get('lookup_rounds', 1)} passes)"
    )
    columns = (
        "documents", "chunks", "domains", "docs/s", "chunks/s", "× embedder", "peak RSS MB",
        "disk MB", "p50 ms", "p95 ms", "CPU p50 ms", "R@5 seed", "R@5 copies", "map tokens",
        "plan ms", "domain recall", "gaps s",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right")
    for row in report["sizes"]:
        ingest, lookup, plan = row["ingest"], row["lookup_ms"], row["planner"]
        peak = row["peak_rss_mb"]
        if row.get("server_peak_rss_mb"):
            peak = f"{peak} + {row['server_peak_rss_mb']}"
        table.add_row(
            str(row["documents"]),
            str(row["chunks"]),
            str(row["domains"]),
            _cell(ingest["documents_per_s"]),
            _cell(ingest["chunks_per_s"]),
            _cell(ingest["ratio_to_embedder"]),
            str(peak),
            _cell(row["disk_mb"]),
            _cell(lookup["p50"]),
            _cell(lookup["p95"]),
            _cell(lookup.get("cpu_p50")),
            _cell(row["recall"]["seed"].get("recall@5")),
            _cell(row["recall"]["copies"].get("recall@5")),
            str(plan["map_tokens"]),
            _cell(plan["plan_ms"]["p50"]),
            _cell(plan["domain_recall"]),
            _cell(row["gaps"]["seconds"]),
        )
    console.print(table)
    for row in report["sizes"]:
        ingest = row["ingest"]
        console.print(
            f"[dim]{row['documents']} documents: ingest of {ingest['documents']} new documents "
            f"({ingest['chunks']} chunks) {ingest['seconds']} s, the embedder alone "
            f"{ingest['embedder_seconds']} s ({ingest['embedder_chunks_per_s']} chunks/s); "
            f"map built in {row['planner']['map_build_s']} s, first plan "
            f"{row['planner']['first_plan_ms']} ms (a new process's "
            f"{row['planner'].get('new_process_first_plan_ms')} ms); one file uploaded "
            f"{row.get('upload', {}).get('seconds')} s, deleted "
            f"{row.get('upload', {}).get('delete_seconds')} s; "
            f"{described(row.get('dense_search_ms') or {})}"
            f"load average {row['load_average_1m']}[/]"
        )
    if report.get("stopped"):
        console.print(f"[yellow]stopped: {report['stopped']}[/]")


def _cell(value: object) -> str:
    return "-" if value is None else str(value)
