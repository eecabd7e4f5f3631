"""The domain a document is in, and whose text a page may carry across domains.

A document's domain is its frontmatter's ``category`` or else the top-level folder it lies
in (``runbooks/disk.md`` is in ``runbooks``; a file at the root in ``general``). A domain
may be readable by some groups only (``access.domains``); a page that writes in a file from
another folder (``documents.included``) must not carry that file's text to readers its
own domain admits and the file's does not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from superbiz.access import admits_all_of

#: the domain of a file at the knowledge base's root, and of a name that is all spaces
DEFAULT_DOMAIN = "general"
#: the id Notion's export appends to each page's and folder's name
_NOTION_ID = re.compile(r" [0-9a-f]{32}$")


def written_name(name: str) -> str:
    """A file's or folder's name as its author wrote it: Notion's Markdown export appends
    each page's 32-digit id ("Runbooks 8f3e…"), which would name the domain and title the
    page.

    >>> written_name("Runbooks 8f3e2a1b4c5d6e7f8a9b0c1d2e3f4a5b"), written_name("db-2024")
    ('Runbooks', 'db-2024')
    """
    return _NOTION_ID.sub("", name)


def normalize_domain(domain: str) -> str:
    """Domains are compared lower-case with inner spaces as hyphens: ``Payment Ops`` →
    ``payment-ops``."""
    return "-".join(domain.strip().lower().split()) or DEFAULT_DOMAIN


def folder_domain(path: PurePosixPath) -> str:
    """The domain of a file at ``path`` (relative to the knowledge base's folder) that names
    none of its own.

    >>> folder_domain(PurePosixPath("Payment Ops/refunds.rst"))
    'payment-ops'
    >>> folder_domain(PurePosixPath("Runbooks 8f3e2a1b4c5d6e7f8a9b0c1d2e3f4a5b/Disk full.md"))
    'runbooks'
    >>> folder_domain(PurePosixPath("index.rst"))
    'general'
    """
    return normalize_domain(written_name(path.parts[0])) if len(path.parts) > 1 else DEFAULT_DOMAIN


def may_write_in(
    fragment: PurePosixPath,
    page: PurePosixPath,
    domain_access: Mapping[str, Sequence[str]],
) -> bool:
    """Whether the file at ``fragment`` may be written into the page at ``page``: only when
    every reader of the page's domain may read the fragment's, by the domains' lists
    (``access.domains``, keyed by ``normalize_domain``). Both name no domain of their own:
    a file that does (frontmatter) stays a document and is never written in.

    >>> lists = {"finance": ("finance",)}
    >>> may_write_in(PurePosixPath("finance/rates.txt"), PurePosixPath("guide/pay.rst"), lists)
    False
    >>> may_write_in(PurePosixPath("shared/ports.txt"), PurePosixPath("finance/pay.rst"), lists)
    True
    """
    return admits_all_of(
        domain_access.get(folder_domain(fragment)), domain_access.get(folder_domain(page))
    )


def read_alike(
    first: PurePosixPath, second: PurePosixPath, domain_access: Mapping[str, Sequence[str]]
) -> bool:
    """Whether the files at ``first`` and ``second`` have the same readers by their
    domains' lists: a fragment is part of a page, and no document of its own, only where
    everyone who may read it reads it there.

    >>> lists = {"finance": ("finance",), "billing": ("finance",)}
    >>> read_alike(PurePosixPath("finance/a.txt"), PurePosixPath("billing/b.rst"), lists)
    True
    >>> read_alike(PurePosixPath("shared/a.txt"), PurePosixPath("finance/b.rst"), lists)
    False
    """
    return may_write_in(first, second, domain_access) and may_write_in(second, first, domain_access)
