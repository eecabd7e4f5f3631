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
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from superbiz._net import free_port
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.agents.simulated import SlowExtractiveModel
from superbiz.config import Settings
from superbiz.evaluation.agent import builtin_dataset
from superbiz.evaluation.metrics import percentile
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.ingest import Ingestor

STARTUP_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 300.0
WARM_UP_REQUESTS = 3
TURNS_PER_SESSION = 2
#: errors quoted in the report, at most
ERROR_SAMPLES = 5

Notice = Callable[[str], None]


class ServiceBenchmarkError(SuperbizError):
    """The benchmark cannot run as asked (e.g. no replica answers)."""


def questions() -> list[str]:
    lines = (builtin_dataset() / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["query"] for line in lines if line.strip()]


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


# -- one turn, one session ---------------------------------------------------------------


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


# -- load -----------------------------------------------------------------------------


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


# -- audit ----------------------------------------------------------------------------


@dataclass(slots=True)
class Audit:
    """What went wrong over the sessions a benchmark ran (see the module docstring)."""

    sessions: int = 0
    lookups: int = 0
    invocation_mismatches: int = 0
    cap_overruns: int = 0
    leaks: int = 0
    second_turns: int = 0
    first_turn_forgotten: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.invocation_mismatches
            or self.cap_overruns
            or self.leaks
            or self.first_turn_forgotten
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "problems": self.problems[:ERROR_SAMPLES], "ok": self.ok}

    def session(self, session: SessionRun, rows: list[dict[str, Any]]) -> None:
        """Check one session against its recorded ``rows``."""
        self.sessions += 1
        sid = session.session_id
        answers = [t.answer for t in session.turns if t.answer is not None]
        reported = [
            (a["turn"], lookup["arguments"], lookup["executed"])
            for a in answers
            for lookup in a["lookups"]
        ]
        stored = [(row["turn"], row["arguments"], row["executed"]) for row in rows]
        self.lookups += len(reported)
        if reported != stored:
            self.invocation_mismatches += 1
            self.problems.append(f"{sid}: {len(reported)} lookups answered, {len(stored)} stored")
        seen: set[str] = set()  # documents this session was shown in earlier turns
        for turn in session.turns:
            if turn.event_sessions - {sid}:
                self.leaks += 1
                self.problems.append(f"{sid}: events of {sorted(turn.event_sessions - {sid})}")
            if turn.answer is not None:
                self._turn(sid, turn.answer, seen)

    def _turn(self, sid: str, answer: dict[str, Any], seen: set[str]) -> None:
        number = answer["turn"]
        executed = sum(lookup["executed"] for lookup in answer["lookups"])
        if executed > answer["high_mark"]:
            self.cap_overruns += 1
            self.problems.append(f"{sid} turn {number}: {executed} lookups executed")
        shown = {path for lookup in answer["lookups"] for path in lookup["documents"]}
        foreign = {c["path"] for c in answer["citations"]} - seen - shown
        if answer["session_id"] != sid or foreign:
            self.leaks += 1
            self.problems.append(f"{sid} turn {number}: cites {sorted(foreign)}")
        if number > 1 and seen:
            self.second_turns += 1
            if shown & seen:
                self.first_turn_forgotten += 1
                self.problems.append(f"{sid} turn {number}: shown again {sorted(shown & seen)}")
        seen |= shown


async def audit(urls: list[str], headers: dict[str, str], sessions: list[SessionRun]) -> Audit:
    """Each session checked against its recorded calls, read from the replicas in turn."""
    checked = Audit()
    async with httpx.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        for k, session in enumerate(sessions):
            url = urls[k % len(urls)]
            response = await client.get(f"{url}/api/sessions/{session.session_id}/invocations")
            rows = response.json()["invocations"] if response.status_code == 200 else []
            checked.session(session, rows)
    return checked


# -- PostgreSQL connections -----------------------------------------------------------------

#: connections to this database, not counting the sampler's own; narrowed to the
#: deployment's when its URL names an ``application_name`` (replicas share the URL)
_CONNECTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (current_setting('application_name') = ''
       OR application_name = current_setting('application_name'))
"""


class ConnectionPeak:
    """The most PostgreSQL connections seen while the benchmark runs (a context manager):
    ``pg_stat_activity`` read every ``interval_s`` on one connection of its own."""

    def __init__(self, database_url: str, interval_s: float = 0.05) -> None:
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        self.engine = create_engine(database_url, poolclass=NullPool)
        self.interval_s = interval_s
        self.peak = 0
        self.samples = 0
        self.max_connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="pg-connections", daemon=True)

    def __enter__(self) -> ConnectionPeak:
        from sqlalchemy import text

        self._connection = self.engine.connect()
        shown = self._connection.execute(text("SHOW max_connections")).scalar()
        self.max_connections = int(shown or 0)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._connection.close()
        self.engine.dispose()

    def _sample(self) -> None:
        from sqlalchemy import text

        query = text(_CONNECTIONS)
        while not self._stop.is_set():
            count = int(self._connection.execute(query).scalar() or 0)
            self._connection.rollback()  # a fresh snapshot of the activity view each time
            self.peak = max(self.peak, count)
            self.samples += 1
            self._stop.wait(self.interval_s)

    def as_dict(self) -> dict[str, int]:
        return {
            "peak_connections": self.peak,
            "max_connections": self.max_connections,
            "samples": self.samples,
        }


@contextlib.contextmanager
def connection_peak(database_url: str) -> Iterator[ConnectionPeak | None]:
    """A ``ConnectionPeak`` on PostgreSQL; ``None`` on any other database."""
    if not database_url.startswith("postgresql"):
        yield None
        return
    with ConnectionPeak(database_url) as peak:
        yield peak


# -- the benchmark -----------------------------------------------------------------------


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


def render_service_report(report: dict[str, Any], console: Console) -> None:
    where = ", ".join(report["urls"]) if len(report["urls"]) > 1 else "loopback"
    table = Table(
        title=f"superbiz service on {where} · {report['model']} · {report['documents']} documents"
    )
    for column in ("measure", "clients", "n", "p50 ms", "p95 ms", "max ms", "turns/s", "errors"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    clients = str(report["clients"])
    chat_one, chat_many = report["chat_one_client"], report["chat_concurrent"]
    stream_one, stream_many = report["stream_one_client"], report["stream_concurrent"]
    rows = [
        ("/api/chat turn", "1", chat_one, True),
        ("/api/chat turn", clients, chat_many, True),
        ("first SSE event", "1", stream_one["first_event"], False),
        ("first SSE event", clients, stream_many["first_event"], False),
        ("first token", "1", stream_one["first_token"], False),
        ("whole stream", "1", stream_one, True),
        ("whole stream", clients, stream_many, True),
    ]
    for name, n_clients, stats, whole in rows:
        table.add_row(
            name,
            n_clients,
            str(stats["n"]),
            f"{stats['p50_ms']:.1f}",
            f"{stats['p95_ms']:.1f}",
            f"{stats['max_ms']:.1f}",
            f"{stats['turns_per_s']:.2f}" if whole else "",
            str(stats["errors"]) if whole else "",
        )
    console.print(table)
    checked = report["audit"]
    verdict = "[green]ok[/]" if checked["ok"] else "[red]FAILED[/]"
    console.print(
        f"audit {verdict}: {checked['sessions']} sessions, {checked['lookups']} lookups; "
        f"invocation mismatches {checked['invocation_mismatches']}, cap overruns "
        f"{checked['cap_overruns']}, cross-session leaks {checked['leaks']}, second turns "
        f"that forgot the first {checked['first_turn_forgotten']} of {checked['second_turns']}"
    )
    postgres = report.get("postgres")
    if postgres:
        console.print(
            f"PostgreSQL connections: peak {postgres['peak_connections']} of "
            f"max_connections {postgres['max_connections']} "
            f"({postgres['samples']} samples of pg_stat_activity)"
        )
    for line in [*report["error_samples"], *checked["problems"]]:
        console.print(f"  {line}", markup=False)


def default_data_dir() -> Path:
    """The benchmark keeps its own knowledge base unless told otherwise."""
    return Path(".superbiz") / "eval" / "service"
