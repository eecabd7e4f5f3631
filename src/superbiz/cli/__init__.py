"""The ``superbiz`` command line (Typer + rich), one module per command group."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Annotated

import typer

from superbiz._process import tune_memory
from superbiz.cli import bench, chat, kb, ops, users
from superbiz.cli import eval as datasets
from superbiz.cli._common import console, err

app = typer.Typer(
    help="Knowledge assistant whose retrieval is governed by code.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Benchmarks that print numbers (and write JSON).", no_args_is_help=True)
app.add_typer(eval_app, name="eval")
feedback_app = typer.Typer(help="Answer ratings (thumbs up/down).", no_args_is_help=True)
app.add_typer(feedback_app, name="feedback")
users_app = typer.Typer(
    help="People, their roles, groups and API keys (README: Sign-in, roles and the audit trail).",
    no_args_is_help=True,
)
app.add_typer(users_app, name="users")


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


def _add(group: typer.Typer, command: Callable[..., None], name: str | None = None) -> None:
    """Register ``command``; its line in the group's ``--help`` is its docstring's first
    paragraph on one line (Typer's rich mode keeps the docstring's line breaks there)."""
    summary = inspect.cleandoc(command.__doc__ or "").split("\n\n")[0]
    group.command(name, short_help=" ".join(summary.split()))(command)


# commands in the order ``superbiz --help`` lists them
_add(app, kb.ingest)
_add(app, kb.sources)
_add(app, chat.lookup)
_add(app, kb.knowledge_map, "map")
_add(app, chat.ask)
_add(app, chat.chat)
_add(app, chat.sessions)
_add(app, chat.trace)
_add(app, ops.gaps)
_add(feedback_app, ops.feedback_export, "export")
_add(eval_app, datasets.eval_retrieval, "retrieval")
_add(eval_app, datasets.eval_levels, "levels")
_add(eval_app, datasets.eval_fit_ranker, "fit-ranker")
_add(eval_app, datasets.eval_agent, "agent")
_add(eval_app, datasets.eval_answers, "answers")
_add(eval_app, bench.eval_service, "service")
_add(eval_app, bench.eval_sync, "sync")
_add(eval_app, bench.eval_gaps, "gaps")
_add(eval_app, bench.eval_ingest, "ingest")
_add(eval_app, datasets.eval_formats, "formats")
_add(eval_app, bench.eval_bombs, "bombs")
_add(eval_app, bench.eval_upload, "upload")
_add(eval_app, bench.eval_telemetry, "telemetry")
_add(eval_app, bench.eval_scale, "scale")
_add(app, kb.calibrate)
_add(users_app, users.add, "add")
_add(users_app, users.list_users, "list")
_add(users_app, users.set_user, "set")
_add(users_app, users.remove, "remove")
_add(users_app, users.rotate, "rotate")
_add(app, users.audit)
_add(app, ops.mcp)
_add(app, ops.serve)

__all__ = ["app", "console", "err", "eval_app", "feedback_app", "users_app"]
