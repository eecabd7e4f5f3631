"""An AsciiDoc page read with the fragments it includes, as Asciidoctor and Antora build it:
a partial or snippet is part of its pages, not a document; a module with a title of its own
stays one; nothing is read from outside the knowledge base's folder, nor from a domain the
page's readers may not all read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from superbiz.access import Reader
from superbiz.config import AccessSettings
from superbiz.knowledge.ingest.ingestor import Ingestor
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.embedders import Embedder

#: the fixture ``stored_text``: what a knowledge base holds of a document
StoredText = Callable[[KnowledgeBase, str], str]

#: an Antora component: pages, a partial, a tagged code example, a module with its own title
FILES = {
    "modules/ROOT/pages/docker.adoc": (
        "= Deploying with Docker\n:partialsdir: ../partials\n\n"
        "Members in containers discover each other by multicast.\n\n"
        "include::partial$docker-warning.adoc[]\n\n"
        "== Cluster names\n\n[source,java]\n----\n"
        "include::example$Clusters.java[tag=names]\n----\n\n"
        "include::{partialsdir}/steps.adoc[leveloffset=+1,tags=ports]\n\n"
        "include::modules/proc-upgrade.adoc[leveloffset=+1]\n"
    ),
    "modules/ROOT/pages/modules/proc-upgrade.adoc": (
        "[id='proc-upgrade']\n= Upgrading the members\n\nRoll one member at a time.\n"
    ),
    "modules/ROOT/partials/docker-warning.adoc": (
        "WARNING: Port mapping opens the members to anyone who reaches the host.\n"
    ),
    "modules/ROOT/partials/steps.adoc": (
        "// tag::ports[]\n== Open the ports\n\nPublish port 5701 of each member.\n"
        "// end::ports[]\n== Not included\n\nThis section stays out.\n"
    ),
    "modules/ROOT/examples/Clusters.java": (
        'class Clusters {\n    // tag::names[]\n    config.setClusterName("production");\n'
        "    // end::names[]\n    // not shown\n}\n"
    ),
}


def _write(root: Path) -> None:
    for relative, text in FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_partials_snippets_and_code_are_written_into_their_page(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    root = tmp_path / "docs"
    _write(root)

    report = Ingestor(kb).ingest([root])

    assert sorted(report.added) == [
        "modules/ROOT/pages/docker.adoc",
        "modules/ROOT/pages/modules/proc-upgrade.adoc",
    ]
    skipped = dict(report.skipped)
    assert set(skipped) == {
        "modules/ROOT/partials/docker-warning.adoc",
        "modules/ROOT/partials/steps.adoc",
    }
    assert skipped["modules/ROOT/partials/steps.adoc"] == (
        "included by modules/ROOT/pages/docker.adoc (AsciiDoc `include::`): "
        "part of that page, not a document"
    )
    page = stored_text(kb, "modules/ROOT/pages/docker.adoc")
    assert "> **Warning**\n> Port mapping opens the members" in page
    assert '```java\n    config.setClusterName("production");\n```' in page
    assert "### Open the ports\n\nPublish port 5701 of each member." in page
    assert "not shown" not in page and "stays out" not in page and "tag::" not in page
    # a module with a title of its own is its own document, not written in twice
    assert "Roll one member at a time." not in page
    assert "Roll one member" in stored_text(kb, "modules/ROOT/pages/modules/proc-upgrade.adoc")


def test_a_changed_fragment_reads_its_page_again(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    root = tmp_path / "docs"
    _write(root)
    Ingestor(kb).ingest([root])

    (root / "modules/ROOT/partials/docker-warning.adoc").write_text(
        "WARNING: Never publish port 5701 on a public address.\n"
    )
    again = Ingestor(kb).ingest([root])

    assert again.updated == ["modules/ROOT/pages/docker.adoc"]
    assert "Never publish port 5701" in stored_text(kb, "modules/ROOT/pages/docker.adoc")


def test_nothing_is_included_from_outside_the_folder(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    (tmp_path / "secret.adoc").write_text("The root password is hunter2.\n")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "loop.adoc").write_text("Loop start.\n\ninclude::loop.adoc[]\n")
    (root / "page.adoc").write_text(
        "= Page\n\nBefore.\n\ninclude::../secret.adoc[]\n\n"
        "include::/etc/hostname[]\n\ninclude::https://example.com/x.adoc[]\n\n"
        "include::loop.adoc[]\n\nAfter.\n"
    )

    Ingestor(kb).ingest([root])

    page = stored_text(kb, "page.adoc")
    assert "Before." in page and "After." in page and page.count("Loop start.") == 1
    assert "hunter2" not in page and "include::" not in page


def test_an_antora_components_attributes_are_its_pages(
    tmp_path: Path, kb: KnowledgeBase, stored_text: StoredText
) -> None:
    """``antora.yml``'s ``asciidoc.attributes``, and the module folders Antora sets itself
    (``{partialsdir}``), are set on every page of the component:
    in the text, in an include's target, in a condition; a changed descriptor reads the
    pages again."""
    root = tmp_path / "docs"
    (root / "modules/ROOT/pages").mkdir(parents=True)
    (root / "modules/ROOT/snippets").mkdir(parents=True)
    (root / "antora.yml").write_text(
        "name: hazelcast\nversion: '6.0'\nasciidoc:\n  attributes:\n"
        "    full-version: '6.0.1'\n    snippetsdir: ../snippets\n    community: true\n"
        "    product: false\n    page-toclevels: 1@\n"
    )
    (root / "modules/ROOT/snippets/jvm.adoc").write_text("Run it on Java 21 or later.\n")
    (root / "modules/ROOT/partials").mkdir()
    (root / "modules/ROOT/partials/ports.adoc").write_text("Open port 5701.\n")
    (root / "modules/ROOT/pages/install.adoc").write_text(
        "= Installing\n\nDownload Hazelcast {full-version}.\n\n"
        "include::{snippetsdir}/jvm.adoc[]\n\ninclude::{partialsdir}/ports.adoc[]\n\n"
        "ifdef::product[]\nCall your account manager.\nendif::[]\n"
        "ifdef::community[]\nAsk on the community forum.\nendif::[]\n"
    )

    report = Ingestor(kb).ingest([root])

    assert report.added == ["modules/ROOT/pages/install.adoc"]
    assert sorted(path for path, _ in report.skipped) == [
        "modules/ROOT/partials/ports.adoc",  # {partialsdir}: set by Antora itself
        "modules/ROOT/snippets/jvm.adoc",
    ]
    page = stored_text(kb, "modules/ROOT/pages/install.adoc")
    assert "Download Hazelcast 6.0.1." in page and "Run it on Java 21 or later." in page
    assert "Open port 5701." in page
    assert "Ask on the community forum." in page and "account manager" not in page
    assert "toclevels" not in page
    document = kb.documents.get("modules/ROOT/pages/install.adoc")
    assert document is not None and document.title == "Installing"

    (root / "antora.yml").write_text(
        "name: hazelcast\nasciidoc:\n  attributes:\n    full-version: '6.0.2'\n"
        "    snippetsdir: ../snippets\n"
    )
    again = Ingestor(kb).ingest([root])

    assert again.updated == ["modules/ROOT/pages/install.adoc"]
    assert "Download Hazelcast 6.0.2." in stored_text(kb, "modules/ROOT/pages/install.adoc")


def test_an_include_never_carries_text_to_a_reader_who_may_not_read_it(
    tmp_path: Path,
    make_settings: Callable[..., Any],
    use_embedder: Embedder,
    stored_text: StoredText,
) -> None:
    """A page writes in a fragment only from a domain its every reader may read
    (``access.domains``); a fragment stays a document unless every one of its readers reads
    it in a page that writes it in. reStructuredText and AsciiDoc alike."""
    files = {
        "guide/install.rst": (
            "Installing\n==========\n\nBefore.\n\n.. include:: ../finance/rates.txt\n\n"
            ".. include:: ../shared/ports.txt\n\nAfter.\n"
        ),
        "guide/limits.adoc": "= Limits\n\nBefore.\n\ninclude::../finance/limits.adoc[]\n",
        "finance/rates.txt": "The interchange rate for gold cards is 1.85 percent.\n",
        "finance/limits.adoc": "The daily payout limit is 40,000 euros.\n",
        "finance/pay.rst": (
            "Paying out\n==========\n\n.. include:: ../shared/ports.txt\n\n"
            ".. include:: ../shared/fees.txt\n"
        ),
        "shared/ports.txt": "The payout gateway listens on port 8443.\n",
        "shared/fees.txt": "Every payout costs a flat fee of 25 cents.\n",
    }
    root = tmp_path / "docs"
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    settings = make_settings(tmp_path, access=AccessSettings(domains={"finance": ("finance",)}))
    kb = KnowledgeBase(settings, embedder=use_embedder)
    try:
        report = Ingestor(kb).ingest([root])

        # read alike by everyone: part of the open page, not a document
        assert dict(report.skipped).keys() == {"shared/ports.txt"}
        assert sorted(report.added) == [
            "finance/limits.adoc",
            "finance/pay.rst",
            "finance/rates.txt",
            "guide/install.rst",
            "guide/limits.adoc",
            "shared/fees.txt",  # written into a finance page, and everyone's to find
        ]
        install = stored_text(kb, "guide/install.rst")
        assert "Before." in install and "port 8443" in install and "After." in install
        assert "1.85" not in install and "40,000" not in stored_text(kb, "guide/limits.adoc")
        paying = stored_text(kb, "finance/pay.rst")
        assert "port 8443" in paying and "25 cents" in paying

        staff = Reader.of_groups("sam", ["support"])
        finance = Reader.of_groups("fay", ["finance"])
        for question, path in [
            ("interchange rate for gold cards", "finance/rates.txt"),
            ("daily payout limit", "finance/limits.adoc"),
        ]:
            assert all(d.domain != "finance" for d in kb.retrieve(question, reader=staff).shown)
            assert path in [d.doc_path for d in kb.retrieve(question, reader=finance).shown]
        assert "shared/fees.txt" in [
            d.doc_path for d in kb.retrieve("flat fee per payout", reader=staff).shown
        ]
    finally:
        kb.close()
