"""Every place a long text holds one of many keys, found in one pass (Aho–Corasick).

The key count reads each new document of a KB against every key of the KB
(``ExactIndex.frequency``). Walking the text word by word and looking each word's bucket
up once per key length it holds cost about 5 ms a document on the 12,000-document scale
KB, and grew with the keys: 8.5 ms at 50,000. An automaton over the keys
(``ahocorasick-rs``, Apache-2.0, in Rust) finds every occurrence of every key in one pass
whatever their number, and Python checks only the places found (about 70 a document
there): about 1 ms a document.

The library is this module's alone, and checked once (``scanner``): its positions must
be characters of a ``str``, as the checks that follow read them. If it fails, ``scanner``
gives None and the count walks the buckets as before.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from functools import lru_cache

log = logging.getLogger(__name__)

#: a probe whose answer differs if positions were bytes (the CJK characters before it)
_PROBE = ("redis连接池 pool", ("连接池", "pool"), [("pool", 9, 13), ("连接池", 5, 8)])


#: keys a small automaton beside the last whole one may hold, before the whole is built
#: again: a one-file upload into 50,000 documents rebuilt the automaton of its 380,000 keys
#: (about 1 s) to count the new document's
ADDED_KEYS = 20_000


class KeyScanner:
    """The keys, as an automaton that finds all of them, overlapping, in a text.

    >>> list(KeyScanner(["kafka", "kafka lag"]).occurrences("kafka lag grows"))
    [('kafka', 0, 5), ('kafka lag', 0, 9)]
    """

    def __init__(self, keys: Iterable[str]) -> None:
        from ahocorasick_rs import AhoCorasick

        self.keys = sorted(set(keys))
        self._automaton = AhoCorasick(self.keys)

    def occurrences(self, text: str) -> Iterator[tuple[str, int, int]]:
        """Each (key, start, end) in ``text``, in order of where they end."""
        keys = self.keys
        for index, start, end in self._automaton.find_matches_as_indexes(text, overlapping=True):
            yield keys[index], start, end


class ChangedKeys:
    """The keys after a change, found by the automaton of the keys before it (``whole``),
    less the keys gone since, and by a small automaton of the keys added since.

    >>> before = KeyScanner(["kafka", "kafka lag", "broker"])
    >>> after = ChangedKeys(before, {"kafka", "kafka lag", "zookeeper"}, {"zookeeper"})
    >>> sorted(after.occurrences("kafka lag on the broker and zookeeper"))
    [('kafka', 0, 5), ('kafka lag', 0, 9), ('zookeeper', 28, 37)]
    """

    def __init__(self, whole: KeyScanner, keys: set[str], added: set[str]) -> None:
        self.whole = whole
        self.current = keys
        self.added = KeyScanner(added)

    def occurrences(self, text: str) -> Iterator[tuple[str, int, int]]:
        """Each (key, start, end) in ``text``, the whole automaton's first."""
        current = self.current
        for found in self.whole.occurrences(text):
            if found[0] in current:
                yield found
        yield from self.added.occurrences(text)


#: what finds every key in a text: one automaton, or one beside the keys added since it
Scanner = KeyScanner | ChangedKeys


def scanner(keys: Iterable[str], before: Scanner | None = None) -> Scanner | None:
    """A scanner of ``keys``, or None where the library fails its check; ``before`` (this
    index's scanner before a change) keeps its whole automaton, beside one of the keys
    added since while they are at most ``ADDED_KEYS``."""
    if not _works():
        return None
    whole = before.whole if isinstance(before, ChangedKeys) else before
    if whole is None:
        return KeyScanner(keys)
    current = set(keys)
    added = current.difference(whole.keys)
    return ChangedKeys(whole, current, added) if len(added) <= ADDED_KEYS else KeyScanner(current)


@lru_cache(maxsize=1)
def _works() -> bool:
    text, keys, expected = _PROBE
    try:
        found = sorted(KeyScanner(keys).occurrences(text))
    except Exception as exc:  # an import or API that changed: the buckets still count
        log.warning("key count: ahocorasick-rs failed (%s); walking the buckets", exc)
        return False
    if found != expected:
        log.warning(
            "key count: ahocorasick-rs found %s, not %s; walking the buckets", found, expected
        )
        return False
    return True
