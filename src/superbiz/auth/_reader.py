"""The bridge to ``superbiz.access`` (issue 34's other half, another branch): who reads,
as the retrieval filters see it.

INTEGRATOR: ``superbiz.access`` is created on the access branch. Until the branches meet,
the fallback below stands in for its ``Reader`` so that this branch type-checks; once
merged, delete the fallback (keep the import and ``reader_of``).
"""

from __future__ import annotations

from dataclasses import dataclass

from superbiz.auth.principal import User

try:
    from superbiz.access import Reader  # type: ignore[import-not-found, import-untyped, unused-ignore]
except ImportError:  # pragma: no cover - the access branch not merged yet

    @dataclass(frozen=True)
    class Reader:  # type: ignore[no-redef, unused-ignore]
        name: str
        groups: frozenset[str]
        unrestricted: bool = False

        @classmethod
        def everyone(cls) -> Reader:
            return cls("everyone", frozenset(), unrestricted=True)


def reader_of(user: User) -> Reader:
    """What ``user`` may read: their groups; everything for an admin, the admin key and
    the local user of a service without sign-in."""
    return Reader(user.name, frozenset(user.groups), unrestricted=user.unrestricted)
