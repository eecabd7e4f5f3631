"""Domains of the knowledge map, aggregated from their documents and stored.

A change recomputes only the affected domains; start-up builds the ones without a row,
so a restart costs no LLM call (docs/design.md §6.4, decision 1).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Annotated

from pydantic import BaseModel, StringConstraints

from superbiz._text import clip
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.llm.base import ChatModel
from superbiz.llm.messages import Message, SystemMessage, UserMessage
from superbiz.llm.structured import ask_structured
from superbiz.storage.domains import DomainRecord, DomainRepository
from superbiz.storage.repository import StoredDocument

log = logging.getLogger(__name__)

DESCRIPTION_CHARS = 256
WHEN_CHARS = 400

_PROMPT = """You summarise one domain of an operations knowledge base for a planner that
decides which domains to consult. Answer with ONE JSON object and nothing else:
{"description": "...", "when_to_retrieve": "..."}
- description: what the domain is about, under 120 characters;
- when_to_retrieve: one or two sentences on which user questions need this domain.
Write in the language most of the documents use."""


_Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class DomainReply(BaseModel):
    """The summariser's JSON."""

    description: _Text
    when_to_retrieve: _Text


def derived_summary(
    domain: str, titles: Sequence[str], whens: Iterable[str | None]
) -> tuple[str, str | None]:
    """``(description, when_to_retrieve)`` of a domain from its documents' titles and
    their own when_to_retrieve sentences, without a model."""
    description = f"{domain}: " + "; ".join(titles)
    when = " / ".join(dict.fromkeys(w for w in whens if w))
    return clip(description, DESCRIPTION_CHARS), clip(when, WHEN_CHARS) or None


def derive_domain(domain: str, docs: list[StoredDocument]) -> DomainRecord:
    """Deterministic summary: titles make the description, the documents' own
    when_to_retrieve sentences make the domain's."""
    description, when = derived_summary(
        domain, [d.title for d in docs], (d.when_to_retrieve for d in docs)
    )
    return DomainRecord(
        domain_id=domain,
        description=description,
        when_to_retrieve=when,
        document_count=len(docs),
        source="derived",
    )


class DomainService:
    def __init__(self, kb: KnowledgeBase, model: ChatModel | None = None) -> None:
        self.kb = kb
        self.model = model
        self.repository = DomainRepository(kb.engine)

    def refresh(self, domains: Iterable[str]) -> None:
        """Recompute ``domains`` from their current documents (delete the empty ones)."""
        wanted = set(domains)
        if not wanted:
            return
        by_domain: dict[str, list[StoredDocument]] = {d: [] for d in wanted}
        for doc in self.kb.current_documents(fresh=True).values():
            if doc.domain in wanted:
                by_domain[doc.domain].append(doc)
        for domain, docs in sorted(by_domain.items()):
            if docs:
                self.repository.save(self._summarise(domain, docs))
            else:
                self.repository.delete(domain)

    def ensure_all(self) -> list[DomainRecord]:
        """Build the domains that have documents but no row; drop rows without documents."""
        existing = {r.domain_id for r in self.repository.all()}
        present = set(self.kb.domains())
        self.refresh((present - existing) | (existing - present))
        return self.repository.all()

    def _summarise(self, domain: str, docs: list[StoredDocument]) -> DomainRecord:
        derived = derive_domain(domain, docs)
        if self.model is None:
            return derived
        listing = "\n".join(
            f"- {d.title}: {d.when_to_retrieve or ''} (covers: {', '.join(d.covers)})"
            for d in docs[:60]
        )
        messages: list[Message] = [
            SystemMessage(_PROMPT),
            UserMessage(f"Domain: {domain}\n{listing}"),
        ]
        try:
            reply = ask_structured(self.model, messages, DomainReply, what="domain summary")
        except SuperbizError as exc:  # a failing LLM must not leave a stale domain
            log.warning("domain %s summarised without the LLM: %s", domain, exc)
            return derived
        return DomainRecord(
            domain,
            clip(reply.value.description, DESCRIPTION_CHARS),
            clip(reply.value.when_to_retrieve, WHEN_CHARS),
            len(docs),
            "llm",
        )
