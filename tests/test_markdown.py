"""Fenced code blocks as CommonMark reads them: what every reader of a Markdown body agrees on."""

from __future__ import annotations

from pathlib import PurePosixPath

from superbiz._markdown import code_blocks, fenced, open_fence
from superbiz.agents.passage_quote import best_passage
from superbiz.knowledge.documents.chunking import split_sections
from superbiz.knowledge.documents.document import parse_document

#: Flink CDC's MySQL page writes its connector's name as inline code of three backticks at a
#: line's start: read as a fence, it opened a block that swallowed the page's next headings
INLINE = """# MySQL CDC

```mysql cdc``` 连接器通过使用 GTID 提供高可用性。

## 可用的指标

| Group | Name |
|---|---|
| table | isSnapshotting |
"""


def test_three_backticks_with_a_backtick_after_them_are_inline_code() -> None:
    lines = INLINE.split("\n")
    assert code_blocks(lines) == [] and not any(fenced(lines))
    assert [s.heading_path for s in split_sections(INLINE)] == [
        ("MySQL CDC",),
        ("MySQL CDC", "可用的指标"),
    ]


def test_a_block_of_four_backticks_closes_only_at_four() -> None:
    body = "# Docs\n\n````md\n```bash\nls\n```\n\n# not a heading\n````\n\n## Next\n\nText."
    assert [s.heading_path for s in split_sections(body)] == [("Docs",), ("Docs", "Next")]
    assert open_fence(body.split("\n")[:6]) == "````"


def test_a_fence_closes_only_with_its_own_character_and_no_info_string() -> None:
    lines = ["~~~", "```", "~~~ text", "~~~~", "after"]
    assert code_blocks(lines) == [(0, 3)]
    assert fenced(["```sh", "ls", "```sh", "# still code"]) == [True] * 4  # never closed


def test_a_fence_four_spaces_further_in_is_a_line_of_the_block() -> None:
    """MkDocs Material's reference shows how to write content tabs in an example block: the
    tabs' fences, indented four spaces, had closed the example, and its next lines (a "#"
    line among them) read as the page's text."""
    example = [
        '``` title="Content tabs with code blocks"',
        '=== "C"',
        "",
        "    ``` c",
        "    int main(void);",
        "    ```",
        "",
        "# a comment of the example",
        "```",
        "",
        "Text after the example.",
    ]
    assert code_blocks(example) == [(0, 8)]
    assert [s.heading_path for s in split_sections("## Tabs\n\n" + "\n".join(example))] == [
        ("Tabs",)
    ]
    item = ["1. Run:", "", "    ```sh", "    make", "    ```", "", "Done."]
    assert code_blocks(item) == [(2, 4)]  # a list item's block closes at its own indent


def test_a_documents_first_heading_is_read_past_inline_code() -> None:
    body = "```mysql cdc``` is the connector.\n\n# MySQL CDC connector\n\nText."
    doc = parse_document(body.encode(), PurePosixPath("mysql-cdc.md"))
    assert doc.title == "MySQL CDC connector"


def test_a_quote_cut_inside_a_long_fenced_block_is_closed_by_its_own_fence() -> None:
    block = "````md\n" + "\n".join(f"```\nstep {n}\n```" for n in range(40)) + "\n````"
    quote = best_passage(f"## Example\n\n{block}", ["step"], limit=200).text
    assert quote.startswith("````md") and quote.endswith("\n````"), quote
