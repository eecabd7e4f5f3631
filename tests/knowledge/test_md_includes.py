"""A MkDocs site's ``include-markdown`` plugin's directives read as MkDocs builds them
(Traefik's documentation, 55 pages): a page holds the text it includes, the shared file is
part of its pages and no document, a changed one reads its pages again, and nothing is read
from outside the knowledge base's folder or from a file with an access list of its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conftest import write_kb
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase

StoredText = Callable[[KnowledgeBase, str], str]

SITE = {
    "mkdocs.yml": "site_name: Proxy\ndocs_dir: content\nplugins:\n  - include-markdown\n",
    # Traefik's shared notice opens with a rule, not frontmatter
    "content/includes/notice.md": (
        '---\n\n!!! question "Using the proxy in production?"\n\n'
        "    Ask the platform team for a support contract.\n"
    ),
    "content/includes/steps.md": (
        "# Steps\n\n<!--steps-start-->\n1. Drain the node.\n2. Restart the proxy.\n"
        "<!--steps-end-->\n\nFooter not included.\n"
    ),
    "content/includes/owned.md": "---\naccess: [sre]\n---\nThe admin token lives in Vault.\n",
    # a name that is neither ./ nor ../ is read from the site's docs_dir, not the page's folder
    "content/routing/providers/includes/notice.md": "# Provider notes\n\nA decoy.\n",
    "content/examples/proxy.yml": "entryPoints:\n  web:\n    address: ':80'\n",
    "content/routing/providers/docker.md": (
        "# Docker provider\n\nLabels route each container.\n\n"
        '{% include-markdown "includes/notice.md" %}\n\n'
        '{%\n  include-markdown "../../includes/steps.md"\n'
        '  start="<!--steps-start-->"\n  end="<!--steps-end-->"\n%}\n\n'
        '```yaml\n{% include "examples/proxy.yml" %}\n```\n\n'
        '{% include-markdown "includes/owned.md" %}\n\n'
        '{% include-markdown "../../../../outside.md" %}\n'
    ),
    "content/routing/providers/file.md": (
        '# File provider\n\nWatch the folder.\n\n{% include-markdown "includes/notice.md" %}\n'
    ),
}


def test_a_page_holds_what_it_includes_and_the_shared_file_is_part_of_it(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    root = tmp_path / "site"
    write_kb(root, SITE)
    (tmp_path / "outside.md").write_text("The root password is hunter2.\n")

    report = Ingestor(kb).ingest([root])

    assert sorted(report.added) == [
        "content/includes/owned.md",  # its own access list: a document, never written in
        "content/routing/providers/docker.md",
        "content/routing/providers/file.md",
        "content/routing/providers/includes/notice.md",
    ]
    skipped = dict(report.skipped)
    assert skipped["content/includes/notice.md"].startswith(
        "included by content/routing/providers/docker.md and 1 more pages (MkDocs snippet or "
        "include): part of those pages"
    )
    assert skipped["content/includes/steps.md"].startswith("included by ")
    page = stored_text(kb, "content/routing/providers/docker.md")
    assert "Ask the platform team for a support contract." in page
    assert "1. Drain the node.\n2. Restart the proxy." in page
    assert "Footer not included" not in page and "<!--steps-start-->" not in page
    assert "```yaml\nentryPoints:\n  web:\n    address: ':80'\n```" in page
    assert 'include-markdown "includes/notice.md"' not in page
    assert "Vault" not in page and "hunter2" not in page and "decoy" not in page
    assert '{% include-markdown "includes/owned.md" %}' in page  # left as written
    ranked = kb.retriever.retrieve("support contract for the proxy in production").ranked
    assert ranked[0].doc_path in {
        "content/routing/providers/docker.md",
        "content/routing/providers/file.md",
    }

    notice = "content/includes/notice.md"
    write_kb(root, {notice: SITE[notice] + "Call us.\n"})
    again = Ingestor(kb).ingest([root])

    assert sorted(again.updated) == [
        "content/routing/providers/docker.md",
        "content/routing/providers/file.md",
    ]
    assert "Call us." in stored_text(kb, "content/routing/providers/file.md")
