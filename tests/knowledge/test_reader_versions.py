"""A reader that reads the same bytes into other text must raise its version
(``knowledge.formats.READER_VERSIONS``), and a chunker that cuts a body otherwise its
own (``CHUNKER_VERSION``): a stored document's hash names them, and without a new version
every knowledge base ingested before keeps the older text, since its files' bytes did
not change. Each sample's reading is recorded at its version; a change without a new
version fails here and prints what to record."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

import pytest

from format_files import docx_bytes, pdf_bytes
from superbiz.knowledge.documents.chunking import CHUNKER_VERSION, chunk_markdown, search_text
from superbiz.knowledge.documents.document import parse_document
from superbiz.knowledge.formats import READER_VERSIONS

MARKDOWN = """---
title: Rotate the API keys
description: Rotating the API's signing keys without downtime
tags: [security]
---
# Rotate the API keys

Before you start, read {ref}`the key policy <key-policy>` and {doc}`/ops/vault`.

```{warning}
Old keys stop working after **24 hours**.
```

!!! danger "Never rotate during a release"
    A deploy that starts mid-rotation signs with the old key.

```bash
vault write -f transit/keys/api/rotate

vault read transit/keys/api
```

## Check

Old keys stay valid for **24 hours**; see [the runbook](https://example.com/keys).

## Steps

Drain the traffic first. Wait until the old keys see no requests for five minutes.

```bash
vault read transit/keys/api
kubectl rollout restart deploy/api
```

Watch the error rate for ten minutes after the restart.
"""

#: what the Markdown reader reads otherwise since version 5 (the chunker's sample is
#: ``MARKDOWN`` alone)
MARKDOWN_SINCE_5 = """<!--
Licensed to the Apache Software Foundation (ASF).
-->
:::tip 提示
轮换前先备份。<!-- draft -->
:::
<a id="old-anchor"></a>
"""

#: what the Markdown reader reads otherwise since version 8
MARKDOWN_SINCE_8 = """<h4 id="faq-1">Why are old keys refused?</h4>
They expired after <b>24 hours</b>.
"""

#: what the Markdown reader reads otherwise since version 9 (version 10 reads a frontmatter
#: block of a site generator's keys alone as frontmatter, not text, and version 11 one whose
#: unknown keys hold a value other than text: ``test_documents``)
MARKDOWN_SINCE_9 = """import Tabs from '@theme/Tabs';

Rotate both regions.{/* TODO: the third one */}
"""

#: what the Markdown reader reads otherwise since version 12 (13: a GitHub alert; 14: a
#: heading that shows nothing)
MARKDOWN_SINCE_12 = """
# &nbsp;
## 相关配置 {#basic-configuration}

Keys rotate daily.

> [!CAUTION]
> Never rotate during a release.
"""

#: what the Markdown reader reads otherwise since version 15: a block of code written as a
#: Hugo shortcode (Istio's ``text``); and a name without the id Notion's export appends
MARKDOWN_SINCE_15 = """
{{< text bash >}}
# a comment, not a heading
$ kubectl rollout restart deploy/<name>
{{< /text >}}
"""

RST = """Rotate the API keys
===================

Before you start, read :ref:`the key policy <key-policy>` and :doc:`/ops/vault`.

.. option:: --force

   .. versionadded:: 2.0

   Rotate even when the key is in use.

.. code-block:: bash

   vault write -f transit/keys/api/rotate

Check
-----

Old keys stay valid for **24 hours**. See `the runbook <https://example.com/keys>`_.
"""

#: what the reStructuredText reader reads otherwise since version 4 (version 6 writes in the
#: fragments a page includes from its folder: ``test_rst_includes``, read from files)
RST_SINCE_4 = """
.. versionchanged:: 2.1
   Keys of ``transit/`` rotate too.
"""

HTML = """<html><head><title>Rotate the API keys - Ops handbook</title></head><body>
<nav><a href="/">Home</a></nav>
<article><h2>Rotate the API keys<a class="headerlink" href="#rotate">¶</a></h2>
<p>Before you start, read <a href="/policy">the key policy</a>.</p>
<pre><code>vault write -f transit/keys/api/rotate</code><code>vault read k</code></pre>
<pre>
kubectl get pods</pre>
<h3>Check</h3><table><tr><th>key</th><th>valid</th></tr><tr><td>old</td><td>24 h</td></tr></table>
</article></body></html>
"""


#: AsciiDoc from version 2: pandoc's curved quotes and unconstrained passthroughs (version 3:
#: a macro's text read up to 500 characters; version 4: a passthrough inside inline code;
#: version 5: a cross reference by a section's title, an image's title; version 6: one by a
#: section's id shows the section's title)
ASCIIDOC = """= Rotate the API keys
:vault: vault

Before you start, read <<key-policy,the key policy>> and xref:ops/vault.adoc[].

WARNING: Old keys stop working after *24 hours*.

== Rotate

[source,bash]
----
{vault} write -f transit/keys/api/rotate <1>
----
<1> The new key signs from now on.

'`transit`' names the engine; key++_++v2 is next (as pandoc writes them), after
link:/keys.md[`min++_++version`] is raised (<<Rotate the keys>>, <<_rotate>>).

image::rotation.svg[title="Key rotation",role="middle"]

[cols="1,1"]
|===
|Key |State
|v1 |retired
|===
"""


def _samples() -> dict[str, tuple[str, bytes]]:
    return {
        "markdown": (
            "keys 0123456789abcdef0123456789abcdef.md",  # a Notion export's name (version 15)
            (
                MARKDOWN
                + MARKDOWN_SINCE_5
                + MARKDOWN_SINCE_8
                + MARKDOWN_SINCE_9
                + MARKDOWN_SINCE_12
                + MARKDOWN_SINCE_15
            ).encode(),
        ),
        "rst": ("keys.rst", (RST + RST_SINCE_4).encode()),
        "html": ("keys.html", HTML.encode()),
        "pdf": (
            "keys.pdf",
            pdf_bytes(
                [
                    [("title", "Rotate the API keys"), ("p", "Ops handbook, 2026")],
                    [("h1", "Check"), ("p", "Old keys stay valid."), ("code", "vault read k")],
                ],
                outline=False,
            ),
        ),
        "docx": ("keys.docx", docx_bytes(title="Rotate the API keys")),
        "asciidoc": ("keys.adoc", ASCIIDOC.encode()),
    }


#: (reader, its version): the first 16 hex digits of the SHA-256 of the sample's reading
#: (title, body, covers, when_to_retrieve, tags, aliases)
READINGS = {
    ("markdown", 14): "c0a027f956e96087",
    ("markdown", 15): "8e97079a6df12cea",
    # 16 titles a page whose top heading is written twice by it (``test_documents``); this
    # sample has its title in its frontmatter, so reads the same
    ("markdown", 16): "8e97079a6df12cea",
    ("rst", 6): "b10ae0ff6eec0ed6",
    ("html", 4): "58cb2a1bbfa8492f",
    ("pdf", 2): "7b8f372d8bf627c2",
    ("docx", 2): "ae197a2df1637455",
    ("asciidoc", 5): "052998f400b22ede",
    ("asciidoc", 6): "2b7b0d7b9589099d",
}
#: the chunker's version: the digest of its chunks of the Markdown sample, at two sizes
#: (to version 2), and of what BM25 indexes of each: the chunk under its document's
#: headline and headings (from version 3, which heads them with the author's description)
CHUNKINGS = {
    2: "1b2f6abe22e97d28",
    3: "daeef9b7530af07c",
    4: "a5ba499d980f9766",
    5: "559dc63969c11643",
    6: "4bfd0b02685f53f9",
    7: "1b4f6b60a0a312b3",
    8: "666635dd0d4a0def",
}
#: a code block nested in a list item, where a window of 120 characters begins
ITEM_BLOCK = """
## Disk full

1. Check the free disk of each node.

    ```bash
    tiup ctl pd config set low-space-ratio 0.9 --with-a-long-flag
    ```

    Then watch the Regions move.
"""
#: fences CommonMark reads otherwise than a line that toggles: inline code written with
#: three backticks, a block of four holding a fence of three
FENCES = """
## Binlog

```mysql cdc``` reads the binlog.

## Nested

````md
```bash
# a comment, not a heading
```
````

Text after the block.
"""
#: an example block that shows a tab's indented fences (MkDocs' reference)
TAB_EXAMPLE = """
## Tabs

``` title="Content tabs"
=== "C"

    ```c
    run();
    ```

# a line of the example, not a heading
```

Text after the example.
"""
#: a table whose rows are too long to stand under its header in a window of 120
LONG_ROWS = "\n## Products\n\n| Name | Filter | Storage |\n|---|---|---|\n" + "".join(
    f"| Broker{n} | SQL92 property filters over tags and keys {n} "
    f"| Low latency file storage {n} |\n"
    for n in range(3)
)
#: a table longer than a window, below ``MARKDOWN``'s body in the chunker's sample
TABLE = "\n## Codes\n\n| Code | Meaning |\n|---|---|\n" + "".join(
    f"| `4030{n}` | Key {n} refused for a reason long enough to fill the window |\n"
    for n in range(6)
)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("reader", list(READER_VERSIONS))
def test_a_reader_that_reads_otherwise_has_a_new_version(reader: str) -> None:
    name, data = _samples()[reader]
    doc = parse_document(data, PurePosixPath(name))
    fields = (doc.covers, doc.when_to_retrieve, doc.tags, doc.aliases)
    reading = _digest(f"{doc.title}\n{doc.body}\n{fields!r}")
    version = READER_VERSIONS[reader]
    if (reader, version) not in READINGS:
        pytest.fail(f"record ({reader!r}, {version}): {reading!r} in READINGS")
    assert READINGS[reader, version] == reading, (
        f"the {reader} reader reads {name} otherwise than at version {version}: raise "
        f"READER_VERSIONS[{reader!r}] to {version + 1} and record "
        f"({reader!r}, {version + 1}): {reading!r} in READINGS"
    )


def test_a_chunker_that_cuts_or_heads_otherwise_has_a_new_version() -> None:
    doc = parse_document(MARKDOWN.encode(), PurePosixPath("keys.md"))
    # as written: a reader's change is not the chunker's (the table since version 4, the
    # fences since version 5, the item's block since version 6, the tab example since 7,
    # the long rows since 8)
    body = MARKDOWN.split("---\n", 2)[2] + TABLE + FENCES + ITEM_BLOCK + TAB_EXAMPLE + LONG_ROWS
    chunks = [c for size in (800, 120) for c in chunk_markdown(body, size, 20)]
    indexed = [search_text(doc.headline, c.heading, c.text) for c in chunks]
    assert indexed[0].startswith("Rotate the API keys\nRotating the API's signing keys")
    chunking = _digest(repr([*[(c.heading_path, c.text) for c in chunks], *indexed]))
    if CHUNKER_VERSION not in CHUNKINGS:
        pytest.fail(f"record {CHUNKER_VERSION}: {chunking!r} in CHUNKINGS")
    assert CHUNKINGS[CHUNKER_VERSION] == chunking, (
        f"chunk_markdown cuts, or search_text heads, otherwise than at version "
        f"{CHUNKER_VERSION}: raise "
        f"CHUNKER_VERSION to {CHUNKER_VERSION + 1} and record {CHUNKER_VERSION + 1}: "
        f"{chunking!r} in CHUNKINGS"
    )
