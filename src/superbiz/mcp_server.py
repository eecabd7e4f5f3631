"""Governed retrieval over MCP: ``lookup_knowledge`` with its governance, for any agent.

Peers expose retrieval as a stateless tool that forgets what it returned and never says
"stop". Here every call goes through ``LookupTurn`` (admission, decision matrix,
recording), so an agent in Claude Desktop, Cursor or LangGraph gets the same relevance
levels, action memory, dedup and water-level verdict as our own executor.

Sessions: one MCP session is one superbiz session and one long turn (the water level
counts every call in it). MCP session ids all start with ``mcp-``, apart from the web's
(``web-…``) and the CLI's: a client cannot read or mark a chat's session by naming it.
The superbiz session id comes, first match wins, from

1. the ``session_id`` argument (a client continues a named session, across connections),
   given ``mcp-`` in front unless it has it;
2. the streamable-HTTP ``Mcp-Session-Id`` of a handshake-era client: ``mcp-<that id>``;
3. a stream transport without HTTP (stdio): the process serves one client, so one
   ``mcp-<uuid>`` made at start;
4. otherwise (stateless HTTP, protocol 2026-07-28 has no sessions): a new
   ``mcp-<uuid>`` for this call. Every result names its ``session_id`` so the client
   can pass it back and stay governed.

Readers: a call over HTTP is its authenticated caller's (``request.state.reader``, set
by the service's authentication); otherwise (stdio, or no users) the server's
``reader`` (``superbiz mcp --as-group``; by default one who may read everything). A
reader's lookups, ``list_domains`` and ``knowledge://map`` hold only what it may read.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal, TypedDict

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import AnyUrl, Field
from starlette.types import ASGIApp

from superbiz._text import asker_language
from superbiz.access import Reader
from superbiz.agents.runtime import open_lookup
from superbiz.api.guard import McpGuard
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.principal import User
from superbiz.config import Settings
from superbiz.exceptions import ForbiddenError, NotFoundError, SessionBusyError
from superbiz.governance.results import ToolOutcome
from superbiz.governance.tool import LOOKUP_KNOWLEDGE, LookupTurn
from superbiz.governance.tracker import SessionTracker
from superbiz.knowledge.coverage.map import KnowledgeMap, build_map, map_for
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.storage.chat import ChatRepository
from superbiz.storage.invocations import TOOL_NAME
from superbiz.storage.session_ids import session_id_problem

__all__ = [
    "MAP_URI",
    "DomainSummary",
    "GovernedRetrieval",
    "ToolAnswer",
    "build_server",
    "serve",
]


Transport = Literal["stdio", "http"]
SERVER_NAME = "superbiz"
MAP_URI = "knowledge://map"
HTTP_PATH = "/mcp"
SESSION_HEADER = "mcp-session-id"
#: what every MCP session id starts with
MCP_PREFIX = "mcp-"
#: sessions whose turn state stays in memory; the least recently used go first (their
#: action memory stays in the tracker, only the water level of their turn is lost)
MAX_SESSIONS = 1024

_PARAMS = LOOKUP_KNOWLEDGE.parameters["properties"]
_SESSION_HELP = (
    "Optional superbiz session to continue (action memory, dedup, water level). Leave it "
    "out to use this MCP session; pass the session_id of an earlier result to continue "
    "that session from another connection."
)
LOOKUP_DESCRIPTION = (
    f"{LOOKUP_KNOWLEDGE.description} Every result also carries session_id, verdict "
    "(continue, supplement, answer, stop), budget_left, water_level and, when the "
    "governor has one, a breaker instruction: follow it. On verdict stop, answer from what "
    "you have: further lookups are blocked."
)
INSTRUCTIONS = (
    "Governed knowledge-base retrieval. Read knowledge://map or call list_domains to see "
    "what the knowledge base covers, then call lookup_knowledge. Results remember what "
    "this session already retrieved; repeated or redundant lookups are blocked "
    "(relevance_level DEDUPED), and verdict 'stop' means answer now."
)


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """A ``lookup_knowledge`` result as the MCP client sees it."""

    data: dict[str, Any]
    is_error: bool

    def as_call_result(self) -> CallToolResult:
        text = json.dumps(self.data, ensure_ascii=False, indent=2)
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=self.data,
            is_error=self.is_error,
        )


def answer_view(outcome: ToolOutcome, session_id: str) -> dict[str, Any]:
    """The executor's view of the call plus what an executor would have enforced: the
    verdict, the budget and water level after this call, and the breaker text."""
    constraint = outcome.constraint
    view = outcome.model_view()
    view["session_id"] = session_id
    view["verdict"] = "error" if outcome.error else constraint.verdict.value
    view["budget_left"] = constraint.budget_left
    view["water_level"] = constraint.water_level.value
    if constraint.message:
        view["breaker"] = constraint.message
    return view


class DomainSummary(TypedDict):
    """A domain as ``list_domains`` reports it."""

    domain_id: str
    document_count: int
    description: str
    when_to_retrieve: str


class GovernedRetrieval:
    """The server's state, free of any transport: one knowledge base and one
    ``LookupTurn`` per superbiz session.

    Methods block (Milvus, SQLAlchemy, the embedder): call them from a worker thread.
    One lock serialises them, because Milvus Lite is one in-process server not made
    for concurrent writers, and a ``LookupTurn`` is not thread-safe either.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        kb: KnowledgeBase | None = None,
        tracker: SessionTracker | None = None,
        reader: Reader | None = None,
    ) -> None:
        self.settings = settings
        #: whose calls these are when the transport names no reader (stdio)
        self.reader = reader or Reader.everyone()
        self.runtime = open_lookup(settings, kb=kb, tracker=tracker)
        #: chat sessions (web, CLI), which an MCP client may never continue
        self._chats = ChatRepository(self.runtime.kb.engine)
        self._turns: OrderedDict[str, LookupTurn] = OrderedDict()
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the embedder and open the index now: the first call then answers at
        once, and an index built by another embedder fails at start, not mid-session."""
        with self._lock:
            _ = self.runtime.kb.searcher
            _ = self.runtime.kb.exact_index

    def call(
        self,
        session_id: str,
        arguments: Mapping[str, Any],
        *,
        call_id: str = "",
        reader: Reader | None = None,
    ) -> ToolAnswer:
        """One governed ``lookup_knowledge`` call in ``session_id`` by ``reader`` (None:
        the server's); always recorded."""
        reader = reader or self.reader
        args = {k: v for k, v in arguments.items() if v is not None}
        if self._chats.exists(session_id):  # a chat chose an id that looks like MCP's
            return ToolAnswer(
                {
                    "error": f"session {session_id!r} is a chat session, apart from MCP's: "
                    "leave session_id out, or name another"
                },
                is_error=True,
            )
        try:
            # after a chat turn of the session still running (another replica's, say)
            with self.runtime.sessions.hold(session_id), self._lock:
                turn = self._turn(session_id, args.get("query"), reader)
                step = len(turn.outcomes) + 1
                outcome = self.runtime.recorded_call(turn, args, call_id=call_id, step=step)
        except SessionBusyError as exc:
            return ToolAnswer({"error": str(exc)}, is_error=True)
        return ToolAnswer(answer_view(outcome, session_id), is_error=outcome.error is not None)

    def domains(self, reader: Reader | None = None) -> list[DomainSummary]:
        """Domain ids with their document counts and the map's descriptions, of what
        ``reader`` (None: the server's) may read."""
        with self._lock:
            knowledge_map = self._map(reader)
        return [
            {
                "domain_id": d.domain_id,
                "document_count": d.document_count,
                "description": d.description,
                "when_to_retrieve": d.when_to_retrieve,
            }
            for d in knowledge_map.domains
        ]

    def map_yaml(self, reader: Reader | None = None) -> str:
        """The knowledge map the Planner sees, within the planner's token budget, of what
        ``reader`` (None: the server's) may read."""
        with self._lock:
            return self._map(reader).to_yaml(self.settings.advanced.planner.map_token_budget)

    def _map(self, reader: Reader | None) -> KnowledgeMap:
        kb = self.runtime.kb
        kb.catch_up()
        return map_for(build_map(kb), kb.view(reader or self.reader))

    def close(self) -> None:
        with self._lock:
            self._turns.clear()
            self.runtime.close()

    def _turn(self, session_id: str, query: Any, reader: Reader) -> LookupTurn:
        """The session's turn, made on its first call; a session resumed by a new server
        process, or by another reader, starts a new turn (its action memory is still in
        the tracker, and a reader meets only the part of it it may read)."""
        turn = self._turns.get(session_id)
        if turn is not None and (turn.reader or Reader.everyone()).key == reader.key:
            self._turns.move_to_end(session_id)
            return turn
        turn = LookupTurn(
            self.runtime.lookup,
            self.settings.governance_config,
            session_id=session_id,
            turn=self.runtime.next_turn(session_id),
            language=asker_language(query if isinstance(query, str) else ""),
            recorder=self.runtime.invocations,
            reader=reader,
        )
        self._turns[session_id] = turn
        while len(self._turns) > MAX_SESSIONS:
            self._turns.popitem(last=False)
        return turn


def mcp_session_id(named: str) -> str:
    """The superbiz session of a ``session_id`` an MCP client names: in the MCP namespace
    (``mcp-``), so that a web chat's id names another session, never the chat's.

    >>> mcp_session_id(" team "), mcp_session_id("mcp-1f2e"), mcp_session_id("web-abc")
    ('mcp-team', 'mcp-1f2e', 'mcp-web-abc')
    >>> mcp_session_id("  ")
    ''
    """
    named = named.strip()
    if not named or named.startswith(MCP_PREFIX):
        return named
    return f"{MCP_PREFIX}{named}"


def _session_problem(session_id: str) -> str | None:
    problem = session_id_problem(session_id)
    return f"'session_id' {problem}" if problem else None


def _not_theirs(auth: Authenticator, ctx: Context, session_id: str) -> str | None:
    """Why the caller may not use ``session_id`` (someone else's), else None; a new
    session becomes theirs."""
    request = ctx.request_context.request
    user = getattr(getattr(request, "state", None), "user", None)
    if not isinstance(user, User):
        return None  # stdio: the person who started the process
    try:
        auth.sessions.check(user, session_id, write=True, claim=True)
    except (NotFoundError, ForbiddenError) as exc:
        return str(exc.args[0] if exc.args else exc)
    return None


#: the context of the resource read in progress (see ``_ReadingServer``)
_reading: ContextVar[Context | None] = ContextVar("superbiz_mcp_reading", default=None)


class _ReadingServer(MCPServer):
    """Hands a static resource's function the context of its read (the SDK gives
    context only to templated resources): ``knowledge://map`` is its reader's map."""

    async def read_resource(
        self, uri: AnyUrl | str, context: Context | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        token = _reading.set(context)
        try:
            return await super().read_resource(uri, context)
        finally:
            _reading.reset(token)


def build_server(service: GovernedRetrieval, auth: Authenticator | None = None) -> MCPServer:
    """The MCP surface over ``service``: two tools and the knowledge-map resource. With
    ``auth`` (over HTTP), a session belongs to the person whose key opened it: another
    person's ``session_id`` is answered as a session that does not exist."""
    process_session = f"mcp-{uuid.uuid4().hex}"
    server: MCPServer = _ReadingServer(
        SERVER_NAME,
        title="superbiz governed retrieval",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
    )

    def reader_of(ctx: Context) -> Reader | None:
        """The HTTP caller authentication named, else None (the server's reader)."""
        request = ctx.request_context.request
        found = getattr(getattr(request, "state", None), "reader", None)
        return found if isinstance(found, Reader) else None

    def session_for(ctx: Context, explicit: str | None) -> str:
        if explicit is not None:
            return mcp_session_id(explicit)
        if ctx.request_context.request is None:  # stdio: this process serves one client
            return process_session
        transport_session = (ctx.headers or {}).get(SESSION_HEADER)
        if transport_session:
            return f"mcp-{transport_session}"
        return f"mcp-{uuid.uuid4().hex}"  # stateless HTTP: the result names it

    @server.tool(
        name=TOOL_NAME,
        description=LOOKUP_DESCRIPTION,
        annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False),
    )
    async def lookup_knowledge(
        query: Annotated[str, Field(description=_PARAMS["query"]["description"])],
        ctx: Context,
        domain: Annotated[str | None, Field(description=_PARAMS["domain"]["description"])] = None,
        missing_dimension: Annotated[
            str | None, Field(description=_PARAMS["missing_dimension"]["description"])
        ] = None,
        session_id: Annotated[str | None, Field(description=_SESSION_HELP)] = None,
    ) -> CallToolResult:
        session = session_for(ctx, session_id)
        problem = _session_problem(session)
        if problem is None and auth is not None:
            problem = await anyio.to_thread.run_sync(_not_theirs, auth, ctx, session)
        if problem is not None:
            return ToolAnswer({"error": problem}, is_error=True).as_call_result()
        arguments = {"query": query, "domain": domain, "missing_dimension": missing_dimension}
        answer = await anyio.to_thread.run_sync(
            partial(
                service.call, session, arguments, call_id=str(ctx.request_id), reader=reader_of(ctx)
            )
        )
        return answer.as_call_result()

    @server.tool(
        name="list_domains",
        description=(
            "The knowledge domains: id, document count, description and when to retrieve. "
            "Pass a domain_id as lookup_knowledge's domain."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def list_domains(ctx: Context) -> dict[str, Any]:
        return {"domains": await anyio.to_thread.run_sync(service.domains, reader_of(ctx))}

    @server.resource(
        MAP_URI,
        name="knowledge-map",
        description="The knowledge map (YAML): each domain, when to retrieve it, its documents.",
        mime_type="application/yaml",
    )
    async def knowledge_map() -> str:
        context = _reading.get()  # a static resource is given no context of its own
        reader = reader_of(context) if context is not None else None
        return await anyio.to_thread.run_sync(service.map_yaml, reader)

    return server


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Stray prints while loading must not reach stdout: on stdio it is the wire."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def serve(
    settings: Settings,
    *,
    reader: Reader | None = None,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Open the knowledge base, warm it up and serve until the client goes (stdio) or
    the process is interrupted (Ctrl-C or SIGTERM: the stores are closed either way)."""
    with _stdout_to_stderr():
        service = GovernedRetrieval(settings, reader=reader)
    previous = _interrupt_on_sigterm()
    try:
        with _stdout_to_stderr():
            service.warm_up()
        auth = Authenticator(settings, service.runtime.kb.engine) if transport == "http" else None
        server = build_server(service, auth)
        if on_ready is not None:
            on_ready()
        if transport == "stdio":
            server.run("stdio")
        else:
            _serve_http(server, settings, host, port, auth)
    except KeyboardInterrupt:
        pass  # asked to stop: a normal end for a server
    finally:
        service.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def http_app(server: MCPServer, settings: Settings, auth: Authenticator | None = None) -> ASGIApp:
    """The streamable-HTTP app behind the service's guard (``McpGuard``): its Host and
    Origin rules and who is calling (``auth``: keys, the provider's tokens), in place of
    the SDK's loopback-only checks."""
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return McpGuard(app, settings, auth)


def _serve_http(
    server: MCPServer, settings: Settings, host: str, port: int, auth: Authenticator | None
) -> None:
    import uvicorn

    app = http_app(server, settings, auth)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


def _interrupt_on_sigterm() -> Any:
    """SIGTERM raises ``KeyboardInterrupt`` like Ctrl-C, so ``finally`` closes the stores
    (uvicorn re-raises the signal after its graceful shutdown; the default would kill us)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, signal.default_int_handler)
