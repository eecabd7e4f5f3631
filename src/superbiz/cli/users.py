"""People and the audit trail: ``superbiz users add|list|set|remove|rotate`` and
``superbiz audit``. They read and write the relational store only (no index), so they run
beside ``superbiz serve`` and act on every replica at once. Changes are audited as
``cli:<the operating-system user>``."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from superbiz.cli._common import (
    DataDir,
    JsonFlag,
    _errors,
    _print_json,
    _settings,
    _table,
    console,
    err,
)
from superbiz.config import Settings
from superbiz.exceptions import ConflictError, NotFoundError

if TYPE_CHECKING:
    from superbiz.auth.directory import UserDirectory

RoleOption = Annotated[
    str | None,
    typer.Option("--role", help="reader (asks), editor (+ documents), admin (+ people, gaps)."),
]
Groups = Annotated[
    list[str] | None,
    typer.Option("--group", "-g", help="A group the person is in (repeat for more)."),
]
Name = Annotated[str, typer.Argument(help="The person's name, as they sign in (e.g. an email).")]


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in this environment (a container)
        return "cli"


@contextmanager
def _directory(settings: Settings) -> Iterator[UserDirectory]:
    from superbiz.auth.directory import UserDirectory
    from superbiz.storage.db import open_database

    with _errors():
        engine = open_database(settings.resolved_database_url)
    try:
        with _errors():
            yield UserDirectory(engine, settings.auth)
    except (ValueError, NotFoundError, ConflictError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    finally:
        engine.dispose()


def _key_message(name: str, key: str) -> None:
    console.print(f"API key of {escape(name)} (shown once; store it now):")
    console.print(key, markup=False, highlight=False, soft_wrap=True)


def add(
    name: Name,
    role: RoleOption = None,
    group: Groups = None,
    data_dir: DataDir = None,
    as_json: JsonFlag = False,
) -> None:
    """Add a person and print their new API key once (only its hash is stored). A person
    who signs in with the identity provider under this name gets this role."""
    with _directory(_settings(data_dir)) as directory:
        person, key = directory.add(name, role or "reader", group or [], _actor())
    if as_json:
        _print_json({"user": asdict(person), "api_key": key})
        return
    console.print(f"added {escape(person.name)} ({person.role}, groups: {_groups(person.groups)})")
    _key_message(person.name, key)


def list_users(data_dir: DataDir = None, as_json: JsonFlag = False) -> None:
    """Everyone who may use the service: role, groups, keys, last seen."""
    with _directory(_settings(data_dir)) as directory:
        people = directory.people()
    if as_json:
        _print_json({"users": [asdict(p) for p in people]})
        return
    if not people:
        console.print("no users: add one with `superbiz users add NAME --role admin`")
        return
    console.print(
        _table(
            "users",
            ["name", "role", "groups", "keys", "signs in with the provider", "last seen"],
            [
                [
                    p.name,
                    p.role if p.role == p.assigned_role else f"{p.role} (set: {p.assigned_role})",
                    _groups(p.groups),
                    ", ".join(f"{k}…" for k in p.keys) or "-",
                    "yes" if p.signed_in_with_provider else "no",
                    p.last_seen_at.isoformat(timespec="minutes") if p.last_seen_at else "never",
                ]
                for p in people
            ],
        )
    )


def set_user(
    name: Name,
    role: RoleOption = None,
    group: Groups = None,
    data_dir: DataDir = None,
) -> None:
    """Change a person's role, or replace their groups with the --group options given."""
    if role is None and group is None:
        err.print("[bold red]error:[/] nothing to change: give --role and/or --group")
        raise typer.Exit(2)
    with _directory(_settings(data_dir)) as directory:
        person = directory.change(name, _actor(), role=role, groups=group)
    console.print(f"{escape(person.name)}: {person.role}, groups: {_groups(person.groups)}")


def remove(name: Name, data_dir: DataDir = None) -> None:
    """Remove a person: their keys and sign-ins stop at once, signing in again is refused
    until they are added back; their sessions stay for admins to read."""
    with _directory(_settings(data_dir)) as directory:
        directory.remove(name, _actor())
    console.print(f"removed {escape(name)}")


def rotate(name: Name, data_dir: DataDir = None, as_json: JsonFlag = False) -> None:
    """Print a new API key for the person; their earlier keys stop working at once."""
    with _directory(_settings(data_dir)) as directory:
        key = directory.rotate(name, _actor())
    if as_json:
        _print_json({"name": name, "api_key": key})
        return
    _key_message(name, key)


def audit(
    data_dir: DataDir = None,
    since: Annotated[
        str | None, typer.Option("--since", help="A duration back (30m, 24h, 7d) or a date.")
    ] = None,
    actor: Annotated[str | None, typer.Option("--actor", help="Only this person's.")] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="Only this action (sign_in, denied, …).")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, latest first.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """The audit trail: sign-ins, uploads, deletes, changes to people, refused requests."""
    from datetime import UTC, datetime

    from superbiz.auth.audit import AuditLog
    from superbiz.knowledge.coverage.gaps import parse_since
    from superbiz.storage.db import open_database

    settings = _settings(data_dir)
    with _errors():
        try:
            start = parse_since(since, datetime.now(UTC)) if since else None
        except ValueError as exc:
            from superbiz.exceptions import ConfigError

            raise ConfigError(f"--since: {exc}") from None
        engine = open_database(settings.resolved_database_url)
        try:
            events = AuditLog(engine).read(since=start, actor=actor, action=action, limit=limit)
        finally:
            engine.dispose()
    if as_json:
        _print_json({"events": [asdict(e) for e in events]})
        return
    console.print(
        _table(
            "audit trail (latest first)",
            ["when", "who", "what", "target", "detail", "from"],
            [
                [
                    e.at.isoformat(timespec="seconds"),
                    e.actor,
                    e.action,
                    e.target or "-",
                    ", ".join(f"{k}: {v}" for k, v in (e.detail or {}).items()) or "-",
                    e.address or "-",
                ]
                for e in events
            ],
        )
    )


def _groups(groups: tuple[str, ...]) -> str:
    return ", ".join(groups) or "none"
