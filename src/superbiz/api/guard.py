"""The checks every request passes before any route reads its body.

One ASGI middleware, so that nothing is parsed or spooled for a request that is refused:

1. ``Host`` must be one of ``service.allowed-hosts`` (400); while that is empty, a
   loopback name or the address the request came in on (DNS rebinding is closed by
   default). The probes ``/livez`` and ``/healthz`` are answered whatever the Host: a
   Kubernetes probe sends the pod's IP. A ``Host`` or ``Origin`` that is no URL
   authority at all (``http://[``) is a 400 on every other request.
2. Who is asking (``superbiz.auth``): the admin key (``service.api-key``), a person's API
   key or the identity provider's JWT (``X-API-Key`` or ``Authorization: Bearer``), or the
   page's sign-in cookie. Once the service has any of these (README "Sign-in, roles and
   the audit trail"), every route but the open ones (``superbiz.auth.roles.OPEN``: the
   page, sign-in, ``/api/info``, the probes) needs someone (401) whose role reaches the
   route's (``ROUTE_ROLES``; 403, audited) — before the body is read. The person and
   what they may read go to ``request.state.user`` and ``request.state.reader``.
3. A write without a key in a header (the page's cookie, or nothing) must come from the
   server's own page: a browser's ``Sec-Fetch-Site`` must be ``same-origin`` (or
   ``none``), else its ``Origin`` must be this host (403) — the page's CSRF defence,
   beside the cookie's ``SameSite``. Clients that send neither (curl, scripts) are not
   browsers, so a page elsewhere cannot use them. No CORS headers are ever sent.
4. A body over its limit is refused: at once when ``Content-Length`` says so, else
   when the bytes streamed so far pass it (413); nothing beyond the limit is read.
5. A path with NUL in it (``%00``) names nothing any store can hold: 404, before any
   route looks it up (PostgreSQL refused the lookup, SQLite found nothing).
6. Every response carries the security headers (CSP, ``X-Frame-Options``, ``nosniff``,
   ``Referrer-Policy``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from fastapi import HTTPException
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import cookie_parser
from starlette.routing import BaseRoute, Mount, compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from superbiz.api.errors import error_response, reported_status
from superbiz.auth._reader import reader_of
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.principal import User, local_user
from superbiz.auth.roles import Role, route_role
from superbiz.auth.sign_ins import COOKIE
from superbiz.config import Settings
from superbiz.exceptions import SignInError, SuperbizError

try:
    from fastapi.routing import iter_route_contexts
except ImportError:  # FastAPI before included routers were nested: routes are flat
    iter_route_contexts = None  # type: ignore[assignment]

#: multipart framing allowed on top of the file itself before an upload is refused
UPLOAD_OVERHEAD = 64 * 1024
UPLOAD_PATH = "/api/documents"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values of a request the page itself (or the user) made
SAME_ORIGIN_SITES = frozenset({"same-origin", "none"})

#: the page loads only its own files; nothing may frame it
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
#: /docs and /redoc load their scripts from the package (static/vendor) and start them
#: inline; ReDoc runs its search in a blob: worker. Nothing from another host.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


def sent_key(headers: Headers) -> str | None:
    """The key a request carries: ``X-API-Key``, else a ``Bearer`` token."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class RouteTemplates:
    """Which route template a request reaches (``/api/sessions/{session_id}``), found
    before the router runs so that roles are checked before the body is read. Built from
    the app's routes on first use (they are all added by then)."""

    def __init__(self, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self._routes = routes
        self._table: list[tuple[frozenset[str] | None, re.Pattern[str], str]] | None = None

    def _build(self) -> list[tuple[frozenset[str] | None, re.Pattern[str], str]]:
        routes: Iterable[Any] = self._routes()
        if iter_route_contexts is not None:  # FastAPI ≥ 0.120 nests included routers
            routes = iter_route_contexts(list(routes))
        table: list[tuple[frozenset[str] | None, re.Pattern[str], str]] = []
        for route in routes:
            path = getattr(route, "path", None)
            if not isinstance(path, str):
                continue
            methods = getattr(route, "methods", None)
            if isinstance(route, Mount):  # the static files: everything under it
                regex, _, _ = compile_path(path.rstrip("/") + "/{rest:path}")
                table.append((None, regex, path))
                continue
            regex, _, _ = compile_path(path)
            table.append((frozenset(methods) if methods else None, regex, path))
        return table

    def template(self, method: str, path: str) -> str | None:
        if self._table is None:
            self._table = self._build()
        method = "GET" if method == "HEAD" else method
        for methods, regex, template in self._table:
            if regex.match(path) and (methods is None or method in methods):
                return template
        return None


def client_address(scope: Scope) -> str | None:
    client = scope.get("client")
    return str(client[0]) if client else None


Refusal = tuple[int, str, str, dict[str, str] | None]

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}
SIGN_IN_FIRST = (
    "sign in first: send an API key as X-API-Key or Authorization: Bearer, or sign in on the page"
)


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """``host`` is listed with or without its port, or matches a ``*.example.com`` entry.

    >>> host_allowed("kb.example.com:8000", ["*.example.com"]), host_allowed("evil.io", ["a"])
    (True, False)
    >>> host_allowed("127.0.0.1:8000", ["127.0.0.1:8000"]), host_allowed("a:1", ["a:2"])
    (True, False)
    """
    name = urlsplit(f"//{host}").hostname or ""
    for entry in allowed:
        entry = entry.lower()
        if entry in ("*", name, host.lower()):
            return True
        if entry.startswith("*.") and name.endswith(entry[1:]):
            return True
    return False


def malformed_header(headers: Headers) -> str | None:
    """``Host`` or ``Origin`` when it cannot be read as a host or a URL (``http://[``),
    else ``None``: the checks below read both."""
    for name, value in (("Host", headers.get("host")), ("Origin", headers.get("origin"))):
        if value is None:
            continue
        try:
            urlsplit(f"//{value}" if name == "Host" else value).hostname  # noqa: B018
        except ValueError:
            return name
    return None


#: the probes a load balancer or Kubernetes sends, with whatever Host it knows (a pod IP)
PROBE_PATHS = frozenset({"/livez", "/healthz"})
HOST_HINT = (
    "add the name clients use to service.allowed-hosts "
    "(YAML: allowed-hosts: [kb.example.com], or "
    "SUPERBIZ_SERVICE__ALLOWED_HOSTS='[\"kb.example.com\"]')"
)


def local_host(host: str, bound: str | None) -> bool:
    """With ``service.allowed-hosts`` empty: ``host`` names this machine's loopback
    (``localhost``, ``127.0.0.1``, ``[::1]``) or ``bound``, the address the request
    came in on; a DNS name pointed here by someone else is neither.

    >>> local_host("localhost:8000", None), local_host("[::1]:80", None)
    (True, True)
    >>> local_host("10.0.0.5:8000", "10.0.0.5"), local_host("evil.example", "10.0.0.5")
    (True, False)
    >>> local_host("127.0.0.1.evil.example", None)
    False
    """
    try:
        name = (urlsplit(f"//{host}").hostname or "").rstrip(".")
    except ValueError:  # not a host at all (``[``)
        return False
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        if ipaddress.ip_address(name).is_loopback:
            return True
    except ValueError:
        pass
    return bool(bound) and name == str(bound).strip("[]").lower()


def host_refusal(host: str, allowed: Iterable[str], bound: str | None) -> str | None:
    """Why ``host`` is refused, or ``None``: it must be in ``allowed``, or, while that
    is empty, name this machine (``local_host``)."""
    allowed = tuple(allowed)
    if allowed:
        if host_allowed(host, allowed):
            return None
        return f"this Host is not in service.allowed-hosts; {HOST_HINT}"
    if not host or local_host(host, bound):  # no Host: no browser, so no rebinding
        return None
    return (
        "this Host is not allowed: with service.allowed-hosts empty only loopback names "
        f"(localhost, 127.0.0.1, [::1]) and the server's own address are; {HOST_HINT}"
    )


def bound_address(scope: Scope) -> str | None:
    """The address the request came in on (the ASGI server's socket)."""
    server = scope.get("server")
    return str(server[0]) if server else None


def same_origin(headers: Headers) -> bool:
    """Whether a browser says the request comes from this server's own page; a client
    that sends neither ``Sec-Fetch-Site`` nor ``Origin`` is not a browser."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site.lower() in SAME_ORIGIN_SITES
    origin = headers.get("origin")
    if origin is None:
        return True
    netloc = urlsplit(origin).netloc.lower()
    return bool(netloc) and netloc == headers.get("host", "").lower()


class RequestGuard:
    """ASGI middleware: host, identity and role, origin and body-size checks, then
    security headers."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        auth: Authenticator | None = None,
        routes: RouteTemplates | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.routes = routes
        self.allowed_hosts = settings.service.allowed_hosts
        self.json_limit = settings.service.max_json_bytes
        self.upload_limit = settings.ingest.max_file_bytes + UPLOAD_OVERHEAD

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(scope, send)
        refusal = self._refusal(scope)
        if refusal is None:
            refusal = await self._identity(scope)
        if refusal is None:
            refusal = self._body_refusal(scope)
        if refusal is not None:
            status, kind, message, extra = refusal
            await error_response(status, kind, message, headers=extra)(scope, receive, send)
            return
        await self.app(scope, _counted(receive, self._limit(scope)), send)

    def _limit(self, scope: Scope) -> int:
        upload = scope["method"] == "POST" and scope["path"].rstrip("/") == UPLOAD_PATH
        return self.upload_limit if upload else self.json_limit

    def _refusal(self, scope: Scope) -> Refusal | None:
        headers = Headers(scope=scope)
        path = scope["path"]
        if path not in PROBE_PATHS:
            if (header := malformed_header(headers)) is not None:
                return 400, "bad_request", f"malformed {header} header: not a host or URL", None
            host = headers.get("host", "")
            refused = host_refusal(host, self.allowed_hosts, bound_address(scope))
            if refused is not None:
                return 400, "invalid_host", refused, None
        return None

    async def _identity(self, scope: Scope) -> Refusal | None:
        """Who is asking, and whether their role reaches the route's (see the module)."""
        state = scope.setdefault("state", {})
        template = self.routes.template(scope["method"], scope["path"]) if self.routes else None
        least = route_role(scope["method"], template) if template is not None else None
        if self.auth is None or least is None:
            state["keyed"] = False
            return None
        headers = Headers(scope=scope)
        credential = sent_key(headers)
        cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE)
        address = client_address(scope)
        target = f"{scope['method']} {scope['path']}"
        try:
            user = await anyio.to_thread.run_sync(self._who, credential, cookie, address, target)
            if user is not None and user.role < least:
                await anyio.to_thread.run_sync(
                    self.auth.audit.denied, user.name, target, f"needs {least.label}", address
                )
        except SignInError as exc:
            return 401, "unauthorized", str(exc), UNAUTHORIZED_HEADERS
        except SuperbizError as exc:  # the directory's store, or the identity provider
            status, kind = reported_status(exc)
            return status, kind, str(exc), None
        if user is None:
            return 401, "unauthorized", SIGN_IN_FIRST, UNAUTHORIZED_HEADERS
        if user.role < least:
            return (
                403,
                "forbidden",
                f"this needs the role {least.label}; {user.name} is {user.role.label}",
                None,
            )
        state["user"], state["reader"] = user, reader_of(user)
        state["keyed"] = credential is not None and user.via != "local"
        return None

    def _who(
        self, credential: str | None, cookie: str | None, address: str | None, target: str
    ) -> User | None:
        assert self.auth is not None
        if not self.auth.required():
            return local_user()
        try:
            return self.auth.authenticate(credential, cookie, address)
        except SignInError as exc:
            self.auth.audit.denied("-", target, str(exc), address)
            raise

    def _body_refusal(self, scope: Scope) -> Refusal | None:
        headers = Headers(scope=scope)
        method, path = scope["method"], scope["path"]
        keyed = bool(scope.get("state", {}).get("keyed"))
        if method not in SAFE_METHODS and not keyed and not same_origin(headers):
            return (
                403,
                "cross_origin",
                "cross-origin write refused: writes come from this server's own page, "
                "or carry an API key (X-API-Key or Authorization: Bearer)",
                None,
            )
        if "\x00" in path:
            return 404, "not_found", "nothing here: the path contains NUL (%00)", None
        limit = self._limit(scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return 413, "payload_too_large", _too_large(int(length), limit), None
        return None


class McpGuard:
    """ASGI middleware of ``superbiz mcp --transport http``: the service's ``Host`` and
    ``Origin`` rules, and once the service asks who is calling (``service.api-key``, a
    person's key, ``auth.oidc``) every request needs someone, sent as
    ``Authorization: Bearer`` (any role may look things up, as a reader asks on the
    page): the MCP endpoint runs lookups and writes sessions, as the service's chat does.
    The person goes to ``request.state.user`` / ``reader`` like the service's."""

    def __init__(self, app: ASGIApp, settings: Settings, auth: Authenticator | None = None):
        self.app = app
        self.auth = auth
        self.allowed_hosts = settings.service.allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self._refusal(scope)
            if refusal is not None:
                status, kind, message, extra = refusal
                await error_response(status, kind, message, headers=extra)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _refusal(self, scope: Scope) -> Refusal | None:
        headers = Headers(scope=scope)
        refused = host_refusal(headers.get("host", ""), self.allowed_hosts, bound_address(scope))
        if refused is not None:
            return 400, "invalid_host", refused, None
        keyed = False
        if self.auth is not None:
            credential = sent_key(headers)
            try:
                user = await anyio.to_thread.run_sync(self._who, credential, client_address(scope))
            except SignInError as exc:
                return 401, "unauthorized", str(exc), UNAUTHORIZED_HEADERS
            if user is None:
                return (
                    401,
                    "unauthorized",
                    "missing API key: send yours (or service.api-key) as Authorization: Bearer",
                    UNAUTHORIZED_HEADERS,
                )
            state = scope.setdefault("state", {})
            state["user"], state["reader"] = user, reader_of(user)
            keyed = credential is not None and user.via != "local"
        if scope["method"] not in SAFE_METHODS and not keyed and not same_origin(headers):
            return 403, "cross_origin", "cross-origin request refused", None
        return None

    def _who(self, credential: str | None, address: str | None) -> User | None:
        assert self.auth is not None
        if not self.auth.required():
            return local_user()
        try:
            user = self.auth.authenticate(credential, None, address)
        except SignInError as exc:
            self.auth.audit.denied("-", "MCP", str(exc), address)
            raise
        if user is not None and user.role < Role.READER:  # every role reads; kept explicit
            return None
        return user


def _too_large(size: int | None, limit: int) -> str:
    what = f"the body is {size} bytes" if size is not None else "the body is too large"
    return f"{what}; the limit is {limit} bytes"


def _counted(receive: Receive, limit: int) -> Receive:
    """``receive`` that refuses the body once more than ``limit`` bytes have come in
    (a chunked body has no length to check up front)."""
    received = 0

    async def counted() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                # FastAPI passes its own HTTPException through body parsing unchanged
                raise HTTPException(413, _too_large(None, limit))
        return message

    return counted


def _with_security_headers(scope: Scope, send: Send) -> Send:
    csp = DOCS_CSP if scope["path"] in DOCS_PATHS else PAGE_CSP

    async def secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS.items():
                headers.setdefault(name, value)
            headers.setdefault("content-security-policy", csp)
        await send(message)

    return secured
