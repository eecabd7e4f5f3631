"""An AsciiDoc table's cells, as ``formats.asciidoc`` writes them into a pipe table: the
rows of a ``|===`` table (or a nested ``!===`` one) by its cell separators and their
specifiers, of a CSV (``,===``) or DSV (``:===``) table by its delimiter, and a cell's
blocks on one line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence

from superbiz.knowledge.formats._roles import code_span

#: where a table cell starts: its separator, after its specifier (``2+``, ``3*``, ``a``, ``^.^s``)
_CELL = re.compile(
    r"(?:(?:^|(?<=[ \t\n]))"
    r"(?P<spec>(?:\d+\*)?(?:\d*(?:\.\d+)?\+)?[<^>]?(?:\.[<^>])?[adehlmsv]?))?(?<!\\)\|"
)


def table_cells(
    separator: str, lines: Sequence[str], cols: str | None
) -> list[list[tuple[str, bool]]]:
    """A table's rows of cells, each cell's text and whether it holds AsciiDoc blocks
    (``a|``): so many cells to a row as the table's columns (``cols``, else its first
    line's cells); a cell spanning columns (``2+|``) fills them, one repeated (``3*|``)
    is written as often.

    >>> for row in table_cells("|", ["|Name |Value", "|a |1", "2+|both"], None):
    ...     print(row)
    [('Name', False), ('Value', False)]
    [('a', False), ('1', False)]
    [('both', False), ('', False)]
    >>> table_cells(",", ["a,b", "1,2"], None)
    [[('a', False), ('b', False)], [('1', False), ('2', False)]]
    """
    if separator in ",:":
        split = csv.reader(lines) if separator == "," else (line.split(":") for line in lines)
        return [[(cell, False) for cell in row] for row in split]
    return _cell_rows(separator, lines, _columns(cols, lines, separator))


def in_line(block: str) -> str:
    """A block as a table cell holds it: a fenced code block as a code span, a quote (an
    admonition) without its marks.

    >>> in_line("```json\\n{\\"id\\": 1}\\n```"), in_line("> **Note**\\n> Restart.")
    ('`{"id": 1}`', '**Note** Restart.')
    """
    lines = block.split("\n")
    if block.startswith("```"):
        return code_span(" ".join(lines[1:-1]))
    if block.startswith(">"):
        return " ".join(line.removeprefix(">").strip() for line in lines)
    return block


def _cell_rows(separator: str, lines: Sequence[str], width: int) -> list[list[tuple[str, bool]]]:
    """A ``|===`` (or nested ``!===``) table's cells, ``width`` to a row."""
    text = "\n".join(lines)
    pattern = _CELL if separator == "|" else re.compile(_CELL.pattern.replace(r"\|", "!"))
    starts = list(pattern.finditer(text))
    cells: list[tuple[str, bool]] = []
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        spec = start["spec"] or ""
        repeat = int(spec.split("*", 1)[0]) if "*" in spec else 1
        span = re.match(r"(\d+)\+", spec.split("*")[-1])
        for _ in range(repeat):
            cells.append((text[start.end() : end].strip(), spec.endswith("a")))
            cells.extend([("", False)] * (int(span[1]) - 1 if span else 0))
    return [cells[row : row + width] for row in range(0, len(cells), width)]


def _columns(cols: str | None, content: Sequence[str], separator: str) -> int:
    """How many columns a table has: its ``cols``, else its first line's cells."""
    if cols:
        count = 0
        for entry in re.split(r"[,;]", cols):
            multiplier = re.match(r"\s*(\d+)\*", entry)
            count += int(multiplier[1]) if multiplier else 1
        return max(count, 1)
    for line in content:
        if line.strip():
            return max(line.count(separator), 1)
    return 1
