"""``superbiz serve`` wiring and ``superbiz eval service`` end to end (small numbers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from superbiz import cli

runner = CliRunner()


@pytest.fixture(autouse=True)
def _shared_embedder(use_embedder: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("superbiz.knowledge.kb.base.make_embedder", lambda settings: use_embedder)


def test_serve_builds_the_app_and_runs_uvicorn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def run(app: FastAPI, **kwargs: Any) -> None:
        seen.update(app=app, **kwargs)

    monkeypatch.setattr("uvicorn.run", run)
    result = runner.invoke(
        cli.app, ["serve", "--port", "8123", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert isinstance(seen["app"], FastAPI)
    assert seen["host"] == "0.0.0.0" and seen["port"] == 8123
    assert "nobody is asked to sign in" in result.output
    assert seen["app"].state.service.settings.data_dir == tmp_path
    seen["app"].state.service.close()


def test_serve_does_not_warn_once_people_must_sign_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kwargs: seen.update(app=app))
    added = runner.invoke(cli.app, ["users", "add", "ops", "--data-dir", str(tmp_path)])
    assert added.exit_code == 0, added.output
    result = runner.invoke(cli.app, ["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "nobody is asked to sign in" not in result.output
    seen["app"].state.service.close()


def test_eval_service_reports_latency_and_first_event(tmp_path: Path) -> None:
    data_dir = tmp_path / "bench"
    result = runner.invoke(
        cli.app,
        ["eval", "service", "--data-dir", str(data_dir), "--clients", "2", "--requests", "4"],
    )
    assert result.exit_code == 0, result.output
    args = ["eval", "service", "--data-dir", str(data_dir), "--clients", "2", "--requests", "2"]
    report = runner.invoke(cli.app, [*args, "--json"])
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    assert data["model"] == "extractive" and data["documents"] == 15  # the example KB
    assert data["clients"] == 2 and data["chat_concurrent"]["n"] == 2
    assert data["errors"] == 0 and data["audit"]["ok"]
    one, many = data["stream_one_client"], data["stream_concurrent"]
    for stats in (data["chat_one_client"], one["first_event"], many["first_event"]):
        assert 0 < stats["p50_ms"] <= stats["max_ms"]
    assert one["first_event"]["p50_ms"] <= one["p50_ms"]
