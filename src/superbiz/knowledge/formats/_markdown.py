"""Markdown writing shared by the format converters: every format becomes the Markdown
the chunker already reads, so a heading path, a table or a code block means the same
thing whichever file it came from."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BACKTICKS = re.compile(r"`+")
#: a line that opens a fenced code block, the fence as group 1
CODE_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


def inline(text: str) -> str:
    """Text on one line, runs of white space as one space (a heading, a table cell)."""
    return _SPACES.sub(" ", text.replace("\n", " ")).strip()


def heading(level: int, text: str) -> str:
    """``## text`` at ``level`` (1–6); empty when there is no text."""
    text = inline(text)
    return f"{'#' * min(max(level, 1), 6)} {text}" if text else ""


def fence(code: str, language: str = "") -> str:
    """``code`` verbatim in a fence longer than any backtick run inside it."""
    longest = max((len(run) for run in _BACKTICKS.findall(code)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{inline(language)}\n{code.rstrip(chr(10))}\n{marks}"


def closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence``: its character, as many or more.

    >>> closes_fence("````", "```"), closes_fence("```python", "```")
    (True, False)
    """
    stripped = line.strip()
    return len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def fence_after(line: str, fence: str | None) -> str | None:
    """The fence of the code block open after ``line``, given the one open before it
    (None: outside any), for readers that walk a page a line at a time.

    >>> fence_after("```bash", None), fence_after("echo", "```"), fence_after("```", "```")
    ('```', '```', None)
    """
    if fence is not None:
        return None if closes_fence(line, fence) else fence
    opening = CODE_FENCE.match(line)
    return opening.group(1) if opening else None


def lines_outside_code(markdown: str, rewrite: Callable[[str], str | None]) -> str:
    """``markdown`` with each line outside its fenced code blocks replaced by
    ``rewrite(line)``, or left out where that is None; a code block stays as written.

    >>> lines_outside_code("note\\n```\\nnote\\n```", str.upper)
    'NOTE\\n```\\nnote\\n```'
    >>> lines_outside_code("<br>\\ntext", lambda line: None if line == "<br>" else line)
    'text'
    """
    out: list[str] = []
    fence: str | None = None
    for line in markdown.split("\n"):
        written = rewrite(line) if fence is None else line
        if written is not None:
            out.append(written)
        fence = fence_after(line, fence)
    return "\n".join(out)


def without_blank_ends(lines: Sequence[str]) -> list[str]:
    """``lines`` without the blank lines before the first and after the last text.

    >>> without_blank_ends(["", "Restart.", " ", ""])
    ['Restart.']
    """
    filled = [number for number, line in enumerate(lines) if line.strip()]
    return list(lines[filled[0] : filled[-1] + 1]) if filled else []


def quoted(lines: Sequence[str]) -> list[str]:
    """``lines`` as a Markdown quote (a note under its title, a blockquote).

    >>> quoted(["**Note**", "", "Restart."])
    ['> **Note**', '>', '> Restart.']
    """
    return [f"> {line}".rstrip() for line in lines]


def table(rows: Sequence[Sequence[str]]) -> str:
    """A pipe table; the first row is the header. Pipes inside cells are escaped and
    short rows padded, so every row has the header's width."""
    cells = [[inline(cell).replace("|", "\\|") for cell in row] for row in rows if row]
    if not cells:
        return ""
    width = max(len(row) for row in cells)
    cells = [row + [""] * (width - len(row)) for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + " --- |" * width]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)


def join_blocks(blocks: Sequence[str]) -> str:
    """Blocks separated by one blank line, empty ones dropped."""
    return "\n\n".join(block.strip("\n") for block in blocks if block.strip()) + "\n"
