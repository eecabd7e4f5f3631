"""A Milvus Lite file read in process: a command that only reads and searches never
imports pymilvus nor starts Lite's gRPC server; the first call that needs the client
serves the very database the gate reads; a second process is told the file is in use."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import superbiz
from fakes.records import chunk_record
from superbiz.retrieval._lite import LiteFile
from superbiz.retrieval.records import ChunkRecord
from superbiz.retrieval.vector_store import MilvusChunkStore

EXAMPLES = Path(superbiz.__file__).parent / "examples" / "corpus"


def _python(code: str, *, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _ingested(data_dir: Path) -> None:
    """The example KB ingested into ``data_dir`` by a process of its own."""
    done = _python(
        f"""
        from superbiz.cli import app
        app(["ingest", {str(EXAMPLES)!r}, "--data-dir", {str(data_dir)!r}])
        """
    )
    assert done.returncode == 0, done.stderr


def test_a_lookup_reads_a_lite_file_without_pymilvus(tmp_path: Path) -> None:
    """``superbiz lookup`` in a new process: the runbook found, and neither pymilvus nor
    Lite's gRPC server loaded (what took 0.45 s of every command)."""
    data_dir = tmp_path / "data"
    _ingested(data_dir)
    done = _python(
        f"""
        import json, sys
        from superbiz.cli import app
        try:
            app(["lookup", "How do I fix PostgreSQL replication lag?", "--json",
                 "--data-dir", {str(data_dir)!r}])
        except SystemExit as exit:
            assert not exit.code, exit.code
        loaded = [name for name in ("pymilvus", "milvus_lite.adapter.grpc") if name in sys.modules]
        print(json.dumps(loaded))
        """
    )
    assert done.returncode == 0, done.stderr
    *answer, loaded = done.stdout.strip().splitlines()
    primary = json.loads("\n".join(answer))["primary"]
    assert primary["path"] == "database/postgres-replication-lag.md"
    assert json.loads(loaded) == []


def test_a_second_process_is_told_the_file_is_in_use(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _ingested(data_dir)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from superbiz.retrieval.vector_store import MilvusChunkStore; "
            f"MilvusChunkStore({str(data_dir / 'milvus.db')!r}, 'superbiz_chunks'); "
            "print('open', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        done = _python(
            f"""
            from superbiz.retrieval.vector_store import MilvusChunkStore
            MilvusChunkStore({str(data_dir / "milvus.db")!r}, "superbiz_chunks")
            """
        )
    finally:
        holder.communicate("", timeout=60)
    assert done.returncode != 0
    assert "another process is probably using it" in done.stderr


def _records(doc: str, count: int) -> list[ChunkRecord]:
    rng = np.random.default_rng(count)
    return [chunk_record(doc, rng.standard_normal(8), f"redis {i}", index=i) for i in range(count)]


def test_a_write_after_reads_serves_the_database_the_gate_reads(tmp_path: Path) -> None:
    """A store opened on a file another process made reads it, deletes by id and flushes
    in process; a delete by filter (the client's) then lands in the very database the
    in-process searches read, and a second store of this process on the file shares it."""
    uri = str(tmp_path / "milvus.db")
    made = _python(
        f"""
        import numpy as np
        from superbiz.retrieval.records import ChunkRecord
        from superbiz.retrieval.vector_store import MilvusChunkStore
        store = MilvusChunkStore({uri!r}, "chunks")
        store.ensure_collection(8)
        rng = np.random.default_rng(0)
        store.insert([
            ChunkRecord(id=f"{{doc}}#{{i}}", doc_path=doc, domain="ops", title=doc, heading="",
                        chunk_index=i, text=f"redis 连接池 {{i}}", content_hash="h",
                        vector=rng.standard_normal(8).astype("float32"),
                        search_text=f"redis 连接池 {{i}}")
            for doc in ("a.md", "b.md") for i in range(3)
        ])
        store.flush()
        """
    )
    assert made.returncode == 0, made.stderr
    store = MilvusChunkStore(uri, "chunks")
    assert store.dimension == 8 and store.has_bm25 and store.has_access
    store.delete_chunks({"a.md#0", "a.md#1", "a.md#2"})
    store.flush()
    assert store._client._client is None  # reads, deletes by id, flushes: in process
    assert store.chunk_ids(["a.md", "b.md"]).keys() == {"b.md"}
    # a delete by filter (over 200 documents) is the client's
    store.delete_documents([*(f"gone-{i}.md" for i in range(200)), "b.md"])
    assert store._client._client is not None
    assert store.chunk_ids(["b.md"]) == {}
    assert store.search_bm25("redis", 10) == []
    again = MilvusChunkStore(uri, "chunks")
    again.insert(_records("c.md", 2))
    assert {hit.doc_path for hit in store.search_bm25("redis", 10)} == {"c.md"}


def test_a_layout_lite_does_not_describe_in_process_is_read_by_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "milvus.db")
    made = MilvusChunkStore(uri, "chunks")
    made.ensure_collection(8)
    made.insert(_records("a.md", 3))
    made.flush()

    def reorganised(self: LiteFile, collection: str) -> None:
        raise AttributeError("'Collection' object has no attribute 'describe'")

    monkeypatch.setattr(LiteFile, "fields", reorganised)
    store = MilvusChunkStore(uri, "chunks")
    assert store._file is None  # the client reads the file from now on
    assert (store.dimension, store.has_bm25, store.has_access) == (8, True, True)
    assert store.chunk_ids(["a.md"]) == {"a.md": {"a.md#0", "a.md#1", "a.md#2"}}
