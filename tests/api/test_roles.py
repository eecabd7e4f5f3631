"""People, roles and whose sessions are whose, over the real HTTP service (per-user API
keys; the identity provider's sign-in is in ``test_sign_in.py``).

Readers ask, rate and see their own sessions; editors also upload, delete and read the
sources; admins also read the gaps, the audit trail and every session (never change
another's), and manage people. Another person's session is a 404 exactly like one that
does not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.api.guard import iter_route_contexts
from superbiz.auth.directory import UserDirectory
from superbiz.auth.roles import OPEN, ROUTE_ROLES, Role
from superbiz.config import ServiceSettings, Settings
from superbiz.storage.models import ChatMessageRow

QUESTION = "支付回调超时怎么办？"
ADMIN_KEY = "the-one-admin-key"


class People:
    """The test's people and their keys."""

    def __init__(self, directory: UserDirectory) -> None:
        self.keys: dict[str, str] = {}
        for name, role, groups in (
            ("rita", "reader", ["payments"]),
            ("rob", "reader", []),
            ("eddie", "editor", []),
            ("ada", "admin", []),
        ):
            _, self.keys[name] = directory.add(name, role, groups, "test")

    def headers(self, name: str) -> dict[str, str]:
        return {"X-API-Key": self.keys[name]}


@pytest.fixture(scope="module")
def assistant(make_assistant: Callable[..., Runtime]) -> Runtime:
    return make_assistant()


@pytest.fixture(scope="module")
def people(assistant: Runtime) -> People:
    return People(UserDirectory(assistant.kb.engine, assistant.settings.auth))


@pytest.fixture(scope="module")
def client(assistant: Runtime, people: People) -> TestClient:
    app = create_app(assistant.settings, assistant=assistant, warm_up=False)
    return TestClient(app, raise_server_exceptions=False)


def ask(client: TestClient, who: str, people: People, session_id: str) -> Any:
    return client.post(
        "/api/chat",
        json={"session_id": session_id, "question": QUESTION},
        headers=people.headers(who),
    )


def test_every_route_of_the_service_names_its_least_role(client: TestClient) -> None:
    app = client.app
    assert iter_route_contexts is not None
    listed = set(OPEN) | set(ROUTE_ROLES)
    missing = [
        (method, route.path)
        for route in iter_route_contexts(list(app.routes))  # type: ignore[attr-defined]
        for method in sorted(route.methods or ["GET"])
        if method != "HEAD" and (method, route.path) not in listed
    ]
    assert not missing, f"routes without a role in superbiz.auth.roles: {missing}"


# (method, path, request kwargs, least role); bodies that change nothing shared
CALLS: list[tuple[str, str, dict[str, Any], Role]] = [
    ("GET", "/api/me", {}, Role.READER),
    ("GET", "/api/documents", {}, Role.READER),
    ("GET", "/api/knowledge/map", {}, Role.READER),
    ("POST", "/api/chat/cancel", {"json": {"session_id": "web-none"}}, Role.READER),
    ("POST", "/api/documents", {"files": {"file": ("x.md", b"\x00", "text/plain")}}, Role.EDITOR),
    ("DELETE", "/api/documents/no/such.md", {}, Role.EDITOR),
    ("GET", "/api/sources", {}, Role.EDITOR),
    ("GET", "/api/gaps", {}, Role.ADMIN),
    ("GET", "/api/audit", {}, Role.ADMIN),
    ("GET", "/api/users", {}, Role.ADMIN),
    ("GET", "/api/sessions?all=true", {}, Role.ADMIN),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "least"), CALLS)
def test_each_role_reaches_what_it_may_and_is_refused_the_rest(
    client: TestClient, people: People, method: str, path: str, kwargs: dict[str, Any], least: Role
) -> None:
    for who, role in (("rob", Role.READER), ("eddie", Role.EDITOR), ("ada", Role.ADMIN)):
        response = client.request(method, path, headers=people.headers(who), **kwargs)
        if role < least:
            assert response.status_code == 403, (who, response.text)
            assert response.json()["error"] == "forbidden"
        else:
            assert response.status_code not in (401, 403), (who, response.text)
    anonymous = client.request(method, path, **kwargs)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"


def test_a_wrong_key_is_refused_and_audited(client: TestClient, people: People) -> None:
    wrong = client.get("/api/documents", headers={"X-API-Key": "sbz_" + "x" * 43})
    assert wrong.status_code == 401
    assert wrong.json()["message"] == "unknown or revoked API key"
    trail = client.get("/api/audit?action=denied", headers=people.headers("ada")).json()
    assert any(
        e["target"] == "GET /api/documents"
        and e["detail"]["reason"] == "unknown or revoked API key"
        for e in trail["events"]
    )


def test_me_names_the_person_their_groups_and_what_the_page_offers(
    client: TestClient, people: People
) -> None:
    rita = client.get("/api/me", headers=people.headers("rita")).json()
    assert rita == {
        "name": "rita",
        "role": "reader",
        "groups": ["payments"],
        "via": "api_key",
        "can": ["ask"],
    }
    ada = client.get("/api/me", headers=people.headers("ada")).json()
    assert "users" in ada["can"] and "audit" in ada["can"] and "gaps" in ada["can"]


def test_sessions_belong_to_their_person(
    client: TestClient, people: People, assistant: Runtime
) -> None:
    mine = "web-rita-session-1"
    assert ask(client, "rita", people, mine).status_code == 200
    turn = client.get(f"/api/sessions/{mine}", headers=people.headers("rita")).json()
    assert [m["role"] for m in turn["messages"]] == ["user", "assistant"]

    # another reader: every path to it answers as for a session that does not exist
    nowhere = client.get("/api/sessions/web-nobody-has-this", headers=people.headers("rob"))
    for method, suffix, kwargs in (
        ("GET", "", {}),
        ("GET", "/invocations", {}),
        ("GET", "/turns/1/citations/1", {}),
        ("PATCH", "", {"json": {"title": "mine now"}}),
        ("DELETE", "", {}),
        ("POST", "/turns/1/feedback", {"json": {"rating": "down"}}),
    ):
        theirs = client.request(
            method, f"/api/sessions/{mine}{suffix}", headers=people.headers("rob"), **kwargs
        )
        assert theirs.status_code == 404, (method, suffix, theirs.text)
        assert theirs.json()["message"] == nowhere.json()["message"].replace(
            "web-nobody-has-this", mine
        )
    # … and asking in it does not move it or add to it
    assert ask(client, "rob", people, mine).status_code == 404
    stream = client.post(
        "/api/chat_stream",
        json={"session_id": mine, "question": QUESTION},
        headers=people.headers("rob"),
    )
    assert stream.status_code == 404
    with Session(assistant.kb.engine) as session:
        stored = session.scalar(
            select(func.count())
            .select_from(ChatMessageRow)
            .where(ChatMessageRow.session_id == mine)
        )
    assert stored == 2
    robs = client.get("/api/sessions", headers=people.headers("rob")).json()["sessions"]
    assert mine not in {s["session_id"] for s in robs}
    # asking for it by id in the list does not show it either
    named = client.get(f"/api/sessions?id={mine}", headers=people.headers("rob")).json()
    assert named["sessions"] == []
    ritas = client.get("/api/sessions", headers=people.headers("rita")).json()["sessions"]
    assert mine in {s["session_id"] for s in ritas}

    # an admin reads it (and sees whose it is), never changes it
    everyone = client.get("/api/sessions?all=true", headers=people.headers("ada")).json()
    assert {s["session_id"]: s["owner"] for s in everyone["sessions"]}[mine] == "rita"
    assert client.get(f"/api/sessions/{mine}", headers=people.headers("ada")).status_code == 200
    assert (
        client.get(f"/api/sessions/{mine}/invocations", headers=people.headers("ada")).status_code
        == 200
    )
    for method, suffix, kwargs in (
        ("PATCH", "", {"json": {"title": "admin's now"}}),
        ("DELETE", "", {}),
        ("POST", "/turns/1/feedback", {"json": {"rating": "up"}}),
    ):
        refused = client.request(
            method, f"/api/sessions/{mine}{suffix}", headers=people.headers("ada"), **kwargs
        )
        assert refused.status_code == 403, refused.text
    assert ask(client, "ada", people, mine).status_code == 403
    # the owner still has it, unchanged
    again = client.get(f"/api/sessions/{mine}", headers=people.headers("rita")).json()
    assert again == turn


def test_a_session_a_person_clears_stays_theirs(client: TestClient, people: People) -> None:
    mine = "web-rita-cleared"
    assert ask(client, "rita", people, mine).status_code == 200
    cleared = client.post(
        "/api/chat/clear", json={"session_id": mine}, headers=people.headers("rita")
    )
    assert cleared.status_code == 200
    assert ask(client, "rob", people, mine).status_code == 404
    assert ask(client, "rita", people, mine).status_code == 200


def test_rotating_and_removing_end_keys_at_once(client: TestClient, assistant: Runtime) -> None:
    directory = UserDirectory(assistant.kb.engine, assistant.settings.auth)
    _, old = directory.add("temp", "reader", [], "test")
    assert client.get("/api/me", headers={"X-API-Key": old}).status_code == 200
    new = directory.rotate("temp", "test")
    assert client.get("/api/me", headers={"X-API-Key": old}).status_code == 401
    assert client.get("/api/me", headers={"Authorization": f"Bearer {new}"}).status_code == 200
    directory.remove("temp", "test")
    assert client.get("/api/me", headers={"X-API-Key": new}).status_code == 401


def test_editors_changes_and_refusals_are_in_the_audit_trail(
    client: TestClient, people: People
) -> None:
    document = b"---\ntitle: Audit probe\n---\n# Audit probe\n\nwhat the trail should name.\n"
    uploaded = client.post(
        "/api/documents",
        files={"file": ("audit-probe.md", document, "text/markdown")},
        headers=people.headers("eddie"),
    )
    assert uploaded.status_code == 201, uploaded.text
    path = uploaded.json()["document"]["path"]
    assert (
        client.delete(f"/api/documents/{path}", headers=people.headers("eddie")).status_code == 200
    )
    refused = client.delete(f"/api/documents/{path}", headers=people.headers("rob"))
    assert refused.status_code == 403

    assert client.get("/api/audit", headers=people.headers("eddie")).status_code == 403
    events = client.get("/api/audit", headers=people.headers("ada")).json()["events"]
    seen = [(e["actor"], e["action"], e["target"]) for e in events]
    assert ("eddie", "upload", path) in seen
    assert ("eddie", "delete_document", path) in seen
    assert ("rob", "denied", f"DELETE /api/documents/{path}") in seen
    assert all(e["at"] and e["address"] for e in events if e["actor"] == "eddie")


def test_admins_manage_people_through_the_api(client: TestClient, people: People) -> None:
    admin = people.headers("ada")
    added = client.post("/api/users", json={"name": "newcomer", "groups": ["hr"]}, headers=admin)
    assert added.status_code == 201, added.text
    key = added.json()["api_key"]
    assert added.json()["user"]["role"] == "reader" and key.startswith("sbz_")
    assert client.get("/api/me", headers={"X-API-Key": key}).json()["groups"] == ["hr"]
    again = client.post("/api/users", json={"name": "newcomer"}, headers=admin)
    assert again.status_code == 409
    bad = client.post("/api/users", json={"name": "service.api-key"}, headers=admin)
    assert bad.status_code == 422

    promoted = client.patch("/api/users/newcomer", json={"role": "editor"}, headers=admin)
    assert promoted.json()["role"] == "editor"
    assert client.get("/api/sources", headers={"X-API-Key": key}).status_code == 200
    listed = {u["name"]: u for u in client.get("/api/users", headers=admin).json()["users"]}
    assert listed["newcomer"]["keys"] == [key[:12]]

    rotated = client.post("/api/users/newcomer/rotate", headers=admin).json()["api_key"]
    assert client.get("/api/me", headers={"X-API-Key": key}).status_code == 401
    assert client.delete("/api/users/newcomer", headers=admin).status_code == 200
    assert client.get("/api/me", headers={"X-API-Key": rotated}).status_code == 401
    assert client.delete("/api/users/newcomer", headers=admin).status_code == 404

    trail = client.get("/api/audit?actor=ada", headers=admin).json()["events"]
    actions = [(e["action"], e["target"]) for e in trail]
    for action in ("user_added", "role_changed", "key_rotated", "user_removed"):
        assert (action, "newcomer") in actions
    change = next(e for e in trail if e["action"] == "role_changed")
    assert change["detail"] == {"from": "reader", "to": "editor"}


def test_the_admin_key_owns_the_sessions_from_before_sign_in(
    make_assistant: Callable[..., Runtime], with_api_key: Callable[[Settings, str], Settings]
) -> None:
    assistant = make_assistant()
    before = TestClient(create_app(assistant.settings, assistant=assistant, warm_up=False))
    old = "web-from-before"
    assert (
        before.post("/api/chat", json={"session_id": old, "question": QUESTION}).status_code == 200
    )

    settings = with_api_key(assistant.settings, ADMIN_KEY)
    assert settings.service == ServiceSettings(api_key=ADMIN_KEY)
    after = TestClient(create_app(settings, assistant=assistant, warm_up=False))
    _, key = UserDirectory(assistant.kb.engine, settings.auth).add("someone", "reader", [], "t")
    admin = {"X-API-Key": ADMIN_KEY}
    assert old in {
        s["session_id"] for s in after.get("/api/sessions", headers=admin).json()["sessions"]
    }
    assert after.get(f"/api/sessions/{old}", headers=admin).status_code == 200
    someone = {"X-API-Key": key}
    assert after.get(f"/api/sessions/{old}", headers=someone).status_code == 404
    taken = after.post("/api/chat", json={"session_id": old, "question": "x"}, headers=someone)
    assert taken.status_code == 404
    assert after.get("/api/me", headers=admin).json()["via"] == "admin_key"
