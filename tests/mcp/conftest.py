"""Fixtures for the MCP server tests: one ingested small KB, copied for each server.

The server runs as a subprocess (the real ``superbiz mcp``), so the KB is ingested by
``superbiz ingest`` in a subprocess too: Milvus Lite holds its data directory for the
whole life of the process that opened it, and this test process must never open it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from superbiz.storage.db import open_database
from superbiz.storage.invocations import Invocation, InvocationRepository

#: the server loads the real USE model and opens Milvus Lite: seconds, not milliseconds
STARTUP_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def mcp_kb(tmp_path_factory: pytest.TempPathFactory, kb_writer: Callable[..., Path]) -> Path:
    """A data directory holding the small KB, ingested once for the session."""
    root = tmp_path_factory.mktemp("mcp-kb")
    kb = kb_writer(root / "kb")
    data = root / "data"
    done = subprocess.run(
        [sys.executable, "-m", "superbiz.cli", "ingest", str(kb), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=STARTUP_TIMEOUT_S,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    return data


@pytest.fixture(scope="module")
def mcp_data_dir(mcp_kb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the ingested KB for one test module's servers."""
    data = tmp_path_factory.mktemp("mcp-server") / "data"
    shutil.copytree(mcp_kb, data)
    return data


def recorded(data_dir: Path, session_id: str) -> list[Invocation]:
    """The ``tool_invocation`` rows of a session, read from the relational store only
    (never Milvus): call it once the server process is gone."""
    engine = open_database(f"sqlite:///{data_dir / 'superbiz.db'}")
    try:
        return InvocationRepository(engine).for_session(session_id)
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def read_invocations() -> Callable[[Path, str], list[Invocation]]:
    return recorded
