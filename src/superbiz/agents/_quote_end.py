"""Where a quote ends: the paragraphs that fit its room, a table too long for it by the
rows naming the question, and a cut where a reader expects one. Pure: paragraphs and
terms in, the quote's text out (``passage_quote.best_passage`` reads a passage with it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from superbiz._markdown import closed, fence, is_delimiter_row
from superbiz._text import has_cjk, introduces, normalize

#: the least of what a quote's last line introduces that the quote shows (``within``)
INTRODUCED_CHARS = 240


def names_word(term: str, text: str) -> bool:
    """Whether ``text`` (normalised) names ``term``: a Chinese term anywhere, a Latin one
    as a word or its inflection, not inside a longer word ("option" is not "optional").

    >>> names_word("option", "save-optional"), names_word("report", "it reports")
    (False, True)
    >>> names_word("连接", "连接池")
    True
    """
    if has_cjk(term):
        return term in text
    return (
        re.search(rf"(?<![a-z0-9]){re.escape(term)}(?:s|es|d|ed|ing)?(?![a-z0-9])", text)
        is not None
    )


def within(paragraphs: Sequence[str], limit: int, terms: Sequence[str] = ()) -> str:
    r"""The first of ``paragraphs`` that fit in ``limit`` characters (at least one, cut with
    "…" when it alone is longer; a table too long, by its rows naming ``terms``:
    ``_table_rows``), then the opening of the next, cut, where at least half the room is
    left (the handbook's "a list of people to meet" had been quoted without the list), a
    section's heading never last, nor a thematic break outside code (``---``, which
    separates what follows, and followed Docker's book's diagrams into their quotes). When
    the last ends introducing the next ("Run the following:") and the next does not fit,
    the next's opening follows it, up to ``INTRODUCED_CHARS`` past the limit if need be:
    74 quotes of the four sets ended on such a line, the commands it announced left out.

    >>> within(["Who reaches whom:\n\n```mermaid\nA --> B\n```\n---"], 200)
    'Who reaches whom:\n\n```mermaid\nA --> B\n```'
    >>> block = "\n".join(["```sh", *(f"kubectl drain node-{n} --force" for n in range(9)), "```"])
    >>> print(within(["Drain each node:", block], 100))
    Drain each node:
    <BLANKLINE>
    ```sh
    kubectl drain node-0 --force
    kubectl drain node-1 --force
    kubectl drain node-2 --force
    kubectl drain node-3 --force
    kubectl drain node-4 --force
    kubectl drain node-5 --force
    kubectl drain node-6 --force
    kubectl drain node-7 --force
    …
    ```
    """
    chosen: list[str] = []
    size = 0
    for paragraph in paragraphs:
        if len(paragraph) > limit - size:
            paragraph = _table_rows(paragraph, terms, limit - size)
        if chosen and size + len(paragraph) > limit:
            room = limit - size - 2 * len(chosen)  # the blank lines between them
            # a line introducing the next has a larger allowance (below)
            opening = 2 * room >= limit and not introduces(chosen[-1])
            if opening and not paragraph.startswith("› "):
                chosen.append(cut(paragraph, room))  # its opening, not half the room unused
            break
        chosen.append(paragraph)
        size += len(paragraph)
    if len(chosen) > 1 and chosen[-1].startswith("› "):
        chosen.pop()
    whole = "\n\n".join(chosen)
    passage = cut(whole, limit)
    if passage == whole and len(chosen) < len(paragraphs) and introduces(whole):
        following = paragraphs[len(chosen)]
        if not following.startswith("› "):  # the next section's, not what this introduces
            passage += "\n\n" + cut(following, max(limit - size, INTRODUCED_CHARS))
    # a block cut by the window or by the limit is closed, so the answer after it is text
    if closed(passage) == passage:  # a rule that ends it, outside code, separates nothing
        passage = _LAST_RULE.sub("", passage)
    return closed(passage)


#: a thematic break ending a quote (``---`` under Docker's book's diagrams)
_LAST_RULE = re.compile(r"\n[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})\s*$")
#: a line of a Markdown table
_TABLE_LINE = re.compile(r"[ \t]*\|")


def _table_rows(table: str, terms: Sequence[str], room: int) -> str:
    r"""A Markdown ``table`` longer than ``room`` characters as its header and the rows
    that name a code of ``terms`` (a number: "403", "1290"), then the most of them, as
    many as fit, in the table's order, with "…" for the rows left out: cut at its last
    whole row, a table of error codes lost the 403 rows a question about a 403 asked
    for. Anything else, or a table no row of which names a term, is returned as it is
    (``cut`` keeps its first rows).

    >>> table = "| HTTP | Meaning |\n|---|---|\n| 401 | expired |\n| 403 | no scope |"
    >>> print(_table_rows(table, ["403"], 60))
    | HTTP | Meaning |
    |---|---|
    | 403 | no scope |
    …
    """
    lines = table.split("\n")
    if len(lines) < 3 or not is_delimiter_row(lines[1]):
        return table
    if not all(_TABLE_LINE.match(line) for line in lines):
        return table
    head, rows = lines[:2], lines[2:]
    named = [
        (sum(term.isdigit() for term in found), len(found))
        for found in ([t for t in terms if names_word(t, text)] for text in map(normalize, rows))
    ]
    size = sum(len(line) + 1 for line in head) + len("…")
    kept: list[int] = []
    for i in sorted(range(len(rows)), key=lambda i: named[i], reverse=True):
        if not named[i][1]:
            break
        if size + len(rows[i]) + 1 <= room:
            kept.append(i)
            size += len(rows[i]) + 1
    if not kept:
        return table
    return "\n".join([*head, *(rows[i] for i in sorted(kept)), "…"])


#: a sentence's end: a full stop after a word (not "e.g."), or a Chinese one
_SENTENCE_END = re.compile(r"(?:(?<=[^\W\d_]{2})|(?<=[)\]`'\"”]))[.!?;](?=\s)|[。！？；]")


def cut(passage: str, limit: int) -> str:
    r"""``passage`` cut to ``limit`` characters where a reader expects a cut: after its last
    whole line that fits, else its last sentence, else its last word, each only when it
    keeps half the room (a long line is still quoted); then "…", and an inline code span
    the cut left open is closed (a word or a command cut in two reads as a typo).

    >>> cut("1. Restart the pod.\n2. Check `kubectl logs pay-callback` for errors", 36)
    '1. Restart the pod.\n…'
    >>> cut("Restart the failing pod. Then read its logs for the request", 40)
    'Restart the failing pod. …'
    >>> cut("Check whether the backend `auth-service` is healthy now", 40)
    'Check whether the backend `auth-service`…'
    >>> cut("Check whether `kubectl describe node` says DiskPressure", 30)
    'Check whether `kubectl`…'
    """
    if len(passage) <= limit:
        return passage
    room, least = passage[: limit + 1], limit // 2
    line = room.rfind("\n")
    if line >= least:
        return passage[:line].rstrip() + "\n…"
    ends = [m.end() for m in _SENTENCE_END.finditer(room)]
    if ends and ends[-1] >= least:
        return passage[: ends[-1]] + " …"
    space = max(room.rfind(" "), room.rfind("\t"))
    head = passage[:space].rstrip() if space >= least else passage[:limit].rstrip()
    last = head.rsplit("\n", 1)[-1]
    if last.count("`") % 2 and fence(last) is None:
        head += "`"
    return head + "…"
