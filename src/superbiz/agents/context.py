"""Turn context handed to the executor's model as system messages: the plan and the
evidence retrieved earlier in the session.

Both are JSON behind a fixed first line, so a model reads them as text and a
deterministic player (the extractive model, the behaviour profiles) reads them back as
the same typed objects. Evidence is a ``Citation`` everywhere inside the agents; it
becomes JSON only here and at the chat store (``dump_evidence`` / ``load_evidence``), and
a lookup's result is JSON with each document numbered for citing (``tool_result_text``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

from superbiz.governance.results import ToolOutcome
from superbiz.llm.messages import Message, SystemMessage

PLAN_HEADER = "PLAN (from the planner; consult these domains):"
EVIDENCE_HEADER = "SESSION EVIDENCE (retrieved earlier in this session; cite by ref):"


CitationUse = Literal["quoted", "related", "shown"]


@dataclass(frozen=True, slots=True)
class Citation:
    """A document put in front of the model, numbered for ``[ref]`` citing."""

    ref: int
    title: str
    path: str
    domain: str = ""
    content: str = ""  # what the model was shown; kept as session evidence
    #: the page the passage shown starts on, for a PDF
    page: int | None = None
    #: what the answer did with it: ``quoted`` (a citation), ``related`` (listed after the
    #: answer, not quoted) or only ``shown`` to the model (it did not bear on the
    #: question); the session keeps all three as evidence for its later turns
    use: CitationUse = "quoted"

    @property
    def location(self) -> str:
        """What to open: the path, with the page of a PDF (``manual.pdf#page=12``)."""
        return self.path if self.page is None else f"{self.path}#page={self.page}"

    def as_dict(self) -> dict[str, Any]:
        """The citation as the CLI and API report it (without the content)."""
        cited = {"ref": self.ref, "title": self.title, "path": self.path, "domain": self.domain}
        if self.page is not None:
            cited |= {"page": self.page, "location": self.location}
        return cited


_EVIDENCE: TypeAdapter[list[Citation]] = TypeAdapter(list[Citation])


def context_message(header: str, data: object) -> SystemMessage:
    """``data`` (JSON-ready) as a system message behind ``header``."""
    return SystemMessage(f"{header}\n{json.dumps(data, ensure_ascii=False)}")


def read_context(messages: Sequence[Message], header: str) -> str | None:
    """The JSON text of the first system message behind ``header``, if any."""
    for message in messages:
        if isinstance(message, SystemMessage) and message.content.startswith(header):
            return message.content[len(header) :]
    return None


def dump_evidence(citations: Iterable[Citation]) -> list[dict[str, Any]]:
    """Citations with their content, as the chat store and the evidence message keep them."""
    items: list[dict[str, Any]] = _EVIDENCE.dump_python(list(citations), mode="json")
    return items


def load_evidence(items: object) -> list[Citation]:
    """Stored evidence back as citations (``ValidationError`` when it is not evidence)."""
    return _EVIDENCE.validate_python(items)


def evidence_message(citations: Sequence[Citation]) -> SystemMessage:
    return context_message(EVIDENCE_HEADER, dump_evidence(citations))


def read_evidence(messages: Sequence[Message]) -> list[Citation]:
    """The session evidence the executor handed the model (empty when none or unreadable)."""
    text = read_context(messages, EVIDENCE_HEADER)
    if text is None:
        return []
    try:
        return _EVIDENCE.validate_json(text)
    except ValidationError:
        return []


def tool_result_text(outcome: ToolOutcome, refs: dict[str, Citation]) -> str:
    """The tool result as the model reads it: JSON, each document numbered for citing."""
    view = outcome.model_view()
    documents = [view.get("primary"), *(view.get("supplement") or [])]
    for doc in documents:
        if not doc:
            continue
        content = doc.get("content") or doc.get("excerpt") or ""
        citation = refs.setdefault(
            doc["path"],
            Citation(
                len(refs) + 1,
                doc["title"],
                doc["path"],
                doc["domain"],
                content,
                doc.get("page"),
            ),
        )
        doc["ref"] = citation.ref
    return json.dumps(view, ensure_ascii=False)
