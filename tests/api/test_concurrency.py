"""Several sessions streaming at once, against a real uvicorn server on loopback.

Turns of different sessions overlap while their models think; what matters is that each
stream gets only its own session's events, and that each session's lookups, dedup and
water levels are exactly what the same question gets when asked alone. Turns of one
session wait for each other, or get 409 past the wait.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from itertools import count
from typing import Any

import httpx
import pytest

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.config import ServiceSettings
from superbiz.evaluation._service_server import LiveServer
from superbiz.llm.messages import ChatResponse, Message, ToolSpec

#: sessions of the many-sessions test
MANY = 20

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


def fresh(prefix: str, n: int = len(QUESTIONS)) -> list[Stream]:
    run = uuid.uuid4().hex[:8]
    return [Stream(f"{prefix}-{run}-{i}", QUESTIONS[i % len(QUESTIONS)]) for i in range(n)]


def assert_isolated(url: str, together: list[Stream], alone: list[Stream]) -> None:
    """Each stream carries only its session; it did what its question does alone; the
    recorded calls of its session are its lookups."""
    by_question = {s.question: s for s in alone}
    for mixed in together:
        single = by_question[mixed.question]
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
    with httpx.Client(base_url=url) as client:
        for stream in together:
            calls = client.get(f"/api/sessions/{stream.session_id}/invocations").json()
            recorded = [c["arguments"].get("query") for c in calls["invocations"]]
            sent = [r["arguments"].get("query") for r in stream.results()]
            assert recorded == sent


class GatheringModel(ExtractiveChatModel):
    """The extractive policy, slowed down so that turns must overlap: its first
    ``parties`` calls each wait until all of them are in progress. Were model calls
    serialised, the first would wait alone and its barrier break."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(parties, timeout=120)
        self._calls = count()

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        if next(self._calls) < self.barrier.parties:
            self.barrier.wait()
        return super().complete(messages, tools)


class HeldModel(ExtractiveChatModel):
    """The extractive policy, whose calls wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.thinking = threading.Event()
        self.go = threading.Event()

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> ChatResponse:
        self.thinking.set()
        assert self.go.wait(120), "the test never let the model answer"
        return super().complete(messages, tools)


def serve(runtime: Runtime) -> LiveServer:
    return LiveServer(create_app(runtime.settings, assistant=runtime, warm_up=False))


def test_concurrent_streams_keep_their_sessions_apart(server_url: str) -> None:
    together = asyncio.run(run_all(server_url, fresh("together"), together=True))
    alone = asyncio.run(run_all(server_url, fresh("alone"), together=False))

    # the requests really were in flight at the same time
    assert max(s.started for s in together) < min(s.ended for s in together)
    assert_isolated(server_url, together, alone)


def test_twenty_sessions_think_at_once_and_stay_apart(
    make_assistant: Callable[..., Runtime],
) -> None:
    model = GatheringModel(MANY)
    with serve(make_assistant(model=model)) as server:
        together = asyncio.run(run_all(server.url, fresh("many", MANY), together=True))
        # every turn was inside a model call at the same moment, or none would be here
        assert model.barrier.n_waiting == 0 and not model.barrier.broken
        alone = asyncio.run(run_all(server.url, fresh("one"), together=False))
        assert_isolated(server.url, together, alone)


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


def test_a_turn_in_a_busy_session_past_the_wait_is_409(
    make_assistant: Callable[..., Runtime],
) -> None:
    model = HeldModel()
    runtime = make_assistant(model=model, service=ServiceSettings(session_wait_s=0))
    with serve(runtime) as server:

        async def scenario() -> tuple[Stream, httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
                first = asyncio.create_task(run_stream(client, Stream("busy", QUESTIONS[0])))
                await asyncio.to_thread(model.thinking.wait, 120)
                body = {"session_id": "busy", "question": QUESTIONS[1]}
                refused = await client.post("/api/chat", json=body)
                other = asyncio.create_task(
                    client.post("/api/chat", json={"session_id": "free", "question": "x"})
                )
                model.go.set()
                return await first, refused, await other

        first, refused, other = asyncio.run(scenario())
        assert refused.status_code == 409
        assert refused.json()["error"] == "session_busy"
        assert "'busy' is busy" in refused.json()["message"]
        assert first.answer()["turn"] == 1 and other.status_code == 200
        with httpx.Client(base_url=server.url, timeout=120) as client:
            body = {"session_id": "busy", "question": QUESTIONS[1]}
            assert client.post("/api/chat", json=body).json()["turn"] == 2  # free again


def test_long_model_steps_keep_the_stream_alive_and_a_gone_client_still_gets_its_turn(
    make_assistant: Callable[..., Runtime],
) -> None:
    model = HeldModel()
    runtime = make_assistant(model=model, service=ServiceSettings(sse_keepalive_s=0.05))
    with serve(runtime) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        body = {"session_id": "long", "question": QUESTIONS[0]}
        lines: list[str] = []
        with client.stream("POST", "/api/chat_stream", json=body) as response:
            for line in response.iter_lines():
                lines.append(line)
                if line == ": keep-alive" and model.thinking.is_set():
                    break  # the model is thinking and the stream is still talking: hang up
        assert "event: plan" in lines and "event: answer" not in lines
        model.go.set()
        messages: list[dict[str, Any]] = []
        for _ in range(2400):  # the turn goes on without its client, then is stored
            found = client.get("/api/sessions/long")
            messages = found.json()["messages"] if found.status_code == 200 else []
            if len(messages) == 2:
                break
            time.sleep(0.05)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert messages[1]["citations"]
        calls = client.get("/api/sessions/long/invocations").json()["invocations"]
        assert calls and all(c["turn"] == 1 for c in calls)
