"""Who may read what: a reader, a document's access list, and the one rule between them.

A document may say who reads it (frontmatter ``access: [group, …]``); a domain may
(settings ``access.domains: {domain: [group, …]}``). A document's own list wins over its
domain's; with neither, everyone reads it. ``"*"`` in a list means every reader (a public
document in a restricted domain). A reader reads a document when one of its groups is
in the list that applies; an unrestricted reader (the CLI's local user, the single admin
key) reads everything. Pure: no I/O, nothing imported from the rest of the package.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

#: in an access list: every reader
EVERYONE = "*"
#: a group name's longest form, and the most groups one list may name
GROUP_MAX = 128
GROUPS_MAX = 64
#: what an access list is stored as where a list cannot be (a vector store's scalar field)
NO_LIST = ""

_SEPARATORS = re.compile(r"[,，;；]")


class AccessListError(ValueError):
    """An access list that cannot be read; the message says why, naming the value."""


@dataclass(frozen=True)
class Reader:
    """Who asks: a name (for logs and audit) and the groups the identity provider gave.
    ``unrestricted`` reads every document whatever its list."""

    name: str
    groups: frozenset[str]
    unrestricted: bool = False

    @classmethod
    def everyone(cls) -> Reader:
        """The reader who may read everything: the CLI's local user, the single admin key."""
        return cls("everyone", frozenset(), unrestricted=True)

    @classmethod
    def of_groups(cls, name: str, groups: Collection[str]) -> Reader:
        """A restricted reader in ``groups`` (each checked as an access list's group is)."""
        return cls(name, frozenset(parse_access(list(groups), allow_everyone=False)))

    @property
    def key(self) -> tuple[bool, frozenset[str]]:
        """What decides what this reader may read: two readers with one key read alike."""
        return (True, frozenset()) if self.unrestricted else (False, self.groups)


def may_read(
    reader: Reader,
    document_access: Sequence[str] | None,
    domain_access: Sequence[str] | None = None,
) -> bool:
    """Whether ``reader`` may read a document whose own list is ``document_access`` in a
    domain whose list is ``domain_access`` (None: no list).

    >>> payments = Reader("ann", frozenset({"payments"}))
    >>> may_read(payments, None, None), may_read(payments, None, ["hr"])
    (True, False)
    >>> may_read(payments, ["payments", "sre"], ["hr"]), may_read(payments, ["*"], ["hr"])
    (True, True)
    >>> may_read(payments, ["sre"], None), may_read(Reader.everyone(), ["sre"], None)
    (False, True)
    """
    if reader.unrestricted:
        return True
    rule = document_access if document_access is not None else domain_access
    if rule is None:
        return True
    return EVERYONE in rule or not reader.groups.isdisjoint(rule)


def admits_all_of(rule: Sequence[str] | None, other: Sequence[str] | None) -> bool:
    """Whether every reader the access list ``other`` admits is admitted by ``rule`` too
    (None: no list, everyone): text under ``rule`` may then be shown wherever ``other``
    applies without reaching anyone it should not.

    >>> admits_all_of(["sre", "payments"], ["payments"]), admits_all_of(["sre"], ["payments"])
    (True, False)
    >>> admits_all_of(None, ["hr"]), admits_all_of(["hr"], None), admits_all_of(["*"], None)
    (True, False, True)
    """
    if rule is None or EVERYONE in rule:
        return True
    if other is None or EVERYONE in other:
        return False
    return set(other) <= set(rule)


def parse_access(value: object, *, allow_everyone: bool = True) -> tuple[str, ...]:
    """An access list as written (a list of group names, or one text with commas) as
    its groups, unique, in the order written; ``AccessListError`` says what is wrong.

    A list that names no group is refused rather than read as "everyone": a mistake in
    it must not open a document to all.

    >>> parse_access(["payments", " sre ", "payments"]), parse_access("payments, sre")
    (('payments', 'sre'), ('payments', 'sre'))
    >>> parse_access([" "])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    superbiz.access.AccessListError: names no group (leave it out to let everyone read, ...)
    """
    if isinstance(value, str):
        items: list[object] = list(_SEPARATORS.split(value))
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise AccessListError(f"must be a list of group names, got {type(value).__name__}")
    groups: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise AccessListError(
                f"must be a list of group names, and {item!r} is a {type(item).__name__}"
            )
        name = unicodedata.normalize("NFC", str(item)).strip()
        if not name:
            continue
        if len(name) > GROUP_MAX:
            raise AccessListError(
                f"the group {name[:40]!r}… is {len(name)} characters long; at most {GROUP_MAX}"
            )
        if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
            raise AccessListError(f"the group {name!r} contains a control character")
        if name == EVERYONE and not allow_everyone:
            raise AccessListError(f"{EVERYONE!r} is no group a reader can be in")
        if name not in groups:
            groups.append(name)
    if not groups:
        raise AccessListError(
            "names no group (leave it out to let everyone read, or name the groups that may)"
        )
    if len(groups) > GROUPS_MAX:
        raise AccessListError(f"names {len(groups)} groups; at most {GROUPS_MAX}")
    return tuple(groups)


def encode_access(groups: Sequence[str] | None) -> str:
    """A document's own list as one text (sorted, so equal lists are equal texts):
    what a vector store's scalar field keeps, ``NO_LIST`` when it has none.

    >>> encode_access(["sre", "payments"]), encode_access(None)
    ('["payments","sre"]', '')
    """
    if groups is None:
        return NO_LIST
    return json.dumps(sorted(set(groups)), ensure_ascii=False, separators=(",", ":"))


def decode_access(text: str) -> tuple[str, ...] | None:
    """``encode_access``'s inverse; None for ``NO_LIST``.

    >>> decode_access('["payments","sre"]'), decode_access("")
    (('payments', 'sre'), None)
    """
    if text == NO_LIST:
        return None
    return tuple(str(group) for group in json.loads(text))
