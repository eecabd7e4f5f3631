"""Two real ``superbiz serve`` replicas on one PostgreSQL database and one Milvus server.

What a team behind a load balancer relies on: a session may alternate between replicas
and keeps one history and one action memory; a document uploaded, deleted or ingested
through any process is found (or gone) through every replica on its next turn; a Milvus
server that goes away is a 503 naming it, and the next turn works once it is back.
Both replicas share one data directory (uploaded files live there; see
docs/getting-started/team.md). Skipped without PostgreSQL or a Milvus server.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from conftest import (
    MilvusServer,
    TcpProxy,
    _libpq_url,
    _require_postgres,
    _with_query,
    free_port,
    write_kb,
)
from superbiz import cli
from superbiz.config import Settings, VectorSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

REDIS_DOC = "infrastructure/redis-pool.md"
START_S = 240.0


@dataclass
class Replicas:
    urls: list[str]
    env: dict[str, str]
    data_dir: Path
    milvus: MilvusServer
    #: replica 0 reaches PostgreSQL through it (replica 1 directly)
    postgres: TcpProxy
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def client(self, index: int) -> httpx.Client:
        return httpx.Client(base_url=self.urls[index], timeout=120.0)

    def ask(self, index: int, session_id: str, question: str) -> dict[str, Any]:
        with self.client(index) as client:
            response = client.post(
                "/api/chat", json={"session_id": session_id, "question": question}
            )
        assert response.status_code == 200, response.text
        return dict(response.json())

    def get(self, index: int, path: str) -> Any:
        with self.client(index) as client:
            response = client.get(path)
        assert response.status_code == 200, response.text
        return response.json()


def _superbiz() -> str:
    exe = shutil.which("superbiz", path=str(Path(sys.executable).parent)) or shutil.which(
        "superbiz"
    )
    if exe is None:
        pytest.skip("the superbiz command is not installed in this environment")
    return exe


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"replica {url} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"replica {url} was not healthy within {START_S:.0f} s")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Replicas]:
    import psycopg

    base = _require_postgres()
    root = tmp_path_factory.mktemp("replicas")
    milvus = MilvusServer(root / "milvus", free_port())
    if (problem := milvus.start()) is not None:
        pytest.skip(problem)
    schema = f"t_{uuid.uuid4().hex}"
    with psycopg.connect(_libpq_url(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    database_url = _with_query(base, options=f"-csearch_path%3D{schema}", application_name=schema)
    data_dir = root / "data"
    settings = Settings(
        data_dir=data_dir, database_url=database_url, vector=VectorSettings(uri=milvus.uri)
    )
    kb = KnowledgeBase(settings, embedder=use_embedder)
    Ingestor(kb).ingest([write_kb(root / "kb")])
    kb.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERBIZ_")}
    env.update(
        SUPERBIZ_DATA_DIR=str(data_dir),
        SUPERBIZ_DATABASE_URL=database_url,
        SUPERBIZ_VECTOR__URI=milvus.uri,
    )
    target = make_url(database_url)
    proxy = TcpProxy((target.host or "127.0.0.1", target.port or 5432), free_port())
    proxy.start()
    proxied = target.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    group = Replicas(urls, env, data_dir, milvus, proxy)
    try:
        for port, url in zip(ports, [proxied, database_url], strict=True):
            log = root / f"serve-{port}.log"
            with log.open("wb") as out:
                group.processes.append(
                    subprocess.Popen(
                        [_superbiz(), "serve", "--port", str(port)],
                        env={**env, "SUPERBIZ_DATABASE_URL": url},
                        cwd=root,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        for url, process, port in zip(group.urls, group.processes, ports, strict=True):
            _wait_healthy(url, process, root / f"serve-{port}.log")
        yield group
    finally:
        for process in group.processes:
            process.terminate()
        for process in group.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        milvus.stop()
        proxy.stop()
        with psycopg.connect(_libpq_url(base), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (schema,),
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _cited(answer: dict[str, Any]) -> set[str]:
    return {citation["path"] for citation in answer["citations"]}


def _domains(replicas: Replicas, index: int) -> set[str]:
    kmap = replicas.get(index, "/api/knowledge/map")
    return {domain["domain_id"] for domain in kmap["available_knowledge_domains"]}


def test_a_session_alternating_between_replicas_keeps_one_history_and_memory(
    replicas: Replicas,
) -> None:
    session = f"team-{uuid.uuid4().hex[:8]}"
    first = replicas.ask(0, session, "Redis connection pool exhausted 怎么办？")
    assert REDIS_DOC in _cited(first)
    second = replicas.ask(1, session, "Redis 连接池耗尽的处理步骤是什么？")
    assert (first["turn"], second["turn"]) == (1, 2)
    # The other replica knows the document was retrieved in turn 1 (SQL action memory).
    assert REDIS_DOC in second["reused_evidence"]

    histories = [replicas.get(i, f"/api/sessions/{session}") for i in (0, 1)]
    assert histories[0] == histories[1]
    messages = histories[0]["messages"]
    assert [(m["turn"], m["role"]) for m in messages] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
    recorded = [replicas.get(i, f"/api/sessions/{session}/invocations") for i in (0, 1)]
    assert recorded[0] == recorded[1]
    rows = recorded[0]["invocations"]
    assert len(rows) == len(first["lookups"]) + len(second["lookups"])
    assert [row["turn"] for row in rows] == sorted(row["turn"] for row in rows)


def test_document_changes_through_any_process_are_seen_by_every_replica(
    replicas: Replicas, tmp_path: Path
) -> None:
    doc = "# Quokka ledger reconciliation\n\nReconcile the quokka ledger nightly with the bank.\n"
    with replicas.client(0) as client:
        uploaded = client.post(
            "/api/documents",
            files={"file": ("quokka-ledger.md", doc.encode(), "text/markdown")},
            data={"domain": "billing"},
        )
    assert uploaded.status_code == 201, uploaded.text
    path = uploaded.json()["document"]["path"]
    assert path == "billing/quokka-ledger.md"

    found = replicas.ask(1, f"u-{uuid.uuid4().hex[:8]}", "How do we reconcile the quokka ledger?")
    assert path in _cited(found)
    assert "billing" in _domains(replicas, 1)

    with replicas.client(1) as client:
        assert client.delete(f"/api/documents/{path}").status_code == 200
    gone = replicas.ask(0, f"d-{uuid.uuid4().hex[:8]}", "How do we reconcile the quokka ledger?")
    assert path not in _cited(gone)
    assert "billing" not in _domains(replicas, 0)

    # `superbiz ingest` runs while both replicas serve.
    folder = write_kb(
        tmp_path / "more",
        {"ops/wombat-failover.md": "# Wombat failover\n\nFail the wombat cluster over.\n"},
    )
    ingest = subprocess.run(
        [_superbiz(), "ingest", str(folder)],
        env=replicas.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    for index in (0, 1):
        answer = replicas.ask(
            index, f"i-{uuid.uuid4().hex[:8]}", "How do I fail over the wombat cluster?"
        )
        assert "ops/wombat-failover.md" in _cited(answer), index


def test_a_turn_waits_for_the_same_session_running_in_another_replica(
    replicas: Replicas,
) -> None:
    """The test holds the session's lock as another replica's running turn would: the
    replica's turn must queue on it in PostgreSQL, and run once it is released."""
    import threading

    import psycopg

    from superbiz.storage.replica_turn_order import LOCK_NAMESPACE, PostgresSessionLocks

    session = f"race-{uuid.uuid4().hex[:8]}"
    locks = PostgresSessionLocks(replicas.env["SUPERBIZ_DATABASE_URL"], 60.0)
    answers: list[dict[str, Any]] = []
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND classid = %s AND objid = (hashtext(%s)::bigint & 4294967295)::oid"
    )
    try:
        with locks.hold(session):
            turn = threading.Thread(
                target=lambda: answers.append(replicas.ask(1, session, "Redis connection pool"))
            )
            turn.start()
            queued = False
            with psycopg.connect(_libpq_url(_require_postgres()), autocommit=True) as admin:
                for _ in range(100):
                    row = admin.execute(waiting, (LOCK_NAMESPACE, session)).fetchone()
                    if queued := bool(row and row[0]):
                        break
                    if not turn.is_alive():
                        break
                    time.sleep(0.1)
            assert queued, "the replica's turn did not wait for the session's lock"
            assert not answers
        turn.join(120)
    finally:
        locks.close()
    assert [a["turn"] for a in answers] == [1]


def test_two_replicas_under_50_sessions_stay_within_postgres_default_connections(
    replicas: Replicas, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``superbiz eval service`` on both replicas with 50 clients reports the most
    connections PostgreSQL held (``pg_stat_activity``, sampled during the run): each
    replica's pools (``database-pool``, defaults) keep two of them within PostgreSQL's
    default ``max_connections`` of 100."""
    from superbiz.config import DatabasePoolSettings

    monkeypatch.setenv("SUPERBIZ_DATABASE_URL", replicas.env["SUPERBIZ_DATABASE_URL"])
    args = ["eval", "service", "--clients", "50", "--requests", "100", "--sequential", "2"]
    urls = [option for url in replicas.urls for option in ("--url", url)]
    output = tmp_path / "service.json"
    result = CliRunner().invoke(cli.app, [*args, *urls, "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert "PostgreSQL connections: peak" in result.output
    report = json.loads(output.read_text())
    assert report["errors"] == 0, report["error_samples"]
    assert report["audit"]["ok"], report["audit"]["problems"]
    postgres = report["postgres"]
    assert postgres["samples"] > 0 and postgres["peak_connections"] > 2
    assert postgres["peak_connections"] <= 2 * DatabasePoolSettings().most < 100


def test_postgres_going_away_is_a_503_naming_it_and_the_next_turn_works(
    replicas: Replicas,
) -> None:
    """PostgreSQL is taken away from replica 0 only (its connections cut, new ones
    refused); replica 1 keeps serving throughout."""
    session = f"pg-{uuid.uuid4().hex[:8]}"
    replicas.postgres.stop()
    try:
        with replicas.client(0) as client:
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["checks"]["database"] == "failed"
            failed = client.post(
                "/api/chat", json={"session_id": session, "question": "Redis connection pool"}
            )
            assert failed.status_code == 503, failed.text
            assert failed.json()["error"] == "store_unavailable"
            assert "relational store (postgresql" in failed.json()["message"]
        assert replicas.get(1, "/healthz")["status"] == "ok"
    finally:
        replicas.postgres.start()
    answer = replicas.ask(0, session, "Redis connection pool exhausted 怎么办？")
    assert answer["turn"] == 1 and REDIS_DOC in _cited(answer)
    messages = replicas.get(1, f"/api/sessions/{session}")["messages"]
    assert [(m["turn"], m["role"]) for m in messages] == [(1, "user"), (1, "assistant")]


def test_milvus_going_away_is_a_503_naming_it_and_the_next_turn_works(
    replicas: Replicas,
) -> None:
    """Last in this module: it takes the Milvus server away and brings it back."""
    session = f"fault-{uuid.uuid4().hex[:8]}"
    replicas.milvus.stop()
    try:
        with replicas.client(0) as client:
            health = client.get("/healthz")
            assert health.status_code == 503
            assert health.json()["checks"]["vector_store"] == "failed"
            assert any(replicas.milvus.uri in p for p in health.json()["problems"])
            failed = client.post(
                "/api/chat", json={"session_id": session, "question": "Redis connection pool"}
            )
            assert failed.status_code == 503, failed.text
            assert failed.json()["error"] == "store_unavailable"
            assert f"Milvus at {replicas.milvus.uri}" in failed.json()["message"]
            assert client.get(f"/api/sessions/{session}").status_code == 404  # nothing stored
    finally:
        assert replicas.milvus.start() is None
    for index in (1, 0):
        assert replicas.get(index, "/healthz")["status"] == "ok"
    answer = replicas.ask(0, session, "Redis connection pool exhausted 怎么办？")
    assert answer["turn"] == 1 and REDIS_DOC in _cited(answer)
    rows = replicas.get(1, f"/api/sessions/{session}/invocations")["invocations"]
    assert len(rows) == len(answer["lookups"])


def test_zz_two_replicas_share_people_keys_sign_ins_and_sessions(replicas: Replicas) -> None:
    """People added once are known to both replicas; a sign-in made through one is a
    sign-in on the other and ends on both; a session is its person's on both; removing
    a person refuses their key everywhere at once; both write one audit trail. Last in
    the module (its name): while people exist the replicas ask everyone who they are, so
    it removes them again and waits until both replicas serve without sign-in."""
    from datetime import timedelta

    from superbiz.auth.directory import UserDirectory
    from superbiz.auth.keys import key_hash
    from superbiz.config import AuthSettings
    from superbiz.storage.db import open_database
    from superbiz.storage.models import utcnow

    engine = open_database(replicas.env["SUPERBIZ_DATABASE_URL"])
    directory = UserDirectory(engine, AuthSettings())
    try:
        _, alice = directory.add("alice", "editor", ["payments"], "cli:test")
        _, bob = directory.add("bob", "reader", [], "cli:test")
        _, root = directory.add("root", "admin", [], "cli:test")

        def call(
            index: int,
            method: str,
            path: str,
            key: str | None,
            headers: dict[str, str] | None = None,
            **kwargs: Any,
        ) -> httpx.Response:
            sent = {**(headers or {}), **({"X-API-Key": key} if key else {})}
            with replicas.client(index) as client:
                return client.request(method, path, headers=sent, **kwargs)

        deadline = time.monotonic() + 30
        for index in (0, 1):  # each replica re-reads "are there people?" every 5 s
            while call(index, "GET", "/api/documents", None).status_code != 401:
                assert time.monotonic() < deadline, f"replica {index} never asked who is calling"
                time.sleep(0.5)
        for index in (0, 1):
            me = call(index, "GET", "/api/me", alice)
            assert me.status_code == 200 and me.json()["name"] == "alice", (index, me.text)

        session = f"web-shared-{uuid.uuid4().hex[:8]}"
        asked = call(
            0,
            "POST",
            "/api/chat",
            alice,
            json={"session_id": session, "question": "Redis 连接池耗尽怎么办？"},
        )
        assert asked.status_code == 200, asked.text
        assert call(1, "GET", f"/api/sessions/{session}", alice).status_code == 200
        assert call(1, "GET", f"/api/sessions/{session}", bob).status_code == 404
        taken = call(1, "POST", "/api/chat", bob, json={"session_id": session, "question": "x"})
        assert taken.status_code == 404
        listed = call(1, "GET", "/api/sessions", alice).json()["sessions"]
        assert [s["session_id"] for s in listed] == [session]

        # a browser's sign-in (the cookie the page holds after the provider) is known to
        # both replicas and ends on both when it signs out through one
        token = "browser-token-" + uuid.uuid4().hex
        person = directory.users.get("bob")
        assert person is not None
        directory.users.start_sign_in(
            key_hash(token), person.id, utcnow() + timedelta(hours=1), None
        )
        cookie = {"Cookie": f"superbiz_session={token}"}
        for index in (0, 1):
            me = call(index, "GET", "/api/me", None, headers=cookie)
            assert me.json()["name"] == "bob" and me.json()["via"] == "sign_in", index
        assert call(0, "POST", "/auth/logout", None, headers=cookie).json()["signed_out"]
        assert call(1, "GET", "/api/me", None, headers=cookie).status_code == 401

        removed = call(1, "DELETE", "/api/users/alice", root)
        assert removed.status_code == 200, removed.text
        assert call(0, "GET", "/api/me", alice).status_code == 401
        trail = call(0, "GET", "/api/audit", root).json()["events"]
        actions = {(e["actor"], e["action"], e["target"]) for e in trail}
        assert ("root", "user_removed", "alice") in actions
        assert ("bob", "sign_out", None) in actions
    finally:
        for name in ("alice", "bob", "root"):
            with contextlib.suppress(Exception):
                directory.remove(name, "cli:test")
        engine.dispose()
        deadline = time.monotonic() + 30
        for index in (0, 1):
            while replicas.get(index, "/api/info")["auth_required"]:
                assert time.monotonic() < deadline
                time.sleep(0.5)
