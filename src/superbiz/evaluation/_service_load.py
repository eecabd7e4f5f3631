"""The load of ``superbiz eval service``: clients running sessions of two turns against
the replicas, round robin, and what each client saw of each turn (latency, first event,
first token, the answer, errors)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from superbiz.evaluation.metrics import percentile

REQUEST_TIMEOUT_S = 300.0
TURNS_PER_SESSION = 2


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and max in ms, from seconds (nearest rank, as every benchmark here).

    >>> percentiles([0.010, 0.020, 0.030])
    {'n': 3, 'p50_ms': 20.0, 'p95_ms': 30.0, 'max_ms': 30.0}
    """
    if not values:
        return {"n": 0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 1),
        "p95_ms": round(percentile(values, 95) * 1000, 1),
        "max_ms": round(max(values) * 1000, 1),
    }


@dataclass(slots=True)
class Turn:
    """What a client saw of one turn."""

    url: str
    latency: float = 0.0
    first_event: float | None = None
    first_token: float | None = None
    answer: dict[str, Any] | None = None
    #: session ids named by the stream's events (streamed turns only)
    event_sessions: set[str] = field(default_factory=set)
    error: str | None = None


@dataclass(slots=True)
class SessionRun:
    session_id: str
    question: str
    turns: list[Turn] = field(default_factory=list)


async def _turn(client: httpx.AsyncClient, url: str, session: SessionRun, stream: bool) -> Turn:
    turn = Turn(url)
    body = {"session_id": session.session_id, "question": session.question}
    started = time.perf_counter()
    try:
        if stream:
            await _streamed(client, url, body, turn, started)
        else:
            response = await client.post(f"{url}/api/chat", json=body)
            if response.status_code != 200:
                turn.error = f"{response.status_code}: {_message(response.text)}"
            else:
                turn.answer = response.json()
    except httpx.HTTPError as exc:
        turn.error = f"{type(exc).__name__}: {exc}"
    turn.latency = time.perf_counter() - started
    return turn


async def _streamed(
    client: httpx.AsyncClient, url: str, body: dict[str, str], turn: Turn, started: float
) -> None:
    async with client.stream("POST", f"{url}/api/chat_stream", json=body) as response:
        if response.status_code != 200:
            turn.error = f"{response.status_code}: {_message((await response.aread()).decode())}"
            return
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
                now = time.perf_counter() - started
                turn.first_event = turn.first_event if turn.first_event is not None else now
                if event == "token" and turn.first_token is None:
                    turn.first_token = now
            elif line.startswith("data:"):
                data = json.loads(line[5:])
                turn.event_sessions.add(data.get("session_id", ""))
                if event == "answer":
                    turn.answer = data
                elif event == "error":
                    turn.error = f"{data.get('status')}: {data.get('message')}"
                elif event == "done":
                    return


def _message(text: str) -> str:
    try:
        return str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        return text[:200]


@dataclass(slots=True)
class Phase:
    """Every session one phase ran, and its wall time."""

    sessions: list[SessionRun]
    wall: float

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    def stats(self, *, stream: bool) -> dict[str, Any]:
        turns = self.turns
        answered = [t for t in turns if t.error is None]
        stats: dict[str, Any] = {
            **percentiles([t.latency for t in answered]),
            "turns_per_s": round(len(answered) / self.wall, 2) if self.wall else 0.0,
            "errors": len(turns) - len(answered),
        }
        if stream:
            stats["first_event"] = percentiles(
                [t.first_event for t in answered if t.first_event is not None]
            )
            stats["first_token"] = percentiles(
                [t.first_token for t in answered if t.first_token is not None]
            )
        return stats


async def run_phase(
    urls: list[str],
    headers: dict[str, str],
    *,
    clients: int,
    requests: int,
    prefix: str,
    items: list[str],
    stream: bool,
) -> Phase:
    """``requests`` turns by ``clients`` clients, in sessions of two turns; turn ``t`` of
    session ``k`` goes to ``urls[(k + t) % len(urls)]``."""
    count = -(-requests // TURNS_PER_SESSION)
    plans = [(k, min(TURNS_PER_SESSION, requests - k * TURNS_PER_SESSION)) for k in range(count)]
    queue: Iterator[tuple[int, int]] = iter(plans)
    sessions: list[SessionRun] = []
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)

    async def client_loop(client: httpx.AsyncClient) -> None:
        for k, turns in queue:
            session = SessionRun(f"{prefix}{k}", items[k % len(items)])
            sessions.append(session)
            for t in range(turns):
                url = urls[(k + t) % len(urls)]
                session.turns.append(await _turn(client, url, session, stream))

    async with httpx.AsyncClient(
        headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        wall = time.perf_counter() - started
    return Phase(sorted(sessions, key=lambda s: int(s.session_id.removeprefix(prefix))), wall)
