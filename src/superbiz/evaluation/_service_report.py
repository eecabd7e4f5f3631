"""The table ``superbiz eval service`` prints from its report."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def render_service_report(report: dict[str, Any], console: Console) -> None:
    where = ", ".join(report["urls"]) if len(report["urls"]) > 1 else "loopback"
    table = Table(
        title=f"superbiz service on {where} · {report['model']} · {report['documents']} documents"
    )
    for column in ("measure", "clients", "n", "p50 ms", "p95 ms", "max ms", "turns/s", "errors"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    clients = str(report["clients"])
    chat_one, chat_many = report["chat_one_client"], report["chat_concurrent"]
    stream_one, stream_many = report["stream_one_client"], report["stream_concurrent"]
    rows = [
        ("/api/chat turn", "1", chat_one, True),
        ("/api/chat turn", clients, chat_many, True),
        ("first SSE event", "1", stream_one["first_event"], False),
        ("first SSE event", clients, stream_many["first_event"], False),
        ("first token", "1", stream_one["first_token"], False),
        ("whole stream", "1", stream_one, True),
        ("whole stream", clients, stream_many, True),
    ]
    for name, n_clients, stats, whole in rows:
        table.add_row(
            name,
            n_clients,
            str(stats["n"]),
            f"{stats['p50_ms']:.1f}",
            f"{stats['p95_ms']:.1f}",
            f"{stats['max_ms']:.1f}",
            f"{stats['turns_per_s']:.2f}" if whole else "",
            str(stats["errors"]) if whole else "",
        )
    console.print(table)
    checked = report["audit"]
    verdict = "[green]ok[/]" if checked["ok"] else "[red]FAILED[/]"
    console.print(
        f"audit {verdict}: {checked['sessions']} sessions, {checked['lookups']} lookups; "
        f"invocation mismatches {checked['invocation_mismatches']}, cap overruns "
        f"{checked['cap_overruns']}, cross-session leaks {checked['leaks']}, second turns "
        f"that forgot the first {checked['first_turn_forgotten']} of {checked['second_turns']}"
    )
    postgres = report.get("postgres")
    if postgres:
        console.print(
            f"PostgreSQL connections: peak {postgres['peak_connections']} of "
            f"max_connections {postgres['max_connections']} "
            f"({postgres['samples']} samples of pg_stat_activity)"
        )
    for line in [*report["error_samples"], *checked["problems"]]:
        console.print(f"  {line}", markup=False)
