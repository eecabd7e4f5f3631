"""The web page in headless Chromium: upload, ask, watch the answer stream and the trace fill.

Uses Debian's ``chromium`` (``apt-get install chromium fonts-wqy-zenhei``) through
Playwright's Python package, never a downloaded browser. Set ``SUPERBIZ_SCREENSHOT_DIR``
to keep the screenshot somewhere other than the test's tmp folder.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chromium import CHROMIUM, CHROMIUM_ARGS, missing
from fakes.git_remote import Remote
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.evaluation._service_server import LiveServer
from superbiz.exceptions import SourceError
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle

# Read at import: the shared fixtures remove every SUPERBIZ_* variable before tests run.
SCREENSHOT_DIR = os.environ.get("SUPERBIZ_SCREENSHOT_DIR")
TIMEOUT_MS = 30_000

DOCUMENT = """---
title: 发票开具失败排查
covers: [发票开具失败, 税号校验不通过]
when_to_retrieve: 用户开不出发票或提示税号错误时
---
# 发票开具失败排查

## 税号校验不通过
核对购买方税号是否为 18 位统一社会信用代码，注意字母 O 与数字 0 的区别。

## 开票接口超时
开票服务依赖税局接口，超时后不要重复提交，先查询开票流水状态。
"""


@pytest.fixture(scope="module")
def page_url(make_assistant: Callable[..., Runtime]) -> Iterator[str]:
    if not CHROMIUM.exists():
        missing(
            f"{CHROMIUM} is missing: `apt-get install chromium fonts-wqy-zenhei` to run the "
            "browser test"
        )
    assistant = make_assistant()
    with LiveServer(create_app(assistant.settings, assistant=assistant)) as server:
        yield server.url


def test_upload_ask_and_watch_the_trace(page_url: str, tmp_path: Path) -> None:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")

    document = tmp_path / "发票开具失败.md"
    document.write_text(DOCUMENT, encoding="utf-8")
    screenshot = tmp_path / "superbiz-ui.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900}, locale="en-US")
            page.set_default_timeout(TIMEOUT_MS)
            console: list[str] = []
            page.on("console", lambda message: console.append(message.text))
            page.goto(page_url)
            expect(page.locator("#model-badge")).to_contain_text("extractive")

            # the file picker offers every format the service ingests (/api/info)
            expect(page.locator("#upload-file")).to_have_attribute(
                "accept", ".md,.mdx,.markdown,.txt,.html,.htm,.pdf,.docx,.rst,.adoc,.asciidoc"
            )
            # upload a document into a new domain
            page.click("button[data-tab=docs]")
            page.set_input_files("#upload-file", str(document))
            page.fill("#upload-domain", "invoice")
            page.click("#upload-button")
            path = "invoice/发票开具失败.md"
            expect(page.locator("#upload-status")).to_contain_text(f"added: {path}")
            expect(page.locator(f"#doc-rows tr[data-path='{path}']")).to_be_visible()

            # the knowledge map shows the new domain
            page.click("button[data-tab=map]")
            expect(page.locator(".domain-card h3", has_text="invoice")).to_be_visible()

            # ask; the answer streams in and the trace panel fills
            page.click("button[data-tab=chat]")
            page.fill("#question", "发票开不出来，提示税号校验不通过怎么办？")
            page.press("#question", "Enter")
            answer = page.locator(".message.assistant").last
            expect(answer).to_have_attribute("data-state", "done")
            expect(answer.locator(".answer-text")).to_contain_text("抽取式回答")
            expect(answer.locator(".answer-text")).to_contain_text("18 位统一社会信用代码")
            expect(answer.locator(".citations")).to_contain_text("invoice/发票开具失败.md")
            expect(answer.locator(".meta")).to_contain_text("grounded")
            expect(answer.locator(".meta")).not_to_contain_text("not grounded")
            expect(page.locator("#plan")).to_contain_text("invoice")
            lookup = page.locator("#lookups li.lookup").first
            expect(lookup).to_have_attribute("data-level", "PRECISE")
            expect(lookup.locator(".badge")).to_have_text("PRECISE")
            expect(lookup).to_contain_text("verdict answer")
            expect(page.locator("#water-calls")).to_have_text("1/8")
            gauge = page.locator("#gauge-fill")
            expect(gauge).to_have_attribute("style", "width: 12.5%;")
            # the evidence ceiling makes it high water after a few calls: the bar is full
            page.evaluate("setGauge(3, 8, 'high')")
            expect(gauge).to_have_attribute("style", "width: 100%;")
            page.evaluate("setGauge(1, 8, 'low')")
            expect(page.locator("#turn-summary")).to_contain_text("1 executed")

            page.screenshot(path=str(screenshot), full_page=True)

            # a follow-up in the same session is answered, its trace replacing the first
            page.fill("#question", "税号校验不通过怎么处理")
            page.press("#question", "Enter")
            expect(page.locator(".message.assistant")).to_have_count(2)
            follow_up = page.locator(".message.assistant").last
            expect(follow_up).to_have_attribute("data-state", "done")
            expect(follow_up.locator(".answer-text")).to_contain_text("税号")
            page.screenshot(path=str(tmp_path / "superbiz-ui-follow-up.png"), full_page=True)
            # everything above ran under the page's Content-Security-Policy
            assert not [text for text in console if "Content Security Policy" in text]
        finally:
            browser.close()
    assert screenshot.stat().st_size > 10_000
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        for shot in (screenshot, tmp_path / "superbiz-ui-follow-up.png"):
            shutil.copy(shot, Path(SCREENSHOT_DIR) / shot.name)


def test_the_sources_tab_shows_each_source_and_a_failed_sync(
    make_assistant: Callable[..., Runtime], tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing: `apt-get install chromium fonts-wqy-zenhei`")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    remote = Remote(tmp_path / "origin")
    remote.write({"ops/deploy.md": "# Deploy\n\nRoll out behind the flag.\n"})
    commit = remote.commit("first")
    assistant = make_assistant()
    lifecycle = DocumentLifecycle(assistant.kb)
    lifecycle.add_git(remote.url)
    shutil.move(remote.bare, tmp_path / "gone.git")
    with pytest.raises(SourceError):
        lifecycle.sync("remote")
    with (
        LiveServer(create_app(assistant.settings, assistant=assistant)) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(server.url)
            page.click("button[data-tab=sources]")
            row = page.locator("#source-rows tr[data-source='remote']")
            expect(row).to_contain_text(commit[:12])
            expect(row).to_contain_text("1 added")
            expect(row.locator(".status.fail")).to_contain_text("error: fetch failed")
            expect(page.locator("#sources-schedule")).to_contain_text("scheduled sync off")
        finally:
            browser.close()


CROSS_SITE_UPLOAD = """async (url) => {
  const form = new FormData();
  form.append("file", new Blob(["# Planted\\n\\nnot yours\\n"]), "planted.md");
  try {
    await fetch(url + "/api/documents", { method: "POST", mode: "no-cors", body: form });
    return "sent";
  } catch (error) {
    return String(error);
  }
}"""


def test_another_site_cannot_write(page_url: str) -> None:
    """The issue's probe: a page on another site posts a no-cors form to the service."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[test]'")
    import httpx

    refused_before = _refused_posts(page_url)
    with _other_site() as other_site, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(other_site)
            assert page.evaluate(CROSS_SITE_UPLOAD, page_url) == "sent"
        finally:
            browser.close()
    listed = httpx.get(f"{page_url}/api/documents").json()["documents"]
    assert "general/planted.md" not in [d["path"] for d in listed]
    assert _refused_posts(page_url) == refused_before + 1  # it came, and got a 403


@contextmanager
def _other_site() -> Iterator[str]:
    """A page at ``http://localhost:<port>/``: the service is at 127.0.0.1, another site."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><p>another site</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _refused_posts(url: str) -> float:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name.endswith("_count") and (labels.get("method"), labels.get("status")) == (
                "POST",
                "403",
            ):
                return sample.value
    return 0.0
