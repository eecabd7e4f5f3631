"""The permission probe over HTTP, end to end through the real service and real identity:
people added with ``superbiz users add`` (their own keys) and a person who signs in with
the team's OpenID Connect provider (a real one, started here: ``oidc-provider-mock``),
whose ID token is his bearer credential and whose groups come from it. On both
relational stores (SQLite, and PostgreSQL in a schema of its own).

- alice (key; groups payments, hr-team) may read the restricted domain (``hr``, by
  ``access.domains``) and the restricted document (``payment/…``, by its ``access:``);
- bob (the provider's token; group sre, an editor by ``auth.oidc.editor-groups``) may
  read neither, and tries every read and write of the service after alice used them;
- ada (key; an admin) reads everything: admins are unrestricted readers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from access_probe import (
    HIDDEN_DOCS,
    HR_DOC,
    PROBES,
    RECON_DOC,
    RECON_TITLE,
    assert_nothing_hidden,
    leaks,
    open_access_runtime,
)
from conftest import fresh_databases
from oidc_provider import id_token, running_provider
from superbiz import cli
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.api.routes.documents import WITHHELD
from superbiz.auth._reader import reader_of
from superbiz.auth.directory import UserDirectory
from superbiz.config import AuthSettings, OidcSettings
from superbiz.evaluation.feedback_export import export_feedback

#: an upload only editors may make, restricted to the payments group by its own list
LEDGER_UPLOAD = "ledger-close.md"
LEDGER_TEXT = b"""---
title: Month-end kingfisher ledger close
access: [payments]
---
# Month-end kingfisher ledger close

Close the kingfisher ledger on the last business day and reconcile the channel totals.
"""


@dataclass
class Service:
    client: TestClient
    runtime: Runtime
    #: each person's request headers: their key, or (bob) the provider's ID token
    headers: dict[str, dict[str, str]]
    keys: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return self.headers[who]


def _users_add(data_dir: Path, database_url: str, name: str, *options: str) -> str:
    """``superbiz users add NAME OPTIONS…`` as an administrator runs it on the server;
    the key it prints once."""
    args = ["users", "add", name, *options, "--data-dir", str(data_dir), "--json"]
    done = CliRunner().invoke(cli.app, args, env={"SUPERBIZ_DATABASE_URL": database_url})
    assert done.exit_code == 0, done.output
    return str(json.loads(done.output)["api_key"])


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, use_embedder: Any
) -> Iterator[Service]:
    root = tmp_path_factory.mktemp(f"api-access-{request.param}")
    with running_provider() as provider, fresh_databases(root) as databases:
        provider.add_user("sub-bob", preferred_username="bob", groups=["sre"])
        url = databases(request.param)
        runtime = open_access_runtime(root, use_embedder, database_url=url)
        try:
            keys = {
                "alice": _users_add(root / "data", url, "alice", "-g", "payments", "-g", "hr-team"),
                "ada": _users_add(root / "data", url, "ada", "--role", "admin"),
            }
            oidc = OidcSettings(
                issuer=provider.issuer,
                client_id="superbiz-access",
                client_secret="access-secret",
                editor_groups=("sre",),
            )
            settings = runtime.settings.model_copy(update={"auth": AuthSettings(oidc=oidc)})
            app = create_app(settings, assistant=runtime, warm_up=False)
            headers = {name: {"X-API-Key": key} for name, key in keys.items()}
            headers["bob"] = {"Authorization": f"Bearer {id_token(provider, oidc, 'sub-bob')}"}
            with TestClient(app, raise_server_exceptions=False) as client:
                yield Service(client, runtime, headers, keys)
        finally:
            runtime.close()


def test_who_is_who(service: Service) -> None:
    """The three people are who the probe needs: bob through the provider's token."""
    me = {
        who: service.client.get("/api/me", headers=service.as_(who)).json()
        for who in service.headers
    }
    assert (me["bob"]["via"], me["bob"]["groups"], me["bob"]["role"]) == (
        "bearer",
        ["sre"],
        "editor",
    )
    assert (me["alice"]["via"], me["alice"]["role"]) == ("api_key", "reader")
    assert sorted(me["alice"]["groups"]) == ["hr-team", "payments"]
    assert me["ada"]["role"] == "admin"


@pytest.fixture(scope="module")
def alices_session(service: Service) -> str:
    """Alice asks about both restricted documents and rates the answers down (gaps); ada
    uploads a restricted document of the payments group."""
    client = service.client
    session = f"web-{uuid.uuid4().hex[:8]}"
    for question in (RECON_TITLE, "育儿假申请流程"):
        turn = client.post(
            "/api/chat",
            json={"session_id": session, "question": question},
            headers=service.as_("alice"),
        )
        assert turn.status_code == 200, turn.text
        assert {c["path"] for c in turn.json()["citations"]} & set(HIDDEN_DOCS)
        rated = client.post(
            f"/api/sessions/{session}/turns/{turn.json()['turn']}/feedback",
            json={"rating": "down", "comment": "not the steps I needed"},
            headers=service.as_("alice"),
        )
        assert rated.status_code == 200, rated.text
    uploaded = client.post(
        "/api/documents",
        data={"domain": "payment"},
        files={"file": (LEDGER_UPLOAD, LEDGER_TEXT, "text/markdown")},
        headers=service.as_("ada"),
    )
    assert uploaded.status_code == 201, uploaded.text
    return session


def _reads(service: Service, who: str, session: str) -> dict[str, str]:
    """Every read of the service ``who`` may make (their own ``session``'s included)."""
    client, headers = service.client, service.as_(who)
    got = {
        "documents": client.get("/api/documents", headers=headers),
        "map": client.get("/api/knowledge/map", headers=headers),
        "map_yaml": client.get("/api/knowledge/map", params={"format": "yaml"}, headers=headers),
        "session": client.get(f"/api/sessions/{session}", headers=headers),
        "sessions": client.get("/api/sessions", headers=headers),
        "trace": client.get(f"/api/sessions/{session}/invocations", headers=headers),
        "citation": client.get(f"/api/sessions/{session}/turns/1/citations/1", headers=headers),
        "metrics": client.get("/metrics", headers=headers),
        "info": client.get("/api/info", headers=headers),
        "me": client.get("/api/me", headers=headers),
    }
    for name, response in got.items():  # bob's first question may have cited nothing
        assert response.status_code == 200 or name == "citation", (who, name, response.text)
    return {name: response.text for name, response in got.items()}


def _ask(service: Service, who: str, session: str, question: str) -> dict[str, Any]:
    answer = service.client.post(
        "/api/chat", json={"session_id": session, "question": question}, headers=service.as_(who)
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_bob_asks_in_every_way_and_reads_everything_and_learns_nothing(
    service: Service, alices_session: str
) -> None:
    """Each probe in bob's own session (the later ones follow-ups of the earlier, after
    alice's turns used the documents), streamed too; then every read of the service."""
    bobs = f"web-{uuid.uuid4().hex[:8]}"
    for question in PROBES:
        assert_nothing_hidden(_ask(service, "bob", bobs, question), said=[question])
    stream = service.client.post(
        "/api/chat_stream",
        json={"session_id": bobs, "question": RECON_TITLE},
        headers=service.as_("bob"),
    )
    assert stream.status_code == 200
    assert_nothing_hidden(stream.text, said=[RECON_TITLE])
    for name, text in _reads(service, "bob", bobs).items():
        assert not leaks(text, said=PROBES), (name, leaks(text, said=PROBES))
    assert "kingfisher" not in service.client.get("/api/sources", headers=service.as_("bob")).text


def test_alices_session_is_no_session_for_bob(service: Service, alices_session: str) -> None:
    """Every route naming her session answers bob exactly as for one that never existed."""
    client, bob = service.client, service.as_("bob")
    nowhere = "web-nobody-has-this"
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", "/api/sessions/{}", {}),
        ("GET", "/api/sessions/{}/invocations", {}),
        ("GET", "/api/sessions/{}/turns/1/citations/1", {}),
        ("PATCH", "/api/sessions/{}", {"json": {"title": "mine"}}),
        ("POST", "/api/sessions/{}/turns/1/feedback", {"json": {"rating": "up"}}),
        ("DELETE", "/api/sessions/{}", {}),
    ]
    for method, template, kwargs in calls:
        hers, absent = (
            client.request(method, template.format(session), headers=bob, **kwargs)
            for session in (alices_session, nowhere)
        )
        assert hers.status_code == absent.status_code == 404, (method, template, hers.text)
        assert hers.json()["message"].replace(alices_session, "X") == absent.json()[
            "message"
        ].replace(nowhere, "X")
    # asking in it (a new id would start a session): the words of a session that is not
    absent = client.get(f"/api/sessions/{nowhere}", headers=bob).json()["message"]
    for route in ("/api/chat", "/api/chat_stream"):
        body = {"session_id": alices_session, "question": RECON_TITLE}
        asked = client.post(route, json=body, headers=bob)
        assert asked.status_code == 404, (route, asked.text)
        assert asked.json()["message"] == absent.replace(nowhere, alices_session)
    listed = client.get("/api/sessions", params={"id": alices_session}, headers=bob).json()
    assert listed["sessions"] == []
    # she still has it, whole
    assert RECON_DOC in _reads(service, "alice", alices_session)["session"]


def test_the_documents_api_is_as_if_they_did_not_exist(
    service: Service, alices_session: str
) -> None:
    client, bob = service.client, service.as_("bob")
    ledger = f"payment/{LEDGER_UPLOAD}"
    for path in (*HIDDEN_DOCS, ledger):
        for method in ("GET", "DELETE"):  # bob is an editor: he may delete what he reads
            hidden = client.request(method, f"/api/documents/{quote(path)}", headers=bob)
            absent = client.request(method, "/api/documents/payment/nope.md", headers=bob)
            assert hidden.status_code == absent.status_code == 404, (method, path)
            assert hidden.json()["message"].replace(path, "X") == absent.json()["message"].replace(
                "payment/nope.md", "X"
            )
    # an upload at a hidden path never replaces it, and is refused as at a knowledge-base
    # document's path (whether it is one, or an upload, or what it holds, is not said)
    mine = b"---\ntitle: Mine\n---\n# Mine\n\nbob's own notes.\n"
    readable_twin = "支付失败排查.md"  # a knowledge-base document bob reads
    for name in (LEDGER_UPLOAD, "nightly-reconciliation.md"):
        refusals = [
            client.post(
                "/api/documents",
                data={"domain": "payment", "overwrite": "true"},
                files={"file": (file_name, mine, "text/markdown")},
                headers=bob,
            )
            for file_name in (name, readable_twin)
        ]
        assert [r.status_code for r in refusals] == [409, 409], [r.text for r in refusals]
        assert refusals[0].json()["message"].replace(name, "X") == refusals[1].json()[
            "message"
        ].replace(readable_twin, "X")
    ada = service.as_("ada")
    assert "kingfisher" in client.get(f"/api/documents/{ledger}", headers=ada).text
    assert "kingfisher" in client.get(f"/api/documents/{quote(RECON_DOC)}", headers=ada).text
    # bob heard "not found"; the audit trail says which document he was refused (once a
    # minute each), and never a path that does not exist or one he may read
    trail = client.get("/api/audit?action=denied&actor=bob", headers=ada).json()["events"]
    withheld = {e["target"] for e in trail if e["detail"]["reason"] == WITHHELD}
    assert withheld == {*HIDDEN_DOCS, ledger}


def test_the_gaps_report_is_an_admins_and_an_admin_reads_everything(
    service: Service, alices_session: str
) -> None:
    client = service.client
    for who in ("bob", "alice"):
        refused = client.get("/api/gaps", params={"since": "1h"}, headers=service.as_(who))
        assert refused.status_code == 403 and not leaks(refused.text)
    gaps = client.get("/api/gaps", params={"since": "1h"}, headers=service.as_("ada"))
    assert gaps.status_code == 200 and "not the steps I needed" in gaps.text
    everyone = client.get("/api/sessions", params={"all": "true"}, headers=service.as_("ada"))
    assert alices_session in everyone.text


def _same(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs between any two turns (ids, times)."""
    varying = ("session_id", "trace_id", "latency_ms", "elapsed_ms", "duration_ms")

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in varying}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return dict(strip(answer))


def test_alice_reads_them_and_gets_what_an_unrestricted_reader_gets(
    service: Service, alices_session: str
) -> None:
    hers = _reads(service, "alice", alices_session)
    assert RECON_DOC in hers["documents"] and HR_DOC in hers["map"]
    assert RECON_DOC in hers["session"] and RECON_DOC in hers["trace"]
    assert RECON_TITLE in hers["sessions"]
    document = service.client.get(
        f"/api/documents/{quote(RECON_DOC)}", headers=service.as_("alice")
    )
    assert document.status_code == 200 and "kingfisher" in document.text
    admins = _reads(service, "ada", alices_session)  # an admin reads her session
    for name in ("map", "map_yaml", "session", "trace", "citation"):
        assert admins[name] == hers[name], name
    # the documents differ by ada's upload only, which alice (payments) reads too
    assert json.loads(admins["documents"]) == json.loads(hers["documents"])
    for question in PROBES:  # the same answers, each in a fresh session
        her_answer = _ask(service, "alice", f"web-{uuid.uuid4().hex[:8]}", question)
        admin_answer = _ask(service, "ada", f"web-{uuid.uuid4().hex[:8]}", question)
        assert _same(her_answer) == _same(admin_answer), question


def test_feedback_export_for_bob_holds_nothing_of_them(
    service: Service, alices_session: str, tmp_path: Path
) -> None:
    """``superbiz feedback export`` as bob reads: the reader his sign-in makes him."""
    session = f"web-{uuid.uuid4().hex[:8]}"
    for question in (RECON_TITLE, "redis connection pool exhausted"):
        turn = _ask(service, "alice", session, question)
        service.client.post(
            f"/api/sessions/{session}/turns/{turn['turn']}/feedback",
            json={"rating": "up"},
            headers=service.as_("alice"),
        )
    kb = service.runtime.kb
    bob = UserDirectory(kb.engine, service.runtime.settings.auth).users.get("bob")
    assert bob is not None and bob.groups == ("sre",)  # recorded from his token
    reader = reader_of(UserDirectory(kb.engine, AuthSettings()).user(bob, "bearer"))
    summary = export_feedback(kb.engine, tmp_path / "bob", may_read=kb.view(reader).may_read)
    written = {
        str(p.relative_to(tmp_path / "bob")): p.read_text(encoding="utf-8")
        for p in (tmp_path / "bob").rglob("*")
        if p.is_file()
    }
    assert_nothing_hidden({"summary": summary, "files": written})
    assert summary["queries"] >= 1  # the Redis question is his to have
    full = export_feedback(kb.engine, tmp_path / "all")
    assert (tmp_path / "all" / "corpus" / RECON_DOC).is_file()
    assert full["queries"] > summary["queries"]
