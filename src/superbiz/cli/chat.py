"""Commands that ask the knowledge base: ``lookup``, ``ask``, ``chat``, ``trace``."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from superbiz.cli._common import (
    AsGroup,
    DataDir,
    JsonFlag,
    SessionOption,
    _continues,
    _errors,
    _print_json,
    _reader,
    _session,
    _settings,
    _table,
    _typed,
    _visible,
    console,
    err,
)
from superbiz.exceptions import LLMError, QuestionError

if TYPE_CHECKING:
    from superbiz.agents.planner import Plan
    from superbiz.agents.supervisor import SupervisedTurn
    from superbiz.agents.turn_result import TurnResult
    from superbiz.governance.results import ToolOutcome


def lookup(
    query: Annotated[str, typer.Argument(help="What to look up.")],
    session: SessionOption = None,
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
    as_group: AsGroup = None,
) -> None:
    """One governed lookup, recorded in the session (`superbiz trace`): prints what the
    model would see."""
    from superbiz.agents.runtime import open_lookup

    with _errors():
        query, given = _typed(query, "the query"), session
        session = _session(given, "lookup")
        domain = _typed(domain, "--domain") if domain else domain
        if missing_dimension:
            missing_dimension = _typed(missing_dimension, "--missing-dimension")
    reader = _reader(as_group)
    with _errors(), open_lookup(_settings(data_dir)) as runtime:
        outcome = runtime.user_lookup(session, query, domain, missing_dimension, reader=reader)
    if outcome.result is None:  # a malformed call or an unknown domain (recorded as such)
        err.print(f"[bold red]error:[/] {escape(outcome.error or 'lookup failed')}")
        raise typer.Exit(2)
    data = outcome.result.as_dict()
    if details:
        data["retrieval_details"] = outcome.details.as_dict() if outcome.details else None
    if as_json:
        _print_json(data)
    else:
        _render_lookup(data)
    _continues(session, given)


def _render_lookup(data: dict[str, Any]) -> None:
    from superbiz.retrieval.relevance import RelevanceLevel
    from superbiz.storage.invocations import TOOL_NAME

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


def ask(
    question: Annotated[str, typer.Argument(help="The question, in Chinese or English.")],
    session: SessionOption = None,
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
    as_group: AsGroup = None,
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
        question, given = _typed(question), session
        session = _session(given, "ask")
    reader = _reader(as_group)
    with _errors(), open_runtime(_settings(data_dir)) as runtime:
        turn = runtime.ask(session, question, on_plan=show_plan, on_lookup=show, reader=reader)
    if as_json:
        _print_json(_turn_json(turn, runtime.settings.advanced.governance.high_min_calls))
        return
    console.print(
        Panel(
            escape(turn.result.answer),
            title=f"answer · {turn.result.model}",
            subtitle=_grounding_line(turn.result),
            expand=False,
        )
    )
    _continues(session, given)  # the JSON names it


def chat(
    session: SessionOption = None,
    data_dir: DataDir = None,
    as_group: AsGroup = None,
) -> None:
    """Interactive multi-turn chat; shows the plan and every lookup as it happens.
    Type /clear to forget the session, /quit (or Ctrl-D) to leave."""
    from superbiz.agents.runtime import open_runtime

    with _errors():
        given, session = session, _session(session, "chat")
    reader = _reader(as_group)
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
                    reader=reader,
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
    _continues(session, given)


def _keep_undecodable_input() -> None:
    """Read typed lines that are not UTF-8 as text with their bytes kept (``_typed``
    then says what to do), not as an error that ends the chat."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")


def _turn_json(turn: SupervisedTurn, high_mark: int) -> dict[str, Any]:
    """The API's answer body less what the service adds (``model``, ``high_mark``), with
    the plans whole, as the planner wrote them (``scoped`` too, which the API leaves out)."""
    from superbiz.api.responses.chat import ChatAnswer

    data = ChatAnswer.from_turn(turn, high_mark).model_dump(
        mode="json", exclude_unset=True, exclude=set(ChatAnswer.SERVICE_FIELDS)
    )
    data["plan"] = turn.plan.as_dict()
    if turn.replan is not None:
        data["replan"] = turn.replan.as_dict()
    return data


def _grounding_line(result: TurnResult) -> str:
    """Whether the answer stands on the documents shown, and who wrote it."""
    sources = len(result.citations)
    line = (
        f"[green]grounded[/] · {sources} source{'s' * (sources != 1)}"
        if result.grounded
        else "[yellow]not grounded[/]"
    )
    if result.answer_source == "no_evidence" and result.related:
        line += f" · only related documents found ({len(result.related)})"
    elif result.answer_source != "model":
        line += f" · {result.answer_source.replace('_', ' ')}"
    if result.related and result.answer_source != "no_evidence":
        line += f" · {len(result.related)} related"
    if result.invalid_citations:
        line += f" · {result.invalid_citations} invalid citation(s) removed"
    return line


def _plan_line(plan: Plan) -> str:
    if not plan.need_retrieval:
        how = "direct answer" if plan.direct_answer else "answer from session evidence"
        return f"[dim]plan[/] {how} [dim]({plan.source})[/]"
    domains = ", ".join(plan.domain_ids)
    if not plan.scoped:  # its domains are candidates: its lookup searches them all
        return f"[dim]plan[/] search every domain, nearest {domains} [dim]({plan.source})[/]"
    return f"[dim]plan[/] consult {domains} [dim]({plan.source})[/]"


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


def sessions(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=1000, help="How many, latest first.")
    ] = 20,
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
) -> None:
    """The chat sessions, latest first: each id (for `trace ID` and `ask --session ID`),
    its turns, when it was last used, and its name or first question."""
    from superbiz.storage.chat import ChatRepository
    from superbiz.storage.db import open_database

    settings = _settings(data_dir)
    with _errors():
        engine = open_database(settings.resolved_database_url)
    try:
        with _errors():
            found = ChatRepository(engine).summaries(limit=limit)
    finally:
        engine.dispose()
    if as_json:
        _print_json([dataclasses.asdict(summary) for summary in found])
        return
    if not found:
        err.print("no sessions yet: `superbiz ask QUESTION` starts one")
        return
    rows = [
        [
            s.session_id,
            s.turns,
            s.updated_at.strftime("%Y-%m-%d %H:%M"),
            (s.title or s.first_question)[:60],
        ]
        for s in found
    ]
    console.print(_table("sessions", ["session", "turns", "last used (UTC)", "name"], rows))


def trace(
    session: Annotated[str, typer.Argument(help="Session id.")],
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
    as_group: AsGroup = None,
) -> None:
    """A session's tool calls, executed and blocked, like the ISS-003 log; with
    --as-group, without the turns that used anything that group may not read."""
    from superbiz.agents.runtime import open_lookup
    from superbiz.governance.tool import RAW_ARGUMENTS
    from superbiz.knowledge.kb.access_rules import reader_limits
    from superbiz.knowledge.kb.withheld import visible_turns

    reader = _reader(as_group)
    with _errors(), open_lookup(_settings(data_dir)) as runtime:
        rows = runtime.invocations.for_session(session)
        ratings = runtime.feedback.for_session(session)
        messages = runtime.chats.messages(session)
        limits = reader_limits(runtime.kb, reader)
    if limits is not None:
        shown = visible_turns(messages, rows, limits)
        rows = [r for r in rows if r.turn in shown]
        messages = [m for m in messages if m.turn in shown]
        ratings = {turn: rating for turn, rating in ratings.items() if turn in shown}
    answers = [m for m in messages if m.role == "assistant"]
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
