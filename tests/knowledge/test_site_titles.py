"""An MkDocs site's ``nav`` titles its pages: PagerDuty's incident-response docs keep every
title in ``mkdocs.yml``, and read alone each page was titled by its file name. Read as
MkDocs reads them here, on real ingests into the embedded defaults; a configuration that
cannot be read titles nothing and stops nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from superbiz.knowledge.documents.site_titles import (
    CONFIG_MAX_BYTES,
    NAV_ENTRIES_MAX,
    SiteTitles,
    nav_titles,
)
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

_CONFIG = """\
site_name: Incident Response
theme:
  name: material
markdown_extensions:
  - pymdownx.emoji:
      emoji_index: !!python/name:material.extensions.emoji.twemoji
nav:
  - Home: index.md
  - On-Call:
    - Being On-Call: 'oncall/being_oncall.md'
    - Alerting Principles: oncall/alerting_principles.md
  - Before an Incident:
    - Call Etiquette: before/call_etiquette.md
    - Complex: before/complex.md
  - Status: https://status.example.com
"""


def _site(root: Path, config: str = _CONFIG) -> Path:
    """A site as its repository holds it: ``mkdocs.yml`` beside ``docs/``."""
    pages = {
        "index.md": "Welcome to the incident response docs: how we page and who answers.\n",
        "oncall/being_oncall.md": "## Responsibilities\n\nAcknowledge a page within five "
        "minutes and keep your laptop with you.\n",
        "oncall/alerting_principles.md": "---\ntitle: Alerting for humans\n---\n# Alerting"
        "\n\nEvery alert pages a person, so it must need one.\n",
        "before/call_etiquette.md": "## First Steps\n\nJoin the call muted and say who you "
        "are when the commander asks.\n",
        "before/complex.md": "# Complex incidents and sub-teams\n\nSplit the call in two.\n",
        "before/unlisted.md": "## Notes\n\nA page the nav does not list is read as ever.\n",
    }
    for path, text in pages.items():
        (root / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / path).write_text(text)
    (root / "mkdocs.yml").write_text(config)
    return root


def _titles(kb: KnowledgeBase) -> dict[str, str]:
    return {doc.path: doc.title for doc in kb.documents.all()}


def test_nav_titles_read_only_pages_with_titles() -> None:
    docs_dir, titles = nav_titles("docs_dir: site/pages\nnav:\n  - Setup: ./setup/../install.md\n")
    assert (docs_dir, titles) == ("site/pages", {"install.md": "Setup"})
    # out of the site, not Markdown, or no title: nothing
    _, titles = nav_titles("nav:\n  - Up: ../README.md\n  - Img: a.png\n  - b.md\n  - '': c.md\n")
    assert titles == {}
    # YAML that is no configuration titles nothing; text that is no YAML says where
    for text in ("- a\n- b\n", "", "nav: 3\n", "nav:\n  - {[1]: x.md}\n"):
        assert nav_titles(text)[1] == {}
    with pytest.raises(ValueError, match=r"not YAML: .*\(line 2\)"):
        nav_titles("site_name: Ops\n  theme: material\nnav: []\n")
    with pytest.raises(ValueError, match="not YAML"):
        nav_titles("\x00")
    # aliases share nodes: a nav of nested aliases is read once per node
    bomb = "a: &a [{T: x.md}]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    _, titles = nav_titles(bomb + "nav: *i\n")
    assert titles == {"x.md": "T"}
    many = "nav:\n" + "".join(f"  - P{n}: p{n}.md\n" for n in range(NAV_ENTRIES_MAX + 5))
    assert len(nav_titles(many)[1]) == NAV_ENTRIES_MAX


def test_a_site_titles_its_pages_that_have_no_title_of_their_own(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    site = _site(tmp_path / "repo")
    report = Ingestor(kb).ingest([site])
    assert not report.skipped
    titles = _titles(kb)
    assert titles["docs/oncall/being_oncall.md"] == "Being On-Call"
    assert titles["docs/before/call_etiquette.md"] == "Call Etiquette"
    assert titles["docs/index.md"] == "Home"
    # a title the page gives itself wins over the nav's (often shorter) entry: its
    # frontmatter's, its own # heading; a page the nav omits is read as ever
    assert titles["docs/oncall/alerting_principles.md"] == "Alerting for humans"
    assert titles["docs/before/complex.md"] == "Complex incidents and sub-teams"
    assert titles["docs/before/unlisted.md"] == "Notes"
    # the title is what the page's chunks are headed and found by
    ranked = kb.retriever.retrieve("being on-call").ranked
    assert (ranked[0].doc_path, ranked[0].title) == ("docs/oncall/being_oncall.md", "Being On-Call")


def test_the_docs_folder_ingested_alone_finds_its_site_above_it(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    site = _site(tmp_path / "repo")
    Ingestor(kb).ingest([site / "docs"])
    assert _titles(kb)["oncall/being_oncall.md"] == "Being On-Call"


def test_a_renamed_nav_entry_is_read_again_and_a_broken_config_titles_nothing(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    site = _site(tmp_path / "repo")
    ingestor = Ingestor(kb)
    ingestor.ingest([site])
    (site / "mkdocs.yml").write_text(_CONFIG.replace("Being On-Call", "On-Call Duties"))
    report = ingestor.ingest([site])
    assert "docs/oncall/being_oncall.md" in report.updated
    assert "docs/oncall/alerting_principles.md" in report.unchanged  # titled by itself
    assert _titles(kb)["docs/oncall/being_oncall.md"] == "On-Call Duties"

    broken = {
        "nav: [\n": "not YAML",
        'docs_dir: "do\\0cs"\nnav:\n  - Being On-Call: oncall/being_oncall.md\n': "null",
        b"nav:\n  - \xff: oncall/being_oncall.md\n": "not UTF-8",
    }
    config = site / "mkdocs.yml"
    for text, why in broken.items():
        config.write_bytes(text if isinstance(text, bytes) else text.encode())
        report = ingestor.ingest([site])
        assert not report.skipped
        assert _titles(kb)["docs/oncall/being_oncall.md"] == "Responsibilities"
        [note] = report.notes  # said once, not once a page
        assert note.startswith(f"{config.resolve()}: not read as a MkDocs site")
        assert why in note


def test_the_nearest_site_whose_docs_hold_the_file_titles_it(tmp_path: Path) -> None:
    outer = _site(tmp_path / "kb").resolve()
    inner = _site(outer / "docs" / "team", "nav:\n  - Team Home: index.md\n")
    sites = SiteTitles()
    assert sites.title((inner / "docs" / "index.md").resolve(), outer) == "Team Home"
    assert sites.title((outer / "docs" / "index.md").resolve(), outer) == "Home"
    # mkdocs.yml is configuration, not a page of its docs_dir
    assert sites.title((outer / "mkdocs.yml").resolve(), outer) is None


def _book(root: Path) -> Path:
    """An mdBook book as its repository holds it: ``book.toml`` beside ``src/``, whose
    ``SUMMARY.md`` titles the chapters (GitBook's is the same file at the book's root)."""
    pages = {
        "SUMMARY.md": "# Summary\n\n[Introduction](README.md)\n\n# Runbooks\n\n"
        "- [**Failing over** the primary](runbooks/failover.md)\n"
        "    - [Checking `replication` lag](runbooks/lag.md)\n"
        "- [Paging %26 escalation](runbooks/paging%20policy.md#who)\n"
        "- [Draft chapter]()\n",
        "README.md": "This book is the database team's runbooks.\n",
        "runbooks/failover.md": "## Before you start\n\nStop writes to the primary, then "
        "promote the replica with the least lag.\n",
        "runbooks/lag.md": "# Replication lag\n\nCompare the replicas' positions.\n",
        "runbooks/paging policy.md": "Page the secondary when the primary does not answer "
        "within ten minutes.\n",
    }
    for path, text in pages.items():
        (root / "src" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / path).write_text(text)
    (root / "book.toml").write_text('[book]\ntitle = "Database runbooks"\n')
    return root


def test_a_table_of_contents_titles_the_pages_it_links(tmp_path: Path, kb: KnowledgeBase) -> None:
    book = _book(tmp_path / "book")
    report = Ingestor(kb).ingest([book])
    assert [path for path, _ in report.skipped] == ["src/SUMMARY.md"]  # no page itself
    titles = _titles(kb)
    assert titles["src/runbooks/failover.md"] == "Failing over the primary"
    assert titles["src/runbooks/paging policy.md"] == "Paging %26 escalation"
    assert titles["src/README.md"] == "Introduction"
    # a page's own # heading wins over the link's text
    assert titles["src/runbooks/lag.md"] == "Replication lag"
    ranked = kb.retriever.retrieve("failing over the primary").ranked
    assert (ranked[0].doc_path, ranked[0].title) == (
        "src/runbooks/failover.md",
        "Failing over the primary",
    )

    # renamed in the table of contents alone: the page is read again under its new title
    summary = book / "src" / "SUMMARY.md"
    summary.write_text(summary.read_text().replace("**Failing over** the", "Promoting a new"))
    report = Ingestor(kb).ingest([book])
    assert report.updated == ["src/runbooks/failover.md"]
    assert _titles(kb)["src/runbooks/failover.md"] == "Promoting a new primary"


def test_a_docsify_sidebar_links_pages_from_the_sites_root(tmp_path: Path) -> None:
    """Docsify reads a nested sidebar's links from the site's root, with or without
    ``.md``; the nearest sidebar that links a page titles it."""
    site = tmp_path / "site"
    for path in ("guide.md", "zh/guide.md", "zh/faq.md", "zh/ops/README.md"):
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text("## 步骤\n\n先停写入。\n")
    (site / "_sidebar.md").write_text("* [Guide](guide.md)\n* [中文](zh/)\n* [FAQ](zh/faq.md)\n")
    (site / "zh" / "_sidebar.md").write_text(
        "- [指南](zh/guide)\n- [常见问题](/zh/faq.md ':ignore')\n- [运维](zh/ops/)\n"
    )
    root = site.resolve()
    sites = SiteTitles()
    assert sites.title(root / "guide.md", root) == "Guide"
    assert sites.title(root / "zh" / "guide.md", root) == "指南"
    assert sites.title(root / "zh" / "faq.md", root) == "常见问题"  # the nearer sidebar's
    assert sites.title(root / "zh" / "ops" / "README.md", root) == "运维"
    assert not sites.problems


def test_a_summary_with_text_of_its_own_titles_nothing(tmp_path: Path, kb: KnowledgeBase) -> None:
    """An incident's ``SUMMARY.md`` is a document, not a site's navigation: the pages it
    links keep their own titles, and a navigation file that cannot be read is named once."""
    folder = tmp_path / "incidents"
    folder.mkdir()
    (folder / "SUMMARY.md").write_text(
        "# Outage of 3 May\n\nThe primary ran out of disk at 02:10; writes failed for "
        "forty minutes.\n\nSee [the timeline](timeline.md).\n"
    )
    (folder / "timeline.md").write_text("## 02:10\n\nDisk full on the primary.\n")
    report = Ingestor(kb).ingest([folder])
    assert sorted(report.added) == ["SUMMARY.md", "timeline.md"]
    assert _titles(kb)["timeline.md"] == "02:10"

    other = tmp_path / "book"
    other.mkdir()
    (other / "SUMMARY.md").write_bytes(b"- [\xff](a.md)\n- [B](b.md)\n- [C](c.md)\n")
    (other / "a.md").write_text("## Steps\n\nRestart it.\n")
    report = Ingestor(kb).ingest([other])
    assert _titles(kb)["a.md"] == "Steps"
    [note] = report.notes
    assert note == (
        f"{(other / 'SUMMARY.md').resolve()}: not read as a site's pages (not UTF-8 text); "
        "its pages are titled as if it were not there"
    )

    # a megabyte of one unclosed link: too large to read, said once; the pages stay
    (other / "SUMMARY.md").write_text("- [A](a.md)\n- [B](b.md)\n[C](" + " " * CONFIG_MAX_BYTES)
    report = Ingestor(kb).ingest([other])
    assert [path for path, _ in report.skipped] == ["SUMMARY.md"]
    assert _titles(kb)["a.md"] == "Steps"
    [note] = report.notes
    assert f"over {CONFIG_MAX_BYTES}" in note
