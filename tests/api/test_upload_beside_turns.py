"""An upload's work that touches no store runs outside the store lock, so chats go on
beside it: converting the file (a legitimate 2,000-page PDF took 23.7 s to upload and a
chat sent meanwhile took 19.9 s instead of 0.14 s; it was converted twice, under the
lock) and measuring the KB's statistics afterwards (seconds at dev size). Each is held
here at a gate while the other requests are made; each completes before the gate opens.
SQLite and Milvus Lite: the stores that have a store lock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import superbiz.knowledge.documents.document as documents
from conftest import write_kb
from superbiz.agents.runtime import Runtime, open_runtime
from superbiz.api import create_app
from superbiz.config import Settings
from superbiz.evaluation._bombs import text_pdf
from superbiz.evaluation._service_server import LiveServer
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.exact_index import ExactIndex

PAY_Q = "支付回调超时怎么办？"


class Gate:
    """Wraps a function so that a call waits until the test opens the gate."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.calls = 0
        self.reached = threading.Event()
        self.opened = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.reached.set()
        self.opened.wait(timeout=60)
        return self.inner(*args, **kwargs)


@pytest.fixture
def runtime(tmp_path: Path, use_embedder: Embedder) -> Iterator[Runtime]:
    settings = Settings(data_dir=tmp_path / "data")
    opened = open_runtime(settings)
    Ingestor(opened.kb, domains=opened.domains).ingest([write_kb(tmp_path / "kb")])
    assert opened.store_lock.enabled
    yield opened
    opened.close()


@pytest.mark.parametrize("held", ["conversion", "statistics"])
def test_chats_and_reads_go_on_while_an_upload_converts_or_measures(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch, held: str
) -> None:
    if held == "conversion":
        gate = Gate(documents.convert)
        monkeypatch.setattr(documents, "convert", gate)
    else:
        gate = Gate(ExactIndex.frequency)
        monkeypatch.setattr(ExactIndex, "frequency", lambda index, *args: gate(index, *args))
    uploaded: list[httpx.Response] = []
    app = create_app(runtime.settings, assistant=runtime, warm_up=False)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=20) as client:
        thread = threading.Thread(
            target=lambda: uploaded.append(
                httpx.post(
                    f"{server.url}/api/documents",
                    files={"file": ("gateway.pdf", text_pdf(pages=40), "application/pdf")},
                    data={"domain": "vendor"},
                    timeout=120,
                )
            )
        )
        thread.start()
        assert gate.reached.wait(timeout=60), f"the upload's {held} never started"
        try:
            chat = client.post("/api/chat", json={"session_id": "beside-1", "question": PAY_Q})
            assert chat.status_code == 200 and chat.json()["citations"]
            assert client.get("/api/documents").status_code == 200
            assert client.get("/api/knowledge/map").status_code == 200
            assert client.get("/api/sessions/beside-1").status_code == 200
            assert thread.is_alive() and not uploaded  # all of it while the upload waited
        finally:
            gate.opened.set()
            thread.join(timeout=120)
        [response] = uploaded
        assert response.status_code == 201, response.text
        assert response.json()["document"]["path"] == "vendor/gateway.pdf"
        if held == "conversion":
            assert gate.calls == 1  # checked before storing, and not converted again
