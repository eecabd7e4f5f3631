"""AsciiDoc → the Markdown structure: what a page shows, read as Asciidoctor reads its
blocks (titles, sections, listings, admonitions, tables, lists, conditionals, attributes);
what only steers the page (comments, ``toc::[]``, passthroughs) is not text."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from superbiz.exceptions import DocumentError
from superbiz.knowledge import formats
from superbiz.knowledge.documents.chunking import chunk_markdown
from superbiz.knowledge.formats.asciidoc import convert_asciidoc

RUNBOOK = """\
// maintained by the platform team
= Kafka broker disk full
Platform Team <platform@example.com>
v2.1, 2026-11-02
:toc: left
:product: Kafka
:kafka-home: /opt/kafka
:on-call: PagerDuty

toc::[]

[[overview]]
== Overview

When a {product} broker's log directory fills up, the broker stops accepting writes and
*every partition* it leads goes offline. See <<recovery,Recovering the broker>>,
<<_retention>> and link:https://kafka.apache.org/documentation/#log[the log documentation^].

NOTE: The alert fires at 85% usage; press kbd:[Ctrl+C] to stop the tail.

== Symptoms

* Producers fail with `NotEnoughReplicasException`.
* The broker log shows:
+
----
java.io.IOException: No space left on device
----
** Under-replicated partitions rise.
* Consumers keep reading.

[[recovery]]
== Recovery

.Free space on the broker
[source,bash]
----
df -h {kafka-home}/data  # <1>
kafka-log-dirs.sh --describe --bootstrap-server localhost:9092 <2>
----
<1> Check the data volume.
<2> List each partition's size.

[WARNING]
.Never by hand
====
Do not delete segment files while the broker runs.
====

=== Retention

[cols="1,2,1",options="header"]
|===
|Setting |Meaning |Default

|`log.retention.hours`
|How long segments are kept
|168

2+|Size cap per partition |-1
|===

Retention hours:: Lower it to free space faster.
Segment bytes:: Smaller segments are deleted sooner.

ifdef::on-call[]
Page the on-call engineer through {on-call}.
endif::[]
ifndef::on-call[]
Mail the platform team.
endif::[]
ifdef::product[]
Open a support case.
endif::product[]

tag::escalation[]
end::escalation[]

include::partials/footer.adoc[]

////
A comment block: not text.
////

++++
<div class="banner">raw HTML</div>
++++
"""


def read(text: str) -> tuple[str | None, str]:
    converted = convert_asciidoc(text.encode(), "broker-disk-full.adoc", ("utf-8",))
    return converted.title, converted.markdown


def test_the_title_heads_the_page_and_sections_are_headings_below_it() -> None:
    title, body = read(RUNBOOK)

    assert title == "Kafka broker disk full"
    assert body.startswith("# Kafka broker disk full\n\n## Overview\n\nWhen a Kafka broker's")
    assert "## Symptoms\n" in body and "## Recovery\n" in body and "### Retention\n" in body
    # the header's author, revision and attribute lines and the steering macro are no text
    assert "Platform Team" not in body and "v2.1" not in body and "toc" not in body


def test_inline_markup_reads_as_its_text() -> None:
    _, body = read(RUNBOOK)

    assert (
        "**every partition** it leads goes offline. See Recovering the broker,\n"
        "Retention and the log documentation."  # <<_retention>>: its section's title
    ) in body
    assert "press Ctrl+C to stop" in body


def test_listings_are_fenced_code_with_their_language_and_no_callout_marks() -> None:
    _, body = read(RUNBOOK)

    assert (
        "**Free space on the broker**\n\n```bash\ndf -h {kafka-home}/data\n"
        "kafka-log-dirs.sh --describe --bootstrap-server localhost:9092\n```"
    ) in body
    assert "1. Check the data volume.\n2. List each partition's size." in body


def test_admonitions_are_quotes_under_their_kind_or_title() -> None:
    _, body = read(RUNBOOK)

    assert "> **Note**\n> The alert fires at 85% usage" in body
    assert "> **Never by hand**\n> Do not delete segment files while the broker runs." in body


def test_lists_nest_as_their_markers_do_and_keep_their_attached_blocks() -> None:
    _, body = read(RUNBOOK)

    assert "- Producers fail with `NotEnoughReplicasException`.\n- The broker log shows:" in body
    assert "```\njava.io.IOException: No space left on device\n```" in body
    assert "  - Under-replicated partitions rise.\n- Consumers keep reading." in body
    assert "- **Retention hours**: Lower it to free space faster." in body


def test_a_table_is_a_pipe_table_its_spans_filling_their_columns() -> None:
    _, body = read(RUNBOOK)

    assert (
        "| Setting | Meaning | Default |\n| --- | --- | --- |\n"
        "| `log.retention.hours` | How long segments are kept | 168 |\n"
        "| Size cap per partition |  | -1 |"
    ) in body


def test_conditionals_comments_includes_and_passthroughs() -> None:
    _, body = read(RUNBOOK)

    assert "Page the on-call engineer through PagerDuty." in body
    assert "Mail the platform team" not in body
    # ``product`` is set, if at all, by a build superbiz does not see: its text is kept
    assert "Open a support case." in body
    for hidden in ("footer", "comment block", "raw HTML", "maintained by", "escalation"):
        assert hidden not in body


def test_a_page_without_a_title_starts_its_sections_at_the_top() -> None:
    title, body = read("== Install\n\nRun it.\n\n== Upgrade\n\nRun it again.\n")

    assert title is None
    assert body == "# Install\n\nRun it.\n\n# Upgrade\n\nRun it again.\n"


def test_csv_tables_literal_paragraphs_and_quotes() -> None:
    _, body = read(
        "= Ports\n\n"
        '[%header,format=csv]\n,===\nService,Port\n"Kafka, plain",9092\n,===\n\n'
        "  $ nc -z broker 9092\n\n"
        "[quote, Site Reliability Engineering]\n____\nHope is not a strategy.\n____\n"
    )

    assert "| Service | Port |\n| --- | --- |\n| Kafka, plain | 9092 |" in body
    assert "```\n$ nc -z broker 9092\n```" in body
    assert "> Hope is not a strategy." in body


def test_chunks_keep_the_heading_path() -> None:
    _, body = read(RUNBOOK)

    headings = {chunk.heading for chunk in chunk_markdown(body, 300, 20)}
    assert "Kafka broker disk full > Recovery > Retention" in headings


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.4\n" + bytes(range(256)), "the extension lies"),
        (b"= Title\n\nText\x00more\n", "contains NUL bytes"),
    ],
)
def test_a_file_that_is_not_asciidoc_text_is_refused_with_the_reason(
    data: bytes, reason: str
) -> None:
    with pytest.raises(DocumentError, match=reason):
        convert_asciidoc(data, "bad.adoc", ("utf-8",))


def test_deeply_nested_blocks_are_read_without_exhausting_the_stack() -> None:
    nested = "".join(f"{'=' * (4 + n)}\n" for n in range(200))
    closing = "".join(f"{'=' * (4 + n)}\n" for n in reversed(range(200)))

    _, body = read(f"= Deep\n\n{nested}Still read.\n{closing}")

    assert "Still read." in body


#: a modular-docs procedure (the shape of Strimzi's and Debezium's guides): an id above the
#: title, steps with blocks attached by ``+``, an open block holding sub-steps, a comment
PROCEDURE = """\
:_mod-docs-content-type: PROCEDURE
// Module included in: assembly-security.adoc

[id='proc-recovering-expired-ca-certs-{context}']
= Recovering from expired CA certificates

.Procedure
. Delete the secret holding the expired certificate.
+
[source,shell]
----
kubectl delete secret my-cluster-cluster-ca-cert -n my-project
----
. Delete the pods that use it.
+
--
.. Delete the Kafka secret.
// a reviewer's note
.. Delete all Kafka pods.
--
+
If only the clients CA expired, delete the Kafka secret alone.

. Check the new certificate's validity.

`values`:: The snapshot's keys.
`id`::: The signal's identifier.
"""


def test_a_procedure_keeps_its_steps_numbered_across_attached_blocks() -> None:
    title, body = read(PROCEDURE)

    assert title == "Recovering from expired CA certificates"
    assert body.startswith("# Recovering from expired CA certificates\n\n**Procedure**\n\n")
    assert "1. Delete the secret holding the expired certificate.\n\n```shell\n" in body
    assert "2. Delete the pods that use it.\n\n1. Delete the Kafka secret.\n2. Delete all" in body
    assert "\n\nIf only the clients CA expired, delete the Kafka secret alone.\n\n3. Check" in body
    assert "- **`values`**: The snapshot's keys.\n  - **`id`**: The signal's identifier." in body
    assert "reviewer" not in body and "+" not in body.replace("```", "")


def test_a_cross_reference_by_a_sections_id_shows_the_sections_title() -> None:
    """A modular guide names its sections by ids (``[id="proc-upgrade_{context}"]``) and
    refers to them with no text, as Asciidoctor shows the section's title; the id's words
    ("proc upgrade ops") had stood in the text."""
    _, body = read(
        "= Upgrades\n:context: ops\n\n"
        "Read <<con-rolling>> first, then xref:proc-upgrade_{context}[] and <<checks>>.\n\n"
        "[#con-rolling]\n== How a rolling upgrade works\n\nOne member at a time.\n\n"
        '[id="proc-upgrade_{context}"]\n== Upgrading the members\n\nStop it.\n\n'
        "[[checks,the final checks]]\n== Checks\n\nAll green.\n"
    )

    assert (
        "Read How a rolling upgrade works first, then Upgrading the members and the final checks."
    ) in body


def test_a_cell_of_asciidoc_content_is_read_as_blocks_on_one_line() -> None:
    _, body = read(
        "= Notifications\n\n"
        '[cols="1,3"]\n|===\n|Property|Description\n\n'
        "|id\na|A unique identifier.\n[NOTE]\n====\nIt may repeat.\n====\n\n"
        '|payload\na|\n[source,json]\n----\n{"id": 1}\n----\n|===\n'
    )

    assert (
        "| Property | Description |\n| --- | --- |\n"
        "| id | A unique identifier. **Note** It may repeat. |\n"
        '| payload | `{"id": 1}` |'
    ) in body


@pytest.mark.parametrize(
    "opener",
    ["link:x[", "https://x[", "xref:x[", "image:x[", "kbd:[", "menu:x[", "footnote:[",
     "pass:[", "<<a", "((a", "(((a", "[.role]*a"],
)  # fmt: skip
def test_a_line_of_unclosed_markup_is_read_not_refused_for_time(opener: str) -> None:
    """Each opener's match scans at most 500 characters for its closing bracket: a line of
    100,000 unclosed openers (300 KB to 1 MB) is read where a scan to the line's end from
    each opener took minutes, past the converter's time bound (``ingest.convert-timeout-s``)."""
    page = f"= Hostile\n\n{opener * 100_000}\n\nAfter.\n".encode()

    converted = formats.convert(page, ".adoc", "hostile.adoc", ("utf-8",))

    assert converted is not None and converted.title == "Hostile"
    assert converted.markdown.rstrip().endswith("After.")


ROUND_TRIP = """\
---
title: MySQL replica lag
---
# MySQL replica lag

When `Seconds_Behind_Master` grows past **300**, the replica serves stale reads. See the
[replication guide](https://dev.mysql.com/doc/refman/8.0/en/replication.html) and
‘semi-sync’ notes.

## Check

1. Run `SHOW REPLICA STATUS\\G` on the replica.
2. Compare `Relay_Log_Pos` with `Exec_Master_Log_Pos`:

   ```sql
   SELECT * FROM performance_schema.replication_applier_status_by_worker;
   ```

   - A worker stuck on one `LAST_ERROR_NUMBER` needs a skip.

| setting | value | why |
| --- | --- | --- |
| `slave_parallel_workers` | 8 | apply in parallel |
| `sync_binlog` | 1 | durable binlog |

> **Warning:** never run `RESET SLAVE ALL` on the only replica.

## Fix

- Raise `innodb_buffer_pool_size` to 70% of memory.
- Restart with `--skip-slave-start` and *then* `START REPLICA`.
"""
_WORD = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")
needs_pandoc = pytest.mark.skipif(shutil.which("pandoc") is None, reason="pandoc is not installed")


@needs_pandoc
def test_a_runbook_written_as_asciidoc_by_pandoc_reads_back_with_its_words(
    tmp_path: Path,
) -> None:
    """A real tool's AsciiDoc (pandoc's Asciidoctor writer: ``++_++`` inside identifiers,
    curved quotes, ``[arabic]`` lists with ``+`` continuations, ``[width=…,cols=…]``
    tables): every word of the Markdown page, but its link's URL, is in what is read."""
    source = tmp_path / "lag.md"
    source.write_text(ROUND_TRIP, encoding="utf-8")
    written = subprocess.run(
        ["pandoc", "-f", "markdown", "-t", "asciidoctor", "--standalone", str(source)],
        capture_output=True,
        check=True,
    ).stdout

    converted = convert_asciidoc(written, "lag.adoc", ("utf-8",))

    assert converted.title == "MySQL replica lag"
    markdown = re.sub(r"\]\([^)]*\)", "]", ROUND_TRIP.split("---\n", 2)[2])
    expected = Counter(_WORD.findall(markdown))
    assert expected - Counter(_WORD.findall(converted.markdown)) == Counter()
    for kept in ("`Seconds_Behind_Master`", "`slave_parallel_workers` | 8", "```sql"):
        assert kept in converted.markdown
