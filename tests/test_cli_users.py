"""``superbiz users add|list|set|remove|rotate`` and ``superbiz audit``: the key printed once
and stored hashed, every change audited as the operating-system user, errors as one red
line."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from superbiz import cli
from superbiz.auth.keys import key_hash
from superbiz.storage.db import open_database
from superbiz.storage.models import ApiKeyRow

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(cli.app, list(args))
    return result.exit_code, result.output


def test_people_from_the_command_line(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    code, out = run(
        "users",
        "add",
        "alice@example.com",
        "--role",
        "admin",
        "-g",
        "ops",
        "--data-dir",
        data,
        "--json",
    )
    assert code == 0, out
    added = json.loads(out)
    key = added["api_key"]
    assert added["user"]["role"] == "admin" and added["user"]["groups"] == ["ops"]

    engine = open_database(f"sqlite:///{tmp_path / 'data' / 'superbiz.db'}")
    with Session(engine) as session:
        stored = list(session.scalars(select(ApiKeyRow.key_hash)))
    engine.dispose()
    assert stored == [key_hash(key)] and key not in stored

    code, out = run("users", "add", "bob", "--data-dir", data)
    assert code == 0 and "shown once" in out
    bob_key = out.strip().splitlines()[-1]
    assert bob_key.startswith("sbz_")

    code, out = run("users", "list", "--data-dir", data, "--json")
    listed = {u["name"]: u for u in json.loads(out)["users"]}
    assert listed["bob"]["role"] == "reader" and listed["bob"]["keys"] == [bob_key[:12]]

    code, out = run("users", "set", "bob", "--role", "editor", "-g", "hr", "--data-dir", data)
    assert code == 0 and "bob: editor, groups: hr" in out
    code, out = run("users", "rotate", "bob", "--data-dir", data, "--json")
    assert json.loads(out)["api_key"] != bob_key
    code, out = run("users", "remove", "bob", "--data-dir", data)
    assert code == 0 and "removed bob" in out

    code, out = run("users", "remove", "bob", "--data-dir", data)
    assert code == 2 and "no user 'bob'" in out
    code, out = run("users", "add", "alice@example.com", "--data-dir", data)
    assert code == 2 and "already a user" in out
    code, out = run("users", "add", "carol", "--role", "owner", "--data-dir", data)
    assert code == 2 and "unknown role 'owner'" in out
    code, out = run("users", "set", "alice@example.com", "--data-dir", data)
    assert code == 2 and "nothing to change" in out

    code, out = run("audit", "--data-dir", data, "--json")
    events = json.loads(out)["events"]
    assert [(e["action"], e["target"]) for e in events] == [
        ("user_removed", "bob"),
        ("key_rotated", "bob"),
        ("groups_changed", "bob"),
        ("role_changed", "bob"),
        ("user_added", "bob"),
        ("user_added", "alice@example.com"),
    ]
    assert all(e["actor"].startswith("cli") for e in events)
    code, out = run("audit", "--data-dir", data, "--action", "role_changed")
    assert code == 0 and "reader" in out and "editor" in out
