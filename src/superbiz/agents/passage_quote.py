"""The part of a passage an answer quotes: the section that answers, by its paragraphs
naming the question's terms, cut where a reader expects a cut (``_quote_end``). Pure:
Markdown and terms in, the quote out (``best_passage``); the extractive answer
(``agents.extractive``) quotes each document it cites this way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from superbiz._markdown import dedented, fenced, indent
from superbiz._text import introduces, normalize
from superbiz.agents._quote_end import names_word, within

#: the longest quote of one document, in characters
PASSAGE_CHARS = 700


@dataclass(frozen=True, slots=True)
class _Section:
    """A heading and the paragraphs under it, up to the next heading (any level), each as
    written (``_placed`` indents them as a quote reads them)."""

    heading: str
    paragraphs: tuple[str, ...]
    #: how far each paragraph's first line is indented (a nested list item's is)
    indents: tuple[int, ...]

    @property
    def title(self) -> str:
        """The heading's words, without its ``#`` marks."""
        return self.heading.lstrip("#").strip()

    @property
    def level(self) -> int:
        """How many ``#`` marks its heading has (0: no heading)."""
        return len(self.heading) - len(self.heading.lstrip("#"))

    def hits(self, terms: Sequence[str]) -> tuple[int, int]:
        """How many of ``terms`` it mentions, then how often in all."""
        counts = [self._text.count(term) for term in terms]
        return sum(c > 0 for c in counts), sum(counts)

    def named(self, terms: Sequence[str]) -> set[str]:
        """Which of ``terms`` it mentions as words (``names_word``)."""
        text = self._text
        return {term for term in terms if names_word(term, text)}

    @property
    def _text(self) -> str:
        return normalize(self.heading + "\n" + "\n".join(self.paragraphs))


_HEADING = re.compile(r"#{1,6}\s")


def _sections(text: str) -> list[_Section]:
    """``text`` cut at its Markdown headings, each section into paragraphs at blank lines.
    A fenced code block is code: a ``#`` line in it is no heading and a blank line in it
    ends no paragraph, so a quote never holds half a block."""
    sections: list[tuple[str, list[list[str]]]] = [("", [[]])]
    lines = text.splitlines()
    for line, code in zip(lines, fenced(lines), strict=True):
        if not code and _HEADING.match(line):
            sections.append((line, [[]]))
        elif not code and not line.strip():
            sections[-1][1].append([])
        else:
            sections[-1][1][-1].append(line)
    result = []
    for heading, runs in sections:
        # a run begins at a line that holds something: at a blank line one ends
        kept = [("\n".join(run).rstrip(), indent(run[0])) for run in runs if run]
        if heading or kept:
            result.append(_Section(heading, tuple(p for p, _ in kept), tuple(i for _, i in kept)))
    return result


#: the longest parent item line a quote begins with (a longer one is a paragraph)
_PARENT_CHARS = 200
#: a line that opens a list item: ``- ``, ``* ``, ``+ ``, ``2. `` or ``2) ``
_LIST_ITEM = re.compile(r"(?:[-*+]|\d{1,3}[.)])[ \t]")


def _placed(section: _Section, chosen: Sequence[int]) -> list[str]:
    r"""The paragraphs ``chosen`` (their places in ``section``, in order) as a quote reads
    them: one nested in a quoted list item keeps its depth below that item (the item's
    image, code block or list: with only its first line unindented, Harbor's "* Hourly" read
    as an item of "* None"); any other starts at the margin. When the first is an item
    nested in one not chosen, that item's first line (up to ``_PARENT_CHARS``) comes first
    (TiDB's troubleshooting map quoted "- 客户端：…" without "- 3.2.1 现象" above it).

    >>> section = _sections("## OOM\n\n- 3.2.1 现象\n\n    - 客户端：报错 2013\n\n- 3.2.2 原因")[0]
    >>> _placed(section, [1])
    ['- 3.2.1 现象', '    - 客户端：报错 2013']
    >>> _placed(section, [0, 1]) == _placed(section, [1]), _placed(section, [2])
    (True, ['- 3.2.2 原因'])
    """
    pieces = [(section.paragraphs[i], section.indents[i]) for i in chosen]
    if chosen and (parent := _parent_item(section, chosen[0])):
        pieces.insert(0, parent)
    placed: list[str] = []
    items: list[tuple[int, int]] = []  # the quoted items still open: (depth, depth placed)
    for text, depth in pieces:
        while items and items[-1][0] >= depth:
            items.pop()
        shift = items[-1][1] + depth - items[-1][0] if items else 0
        placed.append(dedented(text, depth - shift))
        if (item := _last_item(text)) is not None:
            items.append((item, max(0, item - depth + shift)))
    return placed


def _last_item(text: str) -> int | None:
    r"""How far the last line of ``text`` that opens a list item is indented (None: no
    line does, code apart): a paragraph may end in the item its next one is nested in.

    >>> _last_item("Retries:\n  - max: 16"), _last_item("```yaml\n- name: x\n```")
    (2, None)
    """
    lines = text.split("\n")
    for line, code in reversed(list(zip(lines, fenced(lines), strict=True))):
        if not code and _LIST_ITEM.match(line.lstrip(" \t")):
            return indent(line)
    return None


def _parent_item(section: _Section, at: int) -> tuple[str, int] | None:
    """The first line of the list item the ``at``-th paragraph of ``section`` is nested
    in, and its depth, when that paragraph is a nested item; else None."""
    depth = section.indents[at]
    if not depth or not _LIST_ITEM.match(section.paragraphs[at].lstrip(" \t")):
        return None
    for j in range(at - 1, -1, -1):
        if section.indents[j] < depth:
            line = section.paragraphs[j].split("\n", 1)[0].lstrip(" \t")
            if _LIST_ITEM.match(line) and len(line) <= _PARENT_CHARS:
                return line, section.indents[j]
            return None
    return None


class QuotedPassage(NamedTuple):
    """What an extractive answer quotes of a passage: the heading of the section the quote
    starts in ("" when that is the passage's own, which its stored heading names) and the
    quoted text."""

    heading: str
    text: str


def best_passage(
    text: str, terms: Sequence[str], limit: int = PASSAGE_CHARS, *, from_start: bool = False
) -> QuotedPassage:
    r"""The passage of ``text`` that answers ``terms``: the section (heading to heading)
    that mentions the most of them (ties: the most mentions), then any other section
    mentioning more than half as many and one the quote does not name yet, best first,
    each by its paragraphs naming one, under its heading (all of them, from its start,
    when only its heading names any: an FAQ's question, answered by what follows it).
    Quoting the document's opening because it names the product once is what this
    avoids; with no term anywhere, the opening it is, each section after the first
    under its heading (``_read_on``). A section that only repeats the
    quote's words (the next command of a reference page, under words every section
    uses) is left out. ``from_start``: every section in order from the first, as the part
    of a document after its problem's statement is read (``states_problem``).

    >>> best_passage("# T\n\nintro\n\nredis pool is full\n\nother", ["redis"], 100).text
    'redis pool is full'
    >>> best_passage("# T\n\nuses redis\n\n## Full pool\n\nredis pool is full", ["redis", "pool"])
    QuotedPassage(heading='Full pool', text='redis pool is full')
    >>> best_passage("## Why is the pool full?\n\nClients leak connections.", ["pool", "full"])
    QuotedPassage(heading='Why is the pool full?', text='Clients leak connections.')
    >>> best_passage("# RedisPoolFull\n\n## Meaning\n\nThe pool is full.", ["redis", "pool"])
    QuotedPassage(heading='Meaning', text='The pool is full.')
    """
    sections = _sections(text)
    if from_start:
        return _read_on(sections, limit)
    # a heading with nothing under it before the next one (a page's title) has nothing
    # to quote: "etcdGRPCReadRequestsSlow" named every word of its alert and was quoted empty
    hits = [s.hits(terms) if s.paragraphs else (0, 0) for s in sections]
    best = max(hits, default=(0, 0))[0]
    if not best:
        # read as written: "怎么处理？" quoted a passage's "排查步骤", its "处理" and the
        # next part's "症状" as one list, under "排查步骤"
        return _read_on(sections, limit)
    ranked = sorted(range(len(sections)), key=lambda i: (-hits[i][0], -hits[i][1], i))
    if states_problem(sections[ranked[0]].title, terms):
        after = sections[ranked[0] + 1 :]
        if any(s.hits(terms)[0] for s in after if s.paragraphs):
            return _read_on(after, limit)
    quoted: list[int] = []
    named: set[str] = set()
    for i in ranked:
        names = sections[i].named(terms)
        if 2 * hits[i][0] > best and (not quoted or names - named):
            quoted.append(i)
            named |= names
    paragraphs: list[str] = []
    for i in quoted:
        # a section that names the question only in its heading (an FAQ's question) is
        # answered by what follows it: read from its start (its paragraphs naming none of
        # the terms, the quote had been the heading alone)
        chosen = _reading(sections[i].paragraphs, terms) or range(len(sections[i].paragraphs))
        own = _placed(sections[i], chosen)
        if paragraphs and own and sections[i].heading:
            own.insert(0, f"› {sections[i].title}")
        paragraphs += own
    return QuotedPassage(sections[quoted[0]].title, within(paragraphs, limit, terms))


#: a paragraph that only marks what follows as the answer: a FAQ's "回答：", "A:"
_ANSWER_LABEL = re.compile(r"\s*(?:回答|答|解答|answer|a)\s*[:：]\s*", re.IGNORECASE)


def _read_on(sections: Sequence[_Section], limit: int) -> QuotedPassage:
    r"""``sections`` quoted in order from the first's start, each after the first under its
    heading, a FAQ's answer label left out: what follows a problem's statement, or the
    section a question asks for, read as written.

    >>> print(_read_on(_sections("## Q: Is it safe?\n\n回答：\n\nYes."), 100).text)
    Yes.
    """
    paragraphs: list[str] = []
    above: list[_Section] = []  # headings after the first with nothing under them yet
    for at, section in enumerate(sections):
        own = _placed(section, range(len(section.paragraphs)))
        if own and _ANSWER_LABEL.fullmatch(own[0]):  # a FAQ's "回答：" under its question
            own = own[1:]
        if not own:
            if at and section.heading:
                above = [*(s for s in above if s.level < section.level), section]
            continue
        if at and section.heading:
            # "› 二、内存打满与淘汰 › 症状": not the symptoms of the part before
            path = [s.title for s in above if s.level < section.level] + [section.title]
            own.insert(0, "› " + " › ".join(path))
        above = []
        paragraphs += own
    return QuotedPassage(sections[0].title, within(paragraphs, limit))


def after_section(text: str, title: str) -> str:
    r"""What ``text`` holds after its section headed ``title``: from the next heading on,
    code apart ("" when that section runs to the end).

    >>> after_section("## Symptoms\n\nslow\n\n### Investigation\n\nrun it", "Symptoms")
    '### Investigation\n\nrun it'
    """
    lines = text.split("\n")
    inside = False
    for at, (line, code) in enumerate(zip(lines, fenced(lines), strict=True)):
        if not code and _HEADING.match(line):
            if inside:
                return "\n".join(lines[at:])
            inside = line.lstrip("#").strip() == title
    return ""


def inner_sections(text: str) -> list[tuple[str, str]]:
    r"""The sections ``text`` holds below its first line, code apart: each heading's
    words and its section, from the heading up to the next heading of its level or
    above. A passage of small sections (a runbook's "排查步骤" and "处理" stored as one)
    is headed by its first; these are the others.

    >>> text = "### Steps\n\nrun\n\n### Fix\n\nrestart\n\n## Mem\n\n### Full"
    >>> for title, section in inner_sections(text):
    ...     print(title, repr(section))
    Fix '### Fix\n\nrestart'
    Mem '## Mem\n\n### Full'
    Full '### Full'
    """
    lines = text.split("\n")
    marks = [
        (at, len(line) - len(line.lstrip("#")), line.lstrip("#").strip())
        for at, (line, code) in enumerate(zip(lines, fenced(lines), strict=True))
        if not code and _HEADING.match(line)
    ]
    first = next((at for at, line in enumerate(lines) if line.strip()), 0)
    found = []
    for k, (at, level, title) in enumerate(marks):
        if at > first:
            end = next((a for a, deeper, _ in marks[k + 1 :] if deeper <= level), len(lines))
            found.append((title, "\n".join(lines[at:end]).rstrip()))
    return found


def last_heading(text: str) -> str:
    r"""The words of the last heading ``text`` holds, code apart ("" when none).

    >>> last_heading("## Cause\n\n```sh\n# not one\n```\n\n### Fix\n\nrestart")
    'Fix'
    """
    return next((s.title for s in reversed(_sections(text)) if s.heading), "")


#: headings under which a runbook or a knowledge-base article states its problem (what
#: the user sees) before its cause and its fix: Longhorn's "Symptoms", Atlassian's
#: "Problem", Red Hat's "Issue", "现象" (compared as ``_heading_name`` reads them)
_PROBLEM_STATEMENTS = frozenset(
    (
        "symptom",
        "symptoms",
        "problem",
        "problem description",
        "issue",
        "issue description",
        "现象",
        "症状",
        "问题",
        "问题描述",
        "问题现象",
        "故障现象",
        "错误现象",
        "报错现象",
    )
)


def states_problem(heading: str, terms: Sequence[str]) -> bool:
    """Whether a section under ``heading`` states the problem its document is about, and
    the question (``terms``) does not ask for that by name. Such a section repeats the
    question in the document's words, so it matches a question best and answers none:
    "Why are my instance manager pods restarted every hour?" was answered with Longhorn's
    "Symptoms: The instance manager pods are restarted every hour."; its "Reason" and
    "Solution" follow it.

    >>> states_problem("## 2. Symptoms:", ["pods"]), states_problem("症状", ["症状", "卷"])
    (True, False)
    >>> states_problem("Symptoms of a full disk", ["disk"])
    False
    """
    name = _heading_name(heading)
    return name in _PROBLEM_STATEMENTS and not any(names_word(term, name) for term in terms)


#: a heading's number ("2.", "3.1", "一、") and its closing colon
_HEADING_DECOR = re.compile(r"^(?:[\d.]+|[一二三四五六七八九十]+、)\s*|\s*[:：]$")


def _heading_name(heading: str) -> str:
    """A heading's words as ``_PROBLEM_STATEMENTS`` holds them: no ``#``, number or colon.

    >>> _heading_name("## 2.1 Problem description:"), _heading_name("一、问题现象")
    ('problem description', '问题现象')
    """
    return _HEADING_DECOR.sub("", normalize(heading.lstrip("#")).strip()).strip()


def _reading(paragraphs: Sequence[str], terms: Sequence[str]) -> list[int]:
    r"""Where ``paragraphs`` name one of ``terms``, with what they read with: one that
    introduces the next with a colon keeps it, and a paragraph between two of them is kept
    (CMake's "For example, the code:", its code block, then "will run ``someHasher``": the
    quote had lost the code).

    >>> _reading(["Run it:", "```\nmake\n```", "It builds.", "Other."], ["run", "builds"])
    [0, 1, 2]
    """
    named = [any(t in normalize(p) for t in terms) for p in paragraphs]
    last = len(paragraphs) - 1
    return [
        i
        for i in range(len(paragraphs))
        if named[i]
        or (i > 0 and named[i - 1] and introduces(paragraphs[i - 1]))
        or (0 < i < last and named[i - 1] and named[i + 1])
    ]
