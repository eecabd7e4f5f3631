"""Checked citations: is an answer grounded in the documents put in front of the model?

A real small model (tests/data/llm-transcripts) answered with no lookup at all, citing
``[1]`` that named nothing, or with a sentence copied from the prompt. So every ``[n]`` is
checked against the documents the model was shown (this turn's tool results and the
session's carried evidence): markers naming none are removed and counted. An answer is
*grounded* when it cites at least one of those documents and draws on them: enough of
its own key terms (those not already in the question) occur in the cited documents.

:func:`ground` is the policy: an ungrounded answer while documents exist (an empty one
too) gets one repair turn that names the documents; if that is not grounded either, the
extractive answer from the same documents replaces it, labelled as such.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from superbiz._messages import localized
from superbiz._text import Language, key_terms
from superbiz.exceptions import LLMError

__all__ = [
    "EVIDENCE_OVERLAP",
    "AnswerSource",
    "CitationCheck",
    "Grounding",
    "Source",
    "check_citations",
    "draws_on",
    "ground",
    "repair_prompt",
]

#: Share of an answer's own key terms (not in the question) that must occur in the cited
#: documents. Measured on the example KB: the two prompt copies of the transcripts score
#: 0.09 and 0.22, answers written from the runbook 0.47-0.86 (English and Chinese).
EVIDENCE_OVERLAP = 0.3

# [1]  [1, 2]  [1，2]  [ref 1]  [ref: 1]  【1】 — the ways models write a citation; one
# right after ``=`` or inside quotes is a value (``table_ids="[100]"`` quoted from a log).
_MARKER = re.compile(
    r"[ \t]?(?<![=\"'])"
    r"(?:\[(?:ref\s*:?\s*)?(\d+(?:\s*[,，、]\s*\d+)*)\]|【(\d+(?:\s*[,，、]\s*\d+)*)】)"
    r"(?![\"'])",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)  # a[0] in code is no citation


@dataclass(frozen=True, slots=True)
class CitationCheck:
    """The answer with invalid markers removed (valid ones written ``[n]``), the refs it
    cites in order of first use, and how many markers named no document."""

    answer: str
    cited: tuple[int, ...]
    invalid: int


def check_citations(answer: str, valid_refs: Collection[int]) -> CitationCheck:
    """Keep the markers that name a document shown to the model; drop and count the rest."""
    cited: dict[int, None] = {}
    invalid = 0

    def rewrite(match: re.Match[str]) -> str:
        nonlocal invalid
        numbers = [int(n) for n in _NUMBER.findall(match.group(1) or match.group(2))]
        kept = [n for n in numbers if n in valid_refs]
        invalid += len(numbers) - len(kept)
        cited.update(dict.fromkeys(kept))
        if not kept:
            return ""
        space = " " if match.group(0)[0] in " \t" else ""
        return space + "".join(f"[{n}]" for n in kept)

    pieces, start = [], 0
    for code in _CODE.finditer(answer):
        pieces += [_MARKER.sub(rewrite, answer[start : code.start()]), code.group(0)]
        start = code.end()
    pieces.append(_MARKER.sub(rewrite, answer[start:]))
    return CitationCheck("".join(pieces).strip(), tuple(cited), invalid)


def draws_on(answer: str, question: str, documents: Iterable[str]) -> bool:
    """Whether the answer's own content comes from ``documents`` (see ``EVIDENCE_OVERLAP``)."""
    asked = set(key_terms(question))
    own = set(key_terms(_MARKER.sub("", answer))) - asked
    if not own:
        return False
    evidence: set[str] = set()
    for document in documents:
        evidence.update(key_terms(document))
    return len(own & evidence) / len(own) >= EVIDENCE_OVERLAP


AnswerSource = Literal["model", "repaired", "extractive", "no_evidence"]


@dataclass(frozen=True, slots=True)
class Source:
    """A document put in front of the model, as it may be cited."""

    ref: int
    title: str
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class Grounding:
    """The answer to show and how it came to be.

    ``source``: ``model`` (its first answer was grounded), ``repaired`` (after the repair
    turn), ``extractive`` (quoted from the documents instead), ``no_evidence`` (no document
    was shown, so nothing could ground it). ``invalid_citations`` counts the markers
    removed from what the model wrote, repair turn included.
    """

    answer: str
    grounded: bool
    invalid_citations: int
    source: AnswerSource
    cited: tuple[int, ...] = ()


def repair_prompt(language: Language, sources: Sequence[Source]) -> str:
    """The repair turn's instruction: which documents the model has, by number."""
    listed = "\n".join(f"[{s.ref}] {s.title} ({s.path})" for s in sources)
    return localized("grounding.repair", language).format(documents=listed)


def _grounded(check: CitationCheck, question: str, sources: Sequence[Source]) -> bool:
    cited = [s.content for s in sources if s.ref in check.cited]
    return bool(cited) and draws_on(check.answer, question, cited)


def ground(
    answer: str,
    question: str,
    language: Language,
    sources: Sequence[Source],
    *,
    repair: Callable[[str], str] | None,
    extractive: Callable[[], str],
) -> Grounding:
    """Check ``answer``; when it is not grounded, ``repair`` once (it gets the repair
    prompt and returns the model's new answer), then fall back to ``extractive``.

    ``repair=None`` is for a player that quotes the documents itself (the extractive
    policy, the behaviour profiles): its answer is grounded when it cites one, and is
    never repaired (a quote is mostly the documents' words, its label and source list
    are not, so the evidence test would misjudge a short one).
    """
    valid = {s.ref for s in sources}
    first = check_citations(answer, valid)
    if not sources:
        return Grounding(first.answer, False, first.invalid, "no_evidence")
    if repair is None:
        return Grounding(first.answer, bool(first.cited), first.invalid, "model", first.cited)
    if _grounded(first, question, sources):
        return Grounding(first.answer, True, first.invalid, "model", first.cited)
    try:
        second = check_citations(repair(repair_prompt(language, sources)), valid)
    except LLMError:  # the model failed on the repair: the documents still answer
        second = CitationCheck("", (), 0)
    invalid = first.invalid + second.invalid
    if _grounded(second, question, sources):
        return Grounding(second.answer, True, invalid, "repaired", second.cited)
    quoted = check_citations(extractive(), valid)
    return Grounding(quoted.answer, bool(quoted.cited), invalid, "extractive", quoted.cited)
