"""reStructuredText → the Markdown structure, through docutils; nothing in a file reads
another file or a URL."""

from __future__ import annotations

from pathlib import Path

from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.formats.rst import convert_rst

RUNBOOK = """\
=============
Redis Runbook
=============

Redis serves the session cache, see `the docs <https://redis.io/>`_ and ``redis-cli``.

Failover
========

1. Check the quorum.
2. Run::

     redis-cli -p 26379 SENTINEL failover mymaster
       echo done

.. note:: Never restart every replica at once.

Limits
------

==========  ===========
setting     value
==========  ===========
maxclients  10000
timeout     0 | never
==========  ===========

.. toctree::

   other-page
"""


def convert(text: str) -> tuple[str | None, str]:
    converted = convert_rst(text.encode(), "runbook.rst", ("utf-8",))
    return converted.title, converted.markdown


def test_sections_code_tables_and_links_become_the_markdown_structure() -> None:
    title, body = convert(RUNBOOK)

    assert title == "Redis Runbook"
    assert body.startswith(
        "# Redis Runbook\n\nRedis serves the session cache, see the docs and `redis-cli`.\n"
    )
    assert "## Failover\n" in body and "### Limits\n" in body
    assert (
        "   ```\n   redis-cli -p 26379 SENTINEL failover mymaster\n     echo done\n   ```"
    ) in body
    assert "> **Note**\n> Never restart every replica at once." in body
    assert (
        "| setting | value |\n| --- | --- |\n| maxclients | 10000 |\n| timeout | 0 \\| never |"
        in body
    )
    assert "toctree" not in body and "other-page" not in body  # a Sphinx directive: dropped
    headings = {chunk.heading for chunk in chunk_markdown(body, size=120, overlap=10)}
    assert "Redis Runbook > Failover > Limits" in headings


def test_include_and_raw_cannot_read_files_or_urls(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the secret line")
    text = (
        "Title\n=====\n\nBefore.\n\n"
        f".. include:: {secret}\n\n"
        f".. raw:: html\n   :file: {secret}\n\n"
        ".. raw:: html\n   :url: http://127.0.0.1:9/\n\n"
        "After.\n"
    )
    _, body = convert(text)

    assert "secret line" not in body
    assert body == "# Title\n\nBefore.\n\nAfter.\n"


def test_broken_markup_keeps_what_parses() -> None:
    _, body = convert(
        "Heading\n=======\n\nText with an `unclosed reference.\n\n.. unknown:: x\n\nEnd.\n"
    )

    assert "End." in body and "unknown" not in body


def test_sphinx_roles_read_as_their_text() -> None:
    """docutils knows no Sphinx role and kept ``:ref:`…``` as written; a reader sees the
    text Sphinx would show: a reference's title, an option or an object as code."""
    _, body = convert(
        "Logging\n=======\n\n"
        "Use :ref:`-v, --verbose <--verbose>` or :option:`--log`, see :doc:`../topics/config`"
        " and :py:func:`~os.path.join`; :term:`wheel` is a :ref:`built package\n<wheels>`.\n"
    )

    assert body == (
        "# Logging\n\nUse -v, --verbose or `--log`, see config and `join`; wheel is a"
        " built package.\n"
    )


def test_a_version_note_written_on_its_directive_line_reads_as_its_text() -> None:
    """CMake's and Python's manuals write the note right under ``.. versionadded::``, with
    no blank line: docutils reads it as the argument, and it was kept raw after the version
    ("*New in version 3.19 If ``<file>`` is not specified … anywhere..*")."""
    _, body = convert(
        "Transfer\n========\n\n"
        "Downloads ``<url>``.\n\n"
        ".. versionadded:: 3.19\n"
        "  If ``<file>`` is not specified, the file is not\n"
        "  saved.\n\n"
        ".. versionchanged:: 3.8 The *x* parameter was added.\n\n"
        ".. deprecated:: 3.0\n"
    )

    assert body == (
        "# Transfer\n\n"
        "Downloads `<url>`.\n\n"
        "*New in version 3.19:* If `<file>` is not specified, the file is not\nsaved.\n\n"
        "*Changed in version 3.8:* The *x* parameter was added.\n\n"
        "*Deprecated since version 3.0.*\n"
    )


def test_a_title_followed_directly_by_its_only_section_keeps_that_section() -> None:
    """docutils makes such a section the document's subtitle, written as a plain line: the
    chunks under it lost "Transfer" from their heading path. Sphinx keeps it a section."""
    _, body = convert(
        'file\n----\n\nTransfer\n^^^^^^^^\n\nDownloads things.\n\nOptions\n"""""""\n\nTimeouts.\n'
    )

    assert body == "# file\n\n## Transfer\n\nDownloads things.\n\n### Options\n\nTimeouts.\n"


def test_sphinx_directives_keep_the_text_they_hold(tmp_path: Path) -> None:
    """docutils knows no Sphinx directive and dropped each with its content: a manual's
    options (CMake's ``cmake --build -j``), version notes and examples in tabs were lost."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret line")
    _, body = convert(
        "Build\n=====\n\n"
        ".. program:: cmake\n\n"
        ".. option:: -j [<jobs>], --parallel [<jobs>]\n"
        "   :noindex:\n\n"
        "   .. versionadded:: 3.12\n\n"
        "   The maximum number of concurrent processes.\n\n"
        ".. py:function:: connect(host, port=6379)\n\n   Open a connection.\n\n"
        ".. testcode::\n\n   connect('db')\n\n   print('up')\n\n"
        ".. seealso:: The build presets.\n\n"
        ".. tab:: Windows\n\n   .. code-block:: console\n\n      C:\\> cmake --build .\n\n"
        ".. tab:: Linux\n\n   .. pip-command-usage:: check\n\n"
        ".. pip-command-description:: check\n\n"
        f".. literalinclude:: {secret}\n\n"
        ".. toctree::\n\n   other-page\n\n"
        ".. index:: single: build\n"
    )

    assert body == (
        "# Build\n\n"
        "`-j [<jobs>], --parallel [<jobs>]`\n\n"
        "*New in version 3.12.*\n\n"
        "The maximum number of concurrent processes.\n\n"
        "`connect(host, port=6379)`\n\n"
        "Open a connection.\n\n"
        "```\nconnect('db')\n\nprint('up')\n```\n\n"
        "**See also**: The build presets.\n\n"
        "**Windows**\n\n"
        "```console\nC:\\> cmake --build .\n```\n"
    )
