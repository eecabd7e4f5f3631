"""Settings of a deployment: the HTTP ``service``, ``auth`` (OpenID Connect), ``access``
to domains, the ``database-pool`` and ``telemetry``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from superbiz.access import AccessListError, parse_access
from superbiz.config._section import _Section


class DatabasePoolSettings(_Section):
    """PostgreSQL connections one process opens at most: ``size`` kept open plus
    ``overflow`` for the stores' queries, and ``session_locks`` for the turns holding a
    session's advisory lock (one connection each while it runs or waits; more turns wait
    in the process for one, up to ``service.session-wait-s``). With the defaults a
    process opens at most 40, so two replicas and a ``superbiz ingest`` fit PostgreSQL's
    default ``max_connections`` (100). SQLite keeps SQLAlchemy's own pool."""

    size: int = Field(5, ge=1)
    """Connections kept open for the stores' queries."""
    overflow: int = Field(5, ge=0)
    """Connections opened beyond `size` under load."""
    session_locks: int = Field(30, ge=1)
    """Connections for running turns, one each for its session's advisory lock; more turns wait in
    the process for one."""

    @property
    def most(self) -> int:
        """The most connections one process opens."""
        return self.size + self.overflow + self.session_locks


class ServiceSettings(_Section):
    """The HTTP service (see the README's HTTP section).

    ``api_key`` is the admin key of a one-person deployment: once set (or once
    ``auth.oidc`` or anyone added with ``superbiz users add``), every ``/api`` route but
    ``/api/info`` needs a key (``X-API-Key`` or ``Authorization: Bearer``) or the page's
    sign-in, checked before the body is read. A write without a key in a header must come
    from the page's own origin. ``allowed_hosts`` (empty: any)
    refuses other ``Host`` headers; ``max_json_bytes`` bounds a JSON body (uploads are
    bounded by ``ingest.max_file_bytes``). A second request in a busy session waits
    ``session_wait_s`` for the turn ahead, then gets 409; a streamed turn sends a
    keep-alive comment after ``sse_keepalive_s`` of silence, so a proxy's idle timeout
    does not cut a long model step. At most ``max_concurrent_turns`` turns run at once;
    more wait for a slot.
    """

    api_key: str | None = None
    """The admin key of a one-person deployment (and break-glass access): whoever sends it
    (`X-API-Key` or `Authorization: Bearer`) is an admin who reads every document. Once it is
    set, every route but the page, sign-in, `/api/info` and the probes needs a key or a sign-in;
    MCP over HTTP too. A team uses people's own keys (`superbiz users add`) or `auth.oidc`."""
    allowed_hosts: tuple[str, ...] = ()
    """The `Host` names accepted, e.g. `[kb.example.com, "*.internal", "127.0.0.1:8000"]` (with a
    port: that port only; `"*"`: any). Empty: loopback names and the address a request came in on.
    """
    max_json_bytes: int = Field(64 * 1024, ge=1024)
    """A JSON body over this is refused with 413 (uploads are bounded by `ingest.max-file-bytes`).
    """
    session_wait_s: float = Field(30.0, ge=0)
    """How long a request waits for the running turn of its session before a 409."""
    sse_keepalive_s: float = Field(15.0, gt=0)
    """Seconds between `: keep-alive` comments while a streamed turn sends nothing, so a proxy's
    idle timeout does not cut a long model step."""
    max_concurrent_turns: int = Field(64, ge=1)
    """Turns one process runs at once (a thread each, mostly waiting on the model); more wait for a
    slot."""


class OidcSettings(_Section):
    """Sign-in with the team's OpenID Connect provider (``auth.oidc``; README "Sign-in,
    roles and the audit trail"). Set ``issuer`` and ``client_id`` to turn it on: the
    page signs people in with the authorization code flow and PKCE, and the API accepts
    the provider's JWTs (ID tokens, or access tokens whose ``aud`` names ``audience``)
    as ``Authorization: Bearer``, checked against the issuer's JWKS."""

    issuer: str | None = None
    """The provider's issuer URL, exactly as its tokens name it (`https://sso.example.com/realms/team`);
    its `/.well-known/openid-configuration` is read. Set with `client-id` to turn sign-in on."""
    client_id: str | None = None
    """The client id superbiz was registered under at the provider (redirect URI
    `https://YOUR-HOST/auth/callback`); bearer tokens must name it as `aud` unless `audience` says
    otherwise."""
    client_secret: str | None = None
    """A confidential client's secret, sent to the token endpoint (keep it in
    `SUPERBIZ_AUTH__OIDC__CLIENT_SECRET`, not in the file); empty: a public client (PKCE alone)."""
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    """The scopes asked for at sign-in; add the one that makes your provider send groups if it has
    one (`groups`)."""
    username_claim: str = "preferred_username"
    """The claim that names a person (then `email`, then `sub` when it is missing): the name
    `superbiz users add` and the audit trail use."""
    groups_claim: str = "groups"
    """The claim listing a person's groups (dots walk into objects: `realm_access.roles`); they
    decide role groups and what the person may read (`access:` lists). A person whose token has
    no such claim keeps the groups an admin gave them."""
    audience: tuple[str, ...] = ()
    """The `aud` a bearer token must name; empty: `client-id` (Entra ID's access tokens:
    `[api://CLIENT-ID]`)."""
    redirect_url: str | None = None
    """Where the provider sends the browser back; default: `/auth/callback` on the address the
    browser used. Set it behind a proxy that terminates TLS (`https://kb.example.com/auth/callback`).
    """
    admin_groups: tuple[str, ...] = ()
    """Members of these provider groups are admins at each sign-in (leaving the group takes it
    back at the next)."""
    editor_groups: tuple[str, ...] = ()
    """Members of these provider groups are at least editors at each sign-in."""
    timeout_s: float = Field(10.0, gt=0)
    """Seconds one request to the provider may take (discovery, JWKS, token, userinfo)."""

    @field_validator("issuer", "redirect_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, not {value!r}")
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _client_with_issuer(self) -> OidcSettings:
        if self.issuer and not self.client_id:
            raise ValueError("auth.oidc.issuer is set: set auth.oidc.client-id too")
        return self

    @property
    def enabled(self) -> bool:
        return bool(self.issuer and self.client_id)


class AuthSettings(_Section):
    """Who may use the service (``auth``): sign-in with OpenID Connect, the role a new
    person gets, and how long a sign-in lasts. Per-user API keys come from
    ``superbiz users add``; ``service.api-key`` stays as an admin key."""

    oidc: OidcSettings = OidcSettings()
    default_role: Literal["reader", "editor", "admin"] = "reader"
    """The role of a person who signs in for the first time and is in no role group."""
    session_hours: float = Field(12.0, gt=0)
    """A sign-in on the page ends this many hours after it began, however active (then sign in
    again)."""
    session_idle_minutes: float = Field(120.0, gt=0)
    """… or after this many minutes without a request."""
    cookie_secure: bool | None = None
    """The sign-in cookie's `Secure` flag; null: set when the page was reached over https (set
    `true` behind a proxy that terminates TLS)."""


class TelemetrySettings(_Section):
    """OpenTelemetry traces (``superbiz.telemetry``). Nothing leaves the process unless
    ``otlp_endpoint`` is set (an OTLP/HTTP receiver, e.g. ``http://collector:4318``;
    ``/v1/traces`` is added when the URL has no path). Exporting needs the ``telemetry``
    extra (``pip install 'superbiz[telemetry]'``). Without an endpoint, spans go to the
    process's own OpenTelemetry set-up, a no-op unless the host configured one."""

    otlp_endpoint: str | None = None
    """An OTLP/HTTP receiver, e.g. `http://collector:4318` (`/v1/traces` is added when the URL has
    no path); needs `pip install 'superbiz[telemetry]'`. Unset: nothing leaves the process."""
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers for the receiver, e.g. `{x-api-key: …}`."""
    service_name: str = Field("superbiz", min_length=1)
    """The `service.name` of the exported spans."""
    flush_timeout_s: float = Field(1.0, gt=0, le=60)
    """The most an export request, and the flush when a command ends or `serve` stops, may
    take: an unreachable or silent collector costs a user no more."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            return None
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"telemetry.otlp-endpoint must be an http:// or https:// URL, not {value!r}"
            )
        return value


class AccessSettings(_Section):
    """Who may read each domain (``access.domains``: domain → the groups that may; a
    document's own ``access:`` list wins over its domain's, and a domain not listed is
    read by everyone). Each list is checked as a document's is (``superbiz.access``)."""

    domains: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Domain → the groups that may read its documents, e.g. `{hr: [hr-team]}`; a document's own
    `access:` list wins, `"*"` is every reader, a domain not listed is read by everyone. Changing
    it needs a restart, not a re-ingest."""

    @field_validator("domains", mode="before")
    @classmethod
    def _access_lists(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value  # pydantic names the type it wanted
        checked: dict[str, tuple[str, ...]] = {}
        for domain, groups in value.items():
            name = str(domain).strip()
            if not name:
                raise ValueError("access.domains: a domain name is empty")
            try:
                checked[name] = parse_access(groups)
            except AccessListError as exc:
                raise ValueError(f"access.domains.{name}: {exc}") from None
        return checked
