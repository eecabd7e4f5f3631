"""Markdown's block syntax where superbiz reads it, as CommonMark reads it: ATX headings,
fenced code blocks, the lines of pipe tables, and indents.

Several readers walk a Markdown body line by line (its sections, its first heading, its
roles, its chunks' code blocks); they agree on where a code block is only if they read
its fences alike. A line of three backticks is not always a fence: ```` ```mysql cdc``` ````
at a line's start is inline code (a backtick fence's info string holds no backtick), and
a block opened by five backticks is closed only by five or more.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

#: a fence: three or more backticks or tildes, after any indent (a list item's block is
#: indented as its item's text is), then the info string
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
#: a pipe table's delimiter row, under its header: ``|---|:---:|`` (outer pipes optional)
_DELIMITER_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_RULE_DASHES = re.compile(r"-{3,}")
#: an ATX heading with text: up to three spaces, one to six ``#``, its words (closing
#: ``#`` marks apart), as the chunker and the document reader find a page's sections
ATX_HEADING = re.compile(r"^\s{0,3}(?P<marks>#{1,6})\s+(?P<text>.+?)\s*#*\s*$")


class Fence(NamedTuple):
    marker: str
    info: str


def fence(line: str) -> Fence | None:
    """The fence ``line`` is, if any: its marker and info string.

    >>> fence("```bash"), fence("  ~~~")
    (Fence(marker='```', info='bash'), Fence(marker='~~~', info=''))
    >>> fence("```mysql cdc``` 连接器通过使用 GTID") is None  # inline code, not a fence
    True
    """
    match = _FENCE.match(line)
    if match is None:
        return None
    marker, info = match.group(1), match.group(2).strip()
    if marker[0] == "`" and "`" in info:
        return None
    return Fence(marker, info)


def code_blocks(lines: Sequence[str]) -> list[tuple[int, int]]:
    """The fenced code blocks of ``lines``: each one's first and last line, its fences
    included. A block opened by a fence is closed by a fence of the same character, at
    least as long, with no info string, no more than three spaces further in, or by the
    end of the lines.

    >>> code_blocks(["a", "````md", "```", "````", "b", "~~~"])
    [(1, 3), (5, 5)]
    >>> code_blocks(["```x``` is inline", "# a heading"])
    []
    >>> code_blocks(["``` title=example", "=== 'C'", "    ```c", "    run();", "    ```", "```"])
    [(0, 5)]
    """
    return _scan(lines)[0]


def open_fence(lines: Sequence[str]) -> str | None:
    """The fence of the block ``lines`` leave open at their end, if any: what closes it.

    >>> open_fence(["````md", "```", "text"]), open_fence(["```", "ls", "```"])
    ('````', None)
    """
    opened = _scan(lines)[1]
    return opened.marker if opened else None


def closed(text: str) -> str:
    r"""``text`` with the fenced code block it leaves open at its end closed, at the block's
    indent, so that a block in a list item stays in it (closed at the margin, it ended the
    item, and the fence opened a block that swallowed what followed); a last line "…",
    where the block was cut, moves in with it.

    >>> print(closed("1. Run:\n\n   ```sh\n   make\n…"))
    1. Run:
    <BLANKLINE>
       ```sh
       make
       …
       ```
    >>> closed("Run:\n```sh\nls"), closed("no block")
    ('Run:\n```sh\nls\n```', 'no block')
    """
    lines = text.split("\n")
    at = open_block(lines)
    if at is None:
        return text
    pad = lines[at][: indent(lines[at])]
    if lines[-1] == "…":
        lines[-1] = pad + "…"
    return "\n".join([*lines, f"{pad}{open_fence(lines)}"])


def open_block(lines: Sequence[str]) -> int | None:
    """The first line (its fence) of the block ``lines`` leave open at their end, if any.

    >>> open_block(["Run:", "```sh", "ls"]), open_block(["```", "ls", "```"])
    (1, None)
    """
    blocks, opened = _scan(lines)
    return blocks[-1][0] if opened else None


def fenced(lines: Sequence[str]) -> list[bool]:
    """For each of ``lines``, whether it belongs to a fenced code block (``code_blocks``).

    >>> fenced(["a", "```", "# not a heading", "```", "b"])
    [False, True, True, True, False]
    """
    flags = [False] * len(lines)
    for first, last in code_blocks(lines):
        flags[first : last + 1] = [True] * (last - first + 1)
    return flags


def _scan(lines: Sequence[str]) -> tuple[list[tuple[int, int]], Fence | None]:
    """The blocks of ``lines`` and the fence of the one left open. A block closes at a
    fence at most three spaces further in than its opening fence: one further in is a line
    of it (MkDocs' reference shows a tab's indented fences inside an example block)."""
    blocks: list[tuple[int, int]] = []
    opened: Fence | None = None
    first = depth = 0
    for number, line in enumerate(lines):
        found = fence(line)
        if opened is None:
            if found:
                opened, first, depth = found, number, indent(line)
        elif found and _closes(found, opened) and indent(line) <= depth + 3:
            blocks.append((first, number))
            opened = None
    if opened is not None:
        blocks.append((first, len(lines) - 1))
    return blocks, opened


def _closes(found: Fence, opened: Fence) -> bool:
    return (
        not found.info
        and found.marker[0] == opened.marker[0]
        and len(found.marker) >= len(opened.marker)
    )


def is_delimiter_row(line: str) -> bool:
    """Whether ``line`` is a pipe table's delimiter row, the one under its header.

    >>> is_delimiter_row("|------|:---:|"), is_delimiter_row("a | b"), is_delimiter_row("---")
    (True, False, False)
    """
    return "|" in line and _DELIMITER_ROW.match(line) is not None


def table_line(line: str) -> str:
    """A pipe table's header or delimiter row without its padding: a table aligned in its
    source pads every cell, and every rule, to its column's widest. The chunker repeats a
    header so, and a quote knows it again so.

    >>> table_line("| Code   |  Meaning |"), table_line("  |------|:--------:|")
    ('| Code | Meaning |', '|---|:---:|')
    """
    cells = " ".join(line.split())
    return _RULE_DASHES.sub("---", cells.replace(" ", "")) if is_delimiter_row(cells) else cells


def indent(line: str) -> int:
    """How far ``line`` is indented (spaces and tabs, a character each).

    >>> indent("    - item"), indent("text")
    (4, 0)
    """
    return len(line) - len(line.lstrip(" \t"))


def dedented(text: str, width: int) -> str:
    r"""``text`` with each line ``width`` characters of its indent fewer (all it has, when
    it has fewer). A block nested in a list item is indented as the item's text is; quoted
    without the item, all its lines move out together, as CommonMark moves a fenced
    block's lines out by its fence's indent, or its fence reads at the margin and its
    closing fence, four spaces in, closes nothing.

    >>> dedented("    ```java\n    run();\n    ```\n- next", 4)
    '```java\nrun();\n```\n- next'
    """
    return "\n".join(
        line[min(width, indent(line) if line.strip() else len(line)) :] for line in text.split("\n")
    )
