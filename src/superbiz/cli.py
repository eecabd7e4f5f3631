"""The ``superbiz`` command line (Typer + rich)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
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
feedback_app = typer.Typer(help="Answer ratings (thumbs up/down).", no_args_is_help=True)
app.add_typer(feedback_app, name="feedback")

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


#: what Python keeps of bytes that are not UTF-8 in argv or typed text (surrogateescape)
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _typed(text: str, what: str = "the question") -> str:
    """``text`` as given on the command line or typed in; bytes that are not UTF-8 (a
    terminal set to GBK) are a ``QuestionError`` that says how to convert them, where
    they crashed the store or the terminal before."""
    if not _NOT_UTF8.search(text):
        return text
    raw = text.encode("utf-8", "surrogateescape")
    start = next((i for i, ch in enumerate(text) if _NOT_UTF8.match(ch)), 0)
    at = len(text[:start].encode("utf-8", "surrogateescape"))
    try:
        chinese = re.search(r"[\u4e00-\u9fff]", raw.decode("gb18030")) is not None
    except UnicodeDecodeError:
        chinese = False
    source = "GB18030" if chinese else "ENCODING"
    looks = "; it looks like GB18030/GBK Chinese" if chinese else ""
    raise QuestionError(
        f"{what} is not UTF-8 text (byte {at}: 0x{raw[at]:02X}){looks}: set the terminal "
        f"to UTF-8, or convert the text with `iconv -f {source} -t UTF-8`"
    )


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
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Markdown files or folders (or --git URL).")
    ] = None,
    data_dir: DataDir = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Drop documents whose files are gone.")
    ] = False,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop the index and ingest everything anew.")
    ] = False,
    git: Annotated[
        str | None,
        typer.Option(
            "--git",
            help="A Git repository's URL: cloned into the data dir and ingested; again: "
            "only what changed since the last sync.",
        ),
    ] = None,
    branch: Annotated[
        str | None, typer.Option("--branch", help="With --git: the branch [default: HEAD's].")
    ] = None,
    subdir: Annotated[
        str | None, typer.Option("--subdir", help="With --git: only this folder of it.")
    ] = None,
    domain: Annotated[
        str | None,
        typer.Option("--domain", help="With --git: the domain (folder) its documents go in."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Add or update documents; unchanged files are skipped by content hash."""
    from superbiz.knowledge.domains import DomainService
    from superbiz.knowledge.lifecycle import DocumentLifecycle
    from superbiz.knowledge.metadata import LLMMetadataWriter
    from superbiz.llm import make_chat_model

    settings = _settings(data_dir)
    paths = paths or []
    if bool(git) == bool(paths):
        err.print("[bold red]error:[/] give PATH... or --git URL (one of them)")
        raise typer.Exit(2)
    if not git and (branch or subdir or domain):
        err.print("[bold red]error:[/] --branch, --subdir and --domain go with --git URL")
        raise typer.Exit(2)
    # a mistyped path is an error, not a skipped file: a CI job must not pass on it
    if problems := [problem for path in paths if (problem := _unreachable(path))]:
        err.print(f"[bold red]error:[/] {escape('; '.join(problems))}")
        raise typer.Exit(2)
    with _knowledge_base(settings) as kb:
        model = make_chat_model(settings.llm)
        lifecycle = DocumentLifecycle(
            kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=DomainService(kb, model),
        )
        if git:
            synced = lifecycle.add_git(git, branch=branch, subdir=subdir, domain=domain)
            report = synced.report
        else:
            with _progress() as progress:
                task = progress.add_task("ingesting", total=None, item="")
                report = lifecycle.ingest(
                    paths,
                    prune=prune,
                    rebuild=rebuild,
                    **_tracking(progress, task),
                )
    if as_json:
        _print_json(synced.as_dict() if git else report.as_dict())
        return
    for path, reason in report.skipped:
        err.print(f"[yellow]skipped[/] {escape(path)}: {escape(reason)}")
    for path, reason in report.metadata_failures:
        err.print(f"[yellow]metadata derived[/] {escape(path)}: {escape(reason)}")
    for path, reason in report.metadata_warnings:
        err.print(f"[yellow]metadata warning[/] {escape(path)}: {escape(reason)}")
    if git:
        for old, new in synced.renamed:
            err.print(f"renamed {escape(old)} → {escape(new)}")
        console.print(f"sync: {escape(synced.summary())}")
        return
    console.print(f"ingest: {report.summary()}")


@app.command()
def sources(
    data_dir: DataDir = None,
    sync: Annotated[
        bool,
        typer.Option("--sync", help="Fetch every Git source first and ingest what changed."),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Every source documents came from (folders, Git repositories) and its last sync."""
    from superbiz.exceptions import SourceError
    from superbiz.knowledge.domains import DomainService
    from superbiz.knowledge.lifecycle import DocumentLifecycle
    from superbiz.knowledge.metadata import LLMMetadataWriter
    from superbiz.llm import make_chat_model
    from superbiz.storage.sources import GIT

    settings = _settings(data_dir)
    failed = False
    with _knowledge_base(settings) as kb:
        model = make_chat_model(settings.llm) if sync else None
        lifecycle = DocumentLifecycle(
            kb,
            metadata=LLMMetadataWriter(model) if model else None,
            domains=DomainService(kb, model),
        )
        for source in lifecycle.list_sources() if sync else []:
            if source.kind != GIT:
                continue
            try:
                synced = lifecycle.sync(source.name)
                err.print(f"sync: {escape(synced.summary())}")
            except SourceError as exc:  # recorded on the source; the others go on
                failed = True
                err.print(f"[bold red]error:[/] {escape(source.name)}: {escape(str(exc))}")
        records = lifecycle.list_sources()
    if as_json:
        _print_json({"sources": [r.as_dict() for r in records]})
        raise typer.Exit(1 if failed else 0)
    if not records:
        console.print("no sources yet: `superbiz ingest PATH` or `superbiz ingest --git URL`")
        return
    table = Table("name", "kind", "location", "commit", "last sync", "counts", "error")
    for r in records:
        where = r.location + (f" @ {r.branch}" if r.branch else "")
        where += f" /{r.subdir}" if r.subdir else ""
        counts = ", ".join(f"{n} {k}" for k, n in r.counts.items())
        table.add_row(
            escape(r.name),
            r.kind,
            escape(where),
            (r.commit or "")[:12],
            r.synced_at.strftime("%Y-%m-%d %H:%M:%S UTC") if r.synced_at else "never",
            counts,
            Text(r.error or "", style="red"),
        )
    console.print(table)
    if failed:
        raise typer.Exit(1)


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

    with _errors():
        query, session = _typed(query, "the query"), _typed(session, "--session")
        domain = _typed(domain, "--domain") if domain else domain
        if missing_dimension:
            missing_dimension = _typed(missing_dimension, "--missing-dimension")
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

    with _errors():
        question, session = _typed(question), _typed(session, "--session")
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

    with _errors():
        session = _typed(session, "--session")
    _keep_undecodable_input()
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
                    _typed(question),
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


def _keep_undecodable_input() -> None:
    """Read typed lines that are not UTF-8 as text with their bytes kept (``_typed``
    then says what to do), not as an error that ends the chat."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")


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
        ratings = runtime.feedback.for_session(session)
        answers = [m for m in runtime.chats.messages(session) if m.role == "assistant"]
    if as_json:  # each call with its turn's rating (None when the turn has none)
        records = {t["turn"]: t for t in _turn_records(answers, ratings, rows)}
        _print_json(
            [{**dataclasses.asdict(r), "feedback": records[r.turn]["feedback"]} for r in rows]
        )
        return
    if not rows and not ratings:
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
    for record in _turn_records(answers, ratings, rows):
        parts = [f"turn {record['turn']}:"]
        if record["feedback"]:
            rated = record["feedback"]
            parts.append(f"rated {'👍 up' if rated['rating'] == 'up' else '👎 down'}")
            if rated["comment"]:
                parts.append(f"“{_visible(rated['comment'])}”")
        if record["trace_id"]:
            parts.append(f"trace {record['trace_id']}")
        if len(parts) > 1:
            console.print(Text(" ".join(parts)))


def _turn_records(
    answers: list[Any], ratings: dict[int, Any], rows: list[Any]
) -> list[dict[str, Any]]:
    """Each turn's rating and trace id (``superbiz trace``), in turn order."""
    traces: dict[int, str] = {r.turn: r.trace_id for r in rows if r.trace_id}
    traces.update({a.turn: a.trace_id for a in answers if a.trace_id})
    sources = {a.turn: a.answer_source for a in answers}
    turns = sorted({*(r.turn for r in rows), *traces, *ratings, *sources})
    return [
        {
            "turn": turn,
            "answer_source": sources.get(turn),
            "trace_id": traces.get(turn),
            "feedback": {
                "rating": ratings[turn].rating,
                "comment": ratings[turn].comment,
                "updated_at": ratings[turn].updated_at.isoformat(),
            }
            if turn in ratings
            else None,
        }
        for turn in turns
    ]


@app.command()
def gaps(
    data_dir: DataDir = None,
    since: Annotated[
        str, typer.Option("--since", help="A duration back from now (30m, 24h, 7d, 2w) or a date.")
    ] = "30d",
    domain: Annotated[str | None, typer.Option("--domain", help="Only this domain.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """What the knowledge base lacks: questions that found no good evidence, clustered by
    meaning, the runbook most worth writing first."""
    from datetime import UTC, datetime

    from superbiz.knowledge.documents import normalize_domain
    from superbiz.knowledge.gaps import gap_report, parse_since

    try:
        start = parse_since(since, datetime.now(UTC))
    except ValueError as exc:
        err.print(f"[bold red]error:[/] --since: {escape(str(exc))}")
        raise typer.Exit(2) from None
    settings = _settings(data_dir)
    with _knowledge_base(settings) as kb, _errors():
        report = gap_report(
            kb.engine,
            kb.embedder,
            kb.documents,
            settings.gaps,
            since=start,
            domain=normalize_domain(domain) if domain else None,
        )
    if as_json:
        _print_json(report)
        return
    _render_gaps(report)


def _render_gaps(report: dict[str, Any]) -> None:
    if not report["clusters"]:
        console.print(
            f"no knowledge gaps among {report['questions']} questions since {report['since']}"
        )
        return
    table = _table(
        f"knowledge gaps since {report['since']}",
        ["#", "domain", "questions", "sessions", "👎", "why", "examples", "last asked", "closest"],
        [
            [
                rank,
                c["domain"] or "-",
                c["count"],
                c["sessions"],
                c["thumbs_down"],
                ", ".join(f"{k} {v}" for k, v in c["reasons"].items()),
                " | ".join(c["examples"]),
                c["last_asked"][:16].replace("T", " "),
                ", ".join(d["path"] for d in c["closest_documents"]) or "-",
            ]
            for rank, c in enumerate(report["clusters"], start=1)
        ],
    )
    console.print(table)
    left = (
        f"; {report['unclustered']} rarer wordings not clustered" if report["unclustered"] else ""
    )
    console.print(
        f"{report['gaps']} gaps in {len(report['clusters'])} clusters{left} "
        f"({report['timing_ms']['total']:.0f} ms)"
    )


@feedback_app.command("export")
def feedback_export(
    out: Annotated[Path, typer.Option("--out", help="An empty or new folder for the dataset.")],
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Write the rated questions as a dataset eval retrieval and eval agent read:
    corpus/, queries.jsonl (gold: what a thumbs-up answer cited), rated-down.jsonl."""
    from superbiz.evaluation.feedback_export import export_feedback

    with _knowledge_base(_settings(data_dir)) as kb, _errors():
        summary = export_feedback(kb.engine, out)
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


@eval_app.command("sync")
def eval_sync(
    files: Annotated[
        int, typer.Option("--files", help="Files in the generated repository.", min=1)
    ] = 400,
    changes: Annotated[
        int, typer.Option("--changes", help="Syncs timed, one edited file each.", min=1)
    ] = 3,
    as_json: JsonFlag = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
) -> None:
    """A Git source's sync with one of FILES files changed, against its full ingest (a
    generated repository and a temporary KB; target ≤ 5 %)."""
    from superbiz.evaluation.sync import benchmark_sync, render_sync_report

    with _errors():
        report = benchmark_sync(_settings(None), files=files, changes=changes)
    _publish(report, output, as_json, render_sync_report)


@eval_app.command("gaps")
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
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Time the knowledge-gaps report on a generated record of --lookups lookups."""
    from superbiz.evaluation.gaps import benchmark_gaps, render_gaps_benchmark

    with _errors():
        report = benchmark_gaps(_settings(None), lookups=lookups, database_url=database_url)
    _publish(report, output, as_json, render_gaps_benchmark)


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


@eval_app.command("formats")
def eval_formats(
    dataset_dir: Annotated[
        Path, typer.Argument(help="A folder with corpus/ (Markdown) and queries.jsonl.")
    ],
    formats: Annotated[
        str, typer.Option("--formats", help="Comma-separated, of html, docx, pdf.")
    ] = "html,docx,pdf",
    work: Annotated[
        Path | None,
        typer.Option("--work", help="Keep the rendered corpora here; a later run reuses them."),
    ] = None,
    as_json: JsonFlag = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also write JSON here.")
    ] = None,
) -> None:
    """The dataset rendered to HTML, DOCX and PDF by pandoc and LibreOffice (installed
    apart), each ingested: R@5, MRR@10, level counts and chunks/s beside Markdown's."""
    import tempfile

    from superbiz.evaluation.formats import default_jobs, evaluate_formats, render_formats_report

    wanted = [f.strip() for f in formats.split(",") if f.strip()]
    with _errors(), tempfile.TemporaryDirectory(prefix="superbiz-eval-formats-") as scratch:
        report = evaluate_formats(
            dataset_dir,
            _settings,
            work or Path(scratch),
            formats=wanted,
            jobs=default_jobs(),
            on_progress=lambda step: err.print(f"[dim]{step}[/]"),
        )
    _publish(report, output, as_json, render_formats_report)


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
        settings = _settings(data_dir)
    if transport == "http":
        _warn_if_open(settings, host, port, "call lookup_knowledge and write its sessions")
    with _errors():
        serve(
            settings,
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
    _warn_if_open(settings, host, port, "ask questions and change documents")
    err.print(f"[dim]superbiz on http://{host}:{port} · API docs at /docs[/]")
    uvicorn.run(application, host=host, port=port, log_level="info")


def _warn_if_open(settings: Settings, host: str, port: int, what: str) -> None:
    """A server listening beyond loopback without ``service.api-key`` is open to anyone
    who can reach it: say so before it starts."""
    if not settings.service.api_key and host not in ("127.0.0.1", "localhost", "::1"):
        err.print(
            "[yellow]warning:[/] no service.api-key is set: anyone who can reach "
            f"{escape(host)}:{port} may {what}"
        )


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
