"""The page's sign-in in headless Chromium (Debian's, through Playwright), against a real
OpenID Connect provider the test starts: the sign-in screen, the provider's form, back on
the page signed in with the role's controls only, asking, the admin's Audit tab, signing
out. Requests to any host but the service and the provider are refused (the provider's
form links a stylesheet on a CDN)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from access_probe import HIDDEN_DOCS, RECON_TITLE, leaks, open_access_runtime
from chromium import CHROMIUM, CHROMIUM_ARGS, missing
from oidc_provider import Provider, id_token, running_provider
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.config import AuthSettings, OidcSettings
from superbiz.evaluation._service_server import LiveServer

TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def signed_in_service(make_assistant: Callable[..., Runtime]) -> Iterator[tuple[str, Provider]]:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: `apt-get install chromium fonts-wqy-zenhei`")
    with running_provider() as provider:
        provider.add_user("sub-rita", preferred_username="rita", groups=["payments"])
        provider.add_user("sub-ada", preferred_username="ada", groups=["kb-admins"])
        assistant = make_assistant()
        oidc = OidcSettings(
            issuer=provider.issuer,
            client_id="superbiz-page",
            client_secret="page-secret",
            admin_groups=("kb-admins",),
        )
        settings = assistant.settings.model_copy(update={"auth": AuthSettings(oidc=oidc)})
        with LiveServer(create_app(settings, assistant=assistant)) as server:
            yield server.url, provider


def _browser(playwright: Any) -> Any:
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )


def _local_only(page: Any, *origins: str) -> list[str]:
    hosts = {urlsplit(origin).netloc for origin in origins}
    blocked: list[str] = []

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if urlsplit(url).netloc in hosts:
            request_route.continue_()
        else:
            blocked.append(url)
            request_route.abort()

    page.route("**/*", route)
    return blocked


@contextlib.contextmanager
def _page(url: str, provider: Provider) -> Iterator[tuple[Any, list[str]]]:
    """A page in headless Chromium (English) that reaches only the service and the
    provider, and the requests it refused to anything else."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        try:
            page = browser.new_context(locale="en-US").new_page()
            page.set_default_timeout(TIMEOUT_MS)
            yield page, _local_only(page, url, provider.issuer)
        finally:
            browser.close()


def _sign_in(page: Any, url: str, subject: str) -> None:
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#app")).to_be_hidden()
    page.click("#sign-in-link")
    page.fill("input[name=sub]", subject)
    page.click("button[type=submit]:has-text('Authorize')")
    page.wait_for_url(f"{url}/**")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def test_a_reader_signs_in_asks_and_signs_out(signed_in_service: tuple[str, Provider]) -> None:
    url, provider = signed_in_service
    with _page(url, provider) as (page, blocked):
        from playwright.sync_api import expect

        _sign_in(page, url, "sub-rita")

        expect(page.locator("#app")).to_be_visible()
        expect(page.locator("#who-name")).to_have_text("rita")
        expect(page.locator("#who-role")).to_have_text("reader")
        expect(page.locator("#api-key")).to_be_hidden()
        # a reader is offered asking, not uploads, sources, gaps or the audit trail
        for hidden in (
            "#upload-form",
            "button[data-tab=sources]",
            "button[data-tab=gaps]",
            "button[data-tab=audit]",
            "#all-sessions",
        ):
            expect(page.locator(hidden)).to_be_hidden()
        page.click("button[data-tab=docs]")
        expect(page.locator("#doc-rows tr").first).to_be_visible()
        expect(page.locator("#doc-rows button")).to_have_count(0)  # no delete buttons

        page.click("button[data-tab=chat]")
        page.fill("#question", "支付回调超时怎么办？")
        page.press("#question", "Enter")
        answer = page.locator(".message.assistant").last
        expect(answer).to_have_attribute("data-state", "done")
        expect(answer.locator(".citations")).to_contain_text("payment/")
        # the sidebar lists the person's own session, from the server
        expect(page.locator("#session-list li[data-session]")).to_have_count(1)

        cookies = {c["name"]: c for c in page.context.cookies()}
        assert cookies["superbiz_session"]["httpOnly"] is True
        assert cookies["superbiz_session"]["sameSite"] == "Lax"
        assert page.evaluate("document.cookie") == ""  # no script reads the sign-in

        page.click("#sign-out")
        page.wait_for_url(f"{provider.issuer}/**")  # the provider's own sign-out page
        page.goto(url)
        expect(page.locator("#sign-in")).to_be_visible()
        assert all("jsdelivr" in b for b in blocked), blocked


def test_an_admin_sees_the_audit_trail_and_everyones_sessions(
    signed_in_service: tuple[str, Provider],
) -> None:
    url, provider = signed_in_service
    with _page(url, provider) as (page, _):
        from playwright.sync_api import expect

        _sign_in(page, url, "sub-ada")
        expect(page.locator("#who-role")).to_have_text("admin")
        for shown in ("#upload-form", "button[data-tab=gaps]", "button[data-tab=audit]"):
            expect(page.locator(shown)).to_be_attached()
        expect(page.locator("button[data-tab=audit]")).to_be_visible()
        page.click("button[data-tab=audit]")
        sign_ins = page.locator("#audit-rows tr[data-action=sign_in]")
        expect(sign_ins.filter(has_text="ada")).not_to_have_count(0)
        expect(page.locator("#people-rows tr[data-person=ada]")).to_contain_text("kb-admins")
        # everyone's sessions, read-only: another person's session is listed, with
        # whose it is and without renaming or deleting; opened, it offers no asking
        # or rating (the routes refuse both to an admin)
        page.check("#all-sessions")
        ritas = page.locator("#session-list li[data-session]").filter(
            has=page.locator(".session-owner", has_text="rita")
        )
        expect(ritas.first).to_be_visible()
        expect(ritas.first.locator(".session-rename, .session-delete")).to_have_count(0)
        ritas.first.locator(".session-open").click()
        expect(page.locator(".message.assistant").first).to_have_attribute("data-state", "done")
        expect(page.locator("#read-only-note")).to_have_text("rita's session: read only")
        expect(page.locator("#ask-form")).to_be_hidden()
        expect(page.locator(".message.assistant .thumbs").first).to_be_hidden()
        page.click("#new-session")  # a session of her own: asking again
        expect(page.locator("#ask-form")).to_be_visible()
        expect(page.locator("#read-only-note")).to_be_hidden()


def test_a_refused_sign_in_is_said_in_words_of_the_page(
    signed_in_service: tuple[str, Provider],
) -> None:
    url, provider = signed_in_service
    with _page(url, provider) as (page, _):
        from playwright.sync_api import expect

        page.goto(f"{url}/?sign_in_error=removed")
        expect(page.locator("#sign-in-error")).to_have_text(
            "Your account was removed from this service. Ask an administrator."
        )
        assert page.evaluate("location.search") == ""
        # only the page's own sentences: a word it does not know is not shown as given
        page.goto(f"{url}/?sign_in_error=Call%20evil.example%20now")
        expect(page.locator("#sign-in-error")).to_have_text("Sign-in failed")


# -- the permission probe on the page ---------------------------------------------------------


@pytest.fixture(scope="module")
def restricted_service(
    tmp_path_factory: pytest.TempPathFactory, use_embedder: Any
) -> Iterator[tuple[str, Provider]]:
    """The probe's KB (a restricted domain and a restricted document) served with the
    provider; alice (payments, hr-team) has asked about both before bob (sre) signs in."""
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: `apt-get install chromium fonts-wqy-zenhei`")
    runtime = open_access_runtime(tmp_path_factory.mktemp("page-access"), use_embedder)
    try:
        with running_provider() as provider:
            provider.add_user(
                "sub-alice", preferred_username="alice", groups=["payments", "hr-team"]
            )
            provider.add_user("sub-bob", preferred_username="bob", groups=["sre"])
            oidc = OidcSettings(
                issuer=provider.issuer, client_id="superbiz-page", client_secret="page-secret"
            )
            settings = runtime.settings.model_copy(update={"auth": AuthSettings(oidc=oidc)})
            with LiveServer(create_app(settings, assistant=runtime)) as server:
                alice = {"Authorization": f"Bearer {id_token(provider, oidc, 'sub-alice')}"}
                for question in (RECON_TITLE, "育儿假申请流程"):
                    asked = httpx.post(
                        f"{server.url}/api/chat",
                        json={"session_id": "web-alices", "question": question},
                        headers=alice,
                        timeout=120,
                    )
                    assert asked.status_code == 200, asked.text
                    assert {c["path"] for c in asked.json()["citations"]} & set(HIDDEN_DOCS)
                yield server.url, provider
    finally:
        runtime.close()


def test_a_restricted_reader_signed_in_sees_nothing_restricted_anywhere_on_the_page(
    restricted_service: tuple[str, Provider],
) -> None:
    url, provider = restricted_service
    asked = [RECON_TITLE, "kingfisher ledger mismatch", "育儿假申请流程"]
    with _page(url, provider) as (page, _):
        from playwright.sync_api import expect

        _sign_in(page, url, "sub-bob")
        expect(page.locator("#who-name")).to_have_text("bob")
        # the sidebar: alice's session is not his to list
        expect(page.locator("#session-list")).to_contain_text("No sessions yet")
        seen: dict[str, str] = {"sidebar": page.inner_text("#session-list")}

        page.click("button[data-tab=docs]")
        expect(page.locator("#doc-rows tr").first).to_be_visible()
        seen["documents"] = page.inner_text("#doc-rows")
        assert "payment/" in seen["documents"]  # the open part of the domain is his

        page.click("button[data-tab=map]")
        expect(page.locator("#map .domain-card").first).to_be_visible()
        seen["map"] = page.inner_text("#map")
        page.check("#map-yaml")
        expect(page.locator("#map-yaml-text")).to_contain_text("available_knowledge_domains")
        seen["planner view"] = page.inner_text("#map-yaml-text")

        page.click("button[data-tab=chat]")
        for question in asked:  # follow-ups in one session
            page.fill("#question", question)
            page.press("#question", "Enter")
            answer = page.locator(".message.assistant").last
            expect(answer).to_have_attribute("data-state", "done")
        seen["answers"] = page.inner_text("#messages")
        seen["trace"] = page.inner_text("#tab-chat")
        expect(page.locator("#session-list li[data-session]")).to_have_count(1)
        seen["sidebar after"] = page.inner_text("#session-list")
        seen["whole page"] = page.inner_text("body")
        for where, text in seen.items():
            assert not leaks(text, said=asked), (where, leaks(text, said=asked))
