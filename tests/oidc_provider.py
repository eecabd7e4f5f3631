"""A real OpenID Connect provider for the sign-in tests: ``oidc-provider-mock`` (Flask and
Authlib's authorization server, RS256-signed ID tokens, a JWKS, userinfo, end-session),
served over HTTP in a thread. It records what the relying party sent it, so a test can
check the PKCE challenge against the verifier (this provider's 0.3 line does not check
them itself; Keycloak with "PKCE required" does).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from chromium import missing
from superbiz.auth.oidc import OidcClient
from superbiz.config import OidcSettings


@dataclass
class Provider:
    issuer: str
    #: (path, query or form fields) of each request it answered
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)

    def add_user(self, subject: str, **claims: Any) -> None:
        """A person the provider knows (their claims go into ID tokens and userinfo)."""
        response = httpx.put(f"{self.issuer}/users/{quote(subject, safe='')}", json=claims)
        assert response.status_code == 204, response.text

    def authorize(self, url: str, subject: str) -> str:
        """Sign ``subject`` in on the provider's form at ``url`` (as a person would click
        through it); where the provider sends the browser back."""
        response = httpx.post(url, data={"sub": subject}, follow_redirects=False)
        assert response.status_code == 302, response.text
        return str(response.headers["location"])

    def seen(self, path: str) -> list[dict[str, list[str]]]:
        return [fields for seen_path, fields in self.requests if seen_path == path]


@contextmanager
def running_provider(**options: Any) -> Iterator[Provider]:
    """``oidc-provider-mock`` on a free port of ``localhost`` (its issuer)."""
    try:
        import oidc_provider_mock
        import werkzeug.serving
    except ImportError:
        missing("oidc-provider-mock is not installed: pip install -e '.[test]'")
    app = oidc_provider_mock.app(**options)
    recorded: list[tuple[str, dict[str, list[str]]]] = []
    inner = app.wsgi_app

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        fields = parse_qs(environ.get("QUERY_STRING", ""))
        if environ.get("REQUEST_METHOD") == "POST" and "form" in environ.get("CONTENT_TYPE", ""):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            import io

            environ["wsgi.input"] = io.BytesIO(body)
            for key, values in parse_qs(body.decode()).items():
                fields.setdefault(key, []).extend(values)
        recorded.append((environ.get("PATH_INFO", ""), fields))
        return inner(environ, start_response)

    app.wsgi_app = recording  # type: ignore[method-assign]
    server = werkzeug.serving.make_server("localhost", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield Provider(f"http://localhost:{server.server_port}", recorded)
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with running_provider() as started:
        yield started


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


EXPIRED = timedelta(seconds=-600)

#: where ``id_token`` has the provider send its code (a script's OIDC library listens there)
SCRIPT_REDIRECT = "http://127.0.0.1/cb"


def id_token(provider: Provider, settings: OidcSettings, subject: str) -> str:
    """The ID token ``provider`` issues ``subject`` for the client ``settings`` names, by
    the code flow with PKCE a script's OIDC library runs: what it sends as
    ``Authorization: Bearer``."""
    client = OidcClient(settings)
    request = client.authorization_request(SCRIPT_REDIRECT)
    code = query(provider.authorize(request.url, subject))["code"]
    identity = client.redeem(code, SCRIPT_REDIRECT, request.code_verifier, request.nonce)
    assert identity.id_token is not None
    return identity.id_token
