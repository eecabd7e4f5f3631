"""Shared fixtures: one real USE embedder, fresh SQLite/PostgreSQL databases, a small KB.

Every test runs in its own working directory with no ``SUPERBIZ_*`` variable set, so a
``superbiz.yaml`` or the developer's environment cannot change what the tests see.
PostgreSQL tests get a fresh schema each (``t_<uuid>``), selected through the URL's
``options=-csearch_path=...``; set ``SUPERBIZ_TEST_POSTGRES_URL`` to use another server.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from superbiz._net import free_port, wait_listening
from superbiz.config import Settings

# Read before the fixtures below remove every SUPERBIZ_* variable from the environment.
POSTGRES_URL = os.environ.get(
    "SUPERBIZ_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _drop_superbiz_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("SUPERBIZ_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="session", autouse=True)
def _clean_session_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Also covers module- and session-scoped fixtures, which run before function ones."""
    with pytest.MonkeyPatch.context() as patch:
        _drop_superbiz_env(patch)
        patch.chdir(tmp_path_factory.mktemp("cwd"))
        yield


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _drop_superbiz_env(monkeypatch)
    monkeypatch.chdir(tmp_path)


class _QuickPoll:
    """``time`` for pymilvus' gRPC handler with polling sleeps capped at 20 ms.

    pymilvus polls index builds with a fixed ``time.sleep(0.5)``: creating one collection
    (three indexes) costs 1.5 s of pure sleep in Milvus Lite, the bulk of this suite's
    time. Only the waiting between polls changes; Milvus does exactly the same work.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, 0.02))


@pytest.fixture(scope="session", autouse=True)
def _quick_milvus_polling() -> Iterator[None]:
    try:
        from pymilvus.client import grpc_handler
    except ImportError:  # pragma: no cover - pymilvus is a dependency
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        if getattr(grpc_handler, "time", None) is time:
            patch.setattr(grpc_handler, "time", _QuickPoll())
        yield


# -- embedder ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def use_embedder() -> Any:
    """The real USE-multilingual-v3 embedder, loaded once (about 0.5 s from its kept files)."""
    from superbiz.retrieval.embedders import USEEmbedder

    embedder = USEEmbedder()
    assert embedder.dimension == 512  # runs the start-up norm check once
    return embedder


# -- databases ----------------------------------------------------------------------------


def _libpq_url(url: str) -> str:
    """The SQLAlchemy URL as a libpq conninfo URI (``postgresql://...``)."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@functools.cache
def _postgres_problem(url: str) -> str | None:
    """``None`` when PostgreSQL answers at ``url`` within 2 s, else why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(_libpq_url(url), connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


# CI sets this: there a missing server is a failure, not a skip.
REQUIRE_SERVICES = os.environ.get("SUPERBIZ_TEST_REQUIRE_SERVICES") == "1"


def _require_postgres() -> str:
    problem = _postgres_problem(POSTGRES_URL)
    if problem is not None and REQUIRE_SERVICES:
        pytest.fail(f"PostgreSQL is required (SUPERBIZ_TEST_REQUIRE_SERVICES=1): {problem}")
    if problem is not None:
        pytest.skip(
            f"PostgreSQL not reachable at {POSTGRES_URL}; start it (e.g. `pg_ctlcluster 15 main "
            "start`) or set SUPERBIZ_TEST_POSTGRES_URL to run these tests"
        )
    return POSTGRES_URL


def _with_query(url: str, **params: str) -> str:
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"{url}{'&' if '?' in url else '?'}{query}"


@contextlib.contextmanager
def fresh_databases(folder: Path) -> Iterator[Callable[[str], str]]:
    """``make("sqlite" | "postgresql")`` → the URL of a fresh, empty database, for as long
    as the ``with`` lasts (``database_factory`` for one test; a module's fixture may hold
    one for the module).

    A SQLite database is a file in ``folder``. A PostgreSQL database is a new schema
    ``t_<uuid hex>``, dropped (CASCADE) afterwards; connections are tagged with the schema
    as ``application_name`` so that any left open by a failing test can be ended before
    the drop. Nothing depends on what other runs left in the database's public schema.
    """
    schemas: list[str] = []
    sqlite_files: list[Path] = []

    def make(kind: str) -> str:
        if kind == "sqlite":
            name = "superbiz.db" if not sqlite_files else f"superbiz-{len(sqlite_files)}.db"
            sqlite_files.append(folder / name)
            return f"sqlite:///{folder / name}"
        if kind != "postgresql":
            raise ValueError(f"unknown database kind {kind!r}")
        import psycopg

        base = _require_postgres()
        schema = f"t_{uuid.uuid4().hex}"
        with psycopg.connect(_libpq_url(base), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        schemas.append(schema)
        return _with_query(base, options=f"-csearch_path%3D{schema}", application_name=schema)

    try:
        yield make
    finally:
        if schemas:
            import psycopg

            with psycopg.connect(_libpq_url(POSTGRES_URL), autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = %s AND pid <> pg_backend_pid()",
                        (schema,),
                    )
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def database_factory(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``make("sqlite" | "postgresql")`` → the URL of a fresh, empty database (see
    ``fresh_databases``), dropped after the test."""
    with fresh_databases(tmp_path) as make:
        yield make


def refuse_titles(url: str, word: str) -> None:
    """Make the PostgreSQL database at ``url`` refuse every ``documents`` row whose title
    holds ``word``, as it refuses a value it cannot store: a trigger raising a data
    exception (SQLSTATE 22023), which the driver reports as ``DataError``."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "CREATE FUNCTION refuse_title() RETURNS trigger AS $$ BEGIN "
                    f"IF position('{word}' in NEW.title) > 0 THEN "
                    "RAISE EXCEPTION 'value refused for column title' USING ERRCODE = '22023'; "
                    "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
                )
            )
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_title BEFORE INSERT OR UPDATE ON documents "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_title()"
                )
            )
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, database_factory: Callable[[str], str]) -> str:
    """A fresh database on SQLite and on PostgreSQL (skipped when it is not reachable)."""
    return database_factory(request.param)


@pytest.fixture
def make_settings() -> Callable[..., Settings]:
    """``make_settings(tmp_path, database_url, **overrides)`` → ``Settings`` for a test KB."""

    def make(tmp_path: Path, database_url: str | None = None, **overrides: Any) -> Settings:
        return Settings(data_dir=tmp_path / "data", database_url=database_url, **overrides)

    return make


# -- a small knowledge base ----------------------------------------------------------------

SMALL_KB: dict[str, str] = {
    "payment/支付失败排查.md": """---
title: 支付失败排查
category: payment
covers: [支付回调超时, 退款失败]
tags: [支付, 订单]
when_to_retrieve: 用户支付失败或回调异常时
owner: pay-team
---
# 支付失败排查

## 回调超时
支付渠道回调超时时，先检查网关日志，再确认订单状态是否已经更新。

## 退款失败
退款失败通常是因为原交易已经关闭或者商户余额不足。
""",
    "infrastructure/redis-pool.md": """---
title: Redis 连接池耗尽
category: infrastructure
covers: [连接池, connection pool exhausted]
tags: [redis, 缓存]
---
# Redis 连接池耗尽

当 Redis connection pool exhausted 时，应用会报获取连接超时。

## 处理步骤
1. 检查 maxTotal 配置。
2. 排查慢查询和未归还的连接。
""",
    "api/rate-limit.md": """---
title: API rate limiting
category: api
covers: [429 Too Many Requests, throttling]
tags: [quota]
---
# API rate limiting

Clients that exceed their quota receive HTTP 429 Too Many Requests.

## Raising the limit
Ask the platform team to raise the per-tenant quota; include the tenant id.
""",
    "ops/notes/deploy-checklist.md": """# Deployment checklist

Before deploying, freeze the release branch and notify the on-call engineer.
""",
    "glossary.md": """# Glossary

Idempotency means that repeating a request has the same effect as sending it once.
""",
}
SMALL_KB_DOMAINS = {"api", "general", "infrastructure", "ops", "payment"}


def write_kb(root: Path, files: dict[str, str | bytes] | None = None) -> Path:
    """Write ``files`` (default: the small KB) under ``root``; returns ``root``."""
    for relative, content in (SMALL_KB if files is None else files).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def small_kb(tmp_path: Path) -> Path:
    """A KB folder: payment (zh), infrastructure (zh/en), api (en), a document without
    frontmatter in ops/notes/, and one at the root (domain ``general``)."""
    return write_kb(tmp_path / "kb")


@pytest.fixture(scope="session")
def kb_writer() -> Callable[..., Path]:
    """``write_kb`` for fixtures of a wider scope than ``small_kb``."""
    return write_kb


# -- the governed executor loop (added for the executor, tool, profile and CLI tests) ------


@contextlib.contextmanager
def ingested_kb(root: Path, files: dict[str, str | bytes], embedder: Any) -> Iterator[Any]:
    """``files`` written under ``root`` and ingested, every one, into a knowledge base of
    their own (``embedder``, Milvus Lite, SQLite), closed afterwards."""
    from superbiz.knowledge.ingest.ingestor import Ingestor
    from superbiz.knowledge.kb.base import KnowledgeBase

    settings = Settings(data_dir=root / "data", database_url=f"sqlite:///{root}/superbiz.db")
    kb = KnowledgeBase(settings, embedder=embedder)
    try:
        report = Ingestor(kb).ingest([write_kb(root / "kb", files)])
        assert len(report.added) == len(files) and not report.skipped, report
        yield kb
    finally:
        kb.close()


@pytest.fixture(scope="session")
def governed_kb(tmp_path_factory: pytest.TempPathFactory, use_embedder: Any) -> Iterator[Any]:
    """The small KB ingested once for the whole session (real USE, Milvus Lite, SQLite).

    Shared read-only: tests give each turn a fresh session id and their own tracker and
    recorder, so nothing one test does is seen by another.
    """
    with ingested_kb(tmp_path_factory.mktemp("governed-kb"), SMALL_KB, use_embedder) as kb:
        yield kb


# -- a Milvus server (the server profile) ----------------------------------------------------


class MilvusServer:
    """``milvus-lite server`` in a subprocess: the gRPC protocol of Milvus standalone,
    BM25 included. ``stop()`` and ``start()`` let a test take it away and bring it back
    (same port, same data)."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir = data_dir
        self.port = port
        self.uri = f"http://127.0.0.1:{port}"
        self.process: Any = None
        self.log = data_dir.parent / f"milvus-server-{port}.log"

    def start(self, timeout_s: float = 60.0) -> str | None:
        """Start and wait until it listens; ``None``, else why it did not come up."""
        import shutil
        import subprocess
        import sys

        exe = shutil.which("milvus-lite", path=str(Path(sys.executable).parent)) or shutil.which(
            "milvus-lite"
        )
        if exe is None:
            return "the milvus-lite command is not installed (pip install milvus-lite)"
        command = [exe, "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if wait_listening(self.port, timeout_s, lambda: self.process.poll() is None):
            return None
        self.stop()
        tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
        return f"milvus-lite server did not listen on {self.port}: {' | '.join(tail)}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:  # a killed server may leave a half-written segment that fails its restart
                self.process.wait(60)
            except Exception:
                self.process.kill()
                self.process.wait(10)
        self.process = None


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusServer]:
    """A Milvus server for the whole session; tests isolate themselves by collection name
    (``milvus_collection``). Skipped when it cannot start, failed when CI requires it."""
    server = MilvusServer(tmp_path_factory.mktemp("milvus-server") / "data", free_port())
    problem = server.start()
    if problem is not None:
        if REQUIRE_SERVICES:
            pytest.fail(
                f"a Milvus server is required (SUPERBIZ_TEST_REQUIRE_SERVICES=1): {problem}"
            )
        pytest.skip(f"no Milvus server for the server-profile tests: {problem}")
    yield server
    server.stop()


@pytest.fixture
def milvus_collection() -> str:
    """A collection name no other test uses."""
    return f"t_{uuid.uuid4().hex}"


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; ``stop()`` cuts every connection and
    refuses new ones, as a database server that went away would, ``start()`` brings it
    back on the same port. Lets a test take PostgreSQL away from one process only."""

    def __init__(self, target: tuple[str, int], port: int) -> None:
        self.target = target
        self.port = port
        import threading

        self._listener: Any = None
        self._sockets: list[Any] = []
        self._guard = threading.Lock()

    def start(self) -> None:
        import socket
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: Any) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # stopped
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._guard:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: Any, sink: Any) -> None:
        import socket

        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        import socket

        with self._guard:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        for sock in [listener, *sockets] if listener else sockets:
            with contextlib.suppress(OSError):  # wakes the thread blocked on it
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
