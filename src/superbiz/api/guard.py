"""The checks every request passes before any route reads its body.

One ASGI middleware, so that nothing is parsed or spooled for a request that is refused:

1. ``Host`` must be one of ``service.allowed-hosts`` (400); while that is empty, a
   loopback name or the address the request came in on (DNS rebinding is closed by
   default). The probes ``/livez`` and ``/healthz`` are answered whatever the Host: a
   Kubernetes probe sends the pod's IP. A ``Host`` or ``Origin`` that is no URL
   authority at all (``http://[``) is a 400 on every other request.
2. With ``service.api-key`` set, every ``/api`` route but ``/api/info`` and ``/metrics``
   need the key (``X-API-Key`` or ``Authorization: Bearer``) — 401 before the body: they
   show the knowledge base's contents (documents, map, sources with their URLs and skip
   reasons), people's questions (sessions, gaps) or its operations (metrics). The page
   and its files, ``/api/info`` (the page reads whether to ask for a key), the probes and
   the API's description stay open (``OPEN_WITH_KEY``).
3. Without a key, a write must come from the server's own page: a browser's
   ``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``), else its ``Origin`` must be
   this host (403). Clients that send neither (curl, scripts) are not browsers, so a
   page elsewhere cannot use them. No CORS headers are ever sent.
4. A body over its limit is refused: at once when ``Content-Length`` says so, else
   when the bytes streamed so far pass it (413); nothing beyond the limit is read.
5. A path with NUL in it (``%00``) names nothing any store can hold: 404, before any
   route looks it up (PostgreSQL refused the lookup, SQLite found nothing).
6. Every response carries the security headers (CSP, ``X-Frame-Options``, ``nosniff``,
   ``Referrer-Policy``).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from fastapi import HTTPException
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from superbiz.api.errors import error_response
from superbiz.config import Settings

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


def key_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a sent key with the configured one."""
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


def sent_key(headers: Headers) -> str | None:
    """The key a request carries: ``X-API-Key``, else a ``Bearer`` token."""
    key = headers.get("x-api-key")
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


#: what a key does not guard: whether the page must ask for one, and the probes
OPEN_WITH_KEY = frozenset({"/api/info", "/livez", "/healthz"})
#: Prometheus text: counts and latencies of the service's operations
METRICS_PATH = "/metrics"


def needs_key(method: str, path: str) -> bool:
    """Everything under ``/api`` (writes, sessions, gaps, and the reads that show the
    knowledge base: documents, map, sources) and ``/metrics``, but ``OPEN_WITH_KEY``.

    >>> needs_key("GET", "/api/sources"), needs_key("GET", "/metrics")
    (True, True)
    >>> needs_key("GET", "/api/info"), needs_key("GET", "/"), needs_key("GET", "/docs")
    (False, False, False)
    """
    if path in OPEN_WITH_KEY:
        return False
    return path.startswith("/api/") or path == METRICS_PATH


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
    """ASGI middleware: host, key, origin and body-size checks, then security headers."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.api_key = settings.service.api_key
        self.allowed_hosts = settings.service.allowed_hosts
        self.json_limit = settings.service.max_json_bytes
        self.upload_limit = settings.ingest.max_file_bytes + UPLOAD_OVERHEAD

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(scope, send)
        refusal = self._refusal(scope)
        if refusal is not None:
            status, kind, message, extra = refusal
            await error_response(status, kind, message, headers=extra)(scope, receive, send)
            return
        await self.app(scope, _counted(receive, self._limit(scope)), send)

    def _limit(self, scope: Scope) -> int:
        upload = scope["method"] == "POST" and scope["path"].rstrip("/") == UPLOAD_PATH
        return self.upload_limit if upload else self.json_limit

    def _refusal(self, scope: Scope) -> tuple[int, str, str, dict[str, str] | None] | None:
        headers = Headers(scope=scope)
        method, path = scope["method"], scope["path"]
        if path not in PROBE_PATHS:
            if (header := malformed_header(headers)) is not None:
                return 400, "bad_request", f"malformed {header} header: not a host or URL", None
            host = headers.get("host", "")
            refused = host_refusal(host, self.allowed_hosts, bound_address(scope))
            if refused is not None:
                return 400, "invalid_host", refused, None
        keyed = False
        if self.api_key:
            keyed = key_matches(sent_key(headers), self.api_key)
            if needs_key(method, path) and not keyed:
                return (
                    401,
                    "unauthorized",
                    "missing or wrong API key: send it as X-API-Key or Authorization: Bearer",
                    {"WWW-Authenticate": "Bearer"},
                )
        if method not in SAFE_METHODS and not keyed and not same_origin(headers):
            return (
                403,
                "cross_origin",
                "cross-origin write refused: writes come from this server's own page, "
                "or carry the API key (service.api-key)",
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
    ``Origin`` rules, and with ``service.api-key`` set every request needs the key (MCP
    clients send it as ``Authorization: Bearer``): the MCP endpoint runs lookups and
    writes sessions, as the service's chat does."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.api_key = settings.service.api_key
        self.allowed_hosts = settings.service.allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                status, kind, message, extra = refusal
                await error_response(status, kind, message, headers=extra)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str, str, dict[str, str] | None] | None:
        headers = Headers(scope=scope)
        refused = host_refusal(headers.get("host", ""), self.allowed_hosts, bound_address(scope))
        if refused is not None:
            return 400, "invalid_host", refused, None
        keyed = bool(self.api_key) and key_matches(sent_key(headers), self.api_key or "")
        if self.api_key and not keyed:
            return (
                401,
                "unauthorized",
                "missing or wrong API key: send service.api-key as Authorization: Bearer",
                {"WWW-Authenticate": "Bearer"},
            )
        if scope["method"] not in SAFE_METHODS and not keyed and not same_origin(headers):
            return 403, "cross_origin", "cross-origin request refused", None
        return None


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
