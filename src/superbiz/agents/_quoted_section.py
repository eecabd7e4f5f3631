"""What one document's quote is, among its stored passages: the section headed by what
the question asks (``heading_match``), by a passage's heading or one inside a passage of
several small sections; the section after a passage that states the problem; a window
read from where its sentence, code block or table begins. Pure: passages in, the passage
to quote out (``answer_selection`` chooses the documents).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from superbiz._text import normalize
from superbiz.agents.passage_quote import (
    after_section,
    best_passage,
    inner_sections,
    last_heading,
    states_problem,
)
from superbiz.knowledge.documents.ingested import as_rendered
from superbiz.retrieval.passages import heading_matcher
from superbiz.retrieval.quote_windows import (
    joined,
    quoted_window,
    with_introduced,
    with_table_rows,
)


@dataclass(frozen=True, slots=True)
class Passage:
    """One stored passage of a document: its heading path, text and dense vector."""

    heading: str
    text: str
    vector: np.ndarray | None = field(default=None, compare=False)


class StoredPassage(Protocol):
    """A passage as the knowledge base stores it (a chunk: ``ChunkHit`` is one)."""

    @property
    def heading(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def vector(self) -> np.ndarray | None: ...


def headed_section(
    question: str,
    title: str,
    passages: Sequence[StoredPassage],
    indices: Sequence[int],
    values: Sequence[float],
) -> tuple[int, StoredPassage | None] | None:
    """The section of ``passages`` (those at ``indices``, of a document titled ``title``)
    headed by what ``question`` asks (``heading_match``), by a passage's heading or one
    inside it (``inner_sections``): the index of the passage, the best scored
    (``values``) of those under it, and for a heading inside it the section under that
    heading (None: the passage's own). None when no heading matches, or when headings of
    several names match best: "如何为已有迁移任务增加需要迁移的表？" names each of a FAQ's
    "迁移任务当前处于 Dump / Load / Sync 阶段" alike, and none of them is what it asks."""
    headed: list[tuple[str, int, str | None]] = []  # heading, passage, inner section's text
    for i in indices:
        passage = passages[i]
        headed.append((last_heading_of(passage.heading), i, None))
        headed += [(heading, i, text) for heading, text in inner_sections(passage.text)]
    match = heading_matcher(question, title, [heading for heading, _, _ in headed if heading])
    found = [(match(heading), heading, i, text) for heading, i, text in headed]
    best = max((count for count, *_ in found), default=0)
    winners = [(i, text, heading) for count, heading, i, text in found if count == best]
    if not best or len({heading for _, _, heading in winners}) > 1:
        return None
    index, text, heading = max(winners, key=lambda winner: values[winner[0]])
    return index, None if text is None else _section_on(passages, index, heading, text)


def _section_on(
    passages: Sequence[StoredPassage], index: int, title: str, text: str
) -> StoredPassage:
    """The section headed ``title`` inside passage ``index`` (``text``: up to its end or
    to the next heading of its level or above), with the passages after it that the
    section runs on into (their heading paths hold ``title``: the chunker stored TiDB's
    "load 处理单元报错 …" with its "原因", and its "解决方案" as the next passage)."""
    passage = passages[index]
    texts = [text]
    if passage.text.rstrip().endswith(text):
        after = index + 1
        while after < len(passages) and title in passages[after].heading.split(" > "):
            texts.append(passages[after].text)
            after += 1
    return Passage(f"{passage.heading} > {title}", joined(texts), passage.vector)


def past_statement(
    passages: Sequence[StoredPassage],
    index: int,
    values: Sequence[float],
    terms: Sequence[str],
    floor: float,
) -> StoredPassage | None:
    """What to quote instead of passage ``index`` when what it would quote states the
    problem (``states_problem``: Longhorn's "Symptoms" repeat the question): the section
    after the statement (its cause, its fix) whole, from where it begins (in passage
    ``index`` itself when the statement ends there: Rook's "Investigation" under its
    "Symptoms"), when it bears on the question (it names a term of it, or a later passage
    of it scores ``floor``); else None."""
    quote = best_passage(as_rendered(passages[index].text), terms)
    if not states_problem(quote.heading or last_heading_of(passages[index].heading), terms):
        return None
    rest = after_section(passages[index].text, quote.heading) if quote.heading else ""
    after = index + 1
    while (
        not rest
        and after < len(passages)
        and (
            passages[after].heading == passages[index].heading
            or states_problem(last_heading_of(passages[after].heading), terms)
        )
    ):
        after += 1
    if rest:
        section = last_heading(rest)
    elif after < len(passages):
        section = last_heading_of(passages[after].heading)
    else:
        return None
    end = after
    while end < len(passages) and last_heading_of(passages[end].heading) == section:
        end += 1
    named = any(term in normalize(rest) for term in terms)
    if not named and (after == end or max(values[after:end]) < floor):
        return None
    texts = [rest] if rest else []
    texts += [p.text for p in passages[after:end]]
    start = index if rest else after
    return Passage(passages[start].heading, joined(texts), passages[start].vector)


def last_heading_of(heading: str) -> str:
    """The last heading of a passage's heading path ("Reason > Solution": "Solution")."""
    return heading.rpartition(" > ")[2]


def quoted_whole(passages: Sequence[StoredPassage], index: int) -> StoredPassage:
    """Passage ``index`` as it is quoted: from the start of its first sentence, or of its
    code block, when it continues the passages before it under the same heading
    (``quoted_window``); with the rest of the table it ends in, when the passages after
    it carry its rows on (``with_table_rows``), or with what its last line introduces
    (``with_introduced``)."""
    passage = passages[index]
    start, end = index, index + 1
    while start and passages[start - 1].heading == passage.heading:
        start -= 1
    while end < len(passages) and passages[end].heading == passage.heading:
        end += 1
    later = [p.text for p in passages[index + 1 : end]]
    text = quoted_window([p.text for p in passages[start : index + 1]])
    text = with_introduced(with_table_rows(text, later), later)
    return passage if text == passage.text else Passage(passage.heading, text, passage.vector)
