"""The ``superbiz`` command line (Typer + rich), one module per command group."""

from __future__ import annotations

import logging
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


# commands in the order ``superbiz --help`` lists them
app.command()(kb.ingest)
app.command()(kb.sources)
app.command()(chat.lookup)
app.command("map")(kb.knowledge_map)
app.command()(chat.ask)
app.command()(chat.chat)
app.command()(chat.trace)
app.command()(ops.gaps)
feedback_app.command("export")(ops.feedback_export)
eval_app.command("retrieval")(datasets.eval_retrieval)
eval_app.command("levels")(datasets.eval_levels)
eval_app.command("fit-ranker")(datasets.eval_fit_ranker)
eval_app.command("agent")(datasets.eval_agent)
eval_app.command("answers")(datasets.eval_answers)
eval_app.command("service")(bench.eval_service)
eval_app.command("sync")(bench.eval_sync)
eval_app.command("gaps")(bench.eval_gaps)
eval_app.command("ingest")(bench.eval_ingest)
eval_app.command("formats")(datasets.eval_formats)
eval_app.command("bombs")(bench.eval_bombs)
eval_app.command("upload")(bench.eval_upload)
eval_app.command("telemetry")(bench.eval_telemetry)
eval_app.command("scale")(bench.eval_scale)
app.command()(kb.calibrate)
users_app.command("add")(users.add)
users_app.command("list")(users.list_users)
users_app.command("set")(users.set_user)
users_app.command("remove")(users.remove)
users_app.command("rotate")(users.rotate)
app.command()(users.audit)
app.command()(ops.mcp)
app.command()(ops.serve)

__all__ = ["app", "console", "err", "eval_app", "feedback_app", "users_app"]
