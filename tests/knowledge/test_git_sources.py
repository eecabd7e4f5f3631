"""Git repositories as sources, against real repositories made in the test (``git init``,
commits, a bare remote over ``file://``), with real SQLite/PostgreSQL, Milvus Lite and
the real USE embedder: first sync, incremental sync (added, changed, renamed, deleted),
and each bad input of the Git table in docs/reference/errors.md."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fakes.git_remote import Remote, git
from superbiz.exceptions import SourceError
from superbiz.governance.tracker import SqlSessionTracker
from superbiz.knowledge.formats import READER_VERSIONS
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle, safe_domain
from superbiz.knowledge.sources.links import web_link
from superbiz.retrieval.embedders import Embedder
from superbiz.storage.sources import SourceRepository


def doc(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n"


RUNBOOKS = {
    "docs/payment/refund.md": doc("Refund a payment", "Open the order, press refund, confirm."),
    "docs/payment/chargeback.md": doc("Chargebacks", "Answer the bank within seven days."),
    "docs/login.md": doc("Login problems", "Reset the password from the admin page."),
    "src/main.py": "print('not a runbook')\n",
    "README.md": doc("Readme", "The repository's readme, outside docs."),
}


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    repo = Remote(tmp_path / "origin")
    repo.write(RUNBOOKS)
    repo.commit("first")
    return repo


Open = Callable[..., tuple[KnowledgeBase, DocumentLifecycle]]


@pytest.fixture
def open_lifecycle(
    tmp_path: Path, make_settings: Callable[..., Any], use_embedder: Embedder
) -> Iterator[Open]:
    opened: list[KnowledgeBase] = []

    def make(database_url: str | None = None, **overrides: Any) -> tuple[KnowledgeBase, Any]:
        settings = make_settings(tmp_path, database_url, **overrides)
        kb = KnowledgeBase(settings, embedder=use_embedder)
        opened.append(kb)
        return kb, DocumentLifecycle(kb)

    yield make
    for kb in opened:
        kb.close()


def paths(kb: KnowledgeBase) -> list[str]:
    return [d.path for d in kb.documents.all()]


def indexed(kb: KnowledgeBase) -> dict[str, int]:
    """doc_path → chunks in the vector store (every chunk, orphans included)."""
    rows = kb.store._client.query(  # type: ignore[attr-defined]
        kb.store.collection,  # type: ignore[attr-defined]
        filter='doc_path != ""',
        output_fields=["doc_path"],
        limit=16384,
    )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["doc_path"]] = counts.get(row["doc_path"], 0) + 1
    return counts


# -- first sync and incremental sync ------------------------------------------------------


def test_a_repository_is_cloned_ingested_and_then_synced_by_what_changed(
    remote: Remote, open_lifecycle: Open, database_url: str
) -> None:
    kb, lifecycle = open_lifecycle(database_url)
    first = lifecycle.add_git(remote.url, subdir="docs")
    assert first.mode == "full"
    assert sorted(first.report.added) == ["login.md", "payment/chargeback.md", "payment/refund.md"]
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]
    source = SourceRepository(kb.engine).get(first.source.name)
    assert source is not None and source.commit == git(remote.work, "rev-parse", "HEAD")
    assert source.counts["documents"] == 3 and source.error is None

    # a session retrieved the document about to be renamed: the record follows it
    tracker = SqlSessionTracker(kb.engine)
    tracker.mark_many("s1", [("general", "login.md")])
    kept = kb.documents.get("login.md")
    created = (
        kb.engine.connect()
        .exec_driver_sql("SELECT id, created_at FROM documents WHERE path = 'login.md'")
        .one()
    )

    git(remote.work, "mv", "docs/login.md", "docs/sign-in.md")
    (remote.work / "docs/payment/chargeback.md").unlink()
    remote.write(
        {
            "docs/payment/refund.md": doc("Refund a payment", "Refunds need a second approval."),
            "docs/payment/disputes.md": doc("Disputes", "Disputes go to the risk team."),
            "src/main.py": "print('changed, but outside docs')\n",
            "docs/payment/build.sh": "echo not a document\n",
            "docs/.drafts/secret.md": doc("Draft", "hidden, as in a folder's walk"),
        }
    )
    new_commit = remote.commit("second")

    second = lifecycle.sync(first.source.name)
    assert second.mode == "incremental"
    assert second.report.added == ["payment/disputes.md"]
    assert second.report.updated == ["payment/refund.md"]
    assert second.report.removed == ["payment/chargeback.md"]
    assert second.renamed == [("login.md", "sign-in.md")]
    assert second.report.unchanged == [] and second.report.repaired == []
    assert second.report.skipped == []  # neither the script nor the hidden draft
    assert paths(kb) == ["payment/disputes.md", "payment/refund.md", "sign-in.md"]
    # the renamed document is the same row, and its chunks moved with it
    renamed = kb.documents.get("sign-in.md")
    assert renamed is not None and kept is not None
    assert renamed.content_hash == kept.content_hash
    assert (
        kb.engine.connect()
        .exec_driver_sql("SELECT id, created_at FROM documents WHERE path = 'sign-in.md'")
        .one()
        == created
    )
    assert tracker.retrieved_docs("s1") == {"sign-in.md": "general"}
    assert indexed(kb) == {d.path: d.chunk_count for d in kb.documents.all()}
    hit = kb.retrieve("disputes risk team").ranked[0]
    assert hit.doc_path == "payment/disputes.md"
    record = SourceRepository(kb.engine).get(first.source.name)
    assert record is not None and record.commit == new_commit
    assert record.counts | {"documents": 3} == {
        "added": 1,
        "updated": 1,
        "renamed": 1,
        "removed": 1,
        "unchanged": 0,
        "skipped": 0,
        "documents": 3,
    }

    third = lifecycle.add_git(remote.url, subdir="docs")  # the same source: a sync
    assert third.mode == "unchanged" and third.source.name == first.source.name
    assert len(SourceRepository(kb.engine).all()) == 1


def test_domain_and_subdir_place_the_documents_and_a_web_link_names_the_commit(
    remote: Remote, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    result = lifecycle.add_git(remote.url, branch="main", subdir="/docs/payment/", domain="Pay Ops")
    assert paths(kb) == ["pay-ops/chargeback.md", "pay-ops/refund.md"]
    assert {d.domain for d in kb.documents.all()} == {"pay-ops"}
    pattern = "https://git.example.com/team/runbooks/blob/{commit}/{path}"
    assert web_link(pattern, result.source, "pay-ops/refund.md") == (
        f"https://git.example.com/team/runbooks/blob/{result.source.commit}/docs/payment/refund.md"
    )


def test_credentials_in_the_url_are_used_but_never_stored(
    remote: Remote, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    url = f"file://bob:s3cret@localhost{remote.bare}"
    result = lifecycle.add_git(url, subdir="docs")
    assert result.source.location == f"file://localhost{remote.bare}"
    data = kb.settings.data_dir
    leaked = [p for p in data.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
    assert leaked == []
    with pytest.raises(SourceError) as refused:
        lifecycle.add_git("http://bob:s3cret@127.0.0.1:9/team/runbooks.git")
    assert "s3cret" not in str(refused.value)
    assert "127.0.0.1:9" in str(refused.value)


# -- bad input -------------------------------------------------------------------------------


def _nothing_written(kb: KnowledgeBase) -> None:
    assert SourceRepository(kb.engine).all() == []
    assert paths(kb) == []
    home = kb.settings.data_dir / "sources"
    assert not home.exists() or list(home.iterdir()) == []


def test_a_url_that_does_not_exist_is_an_error_and_nothing_is_written(
    tmp_path: Path, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    with pytest.raises(SourceError, match="does not appear to be a git repository"):
        lifecycle.add_git(f"file://{tmp_path}/no-such-repo.git")
    _nothing_written(kb)


def test_a_branch_that_does_not_exist_is_an_error_naming_the_branches(
    remote: Remote, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    with pytest.raises(SourceError, match=r"branch 'release' does not exist .*branches: main"):
        lifecycle.add_git(remote.url, branch="release")
    with pytest.raises(SourceError, match="no folder 'manuals'"):
        lifecycle.add_git(remote.url, subdir="manuals")
    with pytest.raises(SourceError, match="leaves the repository"):
        lifecycle.add_git(remote.url, subdir="../elsewhere")
    _nothing_written(kb)


def test_a_force_pushed_branch_is_compared_in_full(remote: Remote, open_lifecycle: Open) -> None:
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(remote.url, subdir="docs")
    # history rewritten: the first commit is replaced by an unrelated one
    git(remote.work, "checkout", "-q", "--orphan", "rewritten")
    git(remote.work, "rm", "-rq", "--cached", ".")
    for path in RUNBOOKS:
        (remote.work / path).unlink()
    remote.write(
        {
            "docs/payment/refund.md": RUNBOOKS["docs/payment/refund.md"],
            "docs/incident.md": doc("Incidents", "Page the on-call engineer."),
        }
    )
    git(remote.work, "add", "-A")
    git(remote.work, "commit", "-q", "-m", "rewritten")
    git(remote.work, "push", "-q", "--force", "origin", "rewritten:main")
    second = lifecycle.sync(first.source.name)
    assert second.mode == "full"
    assert second.note is not None and "history rewritten" in second.note
    assert second.report.added == ["incident.md"]
    assert second.report.unchanged == ["payment/refund.md"]
    assert sorted(second.report.removed) == ["login.md", "payment/chargeback.md"]
    assert paths(kb) == ["incident.md", "payment/refund.md"]
    assert indexed(kb) == {d.path: d.chunk_count for d in kb.documents.all()}


def test_a_sync_after_superbiz_reads_files_otherwise_reads_the_whole_tree_again(
    remote: Remote, open_lifecycle: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No commit changes a file's bytes when superbiz reads a format anew: a sync that
    only followed the commits kept the older reader's text until each file changed."""
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(remote.url, subdir="docs")
    assert lifecycle.sync(first.source.name).mode == "unchanged"

    monkeypatch.setitem(READER_VERSIONS, "markdown", READER_VERSIONS["markdown"] + 1)
    again = lifecycle.sync(first.source.name)
    assert again.mode == "full"
    assert again.note is not None and "reads files differently" in again.note
    assert sorted(again.report.updated) == [
        "login.md",
        "payment/chargeback.md",
        "payment/refund.md",
    ]
    assert again.report.unchanged == []
    assert indexed(kb) == {d.path: d.chunk_count for d in kb.documents.all()}
    assert lifecycle.sync(first.source.name).mode == "unchanged"


def test_a_shallow_clone_is_a_source_too(
    remote: Remote, open_lifecycle: Open, tmp_path: Path
) -> None:
    """A CI checkout or ``git clone --depth 1`` has no history past its commit: fetching
    from it was refused ("shallow roots are not allowed to be updated") and the sync
    failed with "Needed a single revision"."""
    shallow = tmp_path / "shallow.git"
    git(tmp_path, "clone", "-q", "--bare", "--depth", "1", remote.url, str(shallow))
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(f"file://{shallow}", subdir="docs")
    assert first.source.error is None
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]

    remote.write({"docs/incident.md": doc("Incidents", "Page the on-call engineer.")})
    remote.commit("second")
    git(shallow, "fetch", "-q", "--depth", "1", remote.url, "+main:main")
    second = lifecycle.sync(first.source.name)
    assert second.mode == "full"
    assert second.note is not None and "a shallow repository" in second.note
    assert second.report.added == ["incident.md"]
    assert paths(kb) == ["incident.md", "login.md", "payment/chargeback.md", "payment/refund.md"]


def test_a_symlink_out_of_the_repository_is_skipped_not_followed(
    remote: Remote, open_lifecycle: Open, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text(doc("Secret", "outside the repository"), encoding="utf-8")
    os.symlink(secret, remote.work / "docs/escape.md")
    os.symlink("../../README.md", remote.work / "docs/payment/readme.md")
    # a link to a program, as a folder's walk would pass it by: not worth a line
    os.symlink("../src/main.py", remote.work / "docs/tool")
    remote.commit("links")
    kb, lifecycle = open_lifecycle()
    result = lifecycle.add_git(remote.url, subdir="docs")
    reasons = dict(result.report.skipped)
    assert "symlink pointing out of the repository" in reasons["escape.md"]
    assert "not followed" in reasons["payment/readme.md"]
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]
    tree = kb.settings.data_dir / "sources" / result.source.name / "tree"
    assert not any(p.is_symlink() for p in tree.rglob("*"))
    source = SourceRepository(kb.engine).get(result.source.name)
    assert source is not None and {s["path"] for s in source.skipped} == {
        "escape.md",
        "payment/readme.md",
    }


def test_an_unreachable_remote_keeps_the_last_good_state_and_records_the_error(
    remote: Remote, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(remote.url, subdir="docs")
    shutil.move(remote.bare, remote.bare.with_name("moved.git"))
    with pytest.raises(SourceError):
        lifecycle.sync(first.source.name)
    source = SourceRepository(kb.engine).get(first.source.name)
    assert source is not None
    assert source.error is not None and "fetch failed" in source.error
    assert source.commit == first.source.commit and source.error_at is not None
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]
    assert kb.retrieve("chargeback bank seven days").ranked[0].doc_path == "payment/chargeback.md"
    # the remote is back: the next sync clears the error
    shutil.move(remote.bare.with_name("moved.git"), remote.bare)
    lifecycle.sync(first.source.name)
    again = SourceRepository(kb.engine).get(first.source.name)
    assert again is not None and again.error is None


def test_folders_are_sources_too(tmp_path: Path, open_lifecycle: Open) -> None:
    folder = tmp_path / "kb"
    (folder / "ops").mkdir(parents=True)
    (folder / "ops/deploy.md").write_text(doc("Deploy", "Roll out with care."), encoding="utf-8")
    kb, lifecycle = open_lifecycle()
    lifecycle.ingest([folder])
    lifecycle.ingest([folder])
    [source] = SourceRepository(kb.engine).all()
    assert (source.name, source.kind, source.location) == ("kb", "folder", str(folder.resolve()))
    assert source.counts["unchanged"] == 1 and source.synced_at is not None


def test_a_file_renamed_to_a_name_that_is_not_ingested_takes_its_document_away(
    remote: Remote, open_lifecycle: Open
) -> None:
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(remote.url, subdir="docs")
    git(remote.work, "mv", "docs/login.md", "docs/login.md.bak")
    git(remote.work, "mv", "docs/payment/refund.md", "docs/payment/.refund.md")
    remote.commit("retire")
    second = lifecycle.sync(first.source.name)
    assert second.renamed == []
    assert sorted(second.report.removed) == ["login.md", "payment/refund.md"]
    assert paths(kb) == ["payment/chargeback.md"]
    assert indexed(kb) == {d.path: d.chunk_count for d in kb.documents.all()}


class _Remote(BaseHTTPRequestHandler):
    """An HTTP Git remote that asks for credentials, or never answers."""

    hang = threading.Event()

    def do_GET(self) -> None:
        if self.server.hangs:  # type: ignore[attr-defined]
            _Remote.hang.wait(10)
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _http_remote(*, hangs: bool) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Remote)
    server.hangs = hangs  # type: ignore[attr-defined]
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/team/runbooks.git"
    finally:
        _Remote.hang.set()
        server.shutdown()
        server.server_close()
        _Remote.hang.clear()


def test_a_remote_asking_for_credentials_fails_without_a_prompt(open_lifecycle: Open) -> None:
    kb, lifecycle = open_lifecycle()
    with _http_remote(hangs=False) as url, pytest.raises(SourceError) as failed:
        lifecycle.add_git(url)
    assert "terminal prompts disabled" in str(failed.value)
    _nothing_written(kb)


def test_a_remote_that_never_answers_fails_after_the_git_timeout(open_lifecycle: Open) -> None:
    kb, lifecycle = open_lifecycle(sources={"git_timeout_s": 1})
    with _http_remote(hangs=True) as url, pytest.raises(SourceError, match="longer than 1 s"):
        lifecycle.add_git(url)
    _nothing_written(kb)


# -- bounds, domains and transports (issue 33) --------------------------------------------


def _tree_files(kb: KnowledgeBase) -> set[str]:
    home = kb.settings.data_dir / "sources"
    return {
        p.relative_to(home).as_posix().split("/", 2)[-1]
        for p in home.glob("*/tree/**/*")
        if p.is_file()
    }


def test_a_file_over_the_size_limit_is_never_written_to_disk(
    remote: Remote, open_lifecycle: Open, database_url: str
) -> None:
    """A 200 MB file was reported too large but stayed under sources/<name>/tree/: disk
    use is part of the bound. Here the limit is 2,000 bytes."""
    kb, lifecycle = open_lifecycle(database_url, ingest={"max_file_bytes": 2000})
    remote.write(
        {
            "docs/huge.md": doc("Huge", "x " * 2000),
            "docs/assets/diagram.svg": "<svg>" + "y" * 5000 + "</svg>",  # not a document
        }
    )
    remote.commit("big files")
    first = lifecycle.add_git(remote.url, subdir="docs")
    too_large = dict(first.report.skipped)["huge.md"]
    assert too_large.startswith("too large: 4") and "not written to disk" in too_large
    assert _tree_files(kb) == {"login.md", "payment/chargeback.md", "payment/refund.md"}
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]

    # grown past the limit: the earlier file (and document) stay; a new big file is not written
    earlier = kb.documents.get("payment/refund.md")
    remote.write(
        {
            "docs/payment/refund.md": doc("Refund a payment", "Approve twice. " * 200),
            "docs/payment/bulk.md": doc("Bulk", "z " * 2000),
        }
    )
    remote.commit("grown")
    second = lifecycle.sync(first.source.name)
    skipped = dict(second.report.skipped)
    assert "its earlier version stays on disk and searchable" in skipped["payment/refund.md"]
    assert skipped["payment/bulk.md"].startswith("too large:")
    assert "huge.md" in skipped  # still skipped, untouched by this diff
    assert _tree_files(kb) == {"login.md", "payment/chargeback.md", "payment/refund.md"}
    assert kb.documents.get("payment/refund.md") == earlier
    tree = kb.settings.data_dir / "sources" / first.source.name / "tree"
    assert "press refund" in (tree / "payment/refund.md").read_text()


def test_a_domain_given_again_moves_the_sources_documents(
    remote: Remote, open_lifecycle: Open, database_url: str
) -> None:
    """``ingest --git URL --domain ops2`` on a source first ingested without a domain
    reported "unchanged" and kept no domain, silently."""
    kb, lifecycle = open_lifecycle(database_url)
    first = lifecycle.add_git(remote.url, subdir="docs")
    assert paths(kb) == ["login.md", "payment/chargeback.md", "payment/refund.md"]

    moved = lifecycle.add_git(remote.url, subdir="docs", domain="ops2")
    assert moved.source.name == first.source.name and moved.mode == "full"
    assert moved.note is not None and "domain changed from (none) to ops2" in moved.note
    assert paths(kb) == ["ops2/login.md", "ops2/payment/chargeback.md", "ops2/payment/refund.md"]
    assert {d.domain for d in kb.documents.all()} == {"ops2"}
    assert sorted(moved.report.removed) == [
        "login.md",
        "payment/chargeback.md",
        "payment/refund.md",
    ]
    record = SourceRepository(kb.engine).get(first.source.name)
    assert record is not None and record.domain == "ops2"
    assert indexed(kb) == {d.path: d.chunk_count for d in kb.documents.all()}
    assert kb.retrieve("answer the bank within seven days").ranked[0].doc_path == (
        "ops2/payment/chargeback.md"
    )
    # the same domain again, or none given: an ordinary sync
    assert lifecycle.add_git(remote.url, subdir="docs", domain="ops2").mode == "unchanged"
    assert lifecycle.add_git(remote.url, subdir="docs").mode == "unchanged"
    assert paths(kb)[0] == "ops2/login.md"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("fd::17", "fd:: is a Git remote helper"),
        ("ext::sh -c touch% /tmp/superbiz-pwned", "ext:: is a Git remote helper"),
        ("gopher://example.com/repo.git", "the transport gopher:// is not one"),
        ("--upload-pack=touch /tmp/x", "starts with '-'"),
    ],
)
def test_a_url_of_another_transport_is_refused_before_git_runs(
    open_lifecycle: Open, url: str, why: str
) -> None:
    """``fd::17`` was accepted and waited out sources.git-timeout-s (300 s)."""
    kb, lifecycle = open_lifecycle(sources={"git_timeout_s": 3})
    with pytest.raises(SourceError) as refused:
        lifecycle.add_git(url)
    assert why in str(refused.value) and "use https://" in str(refused.value)
    _nothing_written(kb)


def test_a_changed_fragment_reads_the_pages_that_include_it_again(
    tmp_path: Path, open_lifecycle: Open
) -> None:
    """An Antora site in Git: a change to a partial alone is a change to the pages that
    include it (their text holds it), and the partial is never a document of its own."""
    repo = Remote(tmp_path / "site")
    repo.write(
        {
            "docs/antora.yml": "name: ops\nversion: '1.0'\n",
            "docs/modules/ROOT/pages/docker.adoc": (
                "= Deploying with Docker\n\nContainers find each other by multicast.\n\n"
                "include::partial$warning.adoc[]\n"
            ),
            "docs/modules/ROOT/pages/upgrade.adoc": "= Upgrading\n\nRoll one member at a time.\n",
            "docs/modules/ROOT/partials/warning.adoc": "WARNING: Port 5701 is open to the host.\n",
        }
    )
    repo.commit("first")
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(repo.url)
    assert sorted(first.report.added) == [
        "docs/modules/ROOT/pages/docker.adoc",
        "docs/modules/ROOT/pages/upgrade.adoc",
    ]

    repo.write({"docs/modules/ROOT/partials/warning.adoc": "WARNING: Never publish 5701.\n"})
    repo.commit("the partial alone")
    second = lifecycle.sync(first.source.name)

    assert second.mode == "incremental"
    assert second.report.added == []
    assert second.report.updated == ["docs/modules/ROOT/pages/docker.adoc"]
    assert [path for path, _ in second.report.skipped] == [
        "docs/modules/ROOT/partials/warning.adoc"
    ]
    text = "\n".join(c.text for c in kb.store.chunks_of("docs/modules/ROOT/pages/docker.adoc"))
    assert "Never publish 5701." in text and "open to the host" not in text
    assert sorted(paths(kb)) == [
        "docs/modules/ROOT/pages/docker.adoc",
        "docs/modules/ROOT/pages/upgrade.adoc",
    ]


_SITES = {
    "mkdocs.yml": "site_name: Ops\nnav:\n  - {title}: oncall.md\n",
    "mkdocs.yaml": "site_name: Ops\nnav:\n  - {title}: oncall.md\n",
    # GitBook's or mdBook's table of contents, Docsify's sidebar: links titled by their text
    "SUMMARY.md": "# Summary\n\n- [{title}](docs/oncall.md)\n- [FAQ](docs/faq.md)\n"
    "- [Glossary](docs/glossary.md)\n",
    "_sidebar.md": "* [{title}](/docs/oncall)\n* [FAQ](/docs/faq)\n* [Glossary](/docs/glossary)\n",
}


@pytest.mark.parametrize("config", list(_SITES))
def test_a_renamed_nav_entry_retitles_its_page_on_the_next_sync(
    tmp_path: Path, open_lifecycle: Open, config: str
) -> None:
    """A site in Git keeps its pages' titles in ``mkdocs.yml`` (or ``.yaml``), or in the
    links of its ``SUMMARY.md`` or ``_sidebar.md``: a commit that only renames an entry
    changes no page, and the page is titled anew all the same."""
    repo = Remote(tmp_path / "site")
    repo.write(
        {
            config: _SITES[config].format(title="Being On-Call"),
            "docs/oncall.md": "## Responsibilities\n\nKeep your laptop with you.\n\n"
            "## Etiquette\n\nCover for each other.\n",
        }
    )
    repo.commit("first")
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(repo.url)
    assert first.report.added == ["docs/oncall.md"]  # the configuration is no page
    assert kb.documents.titles(["docs/oncall.md"]) == {"docs/oncall.md": "Being On-Call"}

    repo.write({config: _SITES[config].format(title="On-Call Duties")})
    repo.commit("the nav alone")
    second = lifecycle.sync(first.source.name)

    assert (second.mode, second.report.updated) == ("incremental", ["docs/oncall.md"])
    assert kb.documents.titles(["docs/oncall.md"]) == {"docs/oncall.md": "On-Call Duties"}


@pytest.mark.parametrize("domain", [None, "Incident Ops"])
def test_a_source_of_the_docs_folder_alone_is_titled_by_the_site_above_it(
    tmp_path: Path, open_lifecycle: Open, domain: str | None
) -> None:
    """``--subdir docs`` of a MkDocs repository: its ``mkdocs.yml`` lies above the folder
    written out, and still titles its pages; a commit renaming an entry retitles them."""
    site = "site_name: Ops\nnav:\n  - {title}: oncall.md\n  - Home: ../README.md\n"
    repo = Remote(tmp_path / "site")
    repo.write(
        {
            "mkdocs.yml": site.format(title="Being On-Call"),
            "README.md": "# Ops\n",
            "docs/oncall.md": "## Responsibilities\n\nKeep your laptop with you.\n",
            "docs/before/etiquette.md": "## First steps\n\nJoin the call muted.\n",
        }
    )
    repo.commit("first")
    kb, lifecycle = open_lifecycle()
    first = lifecycle.add_git(repo.url, subdir="docs", domain=domain)
    page = f"{safe_domain(domain)}/oncall.md" if domain else "oncall.md"
    assert sorted(first.report.added) == sorted([page, page.replace("oncall", "before/etiquette")])
    assert kb.documents.titles([page]) == {page: "Being On-Call"}
    assert not first.report.notes

    repo.write({"mkdocs.yml": site.format(title="On-Call Duties")})
    repo.commit("the nav alone, above the folder")
    second = lifecycle.sync(first.source.name)
    assert (second.mode, second.report.updated) == ("incremental", [page])
    assert kb.documents.titles([page]) == {page: "On-Call Duties"}

    repo.write({"mkdocs.yml": "nav: [\n"})
    repo.commit("a broken configuration")
    third = lifecycle.sync(first.source.name)
    assert third.report.updated == [page]
    assert kb.documents.titles([page]) == {page: "Responsibilities"}
    [note] = third.report.notes
    assert note.startswith("mkdocs.yml: not read as a MkDocs site (not YAML")
