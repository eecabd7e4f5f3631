"""The server profile of ``superbiz eval scale``: ``milvus-lite server`` in a subprocess
(the gRPC protocol of Milvus standalone, BM25 included) and a PostgreSQL schema of its
own, as the deploy tests run them; both removed afterwards."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from superbiz._net import free_port, wait_listening
from superbiz.exceptions import SuperbizError

START_TIMEOUT_S = 120.0


class MilvusLiteServer:
    """``milvus-lite server --data-dir DIR`` on a free loopback port."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = data_dir.parent / "milvus-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> MilvusLiteServer:
        exe = shutil.which("milvus-lite", path=str(Path(sys.executable).parent)) or shutil.which(
            "milvus-lite"
        )
        if exe is None:
            raise SuperbizError(
                "the milvus-lite command is not installed (pip install milvus-lite)"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [exe, "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT
            )
        process = self.process
        if wait_listening(self.port, START_TIMEOUT_S, lambda: process.poll() is None):
            return self
        self.stop()
        raise SuperbizError(f"milvus-lite server did not start (see {self.log})")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def peak_rss_mb(self) -> float | None:
        """The server process's peak resident memory (Linux ``VmHWM``)."""
        return _status_mb(self.process.pid, "VmHWM") if self.process else None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


def _status_mb(pid: int, key: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class PostgresSchema:
    """A fresh schema on the PostgreSQL of ``base_url``, dropped on exit; ``url`` puts
    every connection of the knowledge base in it."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.schema = f"scale_{uuid.uuid4().hex[:12]}"
        parts = urlsplit(base_url)
        query = [*parse_qsl(parts.query), ("options", f"-csearch_path={self.schema}")]
        self.url = urlunsplit(parts._replace(query=urlencode(query)))

    def _execute(self, sql: str) -> object:
        import psycopg

        parts = urlsplit(self.base_url)
        libpq = urlunsplit(parts._replace(scheme="postgresql"))
        with psycopg.connect(libpq, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchone() if sql.startswith("SELECT") else None

    def __enter__(self) -> PostgresSchema:
        try:
            self._execute(f'CREATE SCHEMA "{self.schema}"')
        except Exception as exc:
            raise SuperbizError(f"PostgreSQL at {self.base_url}: {exc}") from exc
        return self

    def size_mb(self) -> float:
        """What the schema's tables, indexes and TOAST take on disk."""
        row = self._execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            f"WHERE n.nspname = '{self.schema}' AND c.relkind IN ('r', 'm')"
        )
        return int(row[0]) / (1 << 20) if isinstance(row, tuple) else 0.0

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
