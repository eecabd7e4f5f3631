"""Ingestion on SQLite and PostgreSQL with real Milvus Lite and the real USE embedder:
idempotency, updates, pruning, bad files, crash repair, embedder/dimension mismatch."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fakes.embedders import CountingEmbedder
from fakes.openai_server import FakeOpenAIServer
from fakes.records import chunk_record
from superbiz import _process
from superbiz.config import EmbeddingConfig, VectorSettings
from superbiz.exceptions import IndexMismatchError, UnknownDomainError
from superbiz.governance.lookup import GovernedLookup
from superbiz.governance.tracker import InMemorySessionTracker
from superbiz.knowledge.coverage.map import MapDocument
from superbiz.knowledge.documents.chunking import CHUNKER_VERSION, embedding_text
from superbiz.knowledge.documents.document import (
    SourceDocument,
    content_hash,
    indexed_hash,
    load_document,
)
from superbiz.knowledge.documents.site_titles import SiteTitles
from superbiz.knowledge.formats import READER_VERSIONS
from superbiz.knowledge.ingest import batches
from superbiz.knowledge.ingest import ingestor as ingest_module
from superbiz.knowledge.ingest.batches import chunk_id
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.map_vectors import KeptMapVectors
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle
from superbiz.retrieval.embedders import Embedder, OpenAIEmbedder
from superbiz.storage.repository import StoredDocument

OpenKB = Callable[..., KnowledgeBase]


@pytest.fixture
def open_kb(
    tmp_path: Path,
    database_url: str,
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
) -> Iterator[OpenKB]:
    """``open_kb(embedder=None, **settings)``: a KB on this test's database and data dir."""
    opened: list[KnowledgeBase] = []

    def make(embedder: Embedder | None = None, **overrides: Any) -> KnowledgeBase:
        settings = make_settings(tmp_path, database_url, **overrides)
        kb = KnowledgeBase(settings, embedder=embedder or use_embedder)
        opened.append(kb)
        return kb

    yield make
    for kb in reversed(opened):
        close(kb)


def close(kb: KnowledgeBase) -> None:
    if not getattr(kb, "_closed_by_test", False):
        kb.close()
        kb._closed_by_test = True  # type: ignore[attr-defined]


def md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))


def chunk_counts(kb: KnowledgeBase) -> dict[str, int]:
    """doc_path → chunks in Milvus, for every chunk in the collection (orphans included)."""
    if kb.store.dimension is None:
        return {}
    rows = kb.store._client.query(
        kb.store.collection, filter='doc_path != ""', output_fields=["doc_path"], limit=16384
    )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["doc_path"]] = counts.get(row["doc_path"], 0) + 1
    return counts


def assert_consistent(kb: KnowledgeBase) -> None:
    """Every row has exactly its chunks (with its hash) and there is no other chunk."""
    rows = {doc.path: doc for doc in kb.documents.all()}
    assert chunk_counts(kb) == {path: doc.chunk_count for path, doc in rows.items()}
    state = kb.store.index_state(list(rows))
    for path, doc in rows.items():
        assert state[path] == (doc.chunk_count, frozenset([doc.content_hash]))


# -- first ingest and idempotency -----------------------------------------------------------


def test_first_ingest_adds_all_then_nothing_changes(small_kb: Path, open_kb: OpenKB) -> None:
    expected = md_files(small_kb)
    kb = open_kb()
    report = Ingestor(kb).ingest([small_kb])
    assert sorted(report.added) == expected
    assert (report.updated, report.unchanged, report.repaired, report.removed) == ([], [], [], [])
    assert report.skipped == []
    assert report.changed
    assert report.summary() == f"{len(expected)} added, 0 updated, 0 unchanged, 0 skipped"

    rows = {doc.path: doc for doc in kb.documents.all()}
    assert sorted(rows) == expected
    assert kb.domains() == {"api": 1, "general": 1, "infrastructure": 1, "ops": 1, "payment": 1}
    assert all(doc.chunk_count >= 1 for doc in rows.values())
    assert_consistent(kb)
    before = chunk_counts(kb)

    again = Ingestor(kb).ingest([small_kb])
    assert sorted(again.unchanged) == expected
    assert (again.added, again.updated, again.repaired, again.removed) == ([], [], [], [])
    assert not again.changed
    assert again.summary() == f"0 added, 0 updated, {len(expected)} unchanged, 0 skipped"
    assert chunk_counts(kb) == before

    # a fresh process (new KB object) and a touched-but-identical file: still unchanged
    close(kb)
    (small_kb / "glossary.md").touch()
    kb = open_kb()
    third = Ingestor(kb).ingest([small_kb])
    assert sorted(third.unchanged) == expected and not third.changed
    assert chunk_counts(kb) == before


def test_rows_and_chunks_carry_title_heading_and_document(small_kb: Path, open_kb: OpenKB) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    path = "payment/支付失败排查.md"
    doc = kb.documents.get(path)
    assert doc is not None
    assert (doc.title, doc.domain) == ("支付失败排查", "payment")
    assert doc.covers == ["支付回调超时", "退款失败"]
    assert doc.tags == ["支付", "订单"]
    assert doc.when_to_retrieve == "用户支付失败或回调异常时"
    assert doc.metadata["extra"] == {"owner": "pay-team"}
    data = (small_kb / path).read_bytes()
    stored_as = indexed_hash(content_hash(data), path, kb.settings.ingest)
    assert doc.content_hash == stored_as and doc.size_bytes == len(data)
    assert Path(doc.source_file) == (small_kb / path).resolve()

    chunks = kb.store.chunks_of(path)
    assert len(chunks) == doc.chunk_count
    for i, chunk in enumerate(chunks):
        assert chunk.id == chunk_id(path, i, doc.content_hash)
        assert (chunk.doc_path, chunk.title, chunk.domain) == (path, "支付失败排查", "payment")
        # shown text is the document's own Markdown; the title goes to BM25 and the embedder
        assert chunk.text.split("\n")[0] in data.decode()
        assert chunk.heading.startswith("支付失败排查")
        assert chunk.vector is not None and chunk.vector.shape == (512,)
        assert float(np.linalg.norm(chunk.vector)) == pytest.approx(1.0, abs=1e-4)
    general = kb.documents.get("glossary.md")
    assert general is not None and general.domain == "general" and general.title == "Glossary"
    nested = kb.documents.get("ops/notes/deploy-checklist.md")
    assert nested is not None and nested.domain == "ops"


# -- updates --------------------------------------------------------------------------------


def _long_doc(label: str, sections: int) -> str:
    body = "\n\n".join(
        f"## Section {i}\n" + f"{label} step {i} explains what to check. " * 5
        for i in range(sections)
    )
    return f"---\ntitle: Long runbook\ncategory: ops\n---\n# Long runbook\n\n{body}\n"


def test_changed_file_is_updated_and_its_old_chunks_are_gone(
    small_kb: Path, open_kb: OpenKB
) -> None:
    path = "ops/long.md"
    file = small_kb / path
    file.write_text(_long_doc("OLDVERSION", 6), encoding="utf-8")
    kb = open_kb(ingest={"chunk_size": 200, "chunk_overlap": 20})
    Ingestor(kb).ingest([small_kb])
    old = kb.store.index_state([path])[path]
    assert old[0] > 3

    file.write_text(_long_doc("NEWVERSION", 1), encoding="utf-8")
    report = Ingestor(kb).ingest([small_kb])
    assert report.updated == [path]
    assert report.added == [] and path not in report.unchanged
    assert len(report.unchanged) == len(md_files(small_kb)) - 1

    new_hash = indexed_hash(content_hash(file.read_bytes()), path, kb.settings.ingest)
    doc = kb.documents.get(path)
    assert doc is not None and doc.content_hash == new_hash
    count, hashes = kb.store.index_state([path])[path]
    assert count == doc.chunk_count < old[0]
    assert hashes == frozenset([new_hash])
    texts = " ".join(chunk.text for chunk in kb.store.chunks_of(path))
    assert "NEWVERSION" in texts and "OLDVERSION" not in texts
    assert_consistent(kb)


def test_a_new_reader_version_reads_its_format_again_and_no_other(
    small_kb: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade that reads Markdown otherwise (Sphinx roles, say) must reach a KB
    ingested before it: the files' bytes are the same, so their hash alone kept them."""
    page = "ops/status-page.html"
    (small_kb / page).write_text(
        "<html><head><title>Status page</title></head><body><h1>Status page</h1>"
        "<p>Post an incident on the status page within ten minutes.</p></body></html>",
        encoding="utf-8",
    )
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])

    monkeypatch.setitem(READER_VERSIONS, "markdown", READER_VERSIONS["markdown"] + 1)
    report = Ingestor(kb).ingest([small_kb])
    assert sorted(report.updated) == sorted(report.reread) == md_files(small_kb)
    assert report.unchanged == [page] and report.added == []
    assert f"{len(md_files(small_kb))} read again by this version" in report.summary()
    assert_consistent(kb)
    assert sorted(Ingestor(kb).ingest([small_kb]).unchanged) == sorted([*md_files(small_kb), page])


def test_an_ingest_after_an_upgrade_reads_every_older_document_again(
    small_kb: Path, open_kb: OpenKB, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uploads and other folders are not under the paths of the next ingest: after an
    upgrade their documents kept the older reader's text until each file changed."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "deploy.md").write_text("# Deploys\n\nRoll back with helm rollback.\n")
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    stored = kb.documents.all()
    assert {d.read_with for d in stored} == {
        f"markdown {READER_VERSIONS['markdown']}; chunks {CHUNKER_VERSION} 800/100"
    }
    legacy = stored[0]  # stored before superbiz recorded how it read a file
    kb.documents.save(dataclasses.replace(legacy, metadata={**legacy.metadata, "read_with": ""}))

    report = DocumentLifecycle(kb).ingest([other])
    assert report.updated == [legacy.path] and report.added == ["deploy.md"]
    assert report.reread == []  # how it was read is unknown: rewritten, not "read again"

    monkeypatch.setitem(READER_VERSIONS, "markdown", READER_VERSIONS["markdown"] + 1)
    assert Ingestor(kb).ingest([other]).updated == ["deploy.md"]  # an upload's run
    report = DocumentLifecycle(kb).ingest([other])
    assert sorted(report.updated) == md_files(small_kb) and report.unchanged == ["deploy.md"]
    assert_consistent(kb)
    assert DocumentLifecycle(kb).ingest([other]).updated == []


def test_another_chunk_size_cuts_unchanged_files_again(small_kb: Path, open_kb: OpenKB) -> None:
    path = "ops/long.md"
    (small_kb / path).write_text(_long_doc("STEP", 6), encoding="utf-8")
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    before = kb.documents.get(path)
    close(kb)

    kb = open_kb(ingest={"chunk_size": 200, "chunk_overlap": 20})
    report = Ingestor(kb).ingest([small_kb])
    assert sorted(report.updated) == md_files(small_kb) and report.unchanged == []
    after = kb.documents.get(path)
    assert before is not None and after is not None
    assert after.chunk_count > before.chunk_count
    assert_consistent(kb)


def test_changed_frontmatter_moves_the_document_to_another_domain(
    small_kb: Path, open_kb: OpenKB
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    file = small_kb / "api" / "rate-limit.md"
    file.write_text(file.read_text(encoding="utf-8").replace("category: api", "category: ops"))
    assert Ingestor(kb).ingest([small_kb]).updated == ["api/rate-limit.md"]
    assert kb.domains() == {"general": 1, "infrastructure": 1, "ops": 2, "payment": 1}
    assert kb.require_domain(" OPS ") == "ops"
    with pytest.raises(UnknownDomainError) as info:
        kb.require_domain("api")  # its only document moved away
    assert info.value.known == ["general", "infrastructure", "ops", "payment"]
    assert {c.domain for c in kb.store.chunks_of("api/rate-limit.md")} == {"ops"}
    assert [m.domain for m in kb.exact_index.match("API rate limiting")] == ["ops"]


# -- pruning ----------------------------------------------------------------------------------


def test_prune_removes_deleted_files_only_when_asked(
    small_kb: Path, tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    other = kb_writer(tmp_path / "other", {"handbook/onboarding.md": "# Onboarding\nWelcome.\n"})
    kb = open_kb()
    Ingestor(kb).ingest([small_kb, other])
    (small_kb / "api" / "rate-limit.md").unlink()
    (other / "handbook" / "onboarding.md").unlink()

    kept = Ingestor(kb).ingest([small_kb])
    assert kept.removed == []
    assert kb.documents.get("api/rate-limit.md") is not None
    assert kb.store.index_state(["api/rate-limit.md"])["api/rate-limit.md"][0] >= 1

    pruned = Ingestor(kb).ingest([small_kb], prune=True)
    assert pruned.removed == ["api/rate-limit.md"]
    assert "1 removed" in pruned.summary()
    assert kb.documents.get("api/rate-limit.md") is None
    assert kb.store.index_state(["api/rate-limit.md"]) == {}
    assert kb.exact_index.match("API rate limiting") == []
    assert "api" not in kb.domains()
    # a root that was not ingested this time is left alone, even with --prune
    assert kb.documents.get("handbook/onboarding.md") is not None

    assert Ingestor(kb).ingest([other], prune=True).removed == ["handbook/onboarding.md"]
    assert kb.documents.get("handbook/onboarding.md") is None
    assert_consistent(kb)


def test_a_text_file_pages_include_is_a_fragment_not_a_document(
    tmp_path: Path, open_kb: OpenKB
) -> None:
    """Sphinx manuals share text through ``.. include::`` of ``.txt`` files (CMake's
    ``envvar/ENV_VAR.txt``): no document of its own, and one stored before goes with
    --prune; a text file no page includes stays a document."""
    envvar = tmp_path / "manual" / "envvar"
    envvar.mkdir(parents=True)
    (envvar / "ENV_VAR.txt").write_text("This is an environment variable of the build.\n")
    (envvar / "notes.txt").write_text("Release notes: the build cache moved.\n")
    kb = open_kb()
    first = Ingestor(kb).ingest([envvar.parent])
    assert sorted(first.added) == ["envvar/ENV_VAR.txt", "envvar/notes.txt"]
    (envvar / "CC.rst").write_text("CC\n--\n\n.. include:: ENV_VAR.txt\n\nThe C compiler.\n")
    (envvar / "CXX.rst").write_text(
        "CXX\n---\n\n.. include:: /envvar/ENV_VAR.txt\n\nThe C++ compiler.\n"
    )

    again = Ingestor(kb).ingest([envvar.parent], prune=True)

    assert sorted(again.added) == ["envvar/CC.rst", "envvar/CXX.rst"]
    [(path, reason)] = again.skipped
    assert path == "envvar/ENV_VAR.txt"
    assert reason.startswith("included by envvar/CC.rst and 1 more pages")
    assert again.removed == ["envvar/ENV_VAR.txt"]
    assert kb.documents.get("envvar/ENV_VAR.txt") is None
    assert kb.documents.get("envvar/notes.txt") is not None
    assert_consistent(kb)
    # part of its pages as they are read: its text is theirs, and a change of it theirs too
    for page in ("envvar/CC.rst", "envvar/CXX.rst"):
        text = "\n".join(chunk.text for chunk in kb.store.chunks_of(page))
        assert "This is an environment variable of the build." in text
    (envvar / "ENV_VAR.txt").write_text("This environment variable overrides the cache.\n")
    changed = Ingestor(kb).ingest([envvar.parent], prune=True)
    assert sorted(changed.updated) == ["envvar/CC.rst", "envvar/CXX.rst"]
    assert "overrides the cache" in kb.store.chunks_of("envvar/CC.rst")[0].text


def test_a_folder_with_no_file_superbiz_reads_says_so(tmp_path: Path, open_kb: OpenKB) -> None:
    """An Org-mode manual ingested nothing and said nothing: "0 added, 0 skipped"."""
    manual = tmp_path / "manual"
    (manual / "images").mkdir(parents=True)
    for name in ("failover.org", "backup.org", "images/topology.png"):
        (manual / name).write_text("* Failover\n\nPromote the replica.\n")
    report = Ingestor(open_kb()).ingest([manual])
    assert report.added == []
    [(path, reason)] = report.skipped
    assert path == str(manual)
    assert reason.startswith("no file of a format superbiz reads: 2 .org and 1 .png files")
    assert ".md" in reason and ".rst" in reason


def test_a_fragment_with_its_own_access_list_stays_a_document(
    tmp_path: Path, open_kb: OpenKB
) -> None:
    """A fragment that opens with frontmatter (``access: [finance]``) is not written into
    the open page including it, which everyone may read: it stays a document of its own,
    read by its group."""
    root = tmp_path / "kb"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "rates.txt").write_text(
        "---\naccess: [finance]\n---\nThe negotiated card rate is 1.2 percent.\n"
    )
    (root / "ops" / "fees.rst").write_text(
        "Fees\n====\n\nWhat a payment costs.\n\n.. include:: rates.txt\n"
    )
    kb = open_kb()
    report = Ingestor(kb).ingest([root])
    assert sorted(report.added) == ["ops/fees.rst", "ops/rates.txt"]
    page = "\n".join(chunk.text for chunk in kb.store.chunks_of("ops/fees.rst"))
    assert "What a payment costs." in page and "card rate" not in page
    rates = kb.documents.get("ops/rates.txt")
    assert rates is not None and rates.access == ("finance",)


def test_a_page_includes_nothing_from_outside_its_folder(tmp_path: Path, open_kb: OpenKB) -> None:
    """A fragment is written into its page only from the KB's own folder: not through
    ``..``, not through a symlink that leads out, and not one that includes itself."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the secret line\n")
    root = tmp_path / "kb"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "link.txt").symlink_to(secret)
    (root / "ops" / "loop.txt").write_text("Loop start.\n\n.. include:: loop.txt\n")
    (root / "ops" / "page.rst").write_text(
        "Page\n====\n\nBefore.\n\n.. include:: ../../secret.txt\n\n"
        ".. include:: link.txt\n\n.. include:: loop.txt\n\nAfter.\n"
    )
    kb = open_kb()
    Ingestor(kb).ingest([root])
    text = "\n".join(chunk.text for chunk in kb.store.chunks_of("ops/page.rst"))
    assert "Before." in text and "After." in text and text.count("Loop start.") == 1
    assert "secret line" not in text


def test_a_sites_navigation_files_are_no_pages(tmp_path: Path, open_kb: OpenKB) -> None:
    """Docsify's sidebar and GitBook's table of contents link to every page and answer
    nothing: skipped (one stored before goes with --prune); a ``SUMMARY.md`` with text of
    its own is a document."""
    docs = tmp_path / "docs"
    (docs / "deployment").mkdir(parents=True)
    (docs / "deployment" / "quick-start.md").write_text("# Quick start\n\nRun demo.sh.\n")
    (docs / "deployment" / "distributed.md").write_text("# 分布式部署\n\n每个环境一套服务。\n")
    sidebar = (
        "- 部署文档\n  - [Quick Start](zh/deployment/quick-start.md)\n"
        "  - [分布式部署指南](zh/deployment/distributed.md)\n- [常见问题](zh/faq/faq.md)\n"
    )
    (docs / "incidents").mkdir()
    (docs / "incidents" / "SUMMARY.md").write_text(
        "# Outage summary\n\nThe payment API was down for 12 minutes after a bad deploy.\n"
    )
    kb = open_kb()
    (docs / "_sidebar.md").write_text("no links yet\n")
    assert "_sidebar.md" in Ingestor(kb).ingest([docs]).added
    (docs / "_sidebar.md").write_text(sidebar)
    (docs / "SUMMARY.md").write_text(
        "# Summary\n\n* [Quick start](deployment/quick-start.md)\n"
        "* [Distributed](deployment/distributed.md)\n* [Outage](incidents/SUMMARY.md)\n"
    )

    report = Ingestor(kb).ingest([docs], prune=True)

    reasons = dict(report.skipped)
    assert reasons["_sidebar.md"].startswith("Docsify's sidebar: links to the site's pages")
    assert reasons["SUMMARY.md"].startswith("GitBook's or mdBook's table of contents")
    assert report.removed == ["_sidebar.md"]
    assert set(kb.current_documents()) == {
        "deployment/quick-start.md",
        "deployment/distributed.md",
        "incidents/SUMMARY.md",
    }


def test_a_sphinx_html_build_is_ingested_as_its_pages(tmp_path: Path, open_kb: OpenKB) -> None:
    """A Sphinx site as its HTML builder writes it (run here): each page's source copied
    under ``_sources/`` and the theme's files under ``_static/`` are no documents, and
    one stored before goes with --prune; a ``_sources`` folder outside a build stays."""
    build_main = pytest.importorskip(
        "sphinx.cmd.build", reason="Sphinx builds the site: pip install -e '.[docs]'"
    ).build_main
    source, site = tmp_path / "source", tmp_path / "site"
    source.mkdir()
    (source / "conf.py").write_text("project = 'Runbooks'\nhtml_theme = 'alabaster'\n")
    (source / "index.rst").write_text("Runbooks\n========\n\n.. toctree::\n\n   failover\n")
    (source / "failover.rst").write_text(
        "MySQL failover\n==============\n\nPromote the replica with the newest GTID set.\n"
    )
    assert build_main(["-q", "-b", "html", str(source), str(site)]) == 0
    assert (site / "objects.inv").is_file() and (site / "_sources" / "failover.rst.txt").is_file()
    inventory = (site / "objects.inv").read_bytes()
    (site / "objects.inv").unlink()  # the same folders, in no build: documents
    kb = open_kb()
    assert "_sources/failover.rst.txt" in Ingestor(kb).ingest([site]).added
    (site / "objects.inv").write_bytes(inventory)

    report = Ingestor(kb).ingest([site], prune=True)

    stored = set(kb.current_documents())
    assert {"index.html", "failover.html"} <= stored
    assert not any(path.startswith(("_sources/", "_static/")) for path in stored)
    reasons = dict(report.skipped)
    assert reasons["_sources/failover.rst.txt"].startswith("the source of a page Sphinx built")
    assert reasons["search.html"].startswith("a page Sphinx generates")  # empty: no fault
    assert set(report.parts) == set(reasons)
    assert "_sources/failover.rst.txt" in report.removed
    _, hits = kb.searcher.search("promote the replica GTID")
    assert [hit.doc_path for hit in hits][:1] == ["failover.html"]
    assert_consistent(kb)


# -- one file, one document -------------------------------------------------------------------

TEAM_A = "---\ntitle: Team A guide\n---\n# Team A guide\nTeam A rotates the flamingo keys.\n"
TEAM_B = "---\ntitle: Team B guide\n---\n# Team B guide\nTeam B restarts the walrus.\n"


def test_another_folder_never_replaces_a_document_whose_file_is_still_there(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    a = kb_writer(tmp_path / "kA", {"guide.md": TEAM_A})
    b = kb_writer(tmp_path / "kB", {"guide.md": TEAM_B, "other.md": "# Other\nB only.\n"})
    kb = open_kb()
    Ingestor(kb).ingest([a])

    for prune in (False, True):
        report = Ingestor(kb).ingest([b], prune=prune)
        assert report.updated == [] and report.removed == []
        [(path, reason)] = report.skipped
        assert path == "guide.md"
        assert f"{(a / 'guide.md').resolve()} (still there) is not replaced by " in reason
        assert str((b / "guide.md").resolve()) in reason and "rename one of them" in reason
    row = kb.documents.get("guide.md")
    assert row is not None and row.title == "Team A guide"
    assert Path(row.source_file) == (a / "guide.md").resolve()
    _, hits = kb.searcher.search("flamingo keys")
    assert hits[0].doc_path == "guide.md"
    assert "flamingo" in kb.store.chunks_of("guide.md")[0].text
    assert kb.documents.get("other.md") is not None

    # once A's file is gone (its folder moved, renamed or deleted), B's file takes the path
    (a / "guide.md").unlink()
    report = Ingestor(kb).ingest([b])
    assert report.updated == ["guide.md"] and report.skipped == []
    row = kb.documents.get("guide.md")
    assert row is not None and row.title == "Team B guide"
    assert_consistent(kb)


def test_a_moved_kb_folder_keeps_its_documents_and_follows_their_files(
    small_kb: Path, tmp_path: Path, open_kb: OpenKB
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    moved = small_kb.rename(tmp_path / "moved")
    report = Ingestor(kb).ingest([moved], prune=True)
    assert sorted(report.unchanged) == md_files(moved) and not report.changed
    assert report.skipped == []
    sources = [Path(doc.source_file) for doc in kb.documents.all()]
    assert all(source.is_relative_to(moved.resolve()) for source in sources)
    assert_consistent(kb)


def test_a_sub_folder_or_one_file_of_an_ingested_kb_updates_its_documents_in_place(
    small_kb: Path, open_kb: OpenKB
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    expected = md_files(small_kb)

    report = Ingestor(kb).ingest([small_kb / "payment"], prune=True)
    assert report.unchanged == ["payment/支付失败排查.md"]
    assert not report.changed and report.skipped == []
    file = small_kb / "api" / "rate-limit.md"
    file.write_text(file.read_text(encoding="utf-8") + "\nQuota resets hourly.\n")
    report = Ingestor(kb).ingest([file])
    assert report.updated == ["api/rate-limit.md"] and report.added == []
    assert sorted(doc.path for doc in kb.documents.all()) == expected  # no second copy
    row = kb.documents.get("api/rate-limit.md")
    assert row is not None and row.domain == "api"
    assert "Quota resets hourly." in kb.store.chunks_of("api/rate-limit.md")[-1].text
    assert_consistent(kb)


def test_the_kb_folder_after_its_sub_folder_stores_each_file_once_under_its_kb_path(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    root = kb_writer(
        tmp_path / "kb",
        {"x.md": "# Top\nAt the top.\n", "sub/x.md": "# Sub\nIn sub.\n", "sub/y.md": "# Y\ny\n"},
    )
    kb = open_kb()
    assert sorted(Ingestor(kb).ingest([root / "sub"]).added) == ["x.md", "y.md"]

    report = Ingestor(kb).ingest([root])
    assert sorted(report.added) == ["sub/x.md", "sub/y.md"]
    assert report.updated == ["x.md"]  # the top file takes the path sub/x.md had
    assert report.removed == ["y.md"]  # the copy from the sub-folder
    rows = {doc.path: doc for doc in kb.documents.all()}
    assert sorted(rows) == ["sub/x.md", "sub/y.md", "x.md"]
    assert (rows["x.md"].title, rows["sub/x.md"].title) == ("Top", "Sub")
    assert rows["sub/x.md"].domain == "sub"
    assert_consistent(kb)
    assert not Ingestor(kb).ingest([root]).changed


def test_a_folder_and_its_sub_folder_in_one_command_store_each_file_once_under_the_folder(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    root = kb_writer(tmp_path / "kb", {"payment/a.md": "# A\na\n", "api/b.md": "# B\nb\n"})
    kb = open_kb()
    report = Ingestor(kb).ingest([root, root / "payment", root / "payment" / "a.md"])
    assert sorted(report.added) == ["api/b.md", "payment/a.md"] and report.skipped == []
    assert kb.documents.get("payment/a.md").domain == "payment"  # type: ignore[union-attr]
    again = Ingestor(kb).ingest([root / "payment", root])  # the narrower one first
    assert sorted(again.unchanged) == ["api/b.md", "payment/a.md"]
    assert not again.changed and again.skipped == []


def test_a_new_file_ingested_through_a_sub_folder_gets_its_kb_path_and_domain(
    small_kb: Path, open_kb: OpenKB
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    new = small_kb / "payment" / "chargeback.md"
    new.write_text("# Chargeback\nA customer disputes a payment.\n", encoding="utf-8")
    assert Ingestor(kb).ingest([small_kb / "payment"]).added == ["payment/chargeback.md"]
    row = kb.documents.get("payment/chargeback.md")
    assert row is not None and row.domain == "payment"
    assert not Ingestor(kb).ingest([small_kb]).changed  # no copy to remove later


def test_a_copy_keeps_its_path_until_its_file_has_landed_under_the_kb_path(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    """The sub-folder's copy ``refund.md`` is not taken by the top-level ``refund.md``
    while its own file, now empty, could not be stored under ``payment/refund.md``."""
    root = kb_writer(tmp_path / "kb", {"payment/refund.md": "# Refund\nthe zebra worker\n"})
    kb = open_kb()
    assert Ingestor(kb).ingest([root / "payment"]).added == ["refund.md"]
    (root / "payment" / "refund.md").write_text("", encoding="utf-8")
    (root / "refund.md").write_text("# Top refund\noverview\n", encoding="utf-8")

    report = Ingestor(kb).ingest([root])
    skipped = dict(report.skipped)
    assert skipped["payment/refund.md"].startswith("empty file")
    assert skipped["refund.md"].startswith("another file is stored at this path")
    row = kb.documents.get("refund.md")
    assert row is not None and row.title == "Refund"  # the zebra version is still there
    assert_consistent(kb)


# -- bad files ---------------------------------------------------------------------------------

BAD_FILES: dict[str, str | bytes] = {
    "payment/broken-yaml.md": "---\ntitle: [unclosed\n---\n# Body\ntext\n",
    "payment/list-frontmatter.md": "---\n- a\n- b\n---\n# Body\n",
    "payment/unclosed.md": "---\ntitle: Never closed\n# Body\n",
    "api/empty.md": b"",
    "api/blank.md": b"  \n\t\n",
    "api/binary.md": b"\x00\x01\x02PK\x03\x04" + bytes(range(200)),
    "api/latin1.md": "# Café crème\n".encode("latin-1"),
    "api/huge.md": "# Huge\n" + "x" * 4000,
    "api/covers-mapping.md": "---\ncovers: {a: 1}\n---\n# Body\ntext\n",
    "api/placeholder.md": "# Kafka rebalancing\n\n## Steps\n",
    "api/notes.pdf": b"%PDF-1.4 not a PDF after all",
    "api/notes.odt": b"PK\x03\x04 not markdown",  # not a knowledge file: silently ignored
}
BAD_REASONS = {
    "payment/broken-yaml.md": "malformed frontmatter:",
    "payment/list-frontmatter.md": "malformed frontmatter: expected a mapping of keys",
    "payment/unclosed.md": "malformed frontmatter: no closing '---' line",
    "api/empty.md": "empty file",
    "api/blank.md": "empty file",
    "api/binary.md": "binary file (contains NUL bytes)",
    "api/latin1.md": "not UTF-8 text",
    "api/huge.md": "too large: 4007 bytes exceeds the 3000-byte limit",
    "api/covers-mapping.md": "frontmatter field 'covers' must be a list of texts",
    "api/placeholder.md": "nothing but headings",
    "api/notes.pdf": "corrupt PDF: PDFium cannot read it",
}


def test_bad_files_are_skipped_with_reasons_and_the_rest_goes_on(
    small_kb: Path, tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    good = md_files(small_kb)
    kb_writer(small_kb, BAD_FILES)
    missing = tmp_path / "no-such-folder"
    wrong_type = small_kb / "api" / "notes.odt"
    kb = open_kb(ingest={"max_file_bytes": 3000})
    report = Ingestor(kb).ingest([small_kb, missing, wrong_type])

    assert sorted(report.added) == good
    skipped = dict(report.skipped)
    assert set(skipped) == {*BAD_REASONS, str(missing), str(wrong_type)}
    for path, reason in BAD_REASONS.items():
        assert skipped[path].startswith(reason), (path, skipped[path])
    assert skipped[str(missing)] == "no such file or directory"
    assert skipped[str(wrong_type)].startswith("unsupported file type")
    assert report.summary().endswith(f"{len(BAD_REASONS) + 2} skipped")

    # nothing half-written: no row and no chunk for any skipped file
    assert sorted(doc.path for doc in kb.documents.all()) == good
    assert kb.store.index_state(list(BAD_REASONS)) == {}
    assert set(chunk_counts(kb)) == set(good)
    assert_consistent(kb)

    again = Ingestor(kb).ingest([small_kb])
    assert sorted(again.unchanged) == good
    assert set(dict(again.skipped)) == set(BAD_REASONS)


KEPT = (
    "; its earlier version stays searchable until the file is fixed "
    "(or deleted, then `superbiz ingest --prune`)"
)


@pytest.mark.parametrize(
    ("content", "reason"),
    [("---\ntitle: [oops\n---\nbody\n", "malformed frontmatter: "), ("", "empty file")],
)
def test_a_file_that_turns_bad_keeps_its_last_good_version_and_says_so(
    small_kb: Path, open_kb: OpenKB, content: str, reason: str
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    before = kb.documents.get("api/rate-limit.md")
    (small_kb / "api" / "rate-limit.md").write_text(content)
    report = Ingestor(kb).ingest([small_kb], prune=True)
    [(path, said)] = report.skipped
    assert path == "api/rate-limit.md"
    assert said.startswith(reason) and said.endswith(KEPT)
    assert report.removed == [] and report.updated == []
    assert kb.documents.get("api/rate-limit.md") == before
    assert kb.exact_index.match("API rate limiting")  # still found, as the line says
    assert_consistent(kb)
    # a file never ingested gets no such note
    (small_kb / "api" / "new.md").write_text(content)
    skipped = dict(Ingestor(kb).ingest([small_kb]).skipped)
    assert not skipped["api/new.md"].endswith(KEPT)


def test_frontmatter_dates_do_not_abort_the_run(
    small_kb: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    kb_writer(small_kb, {"ops/dated.md": "---\ntitle: Dated\nupdated: 2024-05-01\n---\n# D\nx\n"})
    kb = open_kb()
    report = Ingestor(kb).ingest([small_kb])
    assert sorted(report.added + [p for p, _ in report.skipped]) == md_files(small_kb)
    assert_consistent(kb)


def test_unknown_frontmatter_keys_are_warned_and_a_rule_with_text_stays_searchable(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    rule = "Warning: never restart the primary database during business hours"
    root = kb_writer(
        tmp_path / "kb",
        {
            "ops/rule.md": f"---\n{rule}\n---\n# Ops rule\nRestart the replicas one by one.\n",
            "ops/refunds.md": "---\ntitle: Refunds\ndomain: payment\n---\n# Refunds\nx\n",
            "ops/plain.md": "---\ntitle: Plain\ncategory: ops\n---\n# Plain\nPlain text.\n",
        },
    )
    kb = open_kb()
    report = Ingestor(kb).ingest([root])
    assert sorted(report.added) == ["ops/plain.md", "ops/refunds.md", "ops/rule.md"]
    warnings = dict(report.metadata_warnings)
    assert sorted(warnings) == ["ops/refunds.md", "ops/rule.md"]
    assert warnings["ops/rule.md"].startswith("the opening '---' block has no frontmatter key")
    assert "'domain'" in warnings["ops/refunds.md"] and "category" in warnings["ops/refunds.md"]
    assert report.as_dict()["metadata_warnings"] == [
        {"path": path, "reason": reason} for path, reason in report.metadata_warnings
    ]
    row = kb.documents.get("ops/rule.md")
    assert row is not None and row.metadata["extra"] == {}
    assert any(rule in chunk.text for chunk in kb.store.chunks_of("ops/rule.md"))
    _, hits = kb.searcher.search(rule)
    assert hits[0].doc_path == "ops/rule.md"
    # said again on every run until the file is fixed
    again = Ingestor(kb).ingest([root])
    assert not again.changed and sorted(dict(again.metadata_warnings)) == sorted(warnings)


# -- crash repair ---------------------------------------------------------------------------------


def test_missing_chunks_are_repaired(small_kb: Path, open_kb: OpenKB) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    expected = chunk_counts(kb)
    kb.store.delete_documents(["api/rate-limit.md"])  # a crash lost this document's chunks
    assert kb.store.index_state(["api/rate-limit.md"]) == {}

    report = Ingestor(kb).ingest([small_kb])
    assert report.repaired == ["api/rate-limit.md"]
    assert "1 repaired" in report.summary()
    assert report.added == [] and report.updated == []
    assert len(report.unchanged) == len(expected) - 1
    assert chunk_counts(kb) == expected
    assert_consistent(kb)


def test_row_with_a_stale_hash_is_reindexed(small_kb: Path, open_kb: OpenKB) -> None:
    """A crash after the new chunks were written but before the row was updated."""
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    row = kb.documents.get("glossary.md")
    assert row is not None
    kb.documents.save(dataclasses.replace(row, content_hash="0" * 64))
    report = Ingestor(kb).ingest([small_kb])
    assert "glossary.md" in report.updated + report.repaired
    assert kb.documents.get("glossary.md") == row
    assert_consistent(kb)


def test_row_without_chunks_and_orphan_chunks_are_repaired(
    small_kb: Path,
    tmp_path: Path,
    open_kb: OpenKB,
    use_embedder: Embedder,
    kb_writer: Callable[..., Path],
) -> None:
    other = kb_writer(tmp_path / "other", {"handbook/onboarding.md": "# Onboarding\nWelcome.\n"})
    kb = open_kb()
    Ingestor(kb).ingest([small_kb, other])

    # 1. a row whose file is gone and whose chunks never made it to Milvus
    kb.documents.save(
        StoredDocument(
            path="ghost/missing.md",
            title="Ghost",
            domain="ghost",
            content_hash="f" * 64,
            size_bytes=10,
            chunk_count=2,
            source_file=str(tmp_path / "gone" / "ghost" / "missing.md"),
            metadata={},
        )
    )
    # 2. a row whose chunks were lost, for a file outside the paths ingested next time
    kb.store.delete_documents(["handbook/onboarding.md"])
    # 3. chunks in Milvus with no row at all
    vector = use_embedder.embed(["orphan text"])[0]
    kb.store.replace_document(
        "orphan/lost.md",
        [
            chunk_record(
                "orphan/lost.md",
                vector,
                "orphan text",
                domain="orphan",
                title="Lost",
                content_hash="e" * 64,
                search_text="Lost\nLost\norphan text",
                chunk_id=chunk_id("orphan/lost.md", 0, "e" * 64),
            )
        ],
    )
    assert chunk_counts(kb)["orphan/lost.md"] == 1

    report = Ingestor(kb).ingest([small_kb])
    assert report.removed == ["ghost/missing.md"]
    assert report.repaired == ["handbook/onboarding.md"]
    assert kb.documents.get("ghost/missing.md") is None
    assert "orphan/lost.md" not in chunk_counts(kb)
    assert "ghost" not in kb.domains()
    assert kb.store.index_state(["handbook/onboarding.md"])["handbook/onboarding.md"][0] == 1
    assert_consistent(kb)

    again = Ingestor(kb).ingest([small_kb])
    assert not again.changed


# -- parallel embedding ---------------------------------------------------------------------------


class _HashEmbedder(Embedder):
    """A vector from each text's hash (so a row shows which text it came from); counts how
    many calls run at once."""

    name = "hash-test"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self.most_at_once = 0
        self.calls = 0

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self._running += 1
            self.calls += 1
            self.most_at_once = max(self.most_at_once, self._running)
        try:
            return np.stack([self.row(text) for text in texts])
        finally:
            with self._lock:
                self._running -= 1

    @staticmethod
    def row(text: str) -> np.ndarray:
        digest = hashlib.sha256(text.encode()).digest()
        row = np.frombuffer(digest, dtype=np.uint8)[:16].astype(np.float32) + 1.0
        unit: np.ndarray = row / np.linalg.norm(row)
        return unit


def test_batches_embedded_in_parallel_keep_each_chunk_with_its_vector(
    tmp_path: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several batches are embedded at once; every stored vector is its own chunk's."""
    monkeypatch.setattr(batches, "EMBED_BATCH", 2)
    root = tmp_path / "kb"
    root.mkdir()
    (root / "long.md").write_text(_long_doc("parallel", 20), encoding="utf-8")
    embedder = _HashEmbedder()
    kb = open_kb(embedder=embedder)
    Ingestor(kb).ingest([root])

    chunks = kb.store.chunks_of("long.md")
    # more batches of 2 than the workers embed at once
    assert len(chunks) > 2 * (batches.EMBED_WORKERS + 1)
    # the probe, one call per batch, then the map's entry and its title
    assert embedder.calls == 1 + (len(chunks) + 1) // 2 + 2
    assert embedder.most_at_once <= batches.EMBED_WORKERS
    for chunk in chunks:
        expected = _HashEmbedder.row(embedding_text("Long runbook", chunk.heading, chunk.text))
        assert chunk.vector is not None
        np.testing.assert_allclose(chunk.vector, expected, atol=1e-6)
    assert_consistent(kb)


@pytest.mark.parametrize("processes", [2, 0])
def test_a_large_ingest_on_milvus_lite_embeds_in_worker_processes(
    small_kb: Path,
    open_kb: OpenKB,
    use_embedder: Embedder,
    monkeypatch: pytest.MonkeyPatch,
    processes: int,
) -> None:
    """Past ``THREADED_GROUPS`` full groups a run embeds in ``ingest.embedding-processes``
    worker processes, its chunks and then its map entries beside the statistics (in
    threads those waited for the statistics: 36 → 25 s after 9,540 new documents' last
    chunk), stopped before the run returns; every stored vector is its own chunk's as
    this process embeds it."""
    monkeypatch.setattr(ingest_module, "INDEX_CHUNKS", 1)  # a group per document
    monkeypatch.setattr(ingest_module, "THREADED_GROUPS", 1)
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(popen(args, **kwargs))
        return started[-1]

    running_at_statistics: list[int] = []
    measure = ingest_module.refresh_statistics

    def statistics(kb: KnowledgeBase, **kwargs: Any) -> Any:
        running_at_statistics.append(sum(process.poll() is None for process in started))
        return measure(kb, **kwargs)

    monkeypatch.setattr(_process.subprocess, "Popen", start)
    monkeypatch.setattr(ingest_module, "refresh_statistics", statistics)
    kb = open_kb(ingest={"embedding_processes": processes})
    report = Ingestor(kb).ingest([small_kb])

    assert len(started) == processes
    assert running_at_statistics == [processes]
    assert all(process.poll() is not None for process in started)
    # the map's entries, embedded by the workers, are kept as this process embeds them
    entries = [MapDocument.of(doc).entry for doc in kb.documents.all()]
    reader = CountingEmbedder(use_embedder)
    kept, _ = KeptMapVectors(kb.documents, reader).vectors(entries)  # type: ignore[arg-type]
    assert reader.texts == 0
    expected = use_embedder.embed([entry for _, entry, _ in entries])
    np.testing.assert_allclose(kept, expected, atol=1e-6)
    chunks = [chunk for doc in report.added for chunk in kb.store.chunks_of(doc)]
    assert len(chunks) > 2
    headline = {p: load_document(small_kb / p, small_kb, 1 << 20).headline for p in report.added}
    assert any("\n" in each for each in headline.values())  # a description heads its chunks
    texts = [embedding_text(headline[c.doc_path], c.heading, c.text) for c in chunks]
    np.testing.assert_allclose(
        np.stack([c.vector for c in chunks]), use_embedder.embed(texts), atol=1e-6
    )
    assert_consistent(kb)


def test_the_first_full_group_already_embeds_in_worker_processes(
    tmp_path: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker starts in about 0.5 s of a core from the kept model files, less than one
    full group loses to the GIL in threads: a run's workers start with its first."""
    monkeypatch.setattr(ingest_module, "INDEX_CHUNKS", 1)  # a group per document
    started: list[list[str]] = []
    popen = subprocess.Popen

    def start(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(args)
        return popen(args, **kwargs)

    monkeypatch.setattr(_process.subprocess, "Popen", start)
    folder = tmp_path / "kb" / "ops"
    folder.mkdir(parents=True)
    (folder / "restart.md").write_text("# Restart\n\nRestart the payment service.\n")
    (folder / "rollback.md").write_text("# Rollback\n\nRoll the last deploy back.\n")
    report = Ingestor(open_kb(ingest={"embedding_processes": 2})).ingest([tmp_path / "kb"])
    assert len(report.added) == 2
    assert [args[-1] for args in started] == ["superbiz.retrieval.embedding_processes"] * 2


@pytest.mark.parametrize("run", ["small", "on a Milvus server"])
def test_a_small_ingest_or_one_on_a_milvus_server_starts_no_worker_process(
    small_kb: Path,
    open_kb: OpenKB,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    run: str,
) -> None:
    """A small run embeds in this process's threads (a worker's start, an interpreter and
    the model, costs more than it saves), and so does any run beside a Milvus server:
    without Lite's Python in the process, the threads do not wait for the GIL."""
    overrides: dict[str, Any] = {}
    if run != "small":
        monkeypatch.setattr(ingest_module, "INDEX_CHUNKS", 1)
        monkeypatch.setattr(ingest_module, "THREADED_GROUPS", 0)
        server = request.getfixturevalue("milvus_server")
        collection = request.getfixturevalue("milvus_collection")
        overrides["vector"] = VectorSettings(uri=server.uri, collection=collection)

    def refuse(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        raise AssertionError("no worker process here")

    monkeypatch.setattr(_process.subprocess, "Popen", refuse)
    kb = open_kb(**overrides)
    report = Ingestor(kb).ingest([small_kb])
    assert report.added and not report.skipped
    assert_consistent(kb)


# -- embedder and dimension mismatch ------------------------------------------------------------


class NarrowUSE(Embedder):
    """The USE model cut to 64 dimensions, under USE's own name: only the dimension differs."""

    name = "use-multilingual-v3"

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed(texts)[:, :64]


def test_dimension_mismatch_then_rebuild(
    small_kb: Path, open_kb: OpenKB, use_embedder: Embedder
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    close(kb)

    narrow = open_kb(embedder=NarrowUSE(use_embedder))
    assert narrow.store.dimension == 512
    with pytest.raises(IndexMismatchError) as info:
        Ingestor(narrow).ingest([small_kb])
    message = str(info.value)
    assert "512-d" in message and "64-d" in message
    assert "re-ingest" in message and "--rebuild" in message
    with pytest.raises(IndexMismatchError, match="--rebuild"):
        GovernedLookup(narrow, InMemorySessionTracker()).lookup("s", "支付失败排查")

    report = Ingestor(narrow).ingest([small_kb], rebuild=True)
    assert sorted(report.added) == md_files(small_kb)
    assert narrow.store.dimension == 64
    assert_consistent(narrow)
    outcome = GovernedLookup(narrow, InMemorySessionTracker()).lookup("s", "支付失败排查")
    assert outcome.result.primary is not None
    assert outcome.result.primary.path == "payment/支付失败排查.md"


@pytest.fixture
def fake_embedder() -> Iterator[OpenAIEmbedder]:
    with FakeOpenAIServer() as server:
        yield OpenAIEmbedder(
            EmbeddingConfig(
                provider="openai", base_url=server.base_url, model="fake-embed", dimensions=64
            )
        )


def test_other_embedder_is_a_clear_error(
    small_kb: Path, open_kb: OpenKB, fake_embedder: OpenAIEmbedder
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    close(kb)

    other = open_kb(embedder=fake_embedder)
    with pytest.raises(IndexMismatchError) as info:
        Ingestor(other).ingest([small_kb])
    assert "512-d" in str(info.value) and "64-d" in str(info.value)
    assert "--rebuild" in str(info.value)
    with pytest.raises(IndexMismatchError) as info:
        GovernedLookup(other, InMemorySessionTracker()).lookup("s", "payment")
    assert "'use-multilingual-v3'" in str(info.value) and "'fake-embed'" in str(info.value)
    assert "--rebuild" in str(info.value)


def test_rebuild_with_another_embedder(
    small_kb: Path, open_kb: OpenKB, fake_embedder: OpenAIEmbedder
) -> None:
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    close(kb)

    other = open_kb(embedder=fake_embedder)
    report = Ingestor(other).ingest([small_kb], rebuild=True)
    assert sorted(report.added) == md_files(small_kb)
    assert other.store.dimension == 64
    assert_consistent(other)
    outcome = GovernedLookup(other, InMemorySessionTracker()).lookup("s", "API rate limiting")
    assert outcome.result.found


def test_a_rebuild_indexes_again_what_was_stored_from_other_folders(
    tmp_path: Path, open_kb: OpenKB, kb_writer: Callable[..., Path]
) -> None:
    """``--rebuild`` with one folder kept the other folder's (and uploads') documents out
    of the new index without a word; their files are still there, so they are indexed."""
    first = kb_writer(tmp_path / "first", {"ops/a.md": "# A\nalpha runbook\n"})
    second = kb_writer(tmp_path / "second", {"api/b.md": "# B\nbeta runbook\n"})
    kb = open_kb()
    Ingestor(kb).ingest([first])
    Ingestor(kb).ingest([second])
    (second / "api" / "gone.md").write_text("# Gone\nx\n", encoding="utf-8")
    Ingestor(kb).ingest([second])
    (second / "api" / "gone.md").unlink()  # its file is gone: not indexed again

    report = Ingestor(kb).ingest([first], rebuild=True)
    assert sorted(report.added) == ["api/b.md", "ops/a.md"]
    assert sorted(doc.path for doc in kb.documents.all()) == ["api/b.md", "ops/a.md"]
    assert_consistent(kb)
    assert not Ingestor(kb).ingest([first, second]).changed


def test_a_broken_document_whose_file_turned_bad_is_kept_until_the_file_is_fixed(
    small_kb: Path, open_kb: OpenKB
) -> None:
    """Its skip line says the earlier version is kept: the repair of its broken index
    must not delete it meanwhile."""
    kb = open_kb()
    Ingestor(kb).ingest([small_kb])
    kb.store.delete_documents(["api/rate-limit.md"])  # a crash lost its chunks
    file = small_kb / "api" / "rate-limit.md"
    good = file.read_text(encoding="utf-8")
    file.write_text("", encoding="utf-8")

    report = Ingestor(kb).ingest([small_kb])
    assert dict(report.skipped)["api/rate-limit.md"].startswith("empty file; its earlier version")
    assert report.removed == [] and kb.documents.get("api/rate-limit.md") is not None

    file.write_text(good, encoding="utf-8")
    assert Ingestor(kb).ingest([small_kb]).repaired == ["api/rate-limit.md"]
    assert_consistent(kb)


class _ReadAheadEmbedder(_HashEmbedder):
    """Holds the run's first batch until the run reads another file (5 s at most): an
    ingest that reads its next files while the current ones are embedded lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = False  # files are being read: the next call is the run's first batch
        self.embedding = threading.Event()
        self.read_meanwhile = threading.Event()
        self.waited_out = False

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        if self.reading and not self.embedding.is_set():
            self.embedding.set()
            self.waited_out = not self.read_meanwhile.wait(timeout=5)
        return super()._embed_raw(texts)


def test_the_next_files_are_read_while_the_current_ones_are_embedded(
    tmp_path: Path, open_kb: OpenKB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading and converting files overlaps embedding: a file is read while the first
    group's first batch is being embedded, and every chunk still gets its own vector."""
    monkeypatch.setattr(batches, "EMBED_BATCH", 2)
    monkeypatch.setattr(ingest_module, "INDEX_CHUNKS", 4)
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(12):
        (root / f"doc{i:02d}.md").write_text(_long_doc(f"doc {i}", 3), encoding="utf-8")
    embedder = _ReadAheadEmbedder()
    kb = open_kb(embedder=embedder)

    class Watching(Ingestor):
        def load(self, file: Path, root: Path, sites: SiteTitles | None = None) -> SourceDocument:
            embedder.reading = True
            if embedder.embedding.is_set():
                embedder.read_meanwhile.set()
            return super().load(file, root, sites)

    report = Watching(kb).ingest([root])
    assert len(report.added) == 12
    assert embedder.embedding.is_set() and not embedder.waited_out
    for doc in report.added:
        for chunk in kb.store.chunks_of(doc):
            assert chunk.vector is not None
            expected = _HashEmbedder.row(embedding_text(chunk.title, chunk.heading, chunk.text))
            np.testing.assert_allclose(chunk.vector, expected, atol=1e-6)
    assert_consistent(kb)


def test_a_docusaurus_mdx_page_is_ingested_without_its_imports(
    tmp_path: Path, open_kb: OpenKB
) -> None:
    """Docusaurus sites keep their pages as ``.mdx``: a folder's were skipped as an
    unsupported file type, and a ``.md`` page that shows tabs opened with its imports."""
    root = tmp_path / "docs"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "deploy.mdx").write_text(
        "---\ntitle: Deploy\n---\nimport Tabs from '@theme/Tabs';\n"
        "import TabItem from '@theme/TabItem';\n\n{/* TODO: Windows */}\n"
        'Drain the node, then roll the deployment.\n\n<Tabs>\n<TabItem value="k8s">\n\n'
        "```bash\nkubectl rollout restart deploy/api\n```\n\n</TabItem>\n</Tabs>\n",
        encoding="utf-8",
    )
    kb = open_kb()
    report = Ingestor(kb).ingest([root])

    assert report.added == ["ops/deploy.mdx"] and report.skipped == []
    [chunk] = kb.passages(["ops/deploy.mdx"])["ops/deploy.mdx"]
    assert chunk.text.startswith("Drain the node, then roll the deployment.")
    assert "import" not in chunk.text and "TODO" not in chunk.text
    assert "kubectl rollout restart deploy/api" in chunk.text
