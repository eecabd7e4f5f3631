"""Sign-in with an OpenID Connect provider, against a real one started by the test
(``oidc-provider-mock`` over HTTP): the page's authorization code flow with PKCE, the
sign-in cookie, sign-out, the provider's JWTs as bearer tokens, and what an administrator
relies on (role groups, removed people, one use per code, one browser per sign-in).
Nothing of superbiz is mocked: the service talks to the provider over HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable, Iterator
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from oidc_provider import EXPIRED, Provider, id_token, query, running_provider
from oidc_provider import provider as provider  # the module's provider fixture
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.auth.directory import UserDirectory
from superbiz.auth.oidc import OidcClient
from superbiz.auth.sign_ins import COOKIE, LOGIN_COOKIE
from superbiz.config import AuthSettings, OidcSettings, Settings

CLIENT_ID = "superbiz-test"


def oidc_settings(issuer: str, **overrides: Any) -> OidcSettings:
    return OidcSettings(
        issuer=issuer,
        client_id=CLIENT_ID,
        client_secret="test-secret",
        admin_groups=("kb-admins",),
        **overrides,
    )


@pytest.fixture(scope="module")
def assistant(make_assistant: Callable[..., Runtime]) -> Runtime:
    return make_assistant()


def app_for(assistant: Runtime, issuer: str, **auth: Any) -> TestClient:
    settings = assistant.settings.model_copy(
        update={"auth": AuthSettings(oidc=oidc_settings(issuer), **auth)}
    )
    return TestClient(
        create_app(settings, assistant=assistant, warm_up=False), raise_server_exceptions=False
    )


@pytest.fixture(scope="module")
def people(provider: Provider) -> Provider:
    provider.add_user("sub-alice", preferred_username="alice", groups=["payments"])
    provider.add_user("sub-bob", preferred_username="bob", groups=["hr", "kb-admins"])
    provider.add_user("sub-carol", preferred_username="carol", email="carol@example.com")
    provider.add_user("sub-eve", preferred_username="eve", groups=["payments"])
    return provider


@pytest.fixture
def client(assistant: Runtime, people: Provider) -> Iterator[TestClient]:
    with app_for(assistant, people.issuer) as test_client:
        yield test_client


def start(client: TestClient, next_path: str = "/") -> str:
    """The page's "Sign in": where the service sends the browser."""
    response = client.get(f"/auth/login?next={next_path}", follow_redirects=False)
    assert response.status_code == 302, response.text
    return str(response.headers["location"])


def come_back(client: TestClient, callback: str) -> httpx.Response:
    parts = urlsplit(callback)
    return client.get(f"{parts.path}?{parts.query}", follow_redirects=False)


def sign_in(client: TestClient, provider: Provider, subject: str) -> httpx.Response:
    back = come_back(client, provider.authorize(start(client), subject))
    assert back.status_code == 302, back.text
    return back


def refused(response: httpx.Response) -> str:
    """Why a sign-in was refused: the word the callback sends the page back with (the
    page words it; the full reason is in the audit trail). No sign-in cookie is set."""
    assert response.status_code == 302, response.text
    location = response.headers["location"]
    assert location.startswith("/?sign_in_error="), location
    assert not any(COOKIE + "=" in h for h in response.headers.get_list("set-cookie"))
    return query(location)["sign_in_error"]


def set_cookie(response: httpx.Response, name: str) -> SimpleCookie:
    for header in response.headers.get_list("set-cookie"):
        cookie = SimpleCookie()
        cookie.load(header)
        if name in cookie:
            return cookie
    raise AssertionError(f"no Set-Cookie {name}")


def test_the_page_signs_in_with_code_flow_and_pkce(client: TestClient, people: Provider) -> None:
    authorize = start(client, "/?tab=docs")
    asked = query(authorize)
    assert authorize.startswith(f"{people.issuer}/oauth2/authorize?")
    assert asked["response_type"] == "code" and asked["client_id"] == CLIENT_ID
    assert asked["code_challenge_method"] == "S256" and asked["nonce"] and asked["state"]
    assert asked["redirect_uri"] == "http://testserver/auth/callback"
    assert set(asked["scope"].split()) == {"openid", "profile", "email"}

    back = come_back(client, people.authorize(authorize, "sub-alice"))
    assert back.status_code == 302 and back.headers["location"] == "/?tab=docs"
    cookie = set_cookie(back, COOKIE)[COOKIE]
    assert cookie["httponly"] and cookie["samesite"].lower() == "lax" and cookie["path"] == "/"
    assert int(cookie["max-age"]) == 12 * 3600
    assert set_cookie(back, LOGIN_COOKIE)[LOGIN_COOKIE]["max-age"] == "0"  # spent

    # the token request carried the verifier whose S256 is the challenge sent before
    verifier = people.seen("/oauth2/token")[-1]["code_verifier"][0]
    digest = hashlib.sha256(verifier.encode()).digest()
    assert base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == asked["code_challenge"]

    me = client.get("/api/me").json()
    assert me == {
        "name": "alice",
        "role": "reader",
        "groups": ["payments"],
        "via": "sign_in",
        "can": ["ask"],
    }


def test_a_role_group_makes_an_admin_and_the_sign_in_is_audited(
    client: TestClient, people: Provider
) -> None:
    sign_in(client, people, "sub-bob")
    me = client.get("/api/me").json()
    assert me["name"] == "bob" and me["role"] == "admin" and me["groups"] == ["hr", "kb-admins"]
    trail = client.get("/api/audit?action=sign_in&actor=bob").json()["events"]
    assert trail and trail[0]["detail"]["via"] == "sign_in"
    assert trail[0]["detail"]["role"] == "admin"


def test_a_person_without_a_groups_claim_keeps_the_groups_an_admin_gave(
    client: TestClient, people: Provider, assistant: Runtime
) -> None:
    directory = UserDirectory(assistant.kb.engine, assistant.settings.auth)
    directory.add("carol", "editor", ["finance"], "test")
    asked = len(people.seen("/userinfo"))
    sign_in(client, people, "sub-carol")
    # the ID token had no groups claim: the provider's userinfo was asked too
    assert len(people.seen("/userinfo")) == asked + 1
    me = client.get("/api/me").json()
    assert me["name"] == "carol" and me["groups"] == ["finance"] and me["role"] == "editor"


def test_signing_out_ends_the_sign_in_and_names_the_providers_sign_out(
    client: TestClient, people: Provider
) -> None:
    back = sign_in(client, people, "sub-alice")
    token = set_cookie(back, COOKIE)[COOKIE].value
    assert client.get("/api/me").status_code == 200
    out = client.post("/auth/logout")
    assert out.status_code == 200 and out.json()["signed_out"] is True
    end = out.json()["end_session_url"]
    assert end.startswith(f"{people.issuer}/oauth2/end_session?")
    assert query(end)["id_token_hint"] and query(end)["post_logout_redirect_uri"].endswith("/")
    assert client.get("/api/me").status_code == 401
    # the cookie's token is gone on the server: replaying it signs in nobody
    client.cookies.set(COOKIE, token)
    assert client.get("/api/me").status_code == 401


def test_writes_from_a_signed_in_browser_must_come_from_the_page(
    client: TestClient, people: Provider
) -> None:
    sign_in(client, people, "sub-alice")
    body = {"session_id": "web-csrf", "question": "支付回调超时怎么办？"}
    cross = client.post("/api/chat", json=body, headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403 and cross.json()["error"] == "cross_origin"
    site = client.post("/api/chat", json=body, headers={"Sec-Fetch-Site": "cross-site"})
    assert site.status_code == 403
    page = client.post("/api/chat", json=body, headers={"Sec-Fetch-Site": "same-origin"})
    assert page.status_code == 200, page.text


def test_a_sign_in_finished_in_another_browser_is_refused(
    assistant: Runtime, people: Provider
) -> None:
    with app_for(assistant, people.issuer) as victim, app_for(assistant, people.issuer) as other:
        callback = people.authorize(start(other), "sub-eve")
        # the attacker's code and state, sent to the victim's browser (login CSRF)
        assert refused(come_back(victim, callback)) == "other_browser"
        assert victim.get("/api/me").status_code == 401
        # the browser that started it finishes it, once: the same code and state again
        # (another tab that still holds the state's cookie) sign nobody in
        assert come_back(other, callback).status_code == 302
        other.cookies.set(LOGIN_COOKIE, query(callback)["state"], path="/auth")
        assert refused(come_back(other, callback)) == "expired"


def test_removed_people_cannot_sign_in_again_and_their_sign_ins_end(
    client: TestClient, people: Provider, assistant: Runtime
) -> None:
    people.add_user("sub-gone", preferred_username="leaver", groups=["payments"])
    sign_in(client, people, "sub-gone")
    assert client.get("/api/me").json()["name"] == "leaver"
    UserDirectory(assistant.kb.engine, assistant.settings.auth).remove("leaver", "test")
    assert client.get("/api/me").status_code == 401
    assert refused(come_back(client, people.authorize(start(client), "sub-gone"))) == "removed"
    sign_in(client, people, "sub-bob")  # an admin reads the trail
    trail = client.get("/api/audit?action=sign_in_refused&actor=leaver").json()["events"]
    assert trail and "removed by an administrator" in trail[0]["detail"]["reason"]


def test_another_account_with_a_taken_name_is_refused(client: TestClient, people: Provider) -> None:
    people.add_user("sub-impostor", preferred_username="alice")
    back = come_back(client, people.authorize(start(client), "sub-impostor"))
    assert refused(back) == "taken"
    assert client.get("/api/me").status_code == 401


def test_a_sign_in_ends_when_idle(assistant: Runtime, people: Provider) -> None:
    with app_for(assistant, people.issuer, session_idle_minutes=0.01) as idle:
        sign_in(idle, people, "sub-alice")
        assert idle.get("/api/me").status_code == 200
        time.sleep(1.0)
        assert idle.get("/api/me").status_code == 401


def test_the_providers_tokens_are_bearer_credentials(client: TestClient, people: Provider) -> None:
    token = id_token(people, oidc_settings(people.issuer), "sub-alice")
    me = client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200, me.text
    assert me.json()["name"] == "alice" and me.json()["via"] == "bearer"

    header, payload, signature = token.split(".")
    forged_claims = base64.urlsafe_b64encode(
        base64.urlsafe_b64decode(payload + "==").replace(b'"alice"', b'"bob"')
    ).rstrip(b"=")
    forged = f"{header}.{forged_claims.decode()}.{signature}"
    refused = client.get("/api/me", headers={"Authorization": f"Bearer {forged}"})
    assert refused.status_code == 401 and "does not verify" in refused.json()["message"]

    # a token the provider issued to another client (audience) proves nothing here
    other = OidcSettings(issuer=people.issuer, client_id="another-app", client_secret="theirs")
    theirs = id_token(people, other, "sub-alice")
    wrong_audience = client.get("/api/me", headers={"Authorization": f"Bearer {theirs}"})
    assert wrong_audience.status_code == 401 and "aud" in wrong_audience.json()["message"]


def test_an_expired_token_is_refused(assistant: Runtime) -> None:
    with running_provider(access_token_max_age=EXPIRED) as stale:
        stale.add_user("sub-alice", preferred_username="alice")
        oidc = OidcClient(oidc_settings(stale.issuer))
        request = oidc.authorization_request("http://127.0.0.1/cb")
        code = query(stale.authorize(request.url, "sub-alice"))["code"]
        with pytest.raises(Exception, match="exp"):
            oidc.redeem(code, "http://127.0.0.1/cb", request.code_verifier, request.nonce)
        with app_for(assistant, stale.issuer) as test_client:
            back = come_back(test_client, stale.authorize(start(test_client), "sub-alice"))
            assert refused(back) == "invalid"
            directory = UserDirectory(assistant.kb.engine, assistant.settings.auth)
            reasons = [e.detail for e in directory.audit.read(action="sign_in_refused")]
            assert any("exp" in str(r) for r in reasons)


def test_info_tells_the_page_to_sign_in(client: TestClient) -> None:
    info = client.get("/api/info").json()
    assert info["sign_in"] == "oidc" and info["auth_required"] is True
    assert client.get("/api/documents").status_code == 401


def test_without_a_provider_there_is_no_sign_in_route(
    make_assistant: Callable[..., Runtime], with_api_key: Callable[[Settings, str], Settings]
) -> None:
    assistant = make_assistant()
    client = TestClient(
        create_app(with_api_key(assistant.settings, "k"), assistant=assistant, warm_up=False)
    )
    assert client.get("/auth/login", follow_redirects=False).status_code == 404
    assert client.get("/api/info").json()["sign_in"] == "key"


def test_a_refusal_by_the_provider_returns_to_the_sign_in_screen(
    client: TestClient, people: Provider
) -> None:
    authorize = start(client)
    denied = httpx.post(authorize, data={"action": "deny"}, follow_redirects=False)
    back = come_back(client, denied.headers["location"])
    assert refused(back) == "refused"
    assert query(denied.headers["location"])["error"] == "access_denied"
