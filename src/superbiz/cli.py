"""The ``superbiz`` command line (Typer + rich)."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from superbiz._process import tune_memory
from superbiz._text import CONTROL_CHARACTERS
from superbiz.config import Settings, load_settings
from superbiz.exceptions import LLMError, QuestionError, SuperbizError

if TYPE_CHECKING:
    from superbiz.agents.executor import TurnResult
    from superbiz.agents.planner import Plan
    from superbiz.governance.tool import ToolOutcome
    from superbiz.knowledge.base import KnowledgeBase

app = typer.Typer(
    help="Knowledge assistant whose retrieval is governed by code.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Benchmarks that print numbers (and write JSON).", no_args_is_help=True)
app.add_typer(eval_app, name="eval")

#: piped output is read by people too (``superbiz trace S | less``): wide enough that a
#: table keeps its columns and a sentence is not broken at rich's default 80 columns
_PIPED_WIDTH = 200
console = Console(width=None if sys.stdout.isatty() else _PIPED_WIDTH)
err = Console(stderr=True, soft_wrap=True)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where the knowledge base lives \\[default: ./.superbiz]."),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


@app.callback()
def _main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
) -> None:
    tune_memory()  # before any command imports pyarrow (Milvus Lite)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        logging.getLogger("pymilvus").setLevel(logging.ERROR)


@contextmanager
def _errors() -> Iterator[None]:
    """Errors for the caller become one red line and exit code 2, never a traceback."""
    try:
        yield
    except SuperbizError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None


def _settings(data_dir: Path | None) -> Settings:
    """The settings, or one red line and exit 2 when the file or environment is invalid."""
    with _errors():
        return load_settings(data_dir=data_dir)


@contextmanager
def _knowledge_base(settings: Settings) -> Iterator[KnowledgeBase]:
    """The data dir's knowledge base, closed afterwards; errors become one red line."""
    from superbiz.knowledge.base import KnowledgeBase

    with _errors():
        kb = KnowledgeBase(settings)
        try:
            yield kb
        finally:
            kb.close()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def _progress() -> Progress:
    """A progress bar redrawn by ``update(..., refresh=True)`` in the caller's thread: an
    auto-refresh thread would take the GIL in the middle of the lookups a benchmark times."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[item]}", style="dim"),
        console=err,
        transient=True,
        auto_refresh=False,
    )


class _Tracking(TypedDict):
    on_total: Callable[[int], None]
    on_progress: Callable[[str], None]


def _tracking(progress: Progress, task: TaskID) -> _Tracking:
    """``on_total`` / ``on_progress`` callbacks that move ``task`` and redraw the bar."""
    return {
        "on_total": lambda n: progress.update(task, total=n, refresh=True),
        "on_progress": lambda label: progress.update(task, advance=1, item=label, refresh=True),
    }


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Markdown files or folders.")],
    data_dir: DataDir = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Drop documents whose files are gone.")
    ] = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop the index and ingest everything anew.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    from superbiz.knowledge.domains import DomainService
    from superbiz.knowledge.ingest import Ingestor
    from superbiz.knowledge.metadata import LLMMetadataWriter
    from superbiz.llm import make_chat_model

    settings = _settings(data_dir)
    # a mistyped path is an error, not a skipped file: a CI job must not pass on it
    if problems := [problem for path in paths if (problem := _unreachable(path))]:
        err.print(f"[bold red]error:[/] {escape('; '.join(problems))}")
        raise typer.Exit(2)
    with _knowledge_base(settings) as kb:
        model = make_chat_model(settings.llm)
        ingestor = Ingestor(
            kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=DomainService(kb, model),
        )
        with _progress() as progress:
            task = progress.add_task("ingesting", total=None, item="")
            report = ingestor.ingest(
                paths,
                prune=prune,
                rebuild=rebuild,
                **_tracking(progress, task),
            )
    if as_json:
        _print_json(report.as_dict())
        return
    for path, reason in report.skipped:
        err.print(f"[yellow]skipped[/] {escape(path)}: {escape(reason)}")
    for path, reason in report.metadata_failures:
        err.print(f"[yellow]metadata derived[/] {escape(path)}: {escape(reason)}")
    for path, reason in report.metadata_warnings:
        err.print(f"[yellow]metadata warning[/] {escape(path)}: {escape(reason)}")
    console.print(f"ingest: {report.summary()}")


def _unreachable(path: Path) -> str | None:
    """Why ``path`` cannot be ingested at all, or None (a folder above it that cannot be
    read is said as such, not as a traceback)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return f"no such file or directory: {path}"
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


@app.command()
def lookup(
    query: Annotated[str, typer.Argument(help="What to look up.")],
    session: Annotated[str, typer.Option("--session", "-s", help="Session id.")] = "cli",
    domain: Annotated[str | None, typer.Option("--domain", "-d", help="Only this domain.")] = None,
    missing_dimension: Annotated[
        str | None, typer.Option("--missing-dimension", help="What a supplement looks for.")
    ] = None,
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
    details: Annotated[
        bool,
        typer.Option("--details", help="Add retrieval_details (scores, never shown to the model)."),
    ] = False,
) -> None:
    """One governed lookup, recorded in the session (`superbiz trace`): prints what the
    model would see."""
    from superbiz.agents.runtime import open_lookup

    with _errors(), open_lookup(_settings(data_dir)) as runtime:
        outcome = runtime.user_lookup(session, query, domain, missing_dimension)
    if outcome.result is None:  # a malformed call or an unknown domain (recorded as such)
        err.print(f"[bold red]error:[/] {escape(outcome.error or 'lookup failed')}")
        raise typer.Exit(2)
    data = outcome.result.as_dict()
    if details:
        data["retrieval_details"] = outcome.details.as_dict() if outcome.details else None
    if as_json:
        _print_json(data)
        return
    _render_lookup(data)


def _render_lookup(data: dict[str, Any]) -> None:
    from superbiz.governance.tool import TOOL_NAME
    from superbiz.retrieval.relevance import RelevanceLevel

    level = data["relevance_level"] or "NO RESULT"
    colours: dict[str, str] = {
        RelevanceLevel.PRECISE: "green",
        RelevanceLevel.HIGHLY_RELEVANT: "cyan",
        RelevanceLevel.REFERENCE: "yellow",
        RelevanceLevel.DEDUPED: "magenta",
    }
    colour = colours.get(level, "red")
    domains = ", ".join(data["retrieved_domains_this_session"])
    head = f"[bold {colour}]{level}[/]"
    if data.get("dedup_reason"):
        head += f"  dedup_reason={data['dedup_reason']}"
    lines = [
        head,
        f"[dim]hint:[/] {escape(data['completeness_hint'])}",
        f"[dim]retrieved domains this session:[/] {domains or '-'}",
        f"[dim]message:[/] {escape(data['message'])}",
    ]
    console.print(Panel("\n".join(lines), title=TOOL_NAME, expand=False))
    if primary := data.get("primary"):
        console.print(
            Panel(
                escape(primary["content"]),
                title=f"{escape(primary['title'])}  "
                f"[dim]{escape(primary['path'])} · {primary['domain']}[/]",
            )
        )
    for item in data.get("supplement") or []:
        console.print(
            Panel(
                escape(item["excerpt"]),
                title=f"supplement: {escape(item['title'])}  [dim]{escape(item['path'])}[/]",
                border_style="dim",
            )
        )
    if "retrieval_details" in data:
        _print_json(data["retrieval_details"])


@app.command("map")
def knowledge_map(
    data_dir: DataDir = None,
    budget: Annotated[
        int | None, typer.Option("--budget", help="Token budget \\[default: planner setting].")
    ] = None,
) -> None:
    """Print the knowledge map the Planner sees (YAML)."""
    from superbiz.knowledge.map import build_map

    settings = _settings(data_dir)
    with _knowledge_base(settings) as kb:
        text = build_map(kb).to_yaml(budget or settings.planner.map_token_budget)
    sys.stdout.write(text)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in Chinese or English.")],
    session: Annotated[str, typer.Option("--session", "-s", help="Session id.")] = "cli",
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Answer a question through the governed executor (extractive without an LLM)."""
    from superbiz.agents.runtime import open_runtime

    def show(outcome: ToolOutcome) -> None:
        if not as_json:
            err.print(_lookup_line(outcome))

    def show_plan(plan: Plan) -> None:
        if not as_json:
            err.print(_plan_line(plan))

    with _errors(), open_runtime(_settings(data_dir)) as runtime:
        turn = runtime.ask(session, question, on_plan=show_plan, on_lookup=show)
    if as_json:
        _print_json(turn.as_dict())
        return
    console.print(
        Panel(
            escape(turn.result.answer),
            title=f"answer · {turn.result.model}",
            subtitle=_grounding_line(turn.result),
            expand=False,
        )
    )


@app.command()
def chat(
    session: Annotated[str, typer.Option("--session", "-s", help="Session id.")] = "chat",
    data_dir: DataDir = None,
) -> None:
    """Interactive multi-turn chat; shows the plan and every lookup as it happens.
    Type /clear to forget the session, /quit (or Ctrl-D) to leave."""
    from superbiz.agents.runtime import open_runtime

    with _errors(), open_runtime(_settings(data_dir)) as runtime:
        console.print(
            f"[dim]session {escape(session)} · model {runtime.model.name} · "
            "/clear to forget, /quit to leave[/]"
        )
        while True:
            try:
                question = console.input("[bold]you>[/] ").strip()
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            if not question:
                continue
            if question in ("/quit", "/exit"):
                break
            if question == "/clear":
                runtime.clear_session(session)
                console.print("[dim]session cleared[/]")
                continue
            try:
                turn = runtime.ask(
                    session,
                    question,
                    on_plan=lambda plan: console.print(_plan_line(plan)),
                    on_lookup=lambda o: console.print(_lookup_line(o)),
                )
            except (LLMError, QuestionError) as exc:  # the session is as it was: ask again
                err.print(f"[bold red]error:[/] {escape(str(exc))}")
                continue
            console.print(
                Panel(
                    escape(turn.result.answer),
                    title="superbiz",
                    subtitle=_grounding_line(turn.result),
                    expand=False,
                )
            )


def _grounding_line(result: TurnResult) -> str:
    """Whether the answer stands on the documents shown, and who wrote it."""
    sources = len(result.citations)
    line = (
        f"[green]grounded[/] · {sources} source{'s' * (sources != 1)}"
        if result.grounded
        else "[yellow]not grounded[/]"
    )
    if result.answer_source != "model":
        line += f" · {result.answer_source.replace('_', ' ')}"
    if result.invalid_citations:
        line += f" · {result.invalid_citations} invalid citation(s) removed"
    return line


def _plan_line(plan: Plan) -> str:
    if not plan.need_retrieval:
        how = "direct answer" if plan.direct_answer else "answer from session evidence"
        return f"[dim]plan[/] {how} [dim]({plan.source})[/]"
    return f"[dim]plan[/] consult {', '.join(plan.domain_ids)} [dim]({plan.source})[/]"


def _lookup_line(lookup: ToolOutcome) -> str:
    status = "executed" if lookup.executed else "[magenta]blocked[/]"
    if lookup.error:
        status = f"[red]error[/] {escape(lookup.error)}"
    query = escape(str(lookup.arguments.get("query", "")))[:60]
    level = lookup.level.value if lookup.level else "-"
    reason = f" ({lookup.dedup_reason})" if lookup.dedup_reason else ""
    return (
        f"[dim]lookup[/] {query!s} [dim]domain[/]={lookup.domain or '-'} "
        f"{status} [bold]{level}[/]{reason} [dim]verdict[/]={lookup.verdict.value} "
        f"[dim]water[/]={lookup.water_level.value}"
    )


@app.command()
def trace(
    session: Annotated[str, typer.Argument(help="Session id.")],
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
) -> None:
    """A session's tool calls, executed and blocked, like the ISS-003 log."""
    from superbiz.agents.runtime import open_lookup
    from superbiz.governance.tool import RAW_ARGUMENTS

    with _errors(), open_lookup(_settings(data_dir)) as runtime:
        rows = runtime.invocations.for_session(session)
    if as_json:
        _print_json([dataclasses.asdict(r) for r in rows])
        return
    if not rows:
        err.print(f"no tool calls recorded for session {session!r}")
        raise typer.Exit(1)
    columns = [
        "id",
        "turn",
        "step",
        "domain",
        "query",
        "level",
        "dedup reason",
        "verdict",
        "water",
        "latency ms",
    ]
    table = _table(
        f"session {session}",
        columns,
        [
            [
                r.id,
                r.turn,
                r.step,
                r.domain or "-",
                str(r.arguments.get("query") or r.arguments.get(RAW_ARGUMENTS, ""))[:40],
                r.relevance_level or ("error" if r.error else "-"),
                r.dedup_reason or "-",
                r.verdict if r.executed or r.error else f"blocked/{r.verdict}",
                r.water_level,
                f"{r.latency_ms:.1f}",
            ]
            for r in rows
        ],
    )
    console.print(table)
    for r in rows:
        if r.error:
            failure = Text(f"call {r.id} (turn {r.turn}, step {r.step}): {_visible(r.error)}")
            console.print(failure, style="red")
    executed = sum(r.executed for r in rows)
    console.print(
        f"{len(rows)} calls: {executed} executed, {len(rows) - executed} blocked or failed"
    )


@eval_app.command("retrieval")
def eval_retrieval(
    dataset_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Folders with corpus/ and queries.jsonl; several are also shown side by side."
        ),
    ],
    data_dir: DataDir = None,
    k: Annotated[int, typer.Option("--k", help="Ranking depth.")] = 10,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N queries.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recall@1/5/10, MRR@10, level precision and lookup latency on a dataset."""
    from superbiz.evaluation.retrieval import evaluate_retrieval, render_reports

    reports = []
    with _errors(), _progress() as progress:
        for dataset_dir in dataset_dirs:
            task = progress.add_task(dataset_dir.name, total=None, item="")
            home = _eval_home(dataset_dir, data_dir, several=len(dataset_dirs) > 1)
            reports.append(
                evaluate_retrieval(
                    dataset_dir, _settings(home), k=k, limit=limit, **_tracking(progress, task)
                )
            )
    report = reports[0] if len(reports) == 1 else {"datasets": reports}
    _publish(report, output, as_json, render_reports)


@eval_app.command("levels")
def eval_levels(
    dataset_dir: Annotated[Path, typer.Argument(help="Folder with corpus/ and queries.jsonl.")],
    data_dir: DataDir = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Fit retrieval.levels: evidence on a labelled dataset (needs the answer model)."""
    from superbiz.evaluation.levels import calibrate_levels, render_levels

    with _errors():
        report = calibrate_levels(dataset_dir, _settings(_eval_home(dataset_dir, data_dir)))
    _publish(report, output, as_json, render_levels)


@eval_app.command("agent")
def eval_agent(
    dataset_dir: Annotated[Path, typer.Argument(help="Folder with corpus/ and queries.jsonl.")],
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            "-p",
            help="obedient | over_cautious | domain_hopper | iss003_replay | defiant",
        ),
    ] = "obedient",
    governance: Annotated[
        str,
        typer.Option(
            "--governance",
            help="on: governed loop; off: plain ReAct baseline; cap:N: the frameworks' plain "
            "cap of N lookups per turn. Several, comma-separated (on,cap:3,off), run over the "
            "same plans as one table.",
        ),
    ] = "on",
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="profile: the --profile plays the agent; llm: the configured "
            "OpenAI-compatible model plans and plays it.",
        ),
    ] = "profile",
    data_dir: DataDir = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N queries.")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Lookups, blocked calls, redundancy, steps, evidence recall, grounded answers and
    tokens under a profile or the configured model."""
    from superbiz.config import GovernanceSettings
    from superbiz.evaluation.agent import (
        evaluate_agent,
        governance_settings,
        render_agent_report,
    )
    from superbiz.evaluation.profiles import PROFILES
    from superbiz.exceptions import ConfigError

    if profile not in PROFILES:
        err.print(f"[bold red]error:[/] unknown profile {profile!r}; choose {', '.join(PROFILES)}")
        raise typer.Exit(2)
    if model not in ("profile", "llm"):
        err.print("[bold red]error:[/] --model must be 'profile' or 'llm'")
        raise typer.Exit(2)
    variants = [v.strip() for v in governance.split(",") if v.strip()]
    try:
        for variant in variants or [""]:
            governance_settings(variant, GovernanceSettings())
    except ConfigError as exc:
        err.print(f"[bold red]error:[/] --governance: {escape(str(exc))}")
        raise typer.Exit(2) from None
    with _errors(), _progress() as progress:
        task = progress.add_task("llm" if model == "llm" else profile, total=None, item="")
        report = evaluate_agent(
            dataset_dir,
            _settings(_eval_home(dataset_dir, data_dir)),
            profile=profile,
            governance=variants[0] if len(variants) == 1 else variants,
            use_llm=model == "llm",
            limit=limit,
            **_tracking(progress, task),
            on_notice=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
        )
    _publish(report, output, as_json, render_agent_report)


@eval_app.command("service")
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
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
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


@eval_app.command("ingest")
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
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
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


@app.command()
def calibrate(
    data_dir: DataDir = None,
    measure: Annotated[
        bool, typer.Option("--measure", help="Measure again now and store the result.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """The level thresholds measured on this KB (after every change of documents), how
    they were derived, and which ones lookups use (settings override them)."""
    from superbiz.evaluation.calibrate import calibrate as run_calibration
    from superbiz.evaluation.calibrate import render_calibration

    with _knowledge_base(_settings(data_dir)) as kb:
        report = run_calibration(kb, measure=measure)
    _publish(report, None, as_json, render_calibration)


@app.command()
def mcp(
    transport: Annotated[
        str,
        typer.Option("--transport", "-t", help="stdio (a desktop client starts it) or http."),
    ] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port to listen on.")] = 8765,
    data_dir: DataDir = None,
) -> None:
    """Serve the governed lookup_knowledge, list_domains and knowledge://map over MCP."""
    from superbiz.mcp_server import HTTP_PATH, serve

    if transport not in ("stdio", "http"):
        err.print("[bold red]error:[/] --transport must be 'stdio' or 'http'")
        raise typer.Exit(2)

    def ready() -> None:
        where = "stdio" if transport == "stdio" else f"http://{host}:{port}{HTTP_PATH}"
        err.print(f"[dim]superbiz MCP server on {where}[/]")

    with _errors():
        serve(
            _settings(data_dir),
            transport="stdio" if transport == "stdio" else "http",
            host=host,
            port=port,
            on_ready=ready,
        )


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    data_dir: DataDir = None,
) -> None:
    """Serve the HTTP API (JSON and SSE chat, documents, map, health, metrics) and the web
    page; OpenAPI docs at /docs. Set service.api-key to protect the write endpoints."""
    import uvicorn

    from superbiz.api.app import create_app

    with _errors():
        settings = _settings(data_dir)
        application = create_app(settings)
    if not settings.service.api_key and host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            "[yellow]warning:[/] no service.api-key is set: anyone who can reach "
            f"{escape(host)}:{port} may ask questions and change documents"
        )
    err.print(f"[dim]superbiz on http://{host}:{port} · API docs at /docs[/]")
    uvicorn.run(application, host=host, port=port, log_level="info")


def _publish(
    report: dict[str, Any],
    output: Path | None,
    as_json: bool,
    render: Callable[[dict[str, Any], Console], None],
) -> None:
    """A benchmark's report: written as JSON to ``output`` if asked, then printed."""
    if output:
        output.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    if as_json:
        _print_json(report)
    else:
        render(report, console)


def _eval_dir(dataset_dir: Path) -> Path:
    """Each dataset gets its own knowledge base under ``./.superbiz/eval/``."""
    import hashlib

    digest = hashlib.sha1(str(dataset_dir.resolve()).encode()).hexdigest()[:8]
    return Path(".superbiz") / "eval" / f"{dataset_dir.resolve().name}-{digest}"


def _eval_home(dataset_dir: Path, data_dir: Path | None, *, several: bool = False) -> Path:
    """Where a dataset's knowledge base lives: ``--data-dir`` itself for one dataset, a
    folder in it per dataset for several (one corpus must not rank in another's), and
    ``_eval_dir`` without one."""
    own = _eval_dir(dataset_dir)
    if data_dir is None:
        return own
    return data_dir / own.name if several else data_dir


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    """A table of stored values, shown as text: a recorded query may hold rich markup
    (``[bold]``) or terminal escapes (``\x1b[31m``) that must not act on the terminal."""
    table = Table(title=escape(title))
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(Text(_visible(str(cell))) for cell in row))
    return table


def _visible(text: str) -> str:
    r"""``text`` with control characters written out, as Python writes them.

    >>> _visible("refund\x1b[31m stuck\x07")
    'refund\\x1b[31m stuck\\x07'
    """
    return CONTROL_CHARACTERS.sub(lambda m: repr(m.group())[1:-1], text)


if __name__ == "__main__":  # pragma: no cover
    app()
