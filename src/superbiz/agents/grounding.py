"""Checked citations: is an answer grounded in the documents put in front of the model?

A real small model (tests/data/llm-transcripts) answered with no lookup at all, citing
``[1]`` that named nothing, or with a sentence copied from the prompt. So every ``[n]`` is
checked against the documents the model was shown (this turn's tool results and the
session's carried evidence): markers naming none are removed and counted. An answer is
*grounded* when it cites at least one document that bears on the question (the answer
selection's, :mod:`superbiz.agents.answer_selection`: grounded means relevant, so the
chargeback FAQ cited for "Who won the 2018 World Cup?" grounds nothing) and draws on
them: enough of its own key terms (those not already in the question) occur in the
cited documents. An answer that copies an earlier answer of the session or pastes the
documents wholesale is no answer at all (:func:`copied`): the live transcript's
follow-up wrote back the previous turn's extractive answer, label and ``[1]`` included.

:func:`ground` is the policy: an ungrounded answer while documents bear on the question
(an empty one too) gets one repair turn that names them, with the passages that answer;
if that is not grounded either, the extractive answer from the same selection replaces
it, labelled as such. When no document bears on the question nothing can ground an
answer: it is ``no_evidence``, its markers removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from superbiz._messages import localized
from superbiz._text import Language, key_terms, normalize
from superbiz.exceptions import LLMError

__all__ = [
    "COPY_SHARE",
    "EVIDENCE_OVERLAP",
    "AnswerSource",
    "CitationCheck",
    "CopyKind",
    "Grounding",
    "Source",
    "check_citations",
    "copied",
    "copied_from",
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


#: Share of an answer's text (its 12-character pieces, markers and spaces removed) that,
#: found verbatim in an earlier answer of the session or in the documents, makes it a copy.
#: The live transcript's follow-up copies the previous answer whole (share 1.0); the
#: model's own-memory answers of that run share under 0.05 with the documents shown.
COPY_SHARE = 0.8
#: A copy of the documents is a pasted excerpt only from this length (characters, as
#: compared): quoting one command or one sentence of a runbook is how answers cite.
WHOLESALE_CHARS = 200
_PIECE = 12
_SPACES = re.compile(r"\s+")

#: what an answer copied instead of answering: an earlier answer of the session (or its
#: extractive label), or the documents wholesale
CopyKind = Literal["turn", "documents"]


def _compared(text: str) -> str:
    return _SPACES.sub("", normalize(_MARKER.sub("", text)))


def _pieces(text: str) -> set[str]:
    return {text[i : i + _PIECE] for i in range(0, max(len(text) - _PIECE, 0) + 1, _PIECE // 2)}


def copied_from(text: str, sources: Iterable[str], *, besides: str = "") -> int:
    """How many characters of ``text`` (about; spaces, case and markers aside) are copied
    verbatim from the one of ``sources`` it shares most with, leaving out what it shares
    with ``besides`` (the user's question a planner's sub-question may repeat).

    >>> copied_from("When a node reports DiskPressure, why?", ["When a node reports DiskPressure"])
    18
    """
    pieces = _pieces(_compared(text)) - _pieces(_compared(besides))
    if not pieces:
        return 0
    found = max((sum(p in _compared(s) for p in pieces) for s in sources), default=0)
    return found * (_PIECE // 2)


def _share(pieces: set[str], source: str) -> float:
    return sum(piece in source for piece in pieces) / len(pieces) if pieces else 0.0


@cache
def _labels() -> tuple[str, ...]:
    """The extractive answers' labels up to their closing bracket (``【抽取式回答】``)."""
    heads = []
    for language in ("zh", "en"):
        for key in ("extractive.label", "extractive.fallback_label"):
            label = localized(key, language)
            end = max(label.find("】"), label.find("]"))
            heads.append(_compared(label[: end + 1]))
    return tuple(dict.fromkeys(h for h in heads if h))


def copied(
    answer: str, earlier: Iterable[str] = (), documents: Iterable[str] = ()
) -> CopyKind | None:
    """Whether ``answer`` copies an earlier answer (or wears the extractive label, which
    only superbiz writes) or pastes ``documents`` wholesale (see ``COPY_SHARE``).

    >>> copied("Set max-active to 128 [1].", ["Set max-active to 128 [1]."])
    'turn'
    >>> copied("Raise max-active to 128 before the sale [1].", ["Check the chargeback FAQ."])
    """
    text = _compared(answer)
    if not text:
        return None
    if any(label in text for label in _labels()):
        return "turn"
    pieces = _pieces(text)
    if any(_share(pieces, _compared(e)) >= COPY_SHARE for e in earlier):
        return "turn"
    if len(text) >= WHOLESALE_CHARS:
        joined = "\n".join(_compared(d) for d in documents)
        if _share(pieces, joined) >= COPY_SHARE:
            return "documents"
    return None


AnswerSource = Literal["model", "repaired", "extractive", "no_evidence"]


@dataclass(frozen=True, slots=True)
class Source:
    """A document put in front of the model, as it may be cited."""

    ref: int
    title: str
    path: str
    content: str
    #: the document bears on the question (the answer selection quoted or listed it)
    bearing: bool = True
    #: its passage that answers the question, when the selection quotes it
    passage: str = ""


@dataclass(frozen=True, slots=True)
class Grounding:
    """The answer to show and how it came to be.

    ``source``: ``model`` (its first answer was grounded), ``repaired`` (after the repair
    turn), ``extractive`` (quoted from the documents instead), ``no_evidence`` (no document
    was shown, so nothing could ground it). ``invalid_citations`` counts the markers
    removed from what the model wrote, repair turn included; ``copied`` says what the
    model copied instead of answering (``copied``), if it did.
    """

    answer: str
    grounded: bool
    invalid_citations: int
    source: AnswerSource
    cited: tuple[int, ...] = ()
    #: what the model's answer copied (first answer or repair), when it copied
    copied: CopyKind | None = None


def repair_prompt(language: Language, sources: Sequence[Source]) -> str:
    """The repair turn's instruction: the documents that bear on the question, by
    number, each quoted document with its passage that answers."""
    listed = "\n".join(
        f"[{s.ref}] {s.title} ({s.path})" + (f"\n{s.passage}" if s.passage else "")
        for s in sources
        if s.bearing
    )
    return localized("grounding.repair", language).format(documents=listed)


def _evidence(source: Source) -> str:
    return f"{source.content}\n{source.passage}" if source.passage else source.content


def _grounded(check: CitationCheck, question: str, sources: Sequence[Source]) -> bool:
    cited = [_evidence(s) for s in sources if s.bearing and s.ref in check.cited]
    return bool(cited) and draws_on(check.answer, question, cited)


def ground(
    answer: str,
    question: str,
    language: Language,
    sources: Sequence[Source],
    *,
    repair: Callable[[str], str] | None,
    extractive: Callable[[], str],
    earlier: Sequence[str] = (),
) -> Grounding:
    """Check ``answer``; when it is not grounded, ``repair`` once (it gets the repair
    prompt and returns the model's new answer), then fall back to ``extractive``.

    ``repair=None`` is for a player that quotes the documents itself (the extractive
    policy, the behaviour profiles): its answer is grounded when it cites one, and is
    never repaired (a quote is mostly the documents' words, its label and source list
    are not, so the evidence test would misjudge a short one).

    ``earlier``: the session's earlier answers; a model answer copying one, or pasting the
    documents wholesale, is not grounded, whatever it cites. Only a ``bearing`` source
    grounds an answer; with none, the answer is ``no_evidence``.
    """
    valid = {s.ref for s in sources}
    first = check_citations(answer, valid)
    if not any(s.bearing for s in sources):
        uncited = check_citations(first.answer, ()).answer  # none of them is evidence
        return Grounding(uncited, False, first.invalid, "no_evidence")
    if repair is None:
        bearing = {s.ref for s in sources if s.bearing}
        cites = tuple(ref for ref in first.cited if ref in bearing)
        return Grounding(first.answer, bool(cites), first.invalid, "model", cites)
    documents = [s.content for s in sources]
    copy = copied(first.answer, earlier, documents)
    if not copy and _grounded(first, question, sources):
        return Grounding(first.answer, True, first.invalid, "model", first.cited)
    try:
        second = check_citations(repair(repair_prompt(language, sources)), valid)
    except LLMError:  # the model failed on the repair: the documents still answer
        second = CitationCheck("", (), 0)
    invalid = first.invalid + second.invalid
    second_copy = copied(second.answer, earlier, documents)
    copy = copy or second_copy
    if not second_copy and _grounded(second, question, sources):
        return Grounding(second.answer, True, invalid, "repaired", second.cited, copy)
    quoted = check_citations(extractive(), valid)
    return Grounding(quoted.answer, bool(quoted.cited), invalid, "extractive", quoted.cited, copy)
