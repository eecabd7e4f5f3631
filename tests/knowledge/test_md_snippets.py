"""A MkDocs site's snippets (``--8<--``) read as MkDocs builds them: a runbook holds the
commands of the script it writes in, a shared warning is part of its pages and no document,
a changed snippet reads its pages again (in a Git source too), and nothing is read from
outside the knowledge base's folder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from conftest import write_kb
from fakes.git_remote import Remote
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.sources.lifecycle import DocumentLifecycle

#: the fixture ``stored_text``: what a knowledge base holds of a document
StoredText = Callable[[KnowledgeBase, str], str]

#: a MkDocs project: its configuration, a runbook, the script it runs, a shared warning
SITE = {
    "mkdocs.yml": "site_name: Ops\nmarkdown_extensions:\n  - pymdownx.snippets\n",
    "docs/runbooks/backup.md": (
        "# Back up the ledger database\n\nRun the backup on the replica:\n\n"
        '```sh\n--8<-- "scripts/backup.sh:run"\n```\n\n'
        '--8<-- "docs/includes/warning.md"\n\n'
        '--8<-- "docs/includes/owned.md"\n\n'
        ';--8<-- "docs/includes/warning.md"\n\n--8<-- "../outside.md"\n\n'
        '--8<-- "docs/includes/pipe.md"\n'
    ),
    "docs/runbooks/restore.md": "# Restore the ledger database\n\nStop the app first.\n",
    "docs/includes/warning.md": "!!! warning\n    Never run the backup on the primary.\n",
    "docs/includes/owned.md": "---\naccess: [dba]\n---\nThe dba password lives in Vault.\n",
    "scripts/backup.sh": (
        "#!/bin/sh\nset -e\n# --8<-- [start:run]\n"
        "pg_dump --format=custom ledger > /backup/ledger.dump\n# --8<-- [end:run]\nexit 0\n"
    ),
}


def test_a_runbook_holds_its_scripts_commands_and_shared_warnings(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    root = tmp_path / "site"
    write_kb(root, SITE)
    (tmp_path / "outside.md").write_text("The root password is hunter2.\n")
    os.mkfifo(root / "docs/includes/pipe.md")  # read, it would block the ingest forever

    report = Ingestor(kb).ingest([root])

    assert sorted(report.added) == [
        "docs/includes/owned.md",  # its own access list: a document, never written in
        "docs/runbooks/backup.md",
        "docs/runbooks/restore.md",
    ]
    assert dict(report.skipped) == {
        "docs/includes/pipe.md": "not a regular file",
        "docs/includes/warning.md": (
            "included by docs/runbooks/backup.md (MkDocs snippet or include): part of that page, "
            "not a document"
        ),
    }
    page = stored_text(kb, "docs/runbooks/backup.md")
    assert "```sh\npg_dump --format=custom ledger > /backup/ledger.dump\n```" in page
    assert "set -e" not in page and "[start:run]" not in page
    assert "> **Warning**\n> Never run the backup on the primary." in page
    assert "Vault" not in page and "hunter2" not in page
    assert '--8<-- "docs/includes/warning.md"' in page  # escaped with ";": as written

    write_kb(root, {"scripts/backup.sh": SITE["scripts/backup.sh"].replace("custom", "directory")})
    again = Ingestor(kb).ingest([root])

    assert again.updated == ["docs/runbooks/backup.md"]
    assert "pg_dump --format=directory ledger" in stored_text(kb, "docs/runbooks/backup.md")


def test_a_git_sources_changed_snippet_reads_its_pages_again(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    """A commit changing the script alone updates the runbook that writes it in."""
    repo = Remote(tmp_path / "site")
    repo.write(SITE)
    repo.commit("first")
    lifecycle = DocumentLifecycle(kb)
    first = lifecycle.add_git(repo.url)
    assert "docs/runbooks/backup.md" in first.report.added

    repo.write({"scripts/backup.sh": SITE["scripts/backup.sh"].replace("custom", "tar")})
    repo.commit("the script alone")
    second = lifecycle.sync(first.source.name)

    assert second.mode == "incremental"
    assert second.report.updated == ["docs/runbooks/backup.md"]
    assert "pg_dump --format=tar ledger" in stored_text(kb, "docs/runbooks/backup.md")
