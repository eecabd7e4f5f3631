"""Several sessions streaming at once, against a real uvicorn server on loopback.

Turns are serialised behind the assistant's lock; what matters is that each stream gets
only its own session's events, and that each session's lookups, dedup and water levels
are exactly what the same question gets when asked alone.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.evaluation.service import LiveServer

QUESTIONS = [
    "支付回调超时怎么办？",
    "Redis connection pool exhausted, 获取连接超时",
    "Clients receive HTTP 429 Too Many Requests, how do we raise the limit?",
    "What should we do before deploying? deployment checklist",
    "What does idempotency mean?",
]


@pytest.fixture(scope="module")
def server_url(chat_assistant: Runtime) -> Iterator[str]:
    app = create_app(chat_assistant.settings, assistant=chat_assistant, warm_up=False)
    with LiveServer(app) as server:
        yield server.url


class Stream:
    def __init__(self, session_id: str, question: str) -> None:
        self.session_id = session_id
        self.question = question
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.started = self.ended = 0.0

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def results(self) -> list[dict[str, Any]]:
        return [data for name, data in self.events if name == "tool_result"]

    def trace(self) -> list[tuple[Any, ...]]:
        """What governance did, call by call: comparable across sessions."""
        keys = ("domain", "executed", "relevance_level", "dedup_reason", "verdict")
        return [
            (*(r[k] for k in keys), r["water_level"], r["calls"], r["budget_left"])
            for r in self.results()
        ]

    def answer(self) -> dict[str, Any]:
        return next(data for name, data in self.events if name == "answer")


async def run_stream(client: httpx.AsyncClient, stream: Stream) -> Stream:
    stream.started = time.perf_counter()
    body = {"session_id": stream.session_id, "question": stream.question}
    async with client.stream("POST", "/api/chat_stream", json=body) as response:
        assert response.status_code == 200
        name = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                assert name is not None
                stream.events.append((name, json.loads(line.removeprefix("data: "))))
    stream.ended = time.perf_counter()
    return stream


async def run_all(url: str, streams: list[Stream], *, together: bool) -> list[Stream]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        if together:
            return list(await asyncio.gather(*(run_stream(client, s) for s in streams)))
        return [await run_stream(client, s) for s in streams]


def fresh(prefix: str) -> list[Stream]:
    run = uuid.uuid4().hex[:8]
    return [Stream(f"{prefix}-{run}-{i}", q) for i, q in enumerate(QUESTIONS)]


def test_concurrent_streams_keep_their_sessions_apart(server_url: str) -> None:
    together = asyncio.run(run_all(server_url, fresh("together"), together=True))
    alone = asyncio.run(run_all(server_url, fresh("alone"), together=False))

    # the requests really were in flight at the same time
    assert max(s.started for s in together) < min(s.ended for s in together)
    for mixed, single in zip(together, alone, strict=True):
        assert {data["session_id"] for _, data in mixed.events} == {mixed.session_id}
        assert mixed.names[0] == "plan" and mixed.names[-2:] == ["answer", "done"]
        assert "error" not in mixed.names
        assert mixed.results(), mixed.question
        assert mixed.results()[0]["calls"] == 1  # a water level of its own, from zero
        # same lookups, levels, dedup reasons, verdicts and water levels as when alone
        assert mixed.trace() == single.trace()
        assert mixed.answer()["answer"] == single.answer()["answer"]
        tokens = "".join(data["text"] for name, data in mixed.events if name == "token")
        assert tokens == mixed.answer()["answer"]

    # each session's action memory and recorded calls hold only its own lookups
    with httpx.Client(base_url=server_url) as client:
        for stream in together:
            calls = client.get(f"/api/sessions/{stream.session_id}/invocations").json()
            recorded = [c["arguments"].get("query") for c in calls["invocations"]]
            sent = [r["arguments"].get("query") for r in stream.results()]
            assert recorded == sent


def test_two_turns_of_one_session_at_once_are_serialised(server_url: str) -> None:
    session = f"same-{uuid.uuid4().hex[:8]}"
    streams = [Stream(session, QUESTIONS[0]), Stream(session, QUESTIONS[2])]
    done = asyncio.run(run_all(server_url, streams, together=True))
    assert sorted(s.answer()["turn"] for s in done) == [1, 2]
    for stream in done:
        assert stream.answer()["question"] == stream.question
        assert stream.names[-1] == "done"
    with httpx.Client(base_url=server_url) as client:
        messages = client.get(f"/api/sessions/{session}").json()["messages"]
    assert [(m["turn"], m["role"]) for m in messages] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
