"""How a stored window of a section reads as a quote. The chunker cuts a long section
into windows that overlap, each begun on a word; a quote of one began in the middle of a
sentence, a list item or a code block, or ended on a table's header or on the line that
announces what follows. These put each window back into the text it was cut from: joined
with its neighbours (``joined``), begun where its sentence, item or code block does
(``quoted_window``, ``from_sentence_start``), and with the rows or the lines its end
introduces (``with_table_rows``, ``with_introduced``). Pure: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise, takewhile

from superbiz._markdown import (
    closed,
    dedented,
    fence,
    fenced,
    indent,
    is_delimiter_row,
    open_block,
    table_line,
)
from superbiz._text import introduces

#: a sentence's end; the period of an abbreviation inside a sentence ("e.g. `R_OK`") is
#: none, and a Chinese full stop's end takes the marks that close it ("**确认单笔还是批量。**")
_SENTENCE_END = re.compile(
    r"[!?]\s+|(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\bcf)(?<!\bincl)(?<!\bapprox)\.\s+"
    r"|[。！？][*_\"')\]”’」』）]*\s*|\n\s*\n",
    re.IGNORECASE,
)
#: what stands before a sentence's end on its line where a list item or a paragraph, not a
#: sentence, starts: an item's number ("2. **Large batch writes …**"), or a bold lead at
#: the line's start, an item's or not ("4. **区分慢在哪一步。**", "**注意。**")
_ITEM_LEAD = re.compile(r"[ \t]*(?:\d{1,3}|(?:(?:[-*+]|\d{1,3}[.)])[ \t]+)?\*\*[^*\n]*)")
#: the longest overlap of two windows sought (the chunker's is 100 characters, begun on a
#: word), and how far back before it a sentence's start is
_CONTINUATION_REACH = 200
#: a shorter overlap is a coincidence, not a continuation
_MIN_OVERLAP = 20
#: a line that opens a list item: ``- ``, ``* ``, ``+ ``, ``2. `` or ``2) ``
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]")


def joined(windows: Sequence[str]) -> str:
    r"""Consecutive windows of one section as the text they were cut from: each after the
    first without what it shares with the one before.

    >>> joined(["Restart the failing pod, then read", "the failing pod, then read its logs."])
    'Restart the failing pod, then read its logs.'
    """
    section = windows[0]
    for before, window in pairwise(windows):
        shared = _overlap(before, window)
        # windows that do not overlap met at a line break: "```" then "```mjs" are two lines
        section += window[shared:] if shared else f"\n{window}"
    return section


def quoted_window(windows: Sequence[str]) -> str:
    r"""The last of ``windows`` (consecutive windows of one section, in order) as a quote
    reads it. The chunker cuts a long section into windows that overlap, each begun on a
    word: a quote of a later window began in the middle of a sentence ("would provide an
    extra dose of insurance …") or of a code block, whose lines then read as prose. So it
    starts where its first sentence does (``from_sentence_start``), or, inside a fenced
    code block, at that block's opening fence when the window before opened it (the whole
    example: Node.js's readline "Read file stream line-by-line" was quoted from its
    ``console.log`` line), else at its first whole line under the fence (a long block).

    A block quoted from its fence keeps the line that introduces it ("Run:", a line
    ending in a colon just before the fence): without it a reader gets the example and
    not what it is an example of.

    >>> first = "Run:\n```sh\nredis-cli ping\nredis-cli info memory\nredis-cli info"
    >>> quoted_window([first, "cli info memory\nredis-cli info\nredis-cli dbsize\n```"])
    'Run:\n```sh\nredis-cli ping\nredis-cli info memory\nredis-cli info\nredis-cli dbsize\n```'
    """
    text = windows[-1]
    if len(windows) < 2:
        return text
    section = joined(windows[:-1])
    shared = _overlap(windows[-2], text)
    before = section[: len(section) - shared]
    opening = _open_block(before)
    if opening is None:
        quote = from_sentence_start(windows[-2], text)
        whole = section + text[shared:] if shared else f"{section}\n{text}"
        if whole.endswith(quote):
            quote = _under_parent(whole[: len(whole) - len(quote)], quote)
        return _introduced(section, quote) if quote == text and not shared else quote
    start, fence_line = opening
    if start >= len(section) - len(windows[-2]):  # the window before opened it
        block = (section + text[shared:])[start:]
        return _introduced(section[:start], dedented(block, indent(fence_line)))
    line_end = text.find("\n")
    whole = text[line_end + 1 :] if 0 <= line_end < shared else text
    return dedented(f"{fence_line}\n{whole}", indent(fence_line))


def _open_block(text: str) -> tuple[int, str] | None:
    r"""Where the code block that ``text`` leaves open starts, and its opening fence line.

    >>> _open_block("Run:\n```sh\nls"), _open_block("```sh\nls\n```")
    ((5, '```sh'), None)
    """
    lines = text.split("\n")
    first = open_block(lines)
    if first is None:
        return None
    return sum(len(line) + 1 for line in lines[:first]), lines[first]


def with_table_rows(text: str, later: Sequence[str]) -> str:
    r"""``text`` with the rows of its last table that the ``later`` windows (the section's
    next ones, in order) carry on: the chunker begins a window among a table's rows under
    the table's header, so a quote of the window that scored best held half the table (a
    question about a 403 got the 401 rows and one 403 row; the other two were in the next
    window). A window that does not repeat the header, or a table that does not end
    ``text``, adds nothing.

    >>> first = "Codes:\n| Code | Meaning |\n|---|---|\n| 401 | expired |\n| 403 | no scope |"
    >>> later = "| Code | Meaning |\n|---|---|\n| 403 | no scope |\n| 404 | gone |\n\nDone."
    >>> print(with_table_rows(first, [later]))
    Codes:
    | Code | Meaning |
    |---|---|
    | 401 | expired |
    | 403 | no scope |
    | 404 | gone |
    """
    lines = text.rstrip().split("\n")
    rule = next((i for i in range(len(lines) - 1, 0, -1) if is_delimiter_row(lines[i])), None)
    if rule is None or not all(line.lstrip().startswith("|") for line in lines[rule - 1 :]):
        return text
    header = [table_line(line) for line in lines[rule - 1 : rule + 1]]
    rows = lines[rule + 1 :]
    held = {row.strip() for row in rows}
    for window in later:
        more = window.split("\n")
        if [table_line(line) for line in more[:2]] != header:
            break
        tail = list(takewhile(lambda line: line.lstrip().startswith("|"), more[2:]))
        rows += [row for row in tail if row.strip() not in held]
        held.update(row.strip() for row in tail)
        if len(tail) < len(more) - 2:  # the table ends in this window
            break
    if len(rows) == len(lines) - rule - 1:
        return text
    return "\n".join([*lines[: rule + 1], *rows])


def with_introduced(text: str, later: Sequence[str]) -> str:
    r"""``text`` with what its last line introduces, when that line ends in a colon and
    the section's next window (``later``'s first) carries on past it: its next paragraph,
    a code block whole (closed with "…" where the next window cuts it). A window ends at
    a paragraph's end, so a quote could end on "您可能需要手动配置以下依赖：" with the
    dependencies in the next window.

    >>> first = "It fails when the slot is gone.\n\nRecreate the slot:"
    >>> later = "slot is gone.\n\nRecreate the slot:\n\n```sql\nSELECT 1;\n\nSELECT 2;\n```\n\nOK"
    >>> with_introduced(first, [later]).split("\n\n", 1)[1]
    'Recreate the slot:\n\n```sql\nSELECT 1;\n\nSELECT 2;\n```'
    >>> with_introduced("Run:", ["Run:\nmake"])
    'Run:\nmake'
    >>> with_introduced("Done.", [later]), with_introduced(first, [])[-5:]
    ('Done.', 'slot:')
    >>> with_introduced(first, [later[:-17]]).split("slot:")[1]  # the next window cuts it
    '\n\n```sql\nSELECT 1;\n…\n```'
    """
    if not later or not introduces(text):
        return text
    last = text.rstrip().rpartition("\n")[2]
    # the next window may begin at the introducing line itself, too short to count as overlap
    shared = _overlap(text, later[0]) or (len(last) if later[0].startswith(last) else 0)
    rest = later[0][shared:] if shared else f"\n{later[0]}"
    body = rest.lstrip("\n")
    lines = body.split("\n")
    code = fenced(lines)
    end = next((i for i, line in enumerate(lines) if i and not (line.strip() or code[i])), None)
    paragraph = "\n".join(lines[:end]).rstrip()
    if not paragraph:
        return text
    if open_block(paragraph.split("\n")) is not None:  # the block runs on past the window
        paragraph = closed(f"{paragraph}\n…")
    gap = rest[: len(rest) - len(body)] or "\n"  # the line break, or the blank line, between
    return f"{text.rstrip()}{gap}{paragraph}"


def _under_parent(preceding: str, quote: str) -> str:
    r"""``quote`` under the list item it is nested in, when it begins with an item indented
    below one (``preceding``, the section's text before it, ends with that indent): the
    webhook runbook's "Read the pattern:" above its cases, whose quote began at the third
    case with nothing to say what the cases are of. A parent longer than
    ``_CONTINUATION_REACH`` is a paragraph, not a line that introduces: left out.

    >>> before = "1. Find it.\n2. Read the pattern:\n   - `timeout`: slow.\n   "
    >>> _under_parent(before, "- `tls`: expired.")
    '2. Read the pattern:\n   - `tls`: expired.'
    >>> _under_parent("Intro.\n", "- `tls`: expired.")
    '- `tls`: expired.'
    >>> _under_parent(before.rstrip(" "), "   - `tls`: expired.")  # begun at its line
    '2. Read the pattern:\n   - `tls`: expired.'
    """
    start = preceding.rfind("\n") + 1
    item = quote.lstrip(" \t")  # a window begun at its line keeps the line's indent
    depth = preceding[start:] + quote[: len(quote) - len(item)]
    if not depth or depth.strip() or not _LIST_ITEM.match(item):
        return quote
    for line in reversed(preceding[:start].split("\n")):
        if not line.strip() or indent(line) >= len(depth):
            continue  # a blank line in a loose list, or a sibling of the quote's item
        if _LIST_ITEM.match(line) and len(line.strip()) <= _CONTINUATION_REACH:
            return f"{line}\n{depth}{item}"
        return quote
    return quote


def _introduced(preceding: str, quote: str) -> str:
    r"""``quote`` with the line that introduces it, when it opens with a code fence and
    the last line of ``preceding`` (the text just before it) ends in a colon and is no
    longer than ``_CONTINUATION_REACH``.

    >>> _introduced("Intro.\nTo check it:\n", "```sh\nping\n```")
    'To check it:\n```sh\nping\n```'
    >>> _introduced("It is fine.", "```sh\nping\n```")
    '```sh\nping\n```'
    >>> _introduced("1. To check it:\n\n", "   ```sh\n   ping\n   ```")
    '1. To check it:\n```sh\nping\n```'
    """
    first = quote.partition("\n")[0]
    if fence(first) is None:
        return quote
    line = preceding.rstrip().rpartition("\n")[2].strip()
    if not introduces(line) or len(line) > _CONTINUATION_REACH:
        return quote
    return f"{line}\n{dedented(quote, indent(first))}"


def from_sentence_start(previous: str, text: str) -> str:
    r"""``text`` from the start of its first sentence, taken from ``previous`` (the window
    before it, under the same heading) when ``text`` begins with the tail of it; a window
    that begins a sentence or a paragraph, or does not continue ``previous``, is returned
    as it is. When the sentence starts out of reach (behind a code block, a long list
    item), the quote starts at the next sentence instead of on "instead." or "is full";
    a code block's closing fence ends what came before it (an etcd cluster's YAML was
    quoted from its "networks:" down to the fence, above the sentence after it).

    >>> before = "Pin it. Then install\nthe whole tool --no-deps"
    >>> from_sentence_start(before, "the whole tool --no-deps, safer.")
    'Then install\nthe whole tool --no-deps, safer.'
    >>> from_sentence_start("Pin it. Then install", "Next step.")
    'Next step.'
    >>> code = "```\nget('http://%zz/')\n```\nLastly, " + "IncompleteRead raises " * 9
    >>> tail = "a ChunkedEncodingError instead."
    >>> from_sentence_start(code + tail, tail + "\n- The proxy API changed.")
    '- The proxy API changed.'
    """
    shared = _overlap(previous, text)
    if not shared:
        return text
    at = len(previous) - shared
    window = previous[max(0, at - _CONTINUATION_REACH) : at]
    if _past_last_fence(window) == len(window):
        # begun on the line after a code block: no sentence of it is looked for inside
        # the code (an etcd cluster's YAML was quoted from its "networks:")
        return text
    ends = _sentence_starts(window)
    if not ends and at > _CONTINUATION_REACH:
        following = _sentence_starts(text[:_CONTINUATION_REACH])
        rest = text[following[0] :] if following else ""
        return rest if rest.strip() else text
    head = window[ends[-1] :] if ends else ""
    return head + text if head.strip() else text


def _past_last_fence(text: str) -> int | None:
    r"""Where the line after the last fence line of ``text`` starts, if it has one.

    >>> _past_last_fence("  - x\n```\n"), _past_last_fence("```\nls\n```\nThen")
    (10, 11)
    >>> _past_last_fence("no fence") is None
    True
    """
    lines = text.split("\n")
    last = next((i for i in range(len(lines) - 1, -1, -1) if fence(lines[i])), None)
    if last is None:
        return None
    return min(len(text), sum(len(line) + 1 for line in lines[: last + 1]))


def _sentence_starts(text: str) -> list[int]:
    r"""Where sentences of ``text`` start after its first: past each sentence's end (a
    Chinese one's closing marks with it), and at the line of a list item, whose number's
    period or bold lead's end starts the item, or of a paragraph's bold lead (a quote begun
    after "2. " read "**Large batch writes …**" without its number; one begun after
    "4. **区分慢在哪一步。" read "**" first).

    >>> text = "Check it. Then:\n1. Stop the job.\n2. Drain it."
    >>> [text[i:] for i in _sentence_starts(text)][:3]
    ['Then:\n1. Stop the job.\n2. Drain it.', '1. Stop the job.\n2. Drain it.', '2. Drain it.']
    >>> text = "先看看板。\n4. **区分慢在哪一步。**\n   - 看日志"
    >>> [text[i:] for i in _sentence_starts(text)]
    ['4. **区分慢在哪一步。**\n   - 看日志']
    """
    starts: list[int] = []
    for match in _SENTENCE_END.finditer(text):
        line = text.rfind("\n", 0, match.start()) + 1
        start = line if _ITEM_LEAD.fullmatch(text, line, match.start()) else match.end()
        if start and start not in starts:
            starts.append(start)
    return starts


def _overlap(previous: str, text: str) -> int:
    """How many characters ``text`` begins with that ``previous`` ends with (0: fewer
    than ``_MIN_OVERLAP``, a coincidence rather than a continuation)."""
    longest = min(len(previous), len(text), _CONTINUATION_REACH)
    return next((k for k in range(longest, _MIN_OVERLAP - 1, -1) if previous.endswith(text[:k])), 0)
