"""The web page in headless Chromium: upload, ask, watch the answer stream and the trace fill.

Uses Debian's ``chromium`` (``apt-get install chromium fonts-wqy-zenhei``) through
Playwright's Python package, never a downloaded browser. Set ``SUPERBIZ_SCREENSHOT_DIR``
to keep the screenshot somewhere other than the test's tmp folder.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.evaluation.service import LiveServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
# Read at import: the shared fixtures remove every SUPERBIZ_* variable before tests run.
REQUIRE_SERVICES = os.environ.get("SUPERBIZ_TEST_REQUIRE_SERVICES") == "1"
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


def _missing(reason: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (SUPERBIZ_TEST_REQUIRE_SERVICES=1)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def page_url(make_assistant: Callable[..., Runtime]) -> Iterator[str]:
    if not CHROMIUM.exists():
        _missing(
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
        _missing("playwright is not installed: pip install -e '.[test]'")

    document = tmp_path / "发票开具失败.md"
    document.write_text(DOCUMENT, encoding="utf-8")
    screenshot = tmp_path / "superbiz-ui.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 900}, locale="zh-CN")
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(page_url)
            expect(page.locator("#model-badge")).to_contain_text("extractive")

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
            expect(page.locator("#plan")).to_contain_text("invoice")
            lookup = page.locator("#lookups li.lookup").first
            expect(lookup).to_have_attribute("data-level", "PRECISE")
            expect(lookup.locator(".badge")).to_have_text("PRECISE")
            expect(lookup).to_contain_text("verdict answer")
            expect(page.locator("#water-calls")).to_have_text("1/8")
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
        finally:
            browser.close()
    assert screenshot.stat().st_size > 10_000
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        for shot in (screenshot, tmp_path / "superbiz-ui-follow-up.png"):
            shutil.copy(shot, Path(SCREENSHOT_DIR) / shot.name)
