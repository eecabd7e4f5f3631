"""Take the screenshots in this folder again: the web page over the example knowledge base
that ships with superbiz, in English and Chinese.

    python docs/screenshots/make.py [OUT_DIR]      # default: this folder

It ingests ``src/superbiz/examples/corpus`` into a temporary data directory with
``superbiz ingest``, starts ``superbiz serve`` on it (the extractive model: no LLM, nothing
from the network), and drives Debian's Chromium (``/usr/bin/chromium``) through Playwright,
as the browser tests do (``tests/chromium.py``): a question and its answer, a citation
opened, two sessions in the sidebar, a thumbs-down in the Gaps tab, and a phone's width.
Needs ``pip install -e ".[test]"`` (Playwright) and ``apt-get install chromium
fonts-wqy-zenhei``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - the tests' browser set-up
from superbiz._net import free_port  # noqa: E402

CORPUS = ROOT / "src" / "superbiz" / "examples" / "corpus"
#: per language: the question asked, a second session's question, a thumbs-down comment on
#: its answer, and a question the example knowledge base has no runbook for (a gap)
SCRIPT = {
    "en": (
        "A merchant says they never received the webhook for a paid order",
        "Pod keeps restarting with exit code 137",
        "Which log line shows the OOM kill?",
        "How do we rotate the VPN's TLS certificate?",
    ),
    "zh": (
        "支付回调超时，是不是 Redis 连接池的问题？",
        "接口返回 429 太多请求，限流阈值怎么调",
        "没有说明各个接口的默认阈值",
        "VPN 的 TLS 证书怎么轮换？",
    ),
}
TIMEOUT_MS = 60_000


def superbiz(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "superbiz.cli", *args], check=True, env=env)


@contextmanager
def serving(data_dir: Path) -> Iterator[str]:
    """``superbiz serve`` on the data dir, until the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPERBIZ_")}
    env["OPENBLAS_NUM_THREADS"] = "1"
    superbiz("ingest", str(CORPUS), "--data-dir", str(data_dir), env=env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = ["serve", "--port", str(port), "--data-dir", str(data_dir)]
    server = subprocess.Popen([sys.executable, "-m", "superbiz.cli", *command], env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"superbiz serve did not come up at {url}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def ask(page: Any, question: str) -> Any:
    page.fill("#question", question)
    page.press("#question", "Enter")
    page.wait_for_selector(".message.assistant:last-child[data-state=done]")
    return page.locator(".message.assistant").last


def shoot(browser: Any, url: str, out: Path) -> None:
    for lang, (question, second, comment, unanswered) in SCRIPT.items():
        context = browser.new_context(
            viewport={"width": 1360, "height": 900}, locale="zh-CN" if lang == "zh" else "en-US"
        )
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_selector("body[data-ready=true]", state="attached")
        page.select_option("#lang", lang)
        answer = ask(page, question)
        page.locator(".message.user").last.scroll_into_view_if_needed()  # the question too
        page.screenshot(path=str(out / f"chat-{lang}.png"))
        answer.locator("button.ref[data-ref='1']").first.click()
        page.locator("#passage").wait_for()
        page.screenshot(path=str(out / f"citation-{lang}.png"))
        page.click("#passage-close")
        page.click("#new-session")
        answer = ask(page, second)
        page.screenshot(path=str(out / f"sessions-{lang}.png"))
        answer.locator(".thumb-down").click()
        answer.locator(".thumbs .comment").fill(comment)
        answer.locator(".send-comment").click()
        answer.locator(".thumbs [role=status]").wait_for()
        ask(page, unanswered)
        page.click(".tab-button[data-tab=gaps]")
        page.locator("#gap-list li.gap", has_text=comment).wait_for()
        page.screenshot(path=str(out / f"gaps-{lang}.png"))
        context.close()
    phone = browser.new_context(viewport={"width": 390, "height": 844}, locale="en-US")
    page = phone.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", state="attached")
    ask(page, SCRIPT["en"][0])
    page.screenshot(path=str(out / "phone-en.png"))
    phone.close()


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    out.mkdir(parents=True, exist_ok=True)
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium fonts-wqy-zenhei")
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory() as data_dir,
        serving(Path(data_dir)) as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            shoot(browser, url, out)
        finally:
            browser.close()
    print(f"screenshots written to {out}")


if __name__ == "__main__":
    main()
