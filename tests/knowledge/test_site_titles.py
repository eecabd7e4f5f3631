"""An MkDocs site's ``nav`` titles its pages: PagerDuty's incident-response docs keep every
title in ``mkdocs.yml``, and read alone each page was titled by its file name. Read as
MkDocs reads them here, on real ingests into the embedded defaults; a configuration that
cannot be read titles nothing and stops nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from superbiz.knowledge.documents.site_titles import NAV_ENTRIES_MAX, SiteTitles, nav_titles
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
