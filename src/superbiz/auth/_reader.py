"""The bridge from a signed-in person to ``superbiz.access``: who reads, as the retrieval
filters see it."""

from __future__ import annotations

import unicodedata

from superbiz.access import Reader
from superbiz.auth.principal import User


def reader_of(user: User) -> Reader:
    """What ``user`` may read: their groups (compared as access lists' groups are: NFC,
    trimmed); everything for an admin, the admin key and the local user of a service
    without sign-in."""
    groups = (unicodedata.normalize("NFC", group).strip() for group in user.groups)
    return Reader(user.name, frozenset(g for g in groups if g), unrestricted=user.unrestricted)
