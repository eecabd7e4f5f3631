"""``superbiz eval service``: the HTTP service's latency on loopback, extractive model.

It starts the real app under uvicorn on a free loopback port in a thread of this
process (Milvus Lite allows one process per data dir) and measures what a client sees:

* time to the first SSE event of ``/api/chat_stream`` (and to the first token and the
  end of the stream), one client at a time and with ``clients`` streams at once;
* ``/api/chat`` latency one at a time and with ``clients`` concurrent clients.

Every request is a fresh session asking one of the example questions, so each one plans,
looks up and answers; the sessions are cleared afterwards. Turns are serialised by the
service's lock, so latency under load is mostly waiting for the turns ahead.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.config import Settings
from superbiz.evaluation.agent import builtin_dataset
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.ingest import Ingestor

STARTUP_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 120.0
WARM_UP_REQUESTS = 3

Notice = Callable[[str], None]


class ServiceBenchmarkError(SuperbizError):
    """The service answered a benchmark request with an error."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def questions() -> list[str]:
    lines = (builtin_dataset() / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and max in ms, from seconds.

    >>> percentiles([0.010, 0.020, 0.030])
    {'n': 3, 'p50_ms': 20.0, 'p95_ms': 30.0, 'max_ms': 30.0}
    """
    if not values:
        return {"n": 0, "p50_ms": 0.0, "p95_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


class LiveServer:
    """uvicorn serving ``app`` on a free loopback port, in a daemon thread."""

    def __init__(self, app: Any, host: str = "127.0.0.1") -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", access_log=False, lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="superbiz-uvicorn", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def _stream_timings(client: httpx.Client, session_id: str, question: str) -> dict[str, float]:
    """Seconds to the first event, the first token and the end of one streamed turn."""
    started = time.perf_counter()
    first_event = first_token = None
    with client.stream(
        "POST", "/api/chat_stream", json={"session_id": session_id, "question": question}
    ) as response:
        response.raise_for_status()
        event = ""
        for line in response.iter_lines():
            if line.startswith("data:") and event == "error":
                message = json.loads(line[5:]).get("message")
                raise ServiceBenchmarkError(f"the service failed on {question!r}: {message}")
            if not line.startswith("event:"):
                continue
            event = line[6:].strip()
            now = time.perf_counter() - started
            if first_event is None:
                first_event = now
            if first_token is None and event == "token":
                first_token = now
            if event == "done":
                break
    total = time.perf_counter() - started
    return {
        "first_event": first_event if first_event is not None else total,
        "first_token": first_token if first_token is not None else total,
        "total": total,
    }


async def _concurrent(
    url: str,
    headers: dict[str, str],
    clients: int,
    requests: int,
    run_id: str,
    items: list[str],
    stream: bool,
) -> tuple[list[float], list[float], float]:
    """``requests`` turns by ``clients`` concurrent clients; (latencies, first events,
    wall time). A client sends its next request when its last one is answered."""
    latencies: list[float] = []
    first_events: list[float] = []
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        for n in counter:
            prefix = "s" if stream else "c"
            body = {"session_id": f"{run_id}-{prefix}{n}", "question": items[n % len(items)]}
            started = time.perf_counter()
            if not stream:
                response = await client.post("/api/chat", json=body)
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)
                continue
            first = None
            async with client.stream("POST", "/api/chat_stream", json=body) as response:
                response.raise_for_status()
                async for line in response.aiter_lines():
                    if line.startswith("event:") and first is None:
                        first = time.perf_counter() - started
                    if line in ("event: done", "event: error"):
                        break
            latencies.append(time.perf_counter() - started)
            first_events.append(first if first is not None else latencies[-1])

    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits
    ) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        wall = time.perf_counter() - started
    return latencies, first_events, wall


def ensure_example_kb(assistant: Runtime, on_notice: Notice | None = None) -> int:
    """Ingest the example KB when the data dir has no documents; the document count."""
    kb = assistant.kb
    if not kb.documents.all():
        if on_notice:
            on_notice(f"{kb.settings.data_dir} is empty: ingesting the example KB")
        Ingestor(kb, domains=assistant.domains).ingest([builtin_dataset() / "corpus"])
        assistant.invalidate_map()
    kb.check_index()  # an index from another embedder or version fails here, not per request
    return len(kb.documents.all())


def benchmark_service(
    settings: Settings,
    *,
    clients: int = 10,
    requests: int = 100,
    sequential: int = 20,
    on_notice: Notice | None = None,
) -> dict[str, Any]:
    """Run the benchmark against ``settings.data_dir``; the numbers as one dict."""
    from superbiz.api.app import create_app

    if clients < 1 or requests < 1 or sequential < 1:
        raise ValueError("clients, requests and sequential must be at least 1")
    assistant = open_runtime(settings, model=ExtractiveChatModel())
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    sessions: list[str] = []
    try:
        documents = ensure_example_kb(assistant, on_notice)
        items = questions()
        headers = {"X-API-Key": settings.service.api_key} if settings.service.api_key else {}
        app = create_app(settings, assistant=assistant)
        with LiveServer(app) as server:
            with httpx.Client(
                base_url=server.url, headers=headers, timeout=REQUEST_TIMEOUT_S
            ) as client:
                for n in range(WARM_UP_REQUESTS):
                    _stream_timings(client, f"{run_id}-w{n}", items[n % len(items)])
                idle = [
                    _stream_timings(client, f"{run_id}-i{n}", items[n % len(items)])
                    for n in range(sequential)
                ]
                chat_one: list[float] = []
                for n in range(sequential):
                    started = time.perf_counter()
                    body = {"session_id": f"{run_id}-o{n}", "question": items[n % len(items)]}
                    client.post("/api/chat", json=body).raise_for_status()
                    chat_one.append(time.perf_counter() - started)
            chat_many, _, chat_wall = asyncio.run(
                _concurrent(server.url, headers, clients, requests, run_id, items, stream=False)
            )
            streams, first_loaded, stream_wall = asyncio.run(
                _concurrent(server.url, headers, clients, requests, run_id, items, stream=True)
            )
        sessions = [
            *(f"{run_id}-w{n}" for n in range(WARM_UP_REQUESTS)),
            *(f"{run_id}-{p}{n}" for p in "io" for n in range(sequential)),
            *(f"{run_id}-{p}{n}" for p in "cs" for n in range(requests)),
        ]
    finally:
        for session_id in sessions:
            assistant.clear_session(session_id)
        assistant.close()
    return {
        "model": "extractive",
        "documents": documents,
        "clients": clients,
        "requests": requests,
        "chat_concurrent": {
            **percentiles(chat_many),
            "throughput_rps": round(len(chat_many) / chat_wall, 1),
        },
        "chat_one_client": percentiles(chat_one),
        "first_event_one_client": percentiles([t["first_event"] for t in idle]),
        "first_token_one_client": percentiles([t["first_token"] for t in idle]),
        "stream_total_one_client": percentiles([t["total"] for t in idle]),
        "first_event_concurrent": percentiles(first_loaded),
        "stream_total_concurrent": {
            **percentiles(streams),
            "throughput_rps": round(len(streams) / stream_wall, 1),
        },
    }


def render_service_report(report: dict[str, Any], console: Console) -> None:
    table = Table(
        title=f"superbiz service on loopback · {report['model']} · {report['documents']} documents"
    )
    for column in ("measure", "clients", "n", "p50 ms", "p95 ms", "max ms", "req/s"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    clients = str(report["clients"])
    rows = [
        ("/api/chat latency", clients, report["chat_concurrent"]),
        ("/api/chat latency", "1", report["chat_one_client"]),
        ("first SSE event", "1", report["first_event_one_client"]),
        ("first SSE event", clients, report["first_event_concurrent"]),
        ("first token", "1", report["first_token_one_client"]),
        ("whole stream", "1", report["stream_total_one_client"]),
        ("whole stream", clients, report["stream_total_concurrent"]),
    ]
    for name, n_clients, stats in rows:
        table.add_row(
            name,
            n_clients,
            str(stats["n"]),
            f"{stats['p50_ms']:.1f}",
            f"{stats['p95_ms']:.1f}",
            f"{stats['max_ms']:.1f}",
            f"{stats['throughput_rps']:.1f}" if "throughput_rps" in stats else "",
        )
    console.print(table)


def default_data_dir() -> Path:
    """The benchmark keeps its own knowledge base unless told otherwise."""
    return Path(".superbiz") / "eval" / "service"
