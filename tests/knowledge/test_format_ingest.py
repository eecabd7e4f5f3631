"""HTML, PDF, Word, reStructuredText and AsciiDoc through a real ingest (USE embedder, SQLite,
Milvus Lite): each becomes chunks with heading paths like Markdown's, a PDF's passages
are cited by page, and every bad file of the issue's list is a skipped file with its
reason while the good files of the same run are stored."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from conftest import write_kb
from format_files import (
    dense_pdf_bytes,
    docx_bytes,
    pdf_bytes,
    scanned_pdf_bytes,
    zip_bomb_docx_bytes,
)
from superbiz.agents.executor import Executor
from superbiz.agents.extractive import ExtractiveChatModel
from superbiz.config import GovernanceConfig
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.formats.pdf import NO_TEXT_LAYER
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

#: page 1 fills a chunk of its own (800 characters), so page 2 starts a new one
BROKERS = [f"Broker {n} keeps its log segments on the data volume of its host." for n in range(14)]
MANUAL = [
    [("h1", "Kafka Operations Manual"), *(("p", line) for line in BROKERS)],
    [
        ("h2", "Consumer lag"),
        ("p", "When consumer lag grows, add partitions and scale the consumer group."),
    ],
]
HTML = """<html><head><title>Disk pressure</title><script>alert(1)</script></head>
<body><nav>Home · Runbooks</nav><article><h1>Disk pressure</h1>
<p onclick="steal()">Rotate the logs when the disk fills;
<a href="javascript:alert(1)">details</a>.</p>
<h2>Cleanup</h2><pre>journalctl --vacuum-size=500M</pre></article>
<footer>© Corp</footer></body></html>
"""
RST = "MySQL failover\n==============\n\nPromote the replica with the highest GTID.\n"
ASCIIDOC = """= Consumer offsets reset
:group: billing-consumers

== Reset to the earliest offset

Stop the group `{group}` first, then:

[source,bash]
----
kafka-consumer-groups.sh --reset-offsets --to-earliest --execute
----
"""
GOOD: dict[str, str | bytes] = {
    "ops/disk.html": HTML,
    "ops/kafka-manual.pdf": pdf_bytes(MANUAL, title="Kafka Operations Manual"),
    "ops/redis.docx": docx_bytes(title="Redis Runbook"),
    "db/mysql.rst": RST,
    "ops/offsets.adoc": ASCIIDOC,
}
BAD: dict[str, str | bytes] = {
    "bad/encrypted.pdf": pdf_bytes(MANUAL, user_password="secret"),
    "bad/corrupt.pdf": b"%PDF-1.4\n" + bytes(range(256)) * 8,
    "bad/scan.pdf": scanned_pdf_bytes(),
    "bad/five-thousand-pages.pdf": pdf_bytes([[("p", "x")]] * 5000, outline=False),
    "bad/dense-page.pdf": dense_pdf_bytes(150_000),
    "bad/not-a-zip.docx": "plain text named .docx",
    "bad/bomb.docx": zip_bomb_docx_bytes(60_000_000),
    "bad/word-named.md": docx_bytes(),
    "bad/html-named.pdf": HTML,
    "bad/pdf-named.adoc": pdf_bytes(MANUAL),
}
REASONS = {
    "bad/encrypted.pdf": "encrypted PDF: it needs a password, which superbiz does not have",
    "bad/corrupt.pdf": "corrupt PDF: PDFium cannot read it (Data format error)",
    "bad/scan.pdf": NO_TEXT_LAYER,
    "bad/five-thousand-pages.pdf": "too many pages: 5000 (the limit is 2000)",
    "bad/dense-page.pdf": "page 1 holds ",
    "bad/not-a-zip.docx": "not a Word .docx: not a zip archive",
    "bad/bomb.docx": "zip bomb refused: its parts unzip to ",
    "bad/word-named.md": "the extension lies: its content is a zip archive (a .docx is one), "
    "not .md",
    "bad/html-named.pdf": "the extension lies: its content does not match, not a .pdf file",
    "bad/pdf-named.adoc": "the extension lies: its content is a PDF document, not AsciiDoc",
}


@pytest.fixture
def ingested(tmp_path: Path, kb: KnowledgeBase) -> tuple[KnowledgeBase, dict[str, str]]:
    report = Ingestor(kb).ingest([write_kb(tmp_path / "kb", {**GOOD, **BAD})])
    assert sorted(report.added) == sorted(GOOD)
    return kb, dict(report.skipped)


def test_every_bad_file_is_skipped_with_its_reason_and_nothing_of_it_is_stored(
    ingested: tuple[KnowledgeBase, dict[str, str]],
) -> None:
    kb, skipped = ingested

    assert set(skipped) == set(REASONS)
    for path, reason in REASONS.items():
        assert skipped[path].startswith(reason), (path, skipped[path])
    assert sorted(doc.path for doc in kb.documents.all()) == sorted(GOOD)
    assert kb.store.chunks_of_documents(list(BAD)) == {}


def test_each_format_is_stored_with_its_title_and_heading_paths(
    ingested: tuple[KnowledgeBase, dict[str, str]],
) -> None:
    kb, _ = ingested

    titles = {doc.path: doc.title for doc in kb.documents.all()}
    assert titles == {
        "ops/disk.html": "Disk pressure",
        "ops/kafka-manual.pdf": "Kafka Operations Manual",
        "ops/redis.docx": "Redis Runbook",
        "db/mysql.rst": "MySQL failover",
        "ops/offsets.adoc": "Consumer offsets reset",
    }
    headings = {path: [chunk.heading for chunk in kb.store.chunks_of(path)] for path in titles}
    assert headings["ops/disk.html"] == ["Disk pressure"]
    assert headings["db/mysql.rst"] == ["MySQL failover"]
    assert headings["ops/offsets.adoc"] == ["Consumer offsets reset"]
    offsets = kb.store.chunks_of("ops/offsets.adoc")[0].text
    assert "## Reset to the earliest offset\n\nStop the group `billing-consumers` first" in offsets
    assert "```bash\nkafka-consumer-groups.sh --reset-offsets" in offsets
    html = kb.store.chunks_of("ops/disk.html")[0].text
    assert "journalctl --vacuum-size=500M" in html
    assert "Home" not in html and "alert" not in html and "javascript" not in html


def test_a_pdf_passage_is_cited_with_its_page(
    ingested: tuple[KnowledgeBase, dict[str, str]],
) -> None:
    kb, _ = ingested
    lookup = GovernedLookup(kb, InMemorySessionTracker())

    outcome = lookup.lookup("s1", "consumer lag grows add partitions")
    primary = outcome.result.primary
    assert primary is not None and primary.path == "ops/kafka-manual.pdf"
    assert primary.page == 2
    assert outcome.result.as_dict()["primary"]["page"] == 2

    executor = Executor(ExtractiveChatModel(), lookup, GovernanceConfig())
    turn = executor.run(f"s-{uuid.uuid4().hex[:8]}", "consumer lag grows, what to do?", turn=1)
    cited = [c.as_dict() for c in turn.citations if c.path == "ops/kafka-manual.pdf"]
    assert cited and cited[0]["location"] == "ops/kafka-manual.pdf#page=2"
    assert "(ops/kafka-manual.pdf#page=2)" in turn.answer


def test_a_markdown_passage_has_no_page(
    ingested: tuple[KnowledgeBase, dict[str, str]],
) -> None:
    kb, _ = ingested

    result = GovernedLookup(kb, InMemorySessionTracker()).lookup("s2", "journalctl vacuum")
    assert result.result.primary is not None
    assert result.result.primary.page is None
    assert "page" not in result.result.as_dict()["primary"]
