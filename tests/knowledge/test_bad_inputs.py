"""The bad-input corpus: every file that cannot be ingested is a skipped file with its
reason, the run goes on and every good file in the same run is stored, on SQLite and
PostgreSQL (real USE embedder, Milvus Lite). The corpus is written by the tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import DataError

from conftest import refuse_titles, write_kb
from superbiz.config import Settings, VectorSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder
from superbiz.retrieval.milvus_filters import Filter, literal

# An alias bomb: 323 bytes of frontmatter that would expand to 9^9 list items.
ALIAS_BOMB = (
    "---\n"
    + "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
        for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\n# Bomb\nbody\n"
)
GOOD: dict[str, str | bytes] = {
    "api/rate-limit.md": "# API rate limiting\nClients over quota receive HTTP 429.\n",
    "api/new\nline.md": "# Newline name\nA file whose name holds a newline.\n",
    "api/quo\"te's \\ name.md": "# Quoted name\nQuotes and a backslash in the name.\n",
    "payment/支付 ünïcode 名.md": "# 支付失败排查\n支付回调超时时，先检查网关日志。\n",
    "payment/utf16.md": "# 退款失败\n退款失败通常是因为原交易已经关闭。\n".encode("utf-16"),
    "payment/bom.md": "\ufeff# 对账\n每日对账在凌晨两点运行。\n".encode(),
    "ops/long-title.md": f"---\ntitle: {'T' * 600}\n---\n# Long title\nbody\n",
}
BAD: dict[str, str | bytes] = {
    "ops/alias-bomb.md": ALIAS_BOMB,
    "ops/self-alias.md": "---\na: &a [1, *a]\n---\n# A\nbody\n",
    "ops/nul-title.md": '---\ntitle: "refund\\0guide"\n---\n# Refund\nbody\n',
    "ops/control-tag.md": '---\ntags: ["ok", "bell\\a"]\n---\n# Tags\nbody\n',
    "ops/nul-body.md": b"# Late NUL\n" + b"x" * 9000 + b"\x00 tail\n",
    "ops/empty.md": b"",
    "ops/binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)),
    "ops/utf16-no-bom.md": "# Title\nsome text here\n".encode("utf-16-le"),
    "ops/gbk.md": "# 支付失败\n正文内容\n".encode("gbk"),
    "ops/huge.md": "# Huge\n" + "x" * 13000,
    "ops/malformed.md": "---\ntitle: [unclosed\n---\n# Body\ntext\n",
    "ops/long-category.md": f"---\ncategory: {'c' * 200}\n---\n# Category\nbody\n",
    # values YAML reads as dates or numbers and cannot build, or JSON cannot hold
    "ops/bad-date.md": "---\ntitle: Reviewed\nreviewed: 2024-02-30\n---\n# Reviewed\nbody\n",
    "ops/nested-date.md": "---\ntitle: N\ncovers: [{since: 2023-13-01}]\n---\n# N\nbody\n",
    "ops/huge-number.md": f"---\ntitle: Ticket\nticket: {'9' * 5000}\n---\n# T\nbody\n",
    "ops/nan.md": "---\ntitle: Score\nscore: .nan\n---\n# Score\nbody\n",
    "ops/inf.md": "---\ntitle: Limits\nlimits: {max: -.inf}\n---\n# Limits\nbody\n",
}
REASONS = {
    "ops/alias-bomb.md": "frontmatter refused: its YAML aliases expand it past 100000 characters",
    "ops/self-alias.md": "frontmatter refused: a YAML alias refers to itself",
    "ops/nul-title.md": "frontmatter field 'title' contains the control character U+0000",
    "ops/control-tag.md": "frontmatter field 'tags' contains the control character U+0007",
    "ops/nul-body.md": "contains NUL characters (U+0000)",
    "ops/empty.md": "empty file",
    "ops/binary.md": "binary file (contains NUL bytes)",
    "ops/utf16-no-bom.md": "binary file (contains NUL bytes); it looks like UTF-16LE without a "
    "byte-order mark: convert it with `iconv -f UTF-16LE -t UTF-8`",
    "ops/gbk.md": "not UTF-8 text (byte 4: invalid start byte); it looks like GB18030/GBK "
    "Chinese: convert it with `iconv -f GB18030 -t UTF-8",
    "ops/huge.md": "too large: 13007 bytes exceeds the 12000-byte limit",
    "ops/malformed.md": "malformed frontmatter:",
    "ops/long-category.md": "category longer than 128 characters",
    "ops/bad-date.md": "frontmatter field 'reviewed': 2024-02-30 is not a date (day is out of "
    "range for month); quote it to keep it as text",
    "ops/nested-date.md": "frontmatter field 'covers': 2023-13-01 is not a date (month must be "
    "in 1..12); quote it to keep it as text",
    "ops/huge-number.md": "frontmatter field 'ticket': a number of 5000 characters is too long "
    "to read; quote it to keep it as text",
    "ops/nan.md": "frontmatter field 'score' is nan, which no store keeps as a number; quote it",
    "ops/inf.md": "frontmatter field 'limits' is -inf, which no store keeps as a number; quote",
    "links/outside.md": "symlink to ",
    "links/outside-folder": "symlink to a folder outside the KB (",
    "links/loop.md": "symlink loop",
    "links/up": "symlink loop: a folder link to ",
    "links/broken.md": "broken symlink (its target ",
    "ops/latin1-\\xe9.md": "file name is not valid UTF-8: rename the file",
    "ops/fifo.md": "not a regular file",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Good and bad files side by side, with symlinks out of the KB and in loops."""
    root = tmp_path / "kb"
    write_kb(root, {**GOOD, **BAD})
    outside = tmp_path / "elsewhere"
    write_kb(outside, {"secret.md": "# Secret\nnot part of the KB\n", "dir/inner.md": "# In\nx\n"})
    links = root / "links"
    links.mkdir()
    (links / "outside.md").symlink_to(outside / "secret.md")
    (links / "outside-folder").symlink_to(outside / "dir", target_is_directory=True)
    (links / "loop.md").symlink_to(links / "loop.md")
    (links / "up").symlink_to(root, target_is_directory=True)
    (links / "broken.md").symlink_to(links / "missing.md")
    (root / "ops" / os.fsdecode(b"latin1-\xe9.md")).write_text("# Name\nbody\n")
    os.mkfifo(root / "ops" / "fifo.md")  # reading it would block forever
    return root


@pytest.fixture
def kb(
    tmp_path: Path,
    database_url: str,
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
) -> Iterator[KnowledgeBase]:
    settings = make_settings(tmp_path, database_url, ingest={"max_file_bytes": 12000})
    knowledge = KnowledgeBase(settings, embedder=use_embedder)
    yield knowledge
    knowledge.close()


def test_every_bad_input_is_skipped_with_its_reason_and_good_files_are_stored(
    corpus: Path, kb: KnowledgeBase
) -> None:
    report = Ingestor(kb).ingest([corpus])

    skipped = dict(report.skipped)
    assert set(skipped) == set(REASONS), sorted(skipped)
    for path, reason in REASONS.items():
        assert skipped[path].startswith(reason), (path, skipped[path])
    assert str(corpus.parent / "elsewhere") in skipped["links/outside-folder"]
    assert sorted(report.added) == sorted(GOOD)
    assert report.summary() == f"{len(GOOD)} added, 0 updated, 0 unchanged, {len(REASONS)} skipped"

    rows = {doc.path: doc for doc in kb.documents.all()}
    assert sorted(rows) == sorted(GOOD)
    assert rows["payment/utf16.md"].title == "退款失败"
    assert rows["payment/bom.md"].title == "对账"
    assert rows["ops/long-title.md"].title == "T" * 511 + "…"  # the column holds 512
    assert rows["api/new\nline.md"].title == "Newline name"
    state = kb.store.index_state(list(rows))
    assert {path: count for path, (count, _) in state.items()} == {
        path: doc.chunk_count for path, doc in rows.items()
    }
    quoted = kb.store.chunks_of("api/quo\"te's \\ name.md")
    assert [chunk.title for chunk in quoted] == ["Quoted name"]
    _, hits = kb.searcher.search("Quotes and a backslash in the name", domain="api")
    assert hits[0].doc_path == "api/quo\"te's \\ name.md"

    again = Ingestor(kb).ingest([corpus])
    assert sorted(again.unchanged) == sorted(GOOD) and not again.changed
    assert set(dict(again.skipped)) == set(REASONS)

    for name in ("api/new\nline.md", "api/quo\"te's \\ name.md"):
        (corpus / name).unlink()
    pruned = Ingestor(kb).ingest([corpus], prune=True)
    assert sorted(pruned.removed) == ["api/new\nline.md", "api/quo\"te's \\ name.md"]
    assert kb.store.index_state(["api/new\nline.md", "api/quo\"te's \\ name.md"]) == {}
    assert kb.store.chunks_of("api/new\nline.md") == []


def test_gb18030_is_accepted_when_the_setting_lists_it(
    tmp_path: Path, database_url: str, make_settings: Callable[..., Any], use_embedder: Embedder
) -> None:
    root = tmp_path / "kb"
    write_kb(root, {"payment/gbk.md": "# 支付失败\n正文内容\n".encode("gbk")})
    settings = make_settings(tmp_path, database_url, ingest={"encodings": ["utf-8", "gb18030"]})
    knowledge = KnowledgeBase(settings, embedder=use_embedder)
    try:
        report = Ingestor(knowledge).ingest([root])
        assert report.added == ["payment/gbk.md"] and report.skipped == []
        doc = knowledge.documents.get("payment/gbk.md")
        assert doc is not None and doc.title == "支付失败"
        assert "正文内容" in knowledge.store.chunks_of("payment/gbk.md")[0].text
    finally:
        knowledge.close()


def test_a_folder_link_inside_the_kb_is_reported_not_followed(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    root = tmp_path / "kb"
    write_kb(root, {"api/rate-limit.md": GOOD["api/rate-limit.md"]})
    (root / "mirror").symlink_to(root / "api", target_is_directory=True)
    report = Ingestor(kb).ingest([root])
    assert report.added == ["api/rate-limit.md"]
    assert report.skipped == [
        (
            "mirror",
            "symlink to a folder inside the KB: not followed (its files are ingested from api)",
        )
    ]


# -- unreadable folders -------------------------------------------------------------------------

LOCKED_REASON = (
    "cannot read this folder: Permission denied; "
    "its stored documents are kept as they are (not pruned)"
)


def _lock(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """What ``chmod 000 folder`` does to a user who is not root (the tests run as root,
    whom it does not stop): listing the folder, and reaching anything in it, fail."""
    scandir, stat = os.scandir, os.stat

    def refuse(path: Any) -> None:
        if Path(os.fsdecode(path)).is_relative_to(folder):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))

    def locked_scandir(path: Any = ".") -> Any:
        refuse(path)
        return scandir(path)

    def locked_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if path != folder and not isinstance(path, int):
            refuse(path)  # the folder itself can be stat'ed, not what is in it
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", locked_scandir)
    monkeypatch.setattr(os, "stat", locked_stat)


def test_an_unreadable_folder_is_skipped_with_its_reason_and_never_pruned(
    tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kb"
    write_kb(root, {"ok.md": "# Readable\ncormorants\n", "locked/x.md": "# L\nlocked\n"})
    assert sorted(Ingestor(kb).ingest([root]).added) == ["locked/x.md", "ok.md"]

    _lock(monkeypatch, (root / "locked").resolve())
    for prune in (False, True):
        report = Ingestor(kb).ingest([root], prune=prune)
        assert report.skipped == [("locked", LOCKED_REASON)]
        assert report.unchanged == ["ok.md"] and report.removed == []
    assert kb.documents.get("locked/x.md") is not None
    assert kb.store.index_state(["locked/x.md"]).keys() == {"locked/x.md"}

    monkeypatch.undo()  # readable again, then deleted: pruned as usual
    (root / "locked" / "x.md").unlink()
    assert Ingestor(kb).ingest([root], prune=True).removed == ["locked/x.md"]


@pytest.mark.skipif(os.geteuid() == 0, reason="chmod 000 does not stop root: see the test above")
def test_a_chmod_000_folder_is_skipped_and_never_pruned(tmp_path: Path, kb: KnowledgeBase) -> None:
    root = tmp_path / "kb"
    write_kb(root, {"ok.md": "# Readable\ncormorants\n", "locked/x.md": "# L\nlocked\n"})
    Ingestor(kb).ingest([root])
    (root / "locked").chmod(0)
    try:
        report = Ingestor(kb).ingest([root], prune=True)
    finally:
        (root / "locked").chmod(0o755)
    assert report.skipped == [("locked", LOCKED_REASON)] and report.removed == []
    assert kb.documents.get("locked/x.md") is not None


# -- idempotency at any chunk count --------------------------------------------------------


@pytest.fixture(params=["lite", "server"])
def paged_kb(
    request: pytest.FixtureRequest, tmp_path: Path, kb: KnowledgeBase, use_embedder: Embedder
) -> Iterator[KnowledgeBase]:
    """``kb``, or one on a Milvus server, whose client reads query results in pages."""
    if request.param == "lite":
        yield kb
        return
    server = request.getfixturevalue("milvus_server")
    vector = VectorSettings(uri=server.uri, collection=request.getfixturevalue("milvus_collection"))
    knowledge = KnowledgeBase(
        Settings(data_dir=tmp_path / "server-data", database_url=None, vector=vector),
        embedder=use_embedder,
    )
    yield knowledge
    knowledge.close()


def test_reingest_is_unchanged_when_chunks_span_many_query_pages(
    tmp_path: Path, paged_kb: KnowledgeBase
) -> None:
    """Chunks are read back in one query in process on Milvus Lite, in pages through the
    client on a server: with a page of 3 rows, documents of 10+ chunks and 100+ chunks in
    all are still counted exactly, so nothing is 'repaired'."""
    kb = paged_kb
    root = tmp_path / "kb"
    sections = "\n\n".join(f"## Step {i}\n" + f"Check item {i} carefully. " * 12 for i in range(30))
    write_kb(root, {f"ops/runbook-{n}.md": f"# Runbook {n}\n\n{sections}\n" for n in range(10)})
    kb.store.batch_size = 3
    first = Ingestor(kb).ingest([root])
    assert len(first.added) == 10
    counts = [doc.chunk_count for doc in kb.documents.all()]
    assert min(counts) > 3 * 3 and sum(counts) > 100
    state = kb.store.index_state([doc.path for doc in kb.documents.all()])
    assert sorted(count for count, _ in state.values()) == sorted(counts)
    assert len(kb.store.chunks_of("ops/runbook-0.md")) == counts[0]
    two = ["ops/runbook-0.md", "ops/runbook-1.md"]
    paged = kb.store.chunks_of_documents(two)
    assert [len(paged[path]) for path in two] == counts[:2]

    again = Ingestor(kb).ingest([root])
    assert len(again.unchanged) == 10
    assert (again.repaired, again.updated, again.added) == ([], [], [])


# -- a row the database refuses -------------------------------------------------------------


def test_a_row_the_database_refuses_is_skipped_and_leaves_no_chunks(
    tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "kb"
    write_kb(root, {"api/a.md": "# A\nfirst\n", "api/b.md": "# B\nsecond\n"})
    save_all = kb.documents.save_all

    def refuse_b(docs: Any) -> None:
        if any(doc.path == "api/b.md" for doc in docs):
            raise DataError("INSERT", {}, Exception("invalid byte sequence\nDETAIL: more"))
        save_all(docs)

    # the batch's one transaction is refused, then each row is tried on its own
    monkeypatch.setattr(kb.documents, "save_all", refuse_b)
    monkeypatch.setattr(kb.documents, "save", lambda doc: refuse_b([doc]))
    report = Ingestor(kb).ingest([root])
    assert report.added == ["api/a.md"]
    assert report.skipped == [("api/b.md", "refused by the database: invalid byte sequence")]
    assert kb.store.index_state(["api/a.md", "api/b.md"]).keys() == {"api/a.md"}


def test_an_edit_postgresql_refuses_keeps_the_earlier_version(
    tmp_path: Path,
    database_factory: Callable[[str], str],
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
) -> None:
    """A real refusal (a trigger raising a data exception): the edited document keeps its
    earlier row and chunks, still found, until the file is fixed."""
    url = database_factory("postgresql")
    knowledge = KnowledgeBase(make_settings(tmp_path, url), embedder=use_embedder)
    try:
        root = tmp_path / "kb"
        write_kb(root, {"api/a.md": "# Alpha\nzebracrossing rules\n", "api/b.md": "# B\nb\n"})
        Ingestor(knowledge).ingest([root])
        before = knowledge.documents.get("api/a.md")
        assert before is not None
        refuse_titles(url, "REFUSED")

        write_kb(root, {"api/a.md": "# REFUSED Alpha\nquokkahabitat rules\n"})
        report = Ingestor(knowledge).ingest([root])
        assert report.updated == [] and [path for path, _ in report.skipped] == ["api/a.md"]
        assert knowledge.documents.get("api/a.md") == before
        state = knowledge.store.index_state(["api/a.md"])
        assert state == {"api/a.md": (before.chunk_count, frozenset([before.content_hash]))}
        found = {hit.doc_path for hit in knowledge.store.search_bm25("zebracrossing", 10)}
        assert found == {"api/a.md"}
        assert knowledge.store.search_bm25("quokkahabitat", 10) == []
        reason = report.skipped[0][1]
        assert reason.startswith("refused by the database: value refused for column title")
        assert "its earlier version stays searchable" in reason

        write_kb(root, {"api/a.md": "# Alpha two\nquokkahabitat rules\n"})
        assert Ingestor(knowledge).ingest([root]).updated == ["api/a.md"]
        found = {hit.doc_path for hit in knowledge.store.search_bm25("quokkahabitat", 10)}
        assert found == {"api/a.md"}
    finally:
        knowledge.close()


# -- Milvus filters ---------------------------------------------------------------------------


def test_filter_literals_escape_everything_the_lexer_reads() -> None:
    assert literal("a\"b\\c\nd\re\tf'g") == '"a\\"b\\\\c\\nd\\re\\tf\'g"'
    template = "doc_path in {paths} and domain == {domain}"
    query = Filter(template, {"paths": ["x", 'y"'], "domain": "d"})
    assert query.rendered() == 'doc_path in ["x", "y\\""] and domain == "d"'
    assert query.template == template  # what a server gets, with the values as parameters
