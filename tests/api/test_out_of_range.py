"""Values no store can hold, sent over HTTP and the CLI: a window reaching back past the
calendar, a turn number past the turn column, a session id with NUL. Each gets its clear
answer on SQLite and on PostgreSQL (they gave a traceback or 500 on one store or both)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from conftest import write_kb
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import open_runtime
from superbiz.api import create_app
from superbiz.cli import app as cli
from superbiz.config import Settings
from superbiz.knowledge.coverage.domains import DomainService
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder


@pytest.fixture
def served(tmp_path: Path, database_url: str, use_embedder: Embedder) -> Iterator[TestClient]:
    """The small KB on SQLite and on PostgreSQL, served with the extractive model."""
    settings = Settings(data_dir=tmp_path / "data", database_url=database_url)
    kb = KnowledgeBase(settings, embedder=use_embedder)
    runtime = open_runtime(settings, kb=kb, model=ExtractiveChatModel())
    Ingestor(kb, domains=DomainService(kb)).ingest([write_kb(tmp_path / "kb")])
    try:
        app = create_app(settings, assistant=runtime, warm_up=False)
        yield TestClient(app, raise_server_exceptions=False)
    finally:
        runtime.close()


def asked(client: TestClient) -> tuple[str, int]:
    session = f"oor-{uuid.uuid4().hex[:12]}"
    response = client.post("/api/chat", json={"session_id": session, "question": "退款失败"})
    assert response.status_code == 200, response.text
    return session, response.json()["turn"]


@pytest.mark.parametrize("turn", [2**31 - 1, 2**31, 2**63, 10**30])
def test_feedback_on_a_turn_past_the_turn_column_is_404(served: TestClient, turn: int) -> None:
    """2147483648 answered 500 on PostgreSQL (integer out of range), 2**63 on SQLite."""
    session, _ = asked(served)
    response = served.post(f"/api/sessions/{session}/turns/{turn}/feedback", json={"rating": "up"})
    assert response.status_code == 404, response.text
    assert response.json() == {
        "error": "not_found",
        "message": f"session {session!r} has no turn {turn}",
    }


@pytest.mark.parametrize("since", ["1000000d", "99999999999w", "9" * 40 + "m"])
def test_a_window_longer_than_the_calendar_covers_everything(
    served: TestClient, since: str
) -> None:
    """``GET /api/gaps?since=1000000d`` answered 500 (OverflowError)."""
    asked(served)
    report = served.get("/api/gaps", params={"since": since})
    assert report.status_code == 200, report.text
    assert report.json()["since"].startswith("0001-01-01")
    assert (
        report.json()["questions"]
        == served.get("/api/gaps", params={"since": "1d"}).json()["questions"]
    )


@pytest.mark.parametrize("ids", [["a\x00b"], ["a\x00b", "x" * 200]])
def test_a_listed_session_id_with_nul_names_no_session(served: TestClient, ids: list[str]) -> None:
    """``GET /api/sessions?id=a%00b`` answered 500 on PostgreSQL (200 on SQLite)."""
    session, _ = asked(served)
    response = served.get("/api/sessions", params={"id": [*ids, session]})
    assert response.status_code == 200, response.text
    assert [s["session_id"] for s in response.json()["sessions"]] == [session]
    alone = served.get("/api/sessions", params={"id": ids})
    assert alone.status_code == 200 and alone.json()["sessions"] == []


def test_the_gaps_command_takes_a_window_longer_than_the_calendar(
    tmp_path: Path, database_url: str, make_settings: Callable[..., Any]
) -> None:
    """``superbiz gaps --since 1000000d`` printed an OverflowError traceback."""
    settings = make_settings(tmp_path, database_url)
    env = {"SUPERBIZ_DATABASE_URL": settings.resolved_database_url}
    data = ["--data-dir", str(settings.data_dir)]
    result = CliRunner().invoke(cli, ["gaps", *data, "--since", "1000000d", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["since"].startswith("0001-01-01")
    shown = CliRunner().invoke(cli, ["gaps", *data, "--since", "1000000d"], env=env)
    assert shown.exit_code == 0 and "Traceback" not in shown.output
    assert "since 0001-01-01" in shown.output
