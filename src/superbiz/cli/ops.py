"""Running and operating a deployment: ``serve``, ``mcp``, ``gaps``, ``feedback export``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from superbiz.cli._common import (
    AsGroup,
    DataDir,
    JsonFlag,
    _errors,
    _knowledge_base,
    _print_json,
    _reader,
    _settings,
    _table,
    console,
    err,
)
from superbiz.config import Settings

if TYPE_CHECKING:
    from superbiz.knowledge.coverage.gaps import GapReport


def gaps(
    data_dir: DataDir = None,
    since: Annotated[
        str, typer.Option("--since", help="A duration back from now (30m, 24h, 7d, 2w) or a date.")
    ] = "30d",
    domain: Annotated[str | None, typer.Option("--domain", help="Only this domain.")] = None,
    as_json: JsonFlag = False,
    as_group: AsGroup = None,
) -> None:
    """What the knowledge base lacks: questions that found no good evidence, clustered by
    meaning, the runbook most worth writing first."""
    from datetime import UTC, datetime

    from superbiz.knowledge.coverage.gaps import parse_since, reader_gap_report

    try:
        start = parse_since(since, datetime.now(UTC))
    except ValueError as exc:
        err.print(f"[bold red]error:[/] --since: {escape(str(exc))}")
        raise typer.Exit(2) from None
    settings = _settings(data_dir)
    reader = _reader(as_group)
    with _knowledge_base(settings) as kb, _errors():
        report = reader_gap_report(kb, settings.gap_config, reader, since=start, domain=domain)
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    _render_gaps(report)


def _render_gaps(report: GapReport) -> None:
    if not report.clusters:
        console.print(f"no knowledge gaps among {report.questions} questions since {report.since}")
        return
    table = _table(
        f"knowledge gaps since {report.since}",
        ["#", "domain", "questions", "sessions", "👎", "why", "examples", "last asked", "closest"],
        [
            [
                rank,
                c.domain or "-",
                c.count,
                c.sessions,
                c.thumbs_down,
                ", ".join(f"{k} {v}" for k, v in c.reasons.items()),
                " | ".join(c.examples),
                c.last_asked[:16].replace("T", " "),
                ", ".join(d.path for d in c.closest_documents) or "-",
            ]
            for rank, c in enumerate(report.clusters, start=1)
        ],
    )
    console.print(table)
    left = f"; {report.unclustered} rarer wordings not clustered" if report.unclustered else ""
    console.print(
        f"{report.gaps} gaps in {len(report.clusters)} clusters{left} "
        f"({report.timing_ms['total']:.0f} ms)"
    )


def feedback_export(
    out: Annotated[Path, typer.Option("--out", help="An empty or new folder for the dataset.")],
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
    as_group: AsGroup = None,
) -> None:
    """Write the rated questions as a dataset eval retrieval and eval agent read:
    corpus/, queries.jsonl (gold: what a thumbs-up answer cited), rated-down.jsonl; with
    --as-group, only what that group may read."""
    from superbiz.evaluation.feedback_export import export_feedback

    reader = _reader(as_group)
    with _knowledge_base(_settings(data_dir)) as kb, _errors():
        view = kb.view(reader)
        summary = export_feedback(
            kb.engine, out, may_read=view.may_read if view.restricted else None
        )
    if as_json:
        _print_json(summary)
        return
    console.print(
        f"{summary['queries']} rated-up questions, {summary['rated_down']} rated down, "
        f"{summary['documents']} documents → {escape(str(out))}"
    )
    if summary["skipped"]:
        console.print(f"{summary['skipped']} ratings without a chat answer left out")
    if summary["documents_missing"]:
        err.print(
            f"[yellow]note:[/] {len(summary['documents_missing'])} documents' files are gone "
            "and were not exported"
        )


def mcp(
    transport: Annotated[
        str,
        typer.Option("--transport", "-t", help="stdio (a desktop client starts it) or http."),
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port to listen on.")] = 8765,
    data_dir: DataDir = None,
    as_group: AsGroup = None,
) -> None:
    """Serve the governed lookup_knowledge, list_domains and knowledge://map over MCP
    (with --as-group, of what that group may read)."""
    from superbiz.mcp_server import HTTP_PATH, serve

    if transport not in ("stdio", "http"):
        err.print("[bold red]error:[/] --transport must be 'stdio' or 'http'")
        raise typer.Exit(2)

    def ready() -> None:
        where = "stdio" if transport == "stdio" else f"http://{host}:{port}{HTTP_PATH}"
        err.print(f"[dim]superbiz MCP server on {where}[/]")

    with _errors():
        settings = _settings(data_dir)
    if transport == "http":
        _warn_if_open(
            settings, host, port, "call lookup_knowledge and write its sessions", _anyone(settings)
        )
    with _errors():
        serve(
            settings,
            reader=_reader(as_group),
            transport="stdio" if transport == "stdio" else "http",
            host=host,
            port=port,
            on_ready=ready,
        )


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    data_dir: DataDir = None,
) -> None:
    """Serve the HTTP API (JSON and SSE chat, documents, map, health, metrics) and the web
    page; OpenAPI docs at /docs. Sign-in: auth.oidc, users (superbiz users add), or the
    single admin key service.api-key."""
    import uvicorn

    from superbiz.api.app import create_app

    with _errors():
        settings = _settings(data_dir)
        application = create_app(settings)
        signs_in = application.state.auth.required()
    _warn_if_open(settings, host, port, "ask questions and change documents", signs_in)
    err.print(f"[dim]superbiz on http://{host}:{port} · API docs at /docs[/]")
    uvicorn.run(application, host=host, port=port, log_level="info")


def _anyone(settings: Settings) -> bool:
    """Whether the service asks who is calling: a key, a provider, or anyone added."""
    if settings.service.api_key or settings.auth.oidc.enabled:
        return True
    from superbiz.storage.db import open_database
    from superbiz.storage.users import UserRepository

    with _errors():
        engine = open_database(settings.resolved_database_url)
    try:
        return UserRepository(engine).any_active()
    finally:
        engine.dispose()


def _warn_if_open(
    settings: Settings, host: str, port: int, what: str, signs_in: bool | None = None
) -> None:
    """A server listening beyond loopback that asks nobody who they are (no
    ``service.api-key``, no ``auth.oidc``, no user) is open to anyone who can reach it:
    say so before it starts."""
    if signs_in is None:
        signs_in = bool(settings.service.api_key or settings.auth.oidc.enabled)
    if not signs_in and host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            "[yellow]warning:[/] nobody is asked to sign in (no service.api-key, auth.oidc or "
            f"`superbiz users add`): anyone who can reach {escape(host)}:{port} may {what}"
        )
