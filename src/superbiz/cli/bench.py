"""The ``eval`` benchmarks of the system rather than of a dataset's answers: the
service under load, Git sync, ingest speed, hostile files, telemetry and scale."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from superbiz.cli._common import JsonFlag, OutputFile, _errors, _publish, _settings, err


def eval_service(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Knowledge base to serve (the example KB is ingested when it is empty) "
            "\\[default: ./.superbiz/eval/service].",
        ),
    ] = None,
    clients: Annotated[int, typer.Option("--clients", help="Concurrent clients.", min=1)] = 10,
    requests: Annotated[
        int, typer.Option("--requests", help="Turns per concurrent phase.", min=1)
    ] = 100,
    sequential: Annotated[
        int, typer.Option("--sequential", help="Turns of the one-client phases.", min=1)
    ] = 20,
    model_latency_ms: Annotated[
        float,
        typer.Option(
            "--model-latency-ms",
            help="Serve a simulated model: the extractive policy, each call delayed this long.",
            min=0,
        ),
    ] = 0,
    urls: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="A running replica to drive instead of an in-process server (repeat it: "
            "round robin, a session's turns alternating between replicas).",
        ),
    ] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Turn latency (p50/p95), turns/s and errors at one and N concurrent clients, time to
    the first SSE event, and an audit of every session (recorded calls, governance cap,
    cross-session leaks, second turns)."""
    from superbiz.evaluation.service import (
        benchmark_service,
        default_data_dir,
        render_service_report,
    )

    with _errors():
        report = benchmark_service(
            _settings(data_dir or default_data_dir()),
            clients=clients,
            requests=requests,
            sequential=sequential,
            model_latency_ms=model_latency_ms,
            urls=urls,
            on_notice=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
        )
    _publish(report, output, as_json, render_service_report)
    if not report["audit"]["ok"]:
        raise typer.Exit(1)


def eval_sync(
    files: Annotated[
        int, typer.Option("--files", help="Files in the generated repository.", min=1)
    ] = 400,
    changes: Annotated[
        int, typer.Option("--changes", help="Syncs timed, one edited file each.", min=1)
    ] = 3,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """A Git source's sync with one of FILES files changed, against its full ingest (a
    generated repository and a temporary KB; target ≤ 5 %)."""
    from superbiz.evaluation.sync import benchmark_sync, render_sync_report

    with _errors():
        report = benchmark_sync(_settings(None), files=files, changes=changes)
    _publish(report, output, as_json, render_sync_report)


def eval_gaps(
    lookups: Annotated[
        int, typer.Option("--lookups", help="Recorded lookups to generate.", min=1)
    ] = 100_000,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url", help="A database to write into (default: temporary SQLite)."
        ),
    ] = None,
    output: OutputFile = None,
    as_json: JsonFlag = False,
) -> None:
    """Time the knowledge-gaps report on a generated record of --lookups lookups."""
    from superbiz.evaluation.gaps import benchmark_gaps, render_gaps_benchmark

    with _errors():
        report = benchmark_gaps(_settings(None), lookups=lookups, database_url=database_url)
    _publish(report, output, as_json, render_gaps_benchmark)


def eval_ingest(
    path: Annotated[
        Path | None, typer.Argument(help="Files or a folder to ingest (or --synthetic-mb).")
    ] = None,
    synthetic_mb: Annotated[
        float | None,
        typer.Option(
            "--synthetic-mb", help="Ingest one generated single-line file this big.", min=0.001
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """Chunks per second and peak memory of an ingest from scratch into a temporary KB
    (the configured embedder; SQLite and Milvus Lite in a temporary folder)."""
    from superbiz.evaluation.ingest import benchmark_ingest, render_ingest_report

    if (path is None) == (synthetic_mb is None):
        err.print("[bold red]error:[/] give a PATH or --synthetic-mb, not both")
        raise typer.Exit(2)
    with _errors():
        report = benchmark_ingest(_settings(None), path, synthetic_mb=synthetic_mb)
    _publish(report, output, as_json, render_ingest_report)


def eval_bombs(
    only: Annotated[
        str | None,
        typer.Option(
            "--only",
            help="Comma-separated, of pdf_bomb, pdf_2000_pages, docx_bomb, html_entity_bomb.",
        ),
    ] = None,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """Peak memory of `superbiz ingest` over generated files that inflate (a PDF stream
    bomb, a .docx bomb, an HTML entity bomb) and a 2,000-page PDF, each above the same
    command's peak over one small Markdown file (bound: 500 MB)."""
    from superbiz.evaluation.hostile import BOMBS, benchmark_bombs, render_bombs_report

    names = [n.strip() for n in only.split(",")] if only else None
    unknown = [n for n in names or [] if n not in BOMBS]
    if unknown:
        err.print(f"[bold red]error:[/] unknown file {unknown[0]!r} (known: {', '.join(BOMBS)})")
        raise typer.Exit(2)
    with _errors():
        report = benchmark_bombs(_settings(None), names)
    _publish(report, output, as_json, render_bombs_report)


def eval_upload(
    pages: Annotated[int, typer.Option("--pages", help="Pages of the uploaded PDF.", min=1)] = 2000,
    alone: Annotated[int, typer.Option("--alone", help="Chats timed alone.", min=1)] = 5,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """A chat's latency alone and while a generated PDF of PAGES pages is uploaded to the
    same server (one run): the upload must not hold the chats (target: within 2 s)."""
    from superbiz.evaluation.hostile import benchmark_upload, render_upload_report

    with _errors():
        report = benchmark_upload(_settings(None), pages=pages, alone=alone)
    _publish(report, output, as_json, render_upload_report)


def eval_telemetry(
    runs: Annotated[int, typer.Option("--runs", help="Runs of each variant.", min=1)] = 3,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """`superbiz ask` with no OTLP collector, one that refuses connections and one that
    never answers, alternating: the wall time of each and what it printed."""
    from superbiz.evaluation.hostile import benchmark_telemetry, render_telemetry_report

    with _errors():
        report = benchmark_telemetry(_settings(None), runs=runs)
    _publish(report, output, as_json, render_telemetry_report)


def eval_scale(
    dataset_dirs: Annotated[
        list[Path], typer.Argument(help="Seed sets (corpus/ and queries.jsonl each).")
    ],
    max_documents: Annotated[
        int, typer.Option("--max-documents", help="The largest size measured.", min=1)
    ] = 50_000,
    profile: Annotated[
        str, typer.Option("--profile", help="embedded (SQLite + Milvus Lite) or server.")
    ] = "embedded",
    database_url: Annotated[
        str,
        typer.Option("--database-url", help="PostgreSQL of the server profile (a schema is made)."),
    ] = "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the generated corpus (and the KB) here."),
    ] = None,
    rounds: Annotated[
        int,
        typer.Option(
            "--rounds", help="Passes over the seed's questions timed (their median).", min=1
        ),
    ] = 3,
    as_json: JsonFlag = False,
    output: OutputFile = None,
) -> None:
    """One KB grown from the seed sets to --max-documents documents (distinct generated
    copies): ingest rate against the embedder's, peak RSS, disk, lookup latency and recall,
    the planner's map and latency, and the gaps report at each size. With -o the JSON is
    written after every size."""
    import json
    import tempfile

    from superbiz.evaluation._scale_report import render_scale_report
    from superbiz.evaluation.scale import benchmark_scale

    if profile not in ("embedded", "server"):
        err.print("[bold red]error:[/] --profile must be 'embedded' or 'server'")
        raise typer.Exit(2)

    def partial(report: dict[str, object]) -> None:
        if output:
            output.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")

    with _errors(), tempfile.TemporaryDirectory(prefix="superbiz-eval-scale-") as scratch:
        report = benchmark_scale(
            dataset_dirs,
            _settings(None),
            work or Path(scratch),
            profile="server" if profile == "server" else "embedded",
            max_documents=max_documents,
            database_url=database_url,
            lookup_rounds=rounds,
            on_size=partial,
            on_notice=lambda text: err.print(f"[dim]{escape(text)}[/]"),
        )
    _publish(report, output, as_json, render_scale_report)
