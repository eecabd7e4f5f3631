"""``GET /api/sources`` and the scheduled sync of ``superbiz serve``
(``sources.sync-interval-s``), against a real Git remote over ``file://``."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from fakes.git_remote import Remote
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle

WAIT_S = 60.0  # a bound on waiting for the background sync, not a speed assertion


def _until(client: TestClient, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        body = client.get("/api/sources").json()
        source = next(s for s in body["sources"] if s["kind"] == "git")
        if done(source) or time.monotonic() > deadline:
            return source
        time.sleep(0.1)


def test_serve_syncs_git_sources_on_schedule_and_shows_a_failed_sync(
    make_assistant: Callable[..., Runtime], tmp_path: Path
) -> None:
    remote = Remote(tmp_path / "origin")
    remote.write({"runbooks/deploy.md": "# Deploy\n\nRoll out behind the feature flag.\n"})
    first = remote.commit("first")
    assistant = make_assistant(sources={"sync_interval_s": 0.2})
    DocumentLifecycle(assistant.kb).add_git(remote.url, subdir="runbooks", domain="ops")
    remote.write({"runbooks/rollback.md": "# Rollback\n\nRevert the release tag.\n"})
    second = remote.commit("second")

    app = create_app(assistant.settings, assistant=assistant, warm_up=False)
    with TestClient(app) as client:  # the lifespan starts the scheduled sync
        listed = client.get("/api/sources").json()
        assert listed["sync_interval_s"] == 0.2
        assert [s["kind"] for s in listed["sources"]] == ["git"]
        assert listed["sources"][0]["commit"] == first
        synced = _until(client, lambda s: s["commit"] == second)
        assert synced["commit"] == second != first
        assert synced["counts"]["added"] == 1 and synced["error"] is None
        paths = {d["path"] for d in client.get("/api/documents").json()["documents"]}
        assert {"ops/deploy.md", "ops/rollback.md"} <= paths

        shutil.move(remote.bare, tmp_path / "gone.git")  # the remote cannot be reached
        failed = _until(client, lambda s: s["error"] is not None)
        assert failed["error"] is not None and "fetch failed" in failed["error"]
        assert failed["commit"] == second  # the last good state stays
        paths = {d["path"] for d in client.get("/api/documents").json()["documents"]}
        assert {"ops/deploy.md", "ops/rollback.md"} <= paths


def test_a_citation_of_a_repository_document_links_to_it_at_its_commit(
    make_assistant: Callable[..., Runtime], tmp_path: Path
) -> None:
    remote = Remote(tmp_path / "origin")
    remote.write(
        {
            "runbooks/kafka-lag.md": "# Kafka consumer lag\n\n"
            "When the consumer lag of the orders topic grows, add consumers to the group "
            "and check the partition count.\n"
        }
    )
    commit = remote.commit("first")
    pattern = "https://git.example.com/team/ops/blob/{commit}/{path}"
    assistant = make_assistant(sources={"remote": {"web-url": pattern}})
    DocumentLifecycle(assistant.kb).add_git(remote.url, subdir="runbooks", domain="ops")
    app = create_app(assistant.settings, assistant=assistant, warm_up=False)
    with TestClient(app) as client:
        response = client.post(
            "/api/chat",
            json={"session_id": "links", "question": "Kafka consumer lag of the orders topic"},
        )
    assert response.status_code == 200, response.text
    citations = {c["path"]: c for c in response.json()["citations"]}
    assert citations["ops/kafka-lag.md"]["url"] == (
        f"https://git.example.com/team/ops/blob/{commit}/runbooks/kafka-lag.md"
    )
    # documents of folders get no link
    assert all(c["url"] is None for p, c in citations.items() if p != "ops/kafka-lag.md")
