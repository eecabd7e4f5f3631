"""People, keys, sign-ins, session owners and the audit trail in the relational store, on
SQLite and on PostgreSQL: what several replicas share."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from superbiz.auth.audit import AuditLog
from superbiz.auth.directory import UserDirectory
from superbiz.auth.keys import key_hash
from superbiz.auth.oidc import Identity
from superbiz.auth.ownership import SessionGate
from superbiz.auth.principal import ADMIN_KEY_USER, User
from superbiz.auth.roles import Role
from superbiz.config import AuthSettings, OidcSettings
from superbiz.exceptions import ConflictError, ForbiddenError, NotFoundError, SignInError
from superbiz.storage.chat import ChatMessage, ChatRepository
from superbiz.storage.db import open_database
from superbiz.storage.models import utcnow
from superbiz.storage.session_owners import SessionOwners
from superbiz.storage.users import PendingSignIn, UserRepository


@pytest.fixture
def engine(database_url: str) -> Engine:
    engine = open_database(database_url)
    yield engine  # type: ignore[misc]
    engine.dispose()


def test_people_and_their_keys(engine: Engine) -> None:
    directory = UserDirectory(engine, AuthSettings())
    person, key = directory.add("alice@example.com", "editor", ["payments", "payments"], "cli:x")
    assert person.role == "editor" and person.groups == ("payments",)
    assert key.startswith("sbz_") and person.keys == (key[:12],)
    # only the key's hash is stored
    stored = UserRepository(engine)
    assert stored.by_key(key_hash(key)) is not None
    assert stored.by_key(key) is None
    user = directory.by_key(key)
    assert user == User("alice@example.com", Role.EDITOR, frozenset({"payments"}), "api_key", 1)
    with pytest.raises(ConflictError):
        directory.add("alice@example.com", "reader", [], "cli:x")
    for bad in ("", "a/b", "x\x00y", ADMIN_KEY_USER, "n" * 129):
        with pytest.raises(ValueError):
            directory.add(bad, "reader", [], "cli:x")
    with pytest.raises(ValueError, match="unknown role"):
        directory.add("bob", "owner", [], "cli:x")

    new = directory.rotate("alice@example.com", "cli:x")
    assert directory.by_key(key) is None and directory.by_key(new) is not None
    directory.change("alice@example.com", "cli:x", role="admin", groups=["hr"])
    assert directory.by_key(new) == User(
        "alice@example.com", Role.ADMIN, frozenset({"hr"}), "api_key", 1
    )
    directory.remove("alice@example.com", "cli:x")
    assert directory.by_key(new) is None
    assert directory.people() == []
    with pytest.raises(NotFoundError):
        directory.rotate("alice@example.com", "cli:x")
    # added back: a new key, the old ones stay dead
    _, again = directory.add("alice@example.com", "reader", [], "cli:x")
    assert directory.by_key(again) is not None and directory.by_key(new) is None

    trail = [(e.actor, e.action, e.target) for e in AuditLog(engine).read()]
    assert trail[:5] == [
        ("cli:x", "user_added", "alice@example.com"),
        ("cli:x", "user_removed", "alice@example.com"),
        ("cli:x", "groups_changed", "alice@example.com"),
        ("cli:x", "role_changed", "alice@example.com"),
        ("cli:x", "key_rotated", "alice@example.com"),
    ]


def test_signing_in_with_the_provider(engine: Engine) -> None:
    settings = AuthSettings(
        oidc=OidcSettings(issuer="https://idp.example", client_id="c", admin_groups=("ops",))
    )
    directory = UserDirectory(engine, settings)
    first = directory.signed_in(Identity("sub-1", "dana", ("payments",)), "sign_in")
    assert first.role is Role.READER and first.groups == frozenset({"payments"})
    # the provider's groups replace the stored ones; a role group raises the role
    second = directory.signed_in(Identity("sub-1", "dana", ("ops",)), "sign_in")
    assert second.role is Role.ADMIN and second.groups == frozenset({"ops"})
    # no groups claim: the stored groups stay; leaving the role group takes the role back
    third = directory.signed_in(Identity("sub-1", "dana", None), "sign_in")
    assert third.groups == frozenset({"ops"})
    fourth = directory.signed_in(Identity("sub-1", "dana", ()), "sign_in")
    assert fourth.role is Role.READER
    with pytest.raises(SignInError, match="another account"):
        directory.signed_in(Identity("sub-2", "dana", ()), "sign_in")
    directory.remove("dana", "cli:x")
    with pytest.raises(SignInError, match="removed"):
        directory.signed_in(Identity("sub-1", "dana", ()), "sign_in")
    refused = AuditLog(engine).read(action="sign_in_refused")
    assert [e.actor for e in refused] == ["dana", "dana"]


def test_a_browsers_sign_in_lasts_its_lifetime_and_idle_time(engine: Engine) -> None:
    users = UserRepository(engine)
    record = users.add("erin", "reader", [], None)
    users.start_sign_in("h1", record.id, utcnow() + timedelta(hours=1), "id-token")
    live = users.sign_in("h1", timedelta(minutes=5))
    assert live is not None and live.user.name == "erin" and live.id_token == "id-token"
    assert users.sign_in("h1", timedelta(0)) is None  # idle past the limit: ended, deleted
    assert users.sign_in("h1", timedelta(hours=1)) is None
    users.start_sign_in("h2", record.id, utcnow() - timedelta(seconds=1), None)
    assert users.sign_in("h2", timedelta(hours=1)) is None  # past its lifetime
    users.start_sign_in("h3", record.id, utcnow() + timedelta(hours=1), None)
    ended = users.end_sign_in("h3")
    assert ended is not None and users.end_sign_in("h3") is None
    users.start_sign_in("h4", record.id, utcnow() + timedelta(hours=1), None)
    users.remove("erin")
    assert users.sign_in("h4", timedelta(hours=1)) is None


def test_a_pending_sign_in_is_taken_once_and_old_ones_are_dropped(engine: Engine) -> None:
    users = UserRepository(engine)
    now = utcnow()
    users.add_pending("old", PendingSignIn("v0", "n0", "r", "/", now - timedelta(hours=1)), now)
    users.add_pending("new", PendingSignIn("v1", "n1", "r", "/x", now), now - timedelta(minutes=10))
    assert users.take_pending("old") is None
    taken: list[PendingSignIn | None] = []
    threads = [
        threading.Thread(target=lambda: taken.append(users.take_pending("new"))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [p.code_verifier for p in taken if p is not None] == ["v1"]


def test_a_session_is_claimed_once_whoever_races_for_it(engine: Engine) -> None:
    owners = SessionOwners(engine)
    results: list[str] = []
    lock = threading.Lock()

    def claim(name: str) -> None:
        owner = owners.claim("web-contested", name)
        with lock:
            results.append(owner)

    threads = [threading.Thread(target=claim, args=(f"p{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and owners.owner("web-contested") == results[0]
    assert owners.claim("web-contested", "someone-else") == results[0]


def test_the_gate_hides_other_peoples_sessions(engine: Engine) -> None:
    gate = SessionGate(SessionOwners(engine))
    alice, bob = User("alice", Role.READER), User("bob", Role.READER)
    root = User("root", Role.ADMIN)
    gate.check(alice, "web-a", write=True, claim=True)
    gate.check(alice, "web-a", write=True)
    for write in (False, True):
        with pytest.raises(NotFoundError, match="no session 'web-a'"):
            gate.check(bob, "web-a", write=write, claim=True)
    gate.check(root, "web-a", write=False)
    with pytest.raises(ForbiddenError):
        gate.check(root, "web-a", write=True)
    with pytest.raises(NotFoundError):
        gate.check(bob, "web-unknown", write=False)
    gate.check(bob, "web-unknown", write=True, missing_ok=True)
    assert SessionOwners(engine).owner("web-unknown") is None
    # a session stored before sign-in (no claim) is the admin key's
    ChatRepository(engine).add_turn("web-old", 1, "q", ChatMessage("web-old", 1, "assistant", "a"))
    assert gate.owner("web-old") == ADMIN_KEY_USER
    with pytest.raises(NotFoundError):
        gate.check(bob, "web-old", write=True, claim=True)
    gate.check(User(ADMIN_KEY_USER, Role.ADMIN, via="admin_key"), "web-old", write=True)


def test_the_session_list_is_each_persons_own(engine: Engine) -> None:
    chats, owners = ChatRepository(engine), SessionOwners(engine)
    for session_id, owner in (("s-a", "alice"), ("s-b", "bob"), ("s-old", None)):
        if owner:
            owners.claim(session_id, owner)
        chats.add_turn(
            session_id, 1, f"q {session_id}", ChatMessage(session_id, 1, "assistant", "a")
        )
    assert [s.session_id for s in chats.summaries(owner="alice")] == ["s-a"]
    assert {s.session_id for s in chats.summaries(owner=ADMIN_KEY_USER, unowned=True)} == {"s-old"}
    everyone = {s.session_id: s.owner for s in chats.summaries()}
    assert everyone == {"s-a": "alice", "s-b": "bob", "s-old": None}
    assert chats.summaries(["s-b"], owner="alice") == []


def test_a_repeated_refusal_is_written_once_a_minute(engine: Engine) -> None:
    log = AuditLog(engine)
    assert log.denied("bob", "GET /api/gaps", "needs admin", "10.0.0.1")
    assert not log.denied("bob", "GET /api/gaps", "needs admin", "10.0.0.1")
    assert log.denied("bob", "GET /api/audit", "needs admin", "10.0.0.1")
    assert [e.target for e in log.read(action="denied")] == ["GET /api/audit", "GET /api/gaps"]
