"""The page a team uses every day, in headless Chromium (Debian's, through Playwright).

Markdown answers and what never runs in them, the passage behind a citation, the
sessions sidebar, stop, Enter, the language switch, a phone's width, axe-core's checks,
``/docs`` with no network, and thumbs and the Gaps tab against the real routes.
(The screenshots of the example knowledge base come from ``docs/screenshots/make.py``.)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from chromium import CHROMIUM, CHROMIUM_ARGS, missing
from fakes.openai_server import FakeOpenAIServer, error_reply, slow_stream_reply
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import LLMSettings
from superbiz.evaluation._service_server import LiveServer
from superbiz.llm import OpenAIChatModel

AXE = Path(__file__).parent.parent / "vendor" / "axe-core" / "axe.min.js"
TIMEOUT_MS = 30_000

XSS_TITLE = '重启 nginx 网关 <img src=x onerror="alert(3)">'
RUNBOOK = f"""---
title: {json.dumps(XSS_TITLE, ensure_ascii=False)}
covers: [重启网关, nginx 重启]
---
# 重启 nginx 网关

## 重启步骤
重启网关前先检查配置：

```sh
nginx -t && systemctl reload nginx
```

| 检查项 | 命令 |
| --- | --- |
| 配置语法 | `nginx -t` |
| 进程状态 | `systemctl status nginx` |

重启网关时 <img src=x onerror="alert(1)"> 不要 <script>alert(2)</script> 并发重启。
"""
QUESTION = "怎么重启 nginx 网关？"


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: `apt-get install chromium fonts-wqy-zenhei`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    yield launched
    launched.close()


@pytest.fixture(scope="module")
def site(make_assistant: Callable[..., Runtime]) -> Iterator[str]:
    """The service over the small KB plus a runbook with a table, a code block and HTML."""
    assistant = make_assistant()
    with LiveServer(create_app(assistant.settings, assistant=assistant)) as server:
        added = httpx.post(
            f"{server.url}/api/documents",
            files={"file": ("restart.md", RUNBOOK.encode())},
            data={"domain": "ops"},
        )
        assert added.status_code == 201, added.text
        yield server.url


@dataclass
class Watch:
    """What a page did that it must not: dialogs, requests to ``x``, script errors."""

    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    accept: bool = False  # confirm() dialogs the test means to answer yes

    def to_x(self) -> list[str]:
        return [u for u in self.requests if re.search(r"/x(\?|$)", urlsplit(u).path + "?")]


@contextmanager
def opened(browser: Any, url: str, **context: Any) -> Iterator[tuple[Any, Watch]]:
    ctx = browser.new_context(**{"viewport": {"width": 1360, "height": 900}, **context})
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    watch = Watch()

    def on_dialog(dialog: Any) -> None:
        watch.dialogs.append(dialog.message)
        dialog.accept() if watch.accept else dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda request: watch.requests.append(request.url))
    page.on("pageerror", lambda error: watch.errors.append(str(error)))
    try:
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", state="attached")
        yield page, watch
    finally:
        ctx.close()


def ask(page: Any, question: str = QUESTION) -> Any:
    page.fill("#question", question)
    page.press("#question", "Enter")
    answer = page.locator(".message.assistant").last
    answer.wait_for()
    page.wait_for_selector(".message.assistant:last-child[data-state=done]")
    return answer


# -- 1 and 2: Markdown, safely; citations you can read -------------------------------------


def test_an_answer_renders_table_and_code_and_its_html_never_runs(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    with opened(browser, site, locale="en-US") as (page, watch):
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        answer = ask(page)
        text = answer.locator(".answer-text")
        expect(text.locator("table th").first).to_have_text("检查项")
        expect(text.locator("table td code").first).to_have_text("nginx -t")
        expect(text.locator("pre code")).to_contain_text("nginx -t && systemctl reload nginx")
        # raw HTML in the answer is shown as text, never made into elements
        expect(text).to_contain_text('<img src=x onerror="alert(1)">')
        expect(text).to_contain_text("<script>alert(2)</script>")
        assert text.locator("img, script").count() == 0
        # the copy button copies the code block
        text.locator(".code-frame .copy").first.click()
        expect(text.locator(".code-frame .copy").first).to_have_text("Copied")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.strip() == "nginx -t && systemctl reload nginx"

        # [1] opens the passage the model was shown, with a link to the whole document
        text.locator("button.ref[data-ref='1']").first.click()
        passage = page.locator("#passage")
        expect(passage).to_be_visible()
        expect(page.locator("#passage-title")).to_have_text(f"[1] {XSS_TITLE}")
        expect(page.locator("#passage-headings")).to_have_text("重启 nginx 网关 › 重启步骤")
        expect(page.locator("#passage-level")).to_have_text(re.compile("PRECISE|HIGHLY_RELEVANT"))
        expect(page.locator("#passage-domain")).to_have_text("ops")
        expect(page.locator("#passage-excerpt table")).to_be_visible()
        link = page.locator("#passage-link")
        expect(link).to_have_attribute("href", "/api/documents/ops/restart.md")
        expect(link).to_have_attribute("rel", "noopener noreferrer")
        whole = httpx.get(site + link.get_attribute("href"))
        assert whole.headers["content-type"].startswith("text/plain") and "<script>" in whole.text
        page.click("#passage-close")
        # the switch changes the page's words, not what it shows
        page.select_option("#lang", "zh")
        text.locator("button.ref[data-ref='1']").first.click()
        expect(passage).to_be_visible()
        expect(link).to_have_text("打开完整文档")
        expect(page.locator("#passage-headings")).to_have_text("重启 nginx 网关 › 重启步骤")
        page.click("#passage-close")
        page.select_option("#lang", "en")
        # a source under the answer opens it too
        answer.locator(".citations button.citation").first.click()
        expect(passage).to_be_visible()
        page.keyboard.press("Escape")
        expect(passage).to_be_hidden()

        # the title with HTML in it, in the documents table and the map: text
        page.click("button[data-tab=docs]")
        expect(page.locator("#doc-rows tr[data-path='ops/restart.md']")).to_contain_text(XSS_TITLE)
        page.click("button[data-tab=map]")
        expect(page.locator(".domain-card", has_text="ops")).to_contain_text(XSS_TITLE)
        page.wait_for_timeout(300)  # an onerror would have fired by now
    assert watch.dialogs == [] and watch.to_x() == [] and watch.errors == []


def test_links_are_http_only_and_open_in_a_new_tab(browser: Any, site: str) -> None:
    markdown = (
        "[ok](https://example.com/runbook) [js](javascript:alert(1)) [data](data:text/html,x) "
        "[rel](/api/info) ![pic](x) <a href='javascript:alert(4)'>raw</a> see [2]"
    )
    with opened(browser, site, locale="en-US") as (page, watch):
        links = page.evaluate(
            """(text) => { const box = document.createElement("div");
            box.append(Markdown.render(text)); document.body.append(box);
            return { links: [...box.querySelectorAll("a")].map((a) => [a.textContent,
              a.getAttribute("href"), a.target, a.rel]),
              refs: [...box.querySelectorAll("button.ref")].map((b) => b.dataset.ref),
              imgs: box.querySelectorAll("img").length, text: box.textContent }; }""",
            markdown,
        )
        page.wait_for_timeout(200)
    assert links["links"] == [
        ["ok", "https://example.com/runbook", "_blank", "noopener noreferrer"],
        ["js", None, "", ""],
        ["data", None, "", ""],
        ["rel", None, "", ""],
    ]
    assert links["refs"] == ["2"] and links["imgs"] == 0
    assert "<a href='javascript:alert(4)'>raw</a>" in links["text"]
    assert watch.dialogs == [] and watch.to_x() == []


# -- 3: sessions ------------------------------------------------------------------------------


def test_sessions_are_listed_reopened_with_their_trace_renamed_and_deleted(
    browser: Any, site: str
) -> None:
    from playwright.sync_api import expect

    with opened(browser, site, locale="en-US") as (page, watch):
        ask(page)
        first = page.locator("#session-id").text_content()
        page.click("#new-session")
        ask(page, "支付回调超时怎么办？")
        items = page.locator("#session-list li")
        expect(items).to_have_count(2)
        expect(items.first.locator(".session-title")).to_have_text("支付回调超时怎么办？")
        expect(items.nth(1).locator(".session-title")).to_have_text(QUESTION)
        expect(items.first).to_have_class(re.compile("current"))
        page.select_option("#lang", "zh")
        expect(page.locator("#sessions-heading")).to_have_text("会话")
        expect(page.locator("#session-list li")).to_have_count(2)
        page.select_option("#lang", "en")

        # reopen the first: its turn, its answer and its recorded trace
        items.nth(1).locator(".session-open").click()
        expect(page.locator("#session-id")).to_have_text(first)
        expect(page.locator(".message.user")).to_have_text([QUESTION])
        expect(page.locator(".message.assistant .answer-text table")).to_be_visible()
        expect(page.locator("#lookups li.lookup").first).to_contain_text("verdict")
        expect(page.locator("#plan")).to_contain_text("ops")

        # rename, kept after a reload
        items.nth(1).locator(".session-rename").click()
        page.fill(".rename-input", "网关重启")
        page.press(".rename-input", "Enter")
        expect(
            page.locator(f"#session-list li[data-session='{first}'] .session-title")
        ).to_have_text("网关重启")
        page.reload()
        page.wait_for_selector("body[data-ready=true]", state="attached")
        renamed = page.locator(f"#session-list li[data-session='{first}']")
        expect(renamed.locator(".session-title")).to_have_text("网关重启")
        expect(page.locator(".message.user")).to_have_text([QUESTION])  # still the current one

        # delete: gone from the list and from the server
        watch.accept = True
        renamed.locator(".session-delete").click()
        expect(page.locator("#session-list li")).to_have_count(1)
        expect(page.locator("#session-id")).not_to_have_text(first)
        assert httpx.get(f"{site}/api/sessions/{first}").status_code == 404


# -- 4: feedback and gaps ------------------------------------------------------------------------


def test_thumbs_record_feedback_and_the_gaps_tab_shows_the_report(browser: Any, site: str) -> None:
    """A thumbs-down with a comment is stored with the turn (the real route), and the Gaps
    tab lists that question with its comment (a rated-down answer is a gap)."""
    from playwright.sync_api import expect

    for lang, comment in (("en", "missing the rollback steps"), ("zh", "缺少回滚步骤")):
        with opened(browser, site, locale="zh-CN" if lang == "zh" else "en-US") as (page, _):
            answer = ask(page)
            answer.locator(".thumb-down").click()
            answer.locator(".thumbs .comment").fill(comment)
            answer.locator(".send-comment").click()
            expect(answer.locator(".thumbs [role=status]")).to_have_text(
                "Thanks, recorded" if lang == "en" else "谢谢，已记录"
            )
            session = page.locator("#session-id").inner_text()
            stored = httpx.get(f"{site}/api/sessions/{session}").json()
            [rated] = [m for m in stored["messages"] if m.get("feedback")]
            assert rated["feedback"]["rating"] == "down"
            assert rated["feedback"]["comment"] == comment
            page.click(".tab-button[data-tab=gaps]")
            gap = page.locator("#gap-list li.gap", has_text=comment)
            expect(gap).to_contain_text(QUESTION)
            expect(gap).to_contain_text("ops")


# -- 6: everyday polish ----------------------------------------------------------------------------


def test_enter_sends_and_shift_enter_breaks_a_line(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    with opened(browser, site, locale="en-US") as (page, _):
        page.click("#question")
        page.keyboard.type("first line")
        page.keyboard.press("Shift+Enter")
        page.keyboard.type("second line")
        assert page.input_value("#question") == "first line\nsecond line"
        expect(page.locator(".message.user")).to_have_count(0)
        page.keyboard.press("Enter")
        expect(page.locator(".message.user")).to_have_text(["first line\nsecond line"])
        expect(page.locator("#question")).to_have_value("")


def test_the_stop_button_ends_a_running_turn(
    browser: Any, make_assistant: Callable[..., Runtime]
) -> None:
    from playwright.sync_api import expect

    with FakeOpenAIServer() as fake:
        # planner off, then an answer that takes ~20 s to drip out in full
        fake.script_chat(error_reply(400, "planner off"), slow_stream_reply(40, every_s=0.005))
        base = make_assistant()
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=0, timeout_s=60)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        with (
            LiveServer(create_app(settings, assistant=runtime)) as server,
            opened(browser, server.url, locale="en-US") as (page, _),
        ):
            page.fill("#question", "支付回调超时怎么办？")
            page.press("#question", "Enter")
            expect(page.locator("#stop-button")).to_be_visible()
            expect(page.locator("#ask-button")).to_be_hidden()
            expect(page.locator(".message.assistant").last).to_contain_text("第 1 段")
            page.click("#stop-button")
            bubble = page.locator(".message.assistant").last
            expect(bubble.locator(".stopped")).to_contain_text("Stopped")
            expect(bubble).to_have_attribute("data-state", "done")
            expect(page.locator("#ask-button")).to_be_visible()
            expect(page.locator("#stop-button")).to_be_hidden()
            # the server stopped too: it read no more of the model's answer, stored none
            answer = fake.recorded[-1]
            wait_until = time.monotonic() + 60
            while not (answer.abandoned or answer.sent_all) and time.monotonic() < wait_until:
                time.sleep(0.05)
            assert answer.abandoned and not answer.sent_all
            session = page.evaluate("localStorage.getItem('superbiz.session')")
            history = httpx.get(f"{server.url}/api/sessions/{session}", timeout=10)
            stored = history.json().get("messages", []) if history.status_code == 200 else []
            assert history.status_code in (200, 404), history.text
            assert [m for m in stored if m["role"] == "assistant"] == []


def test_the_stream_follows_the_bottom_but_never_moves_a_reader_who_scrolled_up(
    browser: Any, make_assistant: Callable[..., Runtime]
) -> None:
    with FakeOpenAIServer() as fake:
        fake.script_chat(error_reply(400, "planner off"), slow_stream_reply(30, every_s=0.0015))
        base = make_assistant()
        llm = LLMSettings(base_url=fake.base_url, model="fake-model", max_retries=0, timeout_s=60)
        settings = base.settings.model_copy(update={"llm": llm})
        runtime = open_runtime(settings, kb=base.kb, model=OpenAIChatModel(llm))
        box = "document.querySelector('#messages')"
        with (
            LiveServer(create_app(settings, assistant=runtime)) as server,
            opened(
                browser, server.url, locale="en-US", viewport={"width": 1200, "height": 600}
            ) as (page, _),
        ):
            page.fill("#question", "支付回调超时怎么办？")
            page.press("#question", "Enter")
            page.wait_for_function(f"() => {box}.scrollHeight > {box}.clientHeight + 150")
            gap = f"{box}.scrollHeight - {box}.scrollTop - {box}.clientHeight"
            assert page.evaluate(gap) < 64  # at the bottom: the stream is followed
            page.evaluate(f"{box}.scrollTop = 0")
            page.wait_for_timeout(100)
            drawn = page.locator(".answer-text p").count()
            page.wait_for_function(
                f"() => document.querySelectorAll('.answer-text p').length > {drawn}"
            )
            assert page.evaluate(f"{box}.scrollTop") == 0  # the reader stays where they are
            page.locator("#stop-button").click()


def test_the_language_follows_the_browser_and_the_switch(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    with opened(browser, site, locale="zh-CN") as (page, _):
        expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
        expect(page.locator(".tab-button[data-tab=chat]")).to_have_text("对话")
        expect(page.locator("#ask-button")).to_have_text("发送")
        page.select_option("#lang", "en")
        expect(page.locator(".tab-button[data-tab=chat]")).to_have_text("Chat")
        expect(page.locator("html")).to_have_attribute("lang", "en")
        page.reload()
        page.wait_for_selector("body[data-ready=true]", state="attached")
        expect(page.locator("#ask-button")).to_have_text("Ask")  # the pick is remembered
    with opened(browser, site, locale="en-GB") as (page, _):
        expect(page.locator("#ask-button")).to_have_text("Ask")


def test_a_phone_width_has_no_sideways_scroll(browser: Any, site: str) -> None:
    from playwright.sync_api import expect

    with opened(browser, site, locale="en-US", viewport={"width": 390, "height": 844}) as (page, _):
        ask(page)
        expect(page.locator("#question")).to_be_in_viewport()
        page.wait_for_selector("#session-list li[data-session]")
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate(
            "[...document.querySelectorAll('body *')].filter((n) =>"
            " n.getBoundingClientRect().right > 391).map((n) => n.tagName + '.' + n.className)"
        )
        assert width <= 390, (width, wide)
        page.locator(".message.assistant button.ref").first.click()
        expect(page.locator("#passage")).to_be_visible()
        box = page.locator("#passage").bounding_box()
        assert box is not None and box["width"] <= 390


def test_axe_finds_no_serious_violations(browser: Any, site: str) -> None:
    """axe-core (vendored in tests/, not the package) on the chat with an answer, the
    passage open, and every tab; the page's own CSP is bypassed only to inject axe."""
    from playwright.sync_api import expect

    script = AXE.read_text(encoding="utf-8")
    found: dict[str, list[str]] = {}
    for locale in ("en-US", "zh-CN"):
        with opened(browser, site, locale=locale, bypass_csp=True) as (page, _):
            ask(page)
            page.add_script_tag(content=script)
            states = [("chat", None), ("passage", ".message.assistant button.ref")]
            states += [(tab, f".tab-button[data-tab={tab}]") for tab in ("map", "docs", "sources")]
            for name, click in states:
                if click:
                    page.locator(click).first.click()
                    if name == "passage":
                        expect(page.locator("#passage")).to_be_visible()
                    page.wait_for_timeout(300)
                result = page.evaluate(
                    "async () => { const r = await axe.run(document);"
                    " return { passes: r.passes.length, serious: r.violations"
                    ".filter((v) => ['serious', 'critical'].includes(v.impact))"
                    ".map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', '))"
                    " }; }"
                )
                assert result["passes"] > 10  # axe ran its rules on this state
                if result["serious"]:
                    found[f"{locale} {name}"] = result["serious"]
                if name == "passage":
                    page.keyboard.press("Escape")
    assert found == {}


def test_first_paint_is_measured(browser: Any, site: str) -> None:
    """Printed, not asserted: the number in docs/how-to/web-page.md."""
    with opened(browser, site, locale="en-US") as (page, _):
        paint = page.evaluate(
            "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
        )
    sizes = {
        name: (Path(__file__).parents[2] / "src/superbiz/api/static" / name).stat().st_size
        for name in ("app.js", "markdown.js", "feedback.js", "i18n.js", "app.css", "index.html")
    }
    print(f"\nfirst contentful paint: {paint:.0f} ms; page's own files (bytes): {sizes}")
    assert paint > 0


# -- 5: API docs offline --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rendered"), [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")]
)
def test_the_api_docs_render_with_only_the_server_reachable(
    browser: Any, site: str, path: str, rendered: str
) -> None:
    from playwright.sync_api import expect

    ctx = browser.new_context()
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    blocked: list[str] = []
    own = urlsplit(site).netloc

    def only_the_server(route: Any) -> None:
        if urlsplit(route.request.url).netloc == own or route.request.url.startswith(
            ("data:", "blob:")
        ):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    try:
        page.goto(site + path)
        expect(page.locator(rendered).first).to_contain_text("superbiz")
        if path == "/docs":
            expect(page.locator(".opblock-tag", has_text="sessions")).to_be_visible()
        else:
            expect(page.get_by_text("/api/chat_stream").first).to_be_attached()
    finally:
        ctx.close()
    assert blocked == []
