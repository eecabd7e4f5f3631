"""Every ``superbiz`` command, from the Typer app: usage, what it does, and each argument
and option with its help (the same text ``--help`` prints)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer.main

from superbiz.reference._markdown import cell, code


@dataclass(frozen=True)
class Parameter:
    """An argument or option as ``--help`` lists it."""

    name: str
    declaration: str  # ``-o, --output <path>``
    help: str


@dataclass(frozen=True)
class Command:
    """A command (or group) with its usage, help and parameters."""

    path: str  # ``superbiz eval agent``
    usage: str
    help: str
    parameters: tuple[Parameter, ...]
    group: bool


def commands() -> list[Command]:
    """Every command of ``superbiz``, groups included, in ``--help`` order."""
    from superbiz.cli import app

    root = typer.main.get_command(app)
    return list(_walk(root, root.context_class(root, info_name="superbiz")))


def _walk(command: Any, ctx: Any) -> Iterator[Command]:
    parameters = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or param.name == "help":
            continue
        declaration, text = record
        parameters.append(Parameter(param.name, declaration, _plain(text)))
    group = hasattr(command, "list_commands")
    yield Command(
        ctx.command_path,
        " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)]),
        inspect.cleandoc(command.help or ""),
        tuple(parameters),
        group,
    )
    if group:
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(sub, sub.context_class(sub, info_name=name, parent=ctx))


def _plain(text: str) -> str:
    """Help text without rich's escapes (``\\[default: …]``)."""
    return text.replace("\\[", "[")


def commands_markdown() -> str:
    """The command reference: one section per command."""
    lines: list[str] = []
    for command in commands():
        label = "cli-" + command.path.replace(" ", "-")
        depth = "###" if command.path.count(" ") <= 1 else "####"
        lines += [f"({label})=", f"{depth} {code(command.path)}", "", command.help, ""]
        lines += [f"Usage: {code(command.usage)}", ""]
        if command.group:
            lines += ["Its commands follow.", ""]
        if command.parameters:
            lines += ["| argument or option | what it does |", "| --- | --- |"]
            lines += [f"| {code(p.declaration)} | {cell(p.help)} |" for p in command.parameters]
            lines.append("")
    return "\n".join(lines)
