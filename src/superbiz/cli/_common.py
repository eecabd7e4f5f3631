"""Helpers every command group shares: the consoles, option types, the one-red-line error
handling, settings and knowledge-base opening, progress bars and report publishing."""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from superbiz._text import CONTROL_CHARACTERS
from superbiz.access import AccessListError, Reader
from superbiz.config import Settings, load_settings
from superbiz.exceptions import QuestionError, SuperbizError
from superbiz.storage.session_ids import session_id_problem

if TYPE_CHECKING:
    from superbiz.knowledge.kb.base import KnowledgeBase

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
OutputFile = Annotated[Path | None, typer.Option("--output", "-o", help="Also write JSON here.")]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        help="Continue this session (its evidence and domains) \\[default: a new one, "
        "whose id is printed].",
    ),
]
AsGroup = Annotated[
    list[str] | None,
    typer.Option(
        "--as-group",
        help="Act as a reader in this group (repeat for several): only what it may read "
        "(access lists) \\[default: the local user, who reads everything].",
    ),
]


def _reader(groups: list[str] | None) -> Reader | None:
    """The reader ``--as-group`` names; None (everything) without it."""
    if not groups:
        return None
    try:
        return Reader.of_groups("cli", groups)
    except AccessListError as exc:
        err.print(f"[bold red]error:[/] --as-group: {escape(str(exc))}")
        raise typer.Exit(2) from None


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


def _session(given: str | None, command: str) -> str:
    """The session ``--session`` names, or a new one for this run: a question asked on
    its own is not a follow-up of every question asked before it, as one shared default
    session had made each (``_continues`` says how to go on with it)."""
    if given is None:
        return f"{command}-{secrets.token_hex(4)}"
    session = _typed(given, "--session")
    if problem := session_id_problem(session):  # the API's rule: its sessions are ours
        err.print(f"[bold red]error:[/] --session {escape(problem)}")
        raise typer.Exit(2)
    return session


def _continues(session: str, given: str | None) -> None:
    """After a run in a new session: its id, and how to ask in it again (to stderr)."""
    if given is None:
        err.print(f"[dim]session {session} · --session {session} continues it[/]")


def _settings(data_dir: Path | None) -> Settings:
    """The settings, or one red line and exit 2 when the file or environment is invalid."""
    with _errors():
        return load_settings(data_dir=data_dir)


@contextmanager
def _knowledge_base(settings: Settings) -> Iterator[KnowledgeBase]:
    """The data dir's knowledge base, closed afterwards; errors become one red line."""
    from superbiz.knowledge.kb.base import KnowledgeBase

    with _errors():
        kb = KnowledgeBase(settings)
        try:
            yield kb
        finally:
            kb.close()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


class _RateColumn(ProgressColumn):
    """Items per second (files while ingesting), once rich has measured a rate."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f}/s", style="progress.data.speed")


def _progress() -> Progress:
    """A progress bar redrawn by ``update(..., refresh=True)`` in the caller's thread: an
    auto-refresh thread would take the GIL in the middle of the lookups a benchmark times."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
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
