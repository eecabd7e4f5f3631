"""Checked citations: is an answer grounded in the documents put in front of the model?

A real small model (tests/data/llm-transcripts) answered with no lookup at all, citing
``[1]`` that named nothing, or with a sentence copied from the prompt. So every ``[n]`` is
checked against the documents the model was shown (this turn's tool results and the
session's carried evidence): markers naming none are removed and counted. An answer is
*grounded* when it cites at least one of those documents and draws on them: enough of
its own key terms (those not already in the question) occur in the cited documents.
Pure functions; the executor decides what to do with an ungrounded answer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from superbiz._text import key_terms

__all__ = ["EVIDENCE_OVERLAP", "CitationCheck", "check_citations", "draws_on"]

#: Share of an answer's own key terms (not in the question) that must occur in the cited
#: documents. Measured on the example KB: the two prompt copies of the transcripts score
#: 0.09 and 0.22, answers written from the runbook 0.47-0.86 (English and Chinese).
EVIDENCE_OVERLAP = 0.3

# [1]  [1, 2]  [1，2]  [ref 1]  [ref: 1]  【1】 — the ways models write a citation.
_MARKER = re.compile(
    r"[ \t]?(?:\[(?:ref\s*:?\s*)?(\d+(?:\s*[,，、]\s*\d+)*)\]|【(\d+(?:\s*[,，、]\s*\d+)*)】)",
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
