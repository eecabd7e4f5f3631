"""The knowledge map the Planner sees (docs/design.md §6.3), within a token budget.

::

    available_knowledge_domains:
      - domain_id: payment
        description: ...
        when_to_retrieve: ...
        documents:
          - title: 支付失败排查手册
            covers: [支付超时, 扣款无回调]

Past the budget, each domain lists fewer documents (its biggest first) and says how many
it left out; the map then carries a ``note`` saying it was summarised. A map whose domains
do not fit even so is narrowed, per question, to the domains nearest it (``nearest``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from superbiz._text import clip, is_cjk
from superbiz.exceptions import EmbeddingError, first_line
from superbiz.knowledge.coverage.domains import DomainService, derived_summary
from superbiz.knowledge.kb.access_rules import ReaderView
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.knowledge.kb.map_vectors import MapEntry
from superbiz.retrieval.embedders import EmbedTexts
from superbiz.retrieval.store import Outside
from superbiz.storage.repository import StoredDocument

log = logging.getLogger(__name__)

DEFAULT_TOKEN_BUDGET = 2000
#: documents each domain of a map narrowed to the nearest domains still lists
NEAREST_DOCUMENTS = 3


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per CJK character, one per 4 other characters.

    >>> estimate_tokens("支付失败"), estimate_tokens("payment failed")
    (4, 4)
    """
    cjk = sum(1 for ch in text if is_cjk(ch))
    return cjk + -(-(len(text) - cjk) // 4)


@dataclass(frozen=True, slots=True)
class MapDocument:
    title: str
    path: str
    covers: tuple[str, ...] = ()
    #: not printed in the map (docs/design.md §6.4 keeps document-level timing out of the Planner's
    #: view) but used by the deterministic planner to score the document
    when_to_retrieve: str | None = None

    @classmethod
    def of(cls, doc: StoredDocument) -> MapDocument:
        return cls(doc.title, doc.path, tuple(doc.covers), doc.when_to_retrieve)

    @property
    def entry(self) -> MapEntry:
        """What the map planner embeds of it: its path, its entry text (title, covers,
        when-to-retrieve line) and its title.

        >>> MapDocument("Refunds", "pay/refunds.md", ("退款",), "a refund fails").entry
        ('pay/refunds.md', 'Refunds\\n退款\\na refund fails', 'Refunds')
        """
        text = "\n".join([self.title, *self.covers, self.when_to_retrieve or ""]).strip()
        return self.path, text, self.title


@dataclass(slots=True)
class MapDomain:
    domain_id: str
    description: str
    when_to_retrieve: str
    document_count: int
    documents: list[MapDocument] = field(default_factory=list)


@dataclass(slots=True)
class KnowledgeMap:
    domains: list[MapDomain]
    note: str | None = None
    #: whether the whole map fits a token budget, per budget: asked for every question an
    #: LLM planner sees, and dumping 628 domains took a second (50,000 documents)
    _fits_whole: dict[int, bool] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def domain_ids(self) -> list[str]:
        return [d.domain_id for d in self.domains]

    def as_dict(self, documents_per_domain: int | None = None) -> dict[str, Any]:
        entries = []
        for domain in self.domains:
            shown = domain.documents[:documents_per_domain]
            entry: dict[str, Any] = {
                "domain_id": domain.domain_id,
                "description": domain.description,
                "when_to_retrieve": domain.when_to_retrieve,
                "document_count": domain.document_count,
            }
            if shown:
                entry["documents"] = [
                    {"title": d.title, "covers": list(d.covers)} if d.covers else {"title": d.title}
                    for d in shown
                ]
            if len(shown) < len(domain.documents):
                entry["more_documents"] = len(domain.documents) - len(shown)
            entries.append(entry)
        data: dict[str, Any] = {"available_knowledge_domains": entries}
        if self.note:
            data["note"] = self.note
        return data

    def nearest(self, nearness: Mapping[str, float], token_budget: int) -> KnowledgeMap:
        """The map a planner is shown for one question: itself while every domain fits
        ``token_budget`` with ``NEAREST_DOCUMENTS`` documents each, else the domains
        nearest the question (``nearness``: each domain's score), as many as fit so, with
        a note saying how many others there are. A team's whole knowledge (hundreds of
        domains) then costs a prompt no more than a handful of domains does."""
        if token_budget not in self._fits_whole:
            # what each domain prints at least: too much already, and nothing is dumped
            least = "".join(d.domain_id + d.description + d.when_to_retrieve for d in self.domains)
            self._fits_whole[token_budget] = estimate_tokens(least) <= token_budget and (
                self._fits(self.domains, token_budget)
            )
        if self._fits_whole[token_budget]:
            return self
        ranked = sorted(self.domains, key=lambda d: nearness.get(d.domain_id, -1.0), reverse=True)
        shown = ranked[: self._most_that_fit(ranked, token_budget)]
        note = (
            f"the {len(shown)} of {len(self.domains)} domains nearest the question, to fit the "
            f"{token_budget}-token budget"
        )
        return KnowledgeMap(shown, note)

    @classmethod
    def _most_that_fit(cls, ranked: list[MapDomain], token_budget: int) -> int:
        """How many of ``ranked``, from the first, fit ``token_budget`` (at least one):
        guessed from each domain's own size, then checked by dumping. A search over all
        of them dumped hundreds of domains at a time, seconds per question in YAML."""
        count, used = 0, 0
        for domain in ranked:
            used += estimate_tokens(_dump(KnowledgeMap([domain]).as_dict(NEAREST_DOCUMENTS)))
            if used > token_budget:
                break
            count += 1
        count = max(count, 1)
        while count > 1 and not cls._fits(ranked[:count], token_budget):
            count -= 1
        while count < len(ranked) and cls._fits(ranked[: count + 1], token_budget):
            count += 1
        return count

    @staticmethod
    def _fits(domains: list[MapDomain], token_budget: int) -> bool:
        text = _dump(
            KnowledgeMap(domains, _note(NEAREST_DOCUMENTS, token_budget)).as_dict(NEAREST_DOCUMENTS)
        )
        return estimate_tokens(text) <= token_budget

    def to_yaml(self, token_budget: int = DEFAULT_TOKEN_BUDGET) -> str:
        """The map as YAML, summarised to ``token_budget`` estimated tokens if needed."""
        # The most documents per domain that fit, found from the fewest up: a large map
        # is dumped at the sizes that fit and one more, not whole first (slow in YAML).
        fitting: str | None = None
        steps = _shrinking(max((len(d.documents) for d in self.domains), default=0))
        for per_domain in reversed(steps):
            note = self._with_note(_note(per_domain, token_budget))
            text = _dump(KnowledgeMap(self.domains, note).as_dict(per_domain))
            if estimate_tokens(text) > token_budget:
                break
            fitting = text
        else:
            full = _dump(self.as_dict())
            if estimate_tokens(full) <= token_budget:
                return full
        if fitting is not None:
            return fitting
        # Domains only and still too long: shorten each domain's texts, then say so.
        for limit in (160, 80, 40):
            clipped = [
                MapDomain(
                    d.domain_id,
                    clip(d.description, limit),
                    clip(d.when_to_retrieve, limit),
                    d.document_count,
                    d.documents,
                )
                for d in self.domains
            ]
            text = _dump(KnowledgeMap(clipped, self._with_note(_note(0, token_budget))).as_dict(0))
            if estimate_tokens(text) <= token_budget:
                return text
        note = f"the domains alone exceed the {token_budget}-token budget; texts shortened"
        return _dump(KnowledgeMap(clipped, self._with_note(note)).as_dict(0))

    def _with_note(self, note: str) -> str:
        """``note`` after this map's own (a narrowed map says so first)."""
        return f"{self.note}; {note}" if self.note else note


def _shrinking(most: int) -> list[int]:
    steps, n = [], most
    while n > 0:
        n = n // 2 if n > 8 else n - 1
        steps.append(n)
    return steps or [0]


def _note(per_domain: int, budget: int) -> str:
    if per_domain == 0:
        return f"documents omitted to fit the {budget}-token budget; domains only"
    return f"summarised to fit the {budget}-token budget: at most {per_domain} documents per domain"


def _dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)


def map_for(kmap: KnowledgeMap, view: ReaderView) -> KnowledgeMap:
    """What of ``kmap`` a reader sees: only the documents it may read, and only the
    domains with one. A domain's stored summary was written from all its documents (by
    a model, or from their titles), so where the reader may not read them all it gets
    one derived from those it may read; its count is theirs."""
    if not view.restricted:
        return kmap
    domains = []
    for domain in kmap.domains:
        docs = [doc for doc in domain.documents if view.may_read(doc.path)]
        if not docs:
            continue
        if len(docs) == len(domain.documents):
            domains.append(replace(domain, document_count=len(docs)))
            continue
        description, when = derived_summary(
            domain.domain_id, [d.title for d in docs], (d.when_to_retrieve for d in docs)
        )
        domains.append(MapDomain(domain.domain_id, description, when or "", len(docs), docs))
    return KnowledgeMap(domains, kmap.note)


def build_map(kb: KnowledgeBase, domains: DomainService | None = None) -> KnowledgeMap:
    """The map from the stored domains and documents (no LLM call: domains without a
    row are built deterministically or by the service's model)."""
    service = domains or DomainService(kb)
    records = {r.domain_id: r for r in service.ensure_all()}
    entries = []
    # read by difference after a change
    for domain_id, docs in _by_domain(kb.current_documents().values()):
        record = records.get(domain_id)
        entries.append(
            MapDomain(
                domain_id=domain_id,
                description=(record.description if record else None) or domain_id,
                when_to_retrieve=(record.when_to_retrieve if record else None) or "",
                document_count=len(docs),
                documents=[MapDocument.of(d) for d in docs],
            )
        )
    return KnowledgeMap(entries)


@contextmanager
def keeping_entry_vectors(
    kb: KnowledgeBase,
    paths: Collection[str],
    *,
    outside: Outside = nullcontext,
    embed: EmbedTexts | None = None,
) -> Iterator[None]:
    """Embed and keep the map entries of the documents at ``paths`` (what an ingest
    wrote) that are not kept yet, in the map's order: begun on entering, so that they
    embed while the block runs (the ingest flushes its index and measures its statistics
    there), finished on leaving, the waits inside ``outside()``; with ``embed`` where
    given (the ingest's worker processes). A plan then reads them:
    the first question after a bulk upload no longer embeds the new part of the map. An
    embedder that fails costs only time: the first plan embeds what is missing."""
    if not paths:  # an unchanged run reads no documents for it
        yield
        return
    chosen = (doc for doc in kb.current_documents(fresh=True).values() if doc.path in paths)
    entries = [MapDocument.of(doc).entry for _, docs in _by_domain(chosen) for doc in docs]
    with kb.map_vectors.keeping(entries, outside=outside, embed=embed) as finish:
        yield
        try:
            finish()
        except EmbeddingError as exc:
            log.warning("map entries not embedded, the first plan embeds them: %s", first_line(exc))


def _by_domain(docs: Iterable[StoredDocument]) -> list[tuple[str, list[StoredDocument]]]:
    """``docs`` by domain, the domains sorted, each one's documents in their order: the
    map's order."""
    by_domain: dict[str, list[StoredDocument]] = {}
    for doc in docs:
        by_domain.setdefault(doc.domain, []).append(doc)
    return sorted(by_domain.items())
