"""Document upload, list and delete: the CLI's ingest path, size limit, safe file names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from format_files import pdf_bytes, scanned_pdf_bytes
from superbiz.agents.runtime import Runtime
from superbiz.api import create_app
from superbiz.knowledge.formats.pdf import NO_TEXT_LAYER
from superbiz.knowledge.ingest.ingestor import Ingestor

LIMIT = 4096
REFUND = """# 退款到账延迟处理

## 现象
用户反馈退款已受理但迟迟未到账，渠道侧显示退款处理中。

## 处理
确认渠道退款单号，超过七个工作日未到账时联系渠道运营加急。
"""


@pytest.fixture(scope="module")
def docs_assistant(make_assistant: Callable[..., Runtime]) -> Runtime:
    return make_assistant(ingest={"max_file_bytes": LIMIT})


@pytest.fixture
def client(docs_assistant: Runtime) -> TestClient:
    app = create_app(docs_assistant.settings, assistant=docs_assistant, warm_up=False)
    return TestClient(app, raise_server_exceptions=False)


def upload(
    client: TestClient, name: str, data: bytes | str, domain: str | None = None
) -> tuple[int, dict]:
    content = data.encode() if isinstance(data, str) else data
    response = client.post(
        "/api/documents",
        files={"file": (name, content, "text/markdown")},
        data={"domain": domain} if domain else None,
    )
    return response.status_code, response.json()


def uploads_of(assistant: Runtime) -> list[str]:
    root = assistant.settings.data_dir / "uploads"
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_upload_ingests_like_the_cli_and_delete_removes_it(
    client: TestClient, docs_assistant: Runtime
) -> None:
    status, body = upload(client, "退款到账延迟.md", REFUND, domain="Billing Ops")
    assert status == 201, body
    assert body["status"] == "added"
    doc = body["document"]
    assert doc["path"] == "billing-ops/退款到账延迟.md" and doc["domain"] == "billing-ops"
    assert doc["title"] == "退款到账延迟处理" and doc["uploaded"] is True
    assert doc["chunk_count"] >= 1
    # metadata as the CLI derives it without an LLM
    assert doc["origin"]["covers"] == "derived" and doc["when_to_retrieve"]
    assert "billing-ops/退款到账延迟.md" in uploads_of(docs_assistant)

    listed = {d["path"]: d for d in client.get("/api/documents").json()["documents"]}
    assert listed[doc["path"]]["uploaded"] is True
    assert listed["payment/支付失败排查.md"]["uploaded"] is False
    kmap = client.get("/api/knowledge/map").json()["available_knowledge_domains"]
    assert "billing-ops" in [d["domain_id"] for d in kmap]  # map rebuilt, domain computed

    answer = client.post("/api/chat", json={"question": "退款迟迟未到账怎么办"}).json()
    assert doc["path"] in [c["path"] for c in answer["citations"]]

    again = upload(client, "退款到账延迟.md", REFUND, domain="Billing Ops")
    assert again[0] == 201 and again[1]["status"] == "unchanged"
    # the KB measured itself again with the upload (key frequencies, thresholds) ...
    kb = docs_assistant.kb
    count = len(kb.documents.all())
    assert kb.key_frequency is not None and kb.key_frequency.documents == count
    assert kb.calibration is not None and kb.calibration.documents == count

    deleted = client.delete(f"/api/documents/{quote(doc['path'])}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"deleted": doc["path"], "domain": "billing-ops", "file_removed": True}
    assert doc["path"] not in [d["path"] for d in client.get("/api/documents").json()["documents"]]
    kmap = client.get("/api/knowledge/map").json()["available_knowledge_domains"]
    assert "billing-ops" not in [d["domain_id"] for d in kmap]
    assert uploads_of(docs_assistant) == []
    assert docs_assistant.kb.store.index_state([doc["path"]]) == {}
    # ... and with the delete
    assert kb.key_frequency is not None and kb.key_frequency.documents == count - 1
    assert kb.calibration is not None and kb.calibration.documents == count - 1
    assert client.delete(f"/api/documents/{quote(doc['path'])}").status_code == 404


#: a two-page vendor manual; page 1 fills a chunk, so page 2's passage is cited by page
MANUAL = pdf_bytes(
    [
        [
            ("h1", "Gateway Manual"),
            *[("p", f"Gateway node {n} terminates TLS.") for n in range(30)],
        ],
        [
            ("h2", "Certificate rotation"),
            ("p", "Rotate the gateway certificate every ninety days."),
        ],
    ],
    title="Gateway Manual",
)
FORMATS = {
    "gateway.pdf": MANUAL,
    "disk.html": "<html><head><title>Disk pressure - Ops</title></head><body><nav>Home</nav>"
    "<main><h1>Disk pressure</h1><p>Rotate the logs.</p></main></body></html>",
    "mysql.rst": "MySQL failover\n==============\n\nPromote the replica.\n",
    "kafka.adoc": "= Kafka broker disk full\n:toc:\n\n== Recovery\n\nFree the data volume.\n",
}


def test_uploads_take_the_formats_ingest_reads_and_cite_a_pdf_by_page(
    client: TestClient, docs_assistant: Runtime
) -> None:
    assert len(MANUAL) < LIMIT
    titles = {}
    for name, data in FORMATS.items():
        status, body = upload(client, name, data, domain="vendor")
        assert status == 201, body
        titles[body["document"]["path"]] = body["document"]["title"]
    assert titles == {
        "vendor/gateway.pdf": "Gateway Manual",
        "vendor/disk.html": "Disk pressure",
        "vendor/mysql.rst": "MySQL failover",
        "vendor/kafka.adoc": "Kafka broker disk full",
    }
    info = client.get("/api/info").json()
    assert {".html", ".htm", ".pdf", ".docx", ".rst", ".adoc"} <= set(info["extensions"])

    answer = client.post(
        "/api/chat", json={"question": "how often to rotate the gateway certificate"}
    ).json()
    cited = {c["path"]: c for c in answer["citations"]}
    assert cited["vendor/gateway.pdf"]["page"] == 2
    assert cited["vendor/gateway.pdf"]["location"] == "vendor/gateway.pdf#page=2"

    # the whole document as the page shows it: the text it was converted to, not its bytes
    for path in titles:
        whole = client.get(f"/api/documents/{quote(path)}")
        assert whole.status_code == 200 and whole.headers["content-type"].startswith("text/")
        assert "%PDF" not in whole.text and "<html" not in whole.text.lower()
        assert "\ufffd" not in whole.text
    assert "Rotate the gateway certificate" in client.get("/api/documents/vendor/gateway.pdf").text

    for path in titles:
        assert client.delete(f"/api/documents/{quote(path)}").status_code == 200


def test_deleting_an_ingested_document_keeps_its_file(
    client: TestClient, docs_assistant: Runtime
) -> None:
    stored = docs_assistant.kb.documents.get("ops/notes/deploy-checklist.md")
    assert stored is not None
    response = client.delete("/api/documents/ops/notes/deploy-checklist.md")
    assert response.status_code == 200
    assert response.json()["file_removed"] is False
    assert Path(stored.source_file).is_file()
    domains = [
        d["domain_id"]
        for d in client.get("/api/knowledge/map").json()["available_knowledge_domains"]
    ]
    assert "ops" not in domains


def test_file_names_cannot_leave_the_uploads_folder(
    client: TestClient, docs_assistant: Runtime
) -> None:
    status, body = upload(client, "../../../etc/evil.md", "# Evil\n\nnot really.\n", "../..")
    assert status == 201, body
    assert body["document"]["path"] == "general/evil.md"
    root = docs_assistant.settings.data_dir / "uploads"
    assert (root / "general" / "evil.md").is_file()
    assert not (docs_assistant.settings.data_dir.parent / "etc").exists()
    status, body = upload(client, "..\\..\\.hidden notes.md", "# Notes\n\ntext\n")
    assert status == 201 and body["document"]["path"] == "general/hidden notes.md"
    for path in ("general/evil.md", "general/hidden notes.md"):
        assert client.delete(f"/api/documents/{quote(path)}").status_code == 200


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("blob.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "binary file (contains NUL bytes)"),
        ("tiny.md", b"\x00\x01\x02\x03\x04", "binary file (contains NUL bytes)"),
        ("empty.md", b"   \n", "empty file"),
        ("latin1.md", "# Café\n".encode("latin-1"), "not UTF-8"),
        ("broken.md", b"---\ntitle: [unclosed\n---\nbody\n", "malformed frontmatter"),
        ("report.pdf", b"%PDF-1.7 text", "corrupt PDF: PDFium cannot read it"),
        ("scan.pdf", scanned_pdf_bytes(), NO_TEXT_LAYER),
        ("report.docx", b"%PDF-1.7 text", "the extension lies: its content is a PDF"),
        ("report.odt", b"PK\x03\x04", "unsupported file type"),
    ],
)
def test_unusable_files_get_422_with_the_reason(
    client: TestClient, docs_assistant: Runtime, name: str, data: bytes, reason: str
) -> None:
    before = uploads_of(docs_assistant)
    status, body = upload(client, name, data)
    assert status == 422, body
    assert body["error"] == "invalid_document" and reason in body["message"]
    assert "UTF-16" not in body["message"]  # a few bytes of binary are not UTF-16 text
    assert uploads_of(docs_assistant) == before


def test_oversize_uploads_get_413(client: TestClient, docs_assistant: Runtime) -> None:
    status, body = upload(client, "big.md", "# Big\n\n" + "x" * LIMIT)
    assert status == 413 and str(LIMIT) in body["message"]
    status, body = upload(client, "huge.md", "# Huge\n\n" + "x" * (LIMIT + 200_000))
    assert status == 413 and body["error"] == "payload_too_large"
    assert "big.md" not in " ".join(uploads_of(docs_assistant))


def test_upload_needs_a_file(client: TestClient) -> None:
    response = client.post("/api/documents", data={"domain": "x"})
    assert response.status_code == 422
    assert "file: Field required" in response.json()["message"]
    assert client.delete("/api/documents/no/such.md").status_code == 404


def test_an_upload_never_brings_back_a_document_deleted_elsewhere(
    client: TestClient, docs_assistant: Runtime
) -> None:
    """Another replica with its own data dir deletes from the shared stores but cannot
    remove this replica's copy of the file; the next upload here ingests only itself."""
    status, body = upload(client, "旧的.md", REFUND, domain="billing")
    assert status == 201, body
    path = body["document"]["path"]
    kb = docs_assistant.kb
    kb.documents.delete([path])  # what the other replica's delete does to the stores
    kb.store.delete_documents([path])
    assert "billing/旧的.md" in uploads_of(docs_assistant)

    status, body = upload(client, "新的.md", REFUND.replace("退款", "提现"), domain="billing")

    assert status == 201 and body["report"]["added"] == ["billing/新的.md"], body
    assert kb.documents.get(path) is None
    assert kb.store.index_state([path]) == {}


def test_a_deleted_knowledge_base_documents_path_stays_its_files(
    make_assistant: Callable[..., Runtime],
) -> None:
    """Delete takes a KB file's document out of the index until the next ingest, and says
    so; an upload never takes its path meanwhile, not even once no other document of its
    folder is left, so the next ingest brings the curated file back."""
    assistant = make_assistant()
    client = TestClient(create_app(assistant.settings, assistant=assistant, warm_up=False))
    stored = assistant.kb.documents.get("api/rate-limit.md")
    assert stored is not None
    kb_folder = Path(stored.source_file).parents[1]

    deleted = client.delete("/api/documents/api/rate-limit.md")
    assert deleted.status_code == 200 and deleted.json()["file_removed"] is False
    for form in ({"domain": "api"}, {"domain": "api", "overwrite": "true"}):
        response = client.post(
            "/api/documents",
            files={"file": ("rate-limit.md", b"# Mine\n\ntaken\n", "text/markdown")},
            data=form,
        )
        assert response.status_code == 409, response.text
        assert "belongs to the knowledge-base file" in response.json()["message"]
    assert "out of the index until the next `superbiz ingest`" in deleted.json()["note"]
    # every other document of the KB folder deleted too: the path is still the file's
    for doc in assistant.kb.documents.all():
        assert client.delete(f"/api/documents/{quote(doc.path)}").status_code == 200
    status, body = upload(client, "redis-pool.md", "# Mine\n\ntaken\n", domain="infrastructure")
    assert status == 409 and "belongs to the knowledge-base file" in body["message"]
    assert uploads_of(assistant) == []

    report = Ingestor(assistant.kb).ingest([kb_folder])
    assert {"api/rate-limit.md", "infrastructure/redis-pool.md"} <= set(report.added)
    again = assistant.kb.documents.get("api/rate-limit.md")
    assert again is not None and Path(again.source_file) == Path(stored.source_file)
