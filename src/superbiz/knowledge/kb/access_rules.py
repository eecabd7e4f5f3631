"""Who may read each document of one knowledge base, and what that leaves a reader.

The rule is ``superbiz.access.may_read``; its inputs are the documents' own lists (the
relational store's ``documents.access``) and the domains' (settings ``access.domains``).
``AccessRules`` holds both for one knowledge version; per reader it derives the
``Visibility`` every search filters by and the domains the reader may know of.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from superbiz.access import Reader, encode_access, may_read
from superbiz.exceptions import ConfigError
from superbiz.knowledge.documents.domains import normalize_domain
from superbiz.retrieval.visibility import Visibility

if TYPE_CHECKING:  # the knowledge base uses these rules: no import cycle at run time
    from superbiz.knowledge.kb.base import KnowledgeBase


def domain_lists(configured: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """``access.domains`` keyed as the knowledge base names domains (``Payment Ops`` is
    ``payment-ops``); two keys naming one domain with other lists are refused.

    >>> domain_lists({"Payment Ops": ("payments",), "hr": ("hr",)})
    {'payment-ops': ('payments',), 'hr': ('hr',)}
    """
    found: dict[str, tuple[str, ...]] = {}
    written: dict[str, str] = {}
    for key, groups in configured.items():
        domain = normalize_domain(key)
        if domain in found and set(found[domain]) != set(groups):
            raise ConfigError(
                f"access.domains: {written[domain]!r} and {key!r} both name the domain "
                f"{domain!r}, with other groups; keep one"
            )
        found[domain], written[domain] = groups, key
    return found


@dataclass(frozen=True)
class AccessRules:
    """The documents' own lists and the domains' lists, at one knowledge version."""

    #: path → (domain, its own list or None)
    documents: Mapping[str, tuple[str, tuple[str, ...] | None]]
    #: domain → the groups that may read it (``domain_lists``)
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        rows: Iterable[tuple[str, str, tuple[str, ...] | None]],
        domains: Mapping[str, tuple[str, ...]],
    ) -> AccessRules:
        """From ``(path, domain, access)`` rows and the configured ``access.domains``."""
        return cls({path: (domain, access) for path, domain, access in rows}, domains)

    def may_read(self, reader: Reader, path: str) -> bool:
        """Whether ``reader`` may read the document at ``path``; a path the knowledge base
        does not hold (deleted since a session cited it) only an unrestricted reader may."""
        if reader.unrestricted:
            return True
        known = self.documents.get(path)
        if known is None:
            return False
        domain, access = known
        return may_read(reader, access, self.domains.get(domain))

    def readable_domains(self, reader: Reader) -> set[str]:
        """The domains in which ``reader`` may read at least one document."""
        return {
            domain for path, (domain, _) in self.documents.items() if self.may_read(reader, path)
        }

    def visibility(self, reader: Reader) -> Visibility | None:
        """What ``reader``'s searches leave out; None for an unrestricted reader."""
        if reader.unrestricted:
            return None
        own = {access for _, access in self.documents.values() if access is not None}
        return Visibility(
            hidden=frozenset(p for p in self.documents if not self.may_read(reader, p)),
            denied_domains=frozenset(
                d for d, groups in self.domains.items() if not may_read(reader, None, groups)
            ),
            admitted_lists=frozenset(
                encode_access(access) for access in own if may_read(reader, access)
            ),
            lists_in_use=bool(own),
        )

    def view(self, reader: Reader) -> ReaderView:
        """``reader``'s view: its visibility and its domains, computed once."""
        return ReaderView(
            self, reader, self.visibility(reader), frozenset(self.readable_domains(reader))
        )


@dataclass(frozen=True)
class ReaderView:
    """What one reader may see of the knowledge base at one version."""

    rules: AccessRules
    reader: Reader
    #: what its searches leave out (None: nothing)
    visibility: Visibility | None
    #: the domains it may read a document of (the only ones it may learn exist)
    domains: frozenset[str]

    @property
    def restricted(self) -> bool:
        return self.visibility is not None

    def may_read(self, path: str) -> bool:
        return self.rules.may_read(self.reader, path)


@dataclass(frozen=True, slots=True)
class ReaderLimits:
    """What a restricted reader may not meet: documents (``may_read``), existing
    domains it may not know of (``hidden_domains``) and the titles of documents it may
    not read that no document it may read shares (``hidden_titles``)."""

    may_read: Callable[[str], bool]
    hidden_domains: frozenset[str] = frozenset()
    hidden_titles: frozenset[str] = frozenset()

    def names_hidden_domain(self, text: str | None) -> bool:
        """Whether ``text`` names a hidden domain as a word (an error listing domains)."""
        return bool(text) and any(
            re.search(rf"(?<![\w-]){re.escape(domain)}(?![\w-])", text or "")
            for domain in self.hidden_domains
        )


def reader_limits(kb: KnowledgeBase, reader: Reader | None) -> ReaderLimits | None:
    """What ``reader`` may not meet in ``kb``; None when it may read everything."""
    view = kb.view(reader)
    if not view.restricted:
        return None
    rules = view.rules
    hidden = [path for path in rules.documents if not view.may_read(path)]
    shown = [path for path in rules.documents if view.may_read(path)]
    existing = {domain for domain, _ in rules.documents.values()} | set(rules.domains)
    return ReaderLimits(
        may_read=view.may_read,
        hidden_domains=frozenset(existing - view.domains),
        hidden_titles=frozenset(kb.documents.titles(hidden).values())
        - frozenset(kb.documents.titles(shown).values()),
    )
