"""``superbiz eval service``: the HTTP service under load, and whether it stayed correct.

Without ``urls`` it starts the real app under uvicorn on a free loopback port in a
thread of this process (Milvus Lite allows one process per data dir), answering with
the extractive policy; ``model_latency_ms`` delays each model call (``SlowExtractiveModel``)
so that a slow LLM is measured without one. With ``urls`` it drives replicas that are
already running, round robin: the turns of one session alternate between them.

Each client runs sessions of two turns (a question, then the same question again) and
sends the next turn when the last is answered. It measures, for ``/api/chat`` and for
``/api/chat_stream``, one client and ``clients`` clients: latency p50/p95, turns/s, time
to the first event and errors. Then it audits every session it ran:

* the lookups its answers reported equal its rows in ``/api/sessions/{id}/invocations``;
* no turn executed more lookups than the governance's high mark;
* no event and no citation of one session appears in another;
* its second turn does not show again a document its first turn retrieved.

On PostgreSQL it also reports the most connections the database held meanwhile
(``pg_stat_activity``, sampled by a thread of its own), against ``max_connections``:
what the replicas' pools (``database-pool``) open under that load.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.simulated import SlowExtractiveModel
from superbiz.config import Settings
from superbiz.evaluation._service_audit import ERROR_SAMPLES, audit
from superbiz.evaluation._service_load import REQUEST_TIMEOUT_S, Phase, run_phase
from superbiz.evaluation._service_postgres import connection_peak
from superbiz.evaluation._service_report import render_service_report
from superbiz.evaluation._service_server import LiveServer
from superbiz.evaluation.agent import builtin_dataset
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.ingest.ingestor import Ingestor

__all__ = [
    "ServiceBenchmarkError",
    "benchmark_service",
    "default_data_dir",
    "ensure_example_kb",
    "render_service_report",
]

WARM_UP_REQUESTS = 3

Notice = Callable[[str], None]


class ServiceBenchmarkError(SuperbizError):
    """The benchmark cannot run as asked (e.g. no replica answers)."""


def questions() -> list[str]:
    lines = (builtin_dataset() / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


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
    model_latency_ms: float = 0,
    urls: list[str] | None = None,
    on_notice: Notice | None = None,
) -> dict[str, Any]:
    """Run the benchmark (in process over ``settings.data_dir``, or against ``urls``);
    the numbers and the audit as one dict."""
    if clients < 1 or requests < 1 or sequential < 1:
        raise ValueError("clients, requests and sequential must be at least 1")
    if urls and model_latency_ms:
        raise ServiceBenchmarkError(
            "--model-latency-ms applies to the in-process server; replicas given with --url "
            "answer with their own model"
        )
    headers = {"X-API-Key": settings.service.api_key} if settings.service.api_key else {}
    database = settings.resolved_database_url
    if urls:
        targets = [url.rstrip("/") for url in urls]
        return _measure(targets, headers, clients, requests, sequential, database, on_notice)
    from superbiz.api.app import create_app

    model = SlowExtractiveModel(model_latency_ms) if model_latency_ms else ExtractiveChatModel()
    assistant = open_runtime(settings, model=model)
    try:
        ensure_example_kb(assistant, on_notice)
        app = create_app(settings, assistant=assistant)
        with LiveServer(app) as server:
            report = _measure(
                [server.url], headers, clients, requests, sequential, database, on_notice
            )
    finally:
        assistant.close()
    report["model_latency_ms"] = model_latency_ms
    return report


def _measure(
    urls: list[str],
    headers: dict[str, str],
    clients: int,
    requests: int,
    sequential: int,
    database_url: str,
    on_notice: Notice | None,
) -> dict[str, Any]:
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    items = questions()
    with httpx.Client(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        try:
            info = client.get(f"{urls[0]}/api/info").raise_for_status().json()
            documents = client.get(f"{urls[0]}/api/documents").raise_for_status().json()["count"]
        except httpx.HTTPError as exc:
            raise ServiceBenchmarkError(f"the service at {urls[0]} does not answer: {exc}") from exc

    def phase(name: str, n_clients: int, n_turns: int, stream: bool) -> Phase:
        if on_notice:
            on_notice(f"{name}: {n_turns} turns, {n_clients} client(s)")
        return asyncio.run(
            run_phase(
                urls,
                headers,
                clients=n_clients,
                requests=n_turns,
                prefix=f"{run_id}-{name}-",
                items=items,
                stream=stream,
            )
        )

    phases: dict[str, Phase] = {}
    try:
        with connection_peak(database_url) as peak:
            phase("warm", 1, WARM_UP_REQUESTS, True)
            phases["chat_one"] = phase("chat1", 1, sequential, False)
            phases["chat_many"] = phase("chatN", clients, requests, False)
            phases["stream_one"] = phase("stream1", 1, sequential, True)
            phases["stream_many"] = phase("streamN", clients, requests, True)
        sessions = [s for p in phases.values() for s in p.sessions]
        checked = asyncio.run(audit(urls, headers, sessions))
    finally:
        _clear(urls, headers, [s.session_id for p in phases.values() for s in p.sessions], run_id)
    errors = [t.error for p in phases.values() for t in p.turns if t.error]
    return {
        "model": info["model"],
        "documents": documents,
        "urls": urls,
        "clients": clients,
        "requests": requests,
        "chat_one_client": phases["chat_one"].stats(stream=False),
        "chat_concurrent": phases["chat_many"].stats(stream=False),
        "stream_one_client": phases["stream_one"].stats(stream=True),
        "stream_concurrent": phases["stream_many"].stats(stream=True),
        "errors": len(errors),
        "error_samples": errors[:ERROR_SAMPLES],
        "audit": checked.as_dict(),
        "postgres": peak.as_dict() if peak is not None else None,
    }


def _clear(urls: list[str], headers: dict[str, str], sessions: list[str], run_id: str) -> None:
    """Forget the benchmark's sessions (and the warm-up's) on the service."""
    warm = [f"{run_id}-warm-{k}" for k in range(WARM_UP_REQUESTS)]
    with httpx.Client(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        for session_id in [*warm, *sessions]:
            try:
                client.post(f"{urls[0]}/api/chat/clear", json={"session_id": session_id})
            except httpx.HTTPError:
                return  # the service is gone; nothing more to clear


def default_data_dir() -> Path:
    """The benchmark keeps its own knowledge base unless told otherwise."""
    return Path(".superbiz") / "eval" / "service"
