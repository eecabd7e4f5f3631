"""A reStructuredText page read with the fragments it includes, as Sphinx builds it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from superbiz.knowledge.documents.document import load_document
from superbiz.knowledge.formats.rst_includes import includes, with_includes
from superbiz.knowledge.ingest.discovery import Candidate
from superbiz.knowledge.ingest.parts import include_fragments

INSTALL = """\
Installation
============

.. begin-install

You can install Celery from PyPI::

    pip install -U celery

.. end-install

Bundles are listed below.
"""


def test_a_fragment_is_read_where_its_directive_stands_at_its_indent(tmp_path: Path) -> None:
    """Celery's introduction includes its installation guide; a fragment included inside
    a note is part of the note."""
    (tmp_path / "includes").mkdir()
    (tmp_path / "includes" / "installation.txt").write_text(INSTALL)
    (tmp_path / "guide").mkdir()
    page = tmp_path / "guide" / "introduction.rst"
    page.write_text(
        "Introduction\n============\n\nCelery is a task queue.\n\n"
        ".. include:: ../includes/installation.txt\n"
        "    :start-after: .. begin-install\n    :end-before: .. end-install\n\n"
        ".. note::\n\n    .. include:: /includes/installation.txt\n       :start-line: 11\n"
        "       :end-line: 12\n\nThe end.\n"
    )
    doc = load_document(page, tmp_path, 1_000_000)
    assert "You can install Celery from PyPI:\n\n```\npip install -U celery\n```" in doc.body
    assert doc.body.count("pip install -U celery") == 1  # the note holds the last line alone
    assert "> Bundles are listed below." in doc.body  # inside the note
    assert "Installation\n" not in doc.body and "The end." in doc.body


def test_a_fragment_included_with_other_options_stays_a_document(tmp_path: Path) -> None:
    """``:literal:`` asks for the file as a literal block, which is not written in: the
    fragment is then a document of its own, not part of a page that lacks it."""
    (tmp_path / "a.txt").write_text("Shared text of the pages.\n")
    (tmp_path / "b.txt").write_text("Shown as it is.\n")
    (tmp_path / "page.rst").write_text(
        "Page\n====\n\n.. include:: a.txt\n\n.. include:: b.txt\n   :literal:\n"
    )
    found = [Candidate(tmp_path / name, tmp_path) for name in ("a.txt", "b.txt", "page.rst")]
    assert list(include_fragments(found, {})) == [tmp_path / "a.txt"]
    text = (tmp_path / "page.rst").read_text()
    assert [i.inlined for i in includes(text)] == [True, False]
    read = {"a.txt": "Shared text of the pages.\n", "b.txt": "Shown as it is.\n"}.get
    written = with_includes(text, PurePosixPath("page.rst"), lambda p: read(str(p)), 1000)
    assert "Shared text of the pages." in written and ".. include:: b.txt" in written


def test_fragments_grow_a_page_by_at_most_the_limit() -> None:
    fragment = "x" * 600
    page = ".. include:: f.txt\n\n.. include:: f.txt\n"
    written = with_includes(page, PurePosixPath("p.rst"), lambda _: fragment, 1000)
    assert written.count(fragment) == 1 and ".. include:: f.txt" in written
