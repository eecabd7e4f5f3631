"""Who may read each document of one knowledge base, and what that leaves a reader.

The rule is ``superbiz.access.may_read``; its inputs are the documents' own lists (the
relational store's ``documents.access``) and the domains' (settings ``access.domains``).
``AccessRules`` holds both for one knowledge version; per reader it derives the
``Visibility`` every search filters by and the domains the reader may know of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from superbiz.access import Reader, encode_access, may_read
from superbiz.exceptions import ConfigError
from superbiz.knowledge.documents import normalize_domain
from superbiz.retrieval.visibility import Visibility


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

    def may_know_domain(self, reader: Reader, domain: str) -> bool:
        """Whether ``reader`` may read a document of ``domain``: the domain exists for it."""
        return domain in self.readable_domains(reader)

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
