"""How many documents use each exact key: what decides whether a key still names one
document (a key many documents use names none of them). Counted by ``ExactIndex.frequency``
whenever documents change (``superbiz.knowledge.kb.statistics``), read at match time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: The most documents whose text may use a key that still names one of them. On dev the
#: keys of all 273 PRECISE lookups (each right) are used by 1 or 2 documents; checked on
#: dev2, where the right ones are used by 1 and the wrong ones by 7 or more ("cluster",
#: a product's name): 3 leaves room for a document or two that mention another by name.
KEY_DOCUMENTS_LIMIT = 3


@dataclass(frozen=True, slots=True)
class KeyFrequency:
    """How many of the knowledge base's ``documents`` use each exact key in their text
    (``counts``; a key found only inside URLs or identifiers is not used), measured
    whenever documents change (``superbiz.knowledge.kb.statistics``)."""

    documents: int
    counts: Mapping[str, int] = field(default_factory=dict)
    #: for the keys that name a document, which documents use them
    users: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the content hash of each document counted, so that a change counts only the
    #: documents it touched (``updated``); empty when not kept
    measured: Mapping[str, str] = field(default_factory=dict)

    def names_a_document(self, key: str) -> bool:
        """Whether ``key`` (in ``match_form``) is rare enough in this KB to name one
        document: the one rule the lookup's L0 and the map planner's exact score share.

        A key's document frequency says how many documents a question using it may be
        about (IDF): one that more than ``KEY_DOCUMENTS_LIMIT`` documents use does not
        name its owner. A key not measured yet (a document added since) counts as specific.

        >>> kb = KeyFrequency(400, {"kafka": 120, "kafka lag": 2})
        >>> kb.names_a_document("kafka"), kb.names_a_document("kafka lag")
        (False, True)
        """
        count = self.counts.get(key)
        return count is None or count <= KEY_DOCUMENTS_LIMIT

    def updated(
        self, measured: Mapping[str, str], fresh: KeyFrequency, gone: Iterable[str]
    ) -> KeyFrequency:
        """These counts after a change: ``gone`` (documents removed, or counted in an
        earlier version) leave the keys that name a document (a key many documents use
        stays one: counting it again would read every document), and ``fresh`` (the new
        and changed documents, counted alone) adds to every key. ``measured``: every
        document now counted, with its content hash. A key a new document brings counts
        its uses in the new documents only, until the next whole measurement
        (``superbiz calibrate --measure``)."""
        gone = set(gone)
        counts = dict(self.counts)
        users: dict[str, Sequence[str]] = dict(self.users)
        for key, paths in self.users.items() if gone else ():
            if gone.isdisjoint(paths):  # most keys, checked in C rather than path by path
                continue
            users[key] = kept = [p for p in paths if p not in gone]
            counts[key] -= len(paths) - len(kept)
            if not counts[key]:
                del counts[key]
        for key, added in fresh.counts.items():
            total = counts.get(key, 0) + added
            counts[key] = total
            if total <= KEY_DOCUMENTS_LIMIT:
                users[key] = [*users.get(key, []), *fresh.users.get(key, ())]
            else:
                users.pop(key, None)
        return KeyFrequency(
            len(measured),
            counts,
            {key: tuple(paths) for key, paths in users.items() if paths},
            dict(measured),
        )

    @staticmethod
    def total(parts: Iterable[KeyFrequency]) -> KeyFrequency:
        """The counts over every part's documents (none in two parts), as one measurement
        of them all gives them: the users in the parts' order. One pass, however many
        parts (adding them two at a time copied the growing counts at each step).

        >>> a = KeyFrequency(2, {"kafka": 2, "lag": 1}, {"kafka": ("a", "b"), "lag": ("a",)})
        >>> both = KeyFrequency.total([a, KeyFrequency(2, {"kafka": 2}, {"kafka": ("c", "d")})])
        >>> both.documents, both.counts, both.users
        (4, {'kafka': 4, 'lag': 1}, {'lag': ('a',)})
        """
        documents, counts, users = 0, dict[str, int](), dict[str, list[str]]()
        for part in parts:
            documents += part.documents
            for key, count in part.counts.items():
                counts[key] = counts.get(key, 0) + count
            for key, paths in part.users.items():
                if counts[key] <= KEY_DOCUMENTS_LIMIT:
                    users.setdefault(key, []).extend(paths)
                else:  # counts only grow: it names no document from here on
                    users.pop(key, None)
        return KeyFrequency(
            documents,
            counts,
            {
                key: tuple(paths)
                for key, paths in users.items()
                if counts[key] <= KEY_DOCUMENTS_LIMIT
            },
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "documents": self.documents,
                "counts": dict(self.counts),
                "users": {key: list(paths) for key, paths in self.users.items()},
                "measured": dict(self.measured),
            },
            ensure_ascii=False,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> KeyFrequency | None:
        """The stored frequencies, or None when there are none or they cannot be read
        (every key then counts as specific, as before they were measured)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            return cls(
                int(data["documents"]),
                {str(k): int(v) for k, v in data["counts"].items()},
                {str(k): tuple(map(str, v)) for k, v in data.get("users", {}).items()},
                {str(k): str(v) for k, v in data.get("measured", {}).items()},
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            return None
