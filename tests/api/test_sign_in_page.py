"""The page's sign-in in headless Chromium (Debian's, through Playwright), against a real
OpenID Connect provider the test starts: the sign-in screen, the provider's form, back on
the page signed in with the role's controls only, asking, the admin's Audit tab, signing
out. Requests to any host but the service and the provider are refused (the provider's
form links a stylesheet on a CDN)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from chromium import CHROMIUM, CHROMIUM_ARGS, missing
from oidc_provider import Provider, running_provider
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
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    url, provider = signed_in_service
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        try:
            context = browser.new_context(locale="en-US")
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            blocked = _local_only(page, url, provider.issuer)
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

            cookies = {c["name"]: c for c in context.cookies()}
            assert cookies["superbiz_session"]["httpOnly"] is True
            assert cookies["superbiz_session"]["sameSite"] == "Lax"
            assert page.evaluate("document.cookie") == ""  # no script reads the sign-in

            page.click("#sign-out")
            page.wait_for_url(f"{provider.issuer}/**")  # the provider's own sign-out page
            page.goto(url)
            expect(page.locator("#sign-in")).to_be_visible()
            assert all("jsdelivr" in b for b in blocked), blocked
        finally:
            browser.close()


def test_an_admin_sees_the_audit_trail_and_everyones_sessions(
    signed_in_service: tuple[str, Provider],
) -> None:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    url, provider = signed_in_service
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        try:
            page = browser.new_page(locale="en-US")
            page.set_default_timeout(TIMEOUT_MS)
            _local_only(page, url, provider.issuer)
            _sign_in(page, url, "sub-ada")
            expect(page.locator("#who-role")).to_have_text("admin")
            for shown in ("#upload-form", "button[data-tab=gaps]", "button[data-tab=audit]"):
                expect(page.locator(shown)).to_be_attached()
            expect(page.locator("button[data-tab=audit]")).to_be_visible()
            page.click("button[data-tab=audit]")
            sign_ins = page.locator("#audit-rows tr[data-action=sign_in]")
            expect(sign_ins.filter(has_text="ada")).not_to_have_count(0)
            expect(page.locator("#people-rows tr[data-person=ada]")).to_contain_text("kb-admins")
            # everyone's sessions, read-only: another person's session is listed
            page.check("#all-sessions")
            expect(page.locator("#session-list li[data-session]").first).to_be_visible()
        finally:
            browser.close()


def test_a_refused_sign_in_is_said_in_words_of_the_page(
    signed_in_service: tuple[str, Provider],
) -> None:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    url, provider = signed_in_service
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        try:
            page = browser.new_page(locale="en-US")
            page.set_default_timeout(TIMEOUT_MS)
            _local_only(page, url, provider.issuer)
            page.goto(f"{url}/?sign_in_error=removed")
            expect(page.locator("#sign-in-error")).to_have_text(
                "Your account was removed from this service. Ask an administrator."
            )
            assert page.evaluate("location.search") == ""
            # only the page's own sentences: a word it does not know is not shown as given
            page.goto(f"{url}/?sign_in_error=Call%20evil.example%20now")
            expect(page.locator("#sign-in-error")).to_have_text("Sign-in failed")
        finally:
            browser.close()
