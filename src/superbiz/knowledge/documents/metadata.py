"""Document metadata for the knowledge map: ``covers`` and ``when_to_retrieve``.

Frontmatter values always win. A document missing them gets them from the LLM (JSON,
validated, one repair retry) or, without an LLM or when it fails, derives them
deterministically: headings → covers, first paragraph → when_to_retrieve. Every value
records where it came from (``frontmatter``, ``llm``, ``derived``); derived covers are
only headings, so the exact index does not use them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Annotated, Protocol

from pydantic import BaseModel, Field, StringConstraints, field_validator

from superbiz._markdown import fenced
from superbiz._text import detect_language
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.documents.chunking import split_sections
from superbiz.knowledge.documents.document import SourceDocument
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import Message, SystemMessage, UserMessage
from superbiz.llm.structured import ask_structured

MAX_COVERS = 6
MAX_COVER_CHARS = 60
MAX_WHEN_CHARS = 300
_BODY_CHARS = 4000
# Section names that say nothing about what a document covers.
_GENERIC_HEADINGS = frozenset(
    """
    meaning impact diagnosis mitigation overview introduction summary background symptoms
    cause causes steps solution solutions resolution notes references appendix faq example
    examples escalation prerequisites 概述 简介 背景 症状 现象 原因 排查步骤 处理 处理方法 解决方法
    解决方案 步骤 注意事项 参考 附录 升级 总结 示例
    """.split()
)


class MetadataWriter(Protocol):
    def write(self, doc: SourceDocument) -> tuple[tuple[str, ...], str]:
        """``(covers, when_to_retrieve)`` for ``doc``; raises ``SuperbizError`` (the model
        failed, or gave no valid metadata after one repair)."""
        ...


@dataclass(frozen=True, slots=True)
class Enrichment:
    document: SourceDocument
    failure: str | None = None


def derive_metadata(doc: SourceDocument) -> tuple[tuple[str, ...], str]:
    """Deterministic metadata: distinctive headings and the first paragraph.

    >>> from pathlib import PurePosixPath
    >>> from superbiz.knowledge.documents.document import parse_document
    >>> doc = parse_document(
    ...     b"# Redis pool\\nWhen the pool is exhausted.\\n## Symptoms\\nx\\n## Pool sizing\\ny",
    ...     PurePosixPath("infra/redis.md"))
    >>> derive_metadata(doc)
    (('Pool sizing',), 'When the pool is exhausted.')
    """
    covers: list[str] = []
    for section in split_sections(doc.body):
        heading = section.heading_path[-1] if section.heading_path else ""
        name = _plain(heading)
        if (
            name
            and name != doc.title
            and name.casefold() not in _GENERIC_HEADINGS
            and _plain(re.sub(r"^[\d.、一二三四五六七八九十]+\s*", "", name)).casefold()
            not in _GENERIC_HEADINGS
        ):
            covers.append(name[:MAX_COVER_CHARS])
    lines = doc.body.split("\n")
    first: list[str] = []
    for line in (" " if code else line for line, code in zip(lines, fenced(lines), strict=True)):
        skip = not line.strip() or line.lstrip().startswith(("#", "|", "---"))
        if skip and first:
            break  # the first paragraph ends at a blank line, a heading or a table
        if not skip:
            first.append(line.strip())
    when = _plain(" ".join(first))[:MAX_WHEN_CHARS]
    return tuple(dict.fromkeys(covers))[:MAX_COVERS], when or doc.title


def _plain(text: str) -> str:
    """Markdown inline syntax removed: ``**bold**``, `` `code` ``, links."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return " ".join(re.sub(r"[*_`>]+", "", text).split())


_PROMPT = """You write metadata for an operations knowledge base.
Read the document and answer with ONE JSON object and nothing else:
{"covers": ["...", "..."], "when_to_retrieve": "..."}
- covers: 2 to 6 concrete scenarios or problems the document resolves, each under 60
  characters (e.g. "payment timeout", "callback never arrives").
- when_to_retrieve: one sentence, under 200 characters, saying when an assistant should
  consult this document.
Write both in the document's language ({language})."""


class MetadataReply(BaseModel):
    """The writer's JSON: covers stripped, unique and clipped; ``when_to_retrieve`` clipped."""

    covers: list[str] = Field(min_length=1)
    when_to_retrieve: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

    @field_validator("covers")
    @classmethod
    def _clean_covers(cls, covers: list[str]) -> list[str]:
        clean = list(dict.fromkeys(c.strip()[:MAX_COVER_CHARS] for c in covers if c.strip()))
        if not clean:
            raise ValueError("only empty strings")
        return clean[:MAX_COVERS]

    @field_validator("when_to_retrieve")
    @classmethod
    def _clip_when(cls, when: str) -> str:
        return when[:MAX_WHEN_CHARS]


class LLMMetadataWriter:
    """Asks a chat model for the metadata (validated, one repair turn)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    def write(self, doc: SourceDocument) -> tuple[tuple[str, ...], str]:
        language = "Chinese" if detect_language(doc.body[:2000]) == "zh" else "English"
        messages: list[Message] = [
            SystemMessage(_PROMPT.replace("{language}", language)),
            UserMessage(f"Title: {doc.title}\n\n{doc.body[:_BODY_CHARS]}"),
        ]
        reply = ask_structured(self.model, messages, MetadataReply, what="metadata").value
        return tuple(reply.covers), reply.when_to_retrieve


def enrich(doc: SourceDocument, writer: MetadataWriter | None) -> Enrichment:
    """Fill what the frontmatter left empty; never loses the document."""
    origin = {"covers": "frontmatter", "when_to_retrieve": "frontmatter"}
    if doc.covers and doc.when_to_retrieve:
        return Enrichment(replace(doc, origin=origin))
    covers, when, failure = None, None, None
    if writer is not None:
        try:
            covers, when = writer.write(doc)
            source = "llm"
        except SuperbizError as exc:
            failure = str(exc)
    if covers is None:
        covers, when = derive_metadata(doc)
        source = "derived"
    if not doc.covers:
        origin["covers"] = source
    if not doc.when_to_retrieve:
        origin["when_to_retrieve"] = source
    return Enrichment(
        replace(
            doc,
            covers=doc.covers or covers,
            when_to_retrieve=doc.when_to_retrieve or when,
            origin=origin,
        ),
        failure,
    )
