"""How much of a document's title a query names: a field signal fused beside BM25 and cosine.

Runbook titles name their alert ("Kube Pod Not Ready", ``KubePodCrashLooping``), and an
alert text usually repeats those words in another form ("non-ready", "crash looping"),
which BM25 over whole chunks dilutes among sibling runbooks. Only Latin words count:
a Chinese FAQ section's title is its page title, shared by its siblings (measured in the
README: counting jieba words lowered HIGHLY_RELEVANT precision).
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache

from superbiz.retrieval.records import ENGLISH_STOP_WORDS

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
_STOP = frozenset(ENGLISH_STOP_WORDS)
_PREFIX = 4


@lru_cache(maxsize=4096)
def title_words(text: str) -> tuple[str, ...]:
    """Latin words of three letters or more, CamelCase split, lowercased, stop words out
    (cached: a corpus's titles come back in every ranking).

    >>> title_words("KubePodNotReady"), title_words("Node RAID Disk Failure")
    (('kube', 'pod', 'ready'), ('node', 'raid', 'disk', 'failure'))
    >>> title_words("TiDB 集群管理常见问题")
    ()
    """
    words = (w.lower() for w in _WORD.findall(text))
    return tuple(w for w in words if len(w) >= 3 and w not in _STOP)


class TitleVocabulary:
    """How rare each title word is among a knowledge base's titles. A word most titles
    share ("npm" in npm-install, npm-ci and npm-deprecate; "ceph" in a storage operator's
    alerts) says little about which page a query means, so ``title_coverage`` weighs each
    of a title's words by its inverse document frequency among the titles, as BM25
    weighs a term (the weight never reaches 0: a title of shared words still counts).

    >>> titles = TitleVocabulary.of(["npm-install", "npm-ci", "npm-deprecate"])
    >>> round(titles.weight("npm"), 2), round(titles.weight("deprecate"), 2)
    (0.13, 0.98)
    >>> UNIFORM.weight("npm")  # no titles: every word alike
    1.0
    """

    __slots__ = ("_counts", "_titles", "_weights")

    def __init__(self, counts: Mapping[str, int], titles: int) -> None:
        self._counts = dict(counts)
        self._titles = titles
        # each word's weight once (a lookup weighs the words of every title it ranks)
        self._weights: dict[str, float] = {}

    @classmethod
    def of(cls, titles: Iterable[str]) -> TitleVocabulary:
        """The vocabulary of ``titles``, each counted once per title it is in."""
        counts: Counter[str] = Counter()
        seen = 0
        for title in titles:
            seen += 1
            counts.update(set(title_words(title)))
        return cls(counts, seen)

    def weight(self, word: str) -> float:
        if not self._titles:
            return 1.0
        weight = self._weights.get(word)
        if weight is None:
            weight = math.log((self._titles + 1) / (self._counts.get(word, 0) + 0.5))
            self._weights[word] = weight
        return weight


#: every title word weighs the same: the plain share of a title's words
UNIFORM = TitleVocabulary({}, 0)


class TitleCounts:
    """A changing knowledge base's ``TitleVocabulary``, kept by difference: a change
    counts the words of the titles it touched, not every title again (the first lookup
    after an upload into 11,925 documents spent 0.1 s on them, on every replica).

    >>> titles = TitleCounts()
    >>> round(titles.vocabulary({"a": "npm-install", "b": "npm-publish"}).weight("npm"), 2)
    0.18
    >>> later = titles.vocabulary({"a": "npm-install", "c": "yarn-publish"})  # b went, c came
    >>> whole = TitleVocabulary.of(["npm-install", "yarn-publish"])
    >>> [round(later.weight(w), 2) == round(whole.weight(w), 2) for w in ("npm", "publish")]
    [True, True]
    """

    def __init__(self) -> None:
        self._titles: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def vocabulary(self, titles: Mapping[str, str]) -> TitleVocabulary:
        """The vocabulary of ``titles`` (each document's title by its key), as
        ``TitleVocabulary.of(titles.values())`` counts it."""
        with self._lock:
            held, counts = self._titles, self._counts
            for key in [key for key, title in held.items() if titles.get(key) != title]:
                for word in set(title_words(held.pop(key))):
                    counts[word] -= 1
                    if not counts[word]:
                        del counts[word]
            for key, title in titles.items():
                if key not in held:
                    held[key] = title
                    for word in set(title_words(title)):
                        counts[word] = counts.get(word, 0) + 1
            return TitleVocabulary(counts, len(held))


def title_coverage(
    title: str, asked: tuple[str, ...], vocabulary: TitleVocabulary = UNIFORM
) -> float:
    """The share of ``title``'s words that the query's words ``asked`` (its ``title_words``)
    contain: a query word that starts with the title word's first four letters, or the
    title word with the query word's ("ready" ~ "non-ready", "looping" ~ "loop"); each
    word weighed by how rare it is among the KB's titles (``vocabulary``).

    >>> asked = title_words("Pod web has been in a non-ready state")
    >>> title_coverage("Kube Pod Not Ready", asked)
    0.6666666666666666
    >>> title_coverage("支付失败排查", title_words("支付失败")), title_coverage("Kube API Down", ())
    (0.0, 0.0)
    >>> titles = TitleVocabulary.of(["npm-install", "npm-ci", "npm-deprecate"])
    >>> asked = title_words("How do I deprecate a package?")
    >>> title_coverage("npm-deprecate", asked)
    0.5
    >>> round(title_coverage("npm-deprecate", asked, titles), 2)
    0.88
    """
    named = _named(title, asked)
    if not named:
        return 0.0
    weights = [vocabulary.weight(word) for word, _ in named]
    return sum(w for w, (_, hit) in zip(weights, named, strict=True) if hit) / sum(weights)


@lru_cache(maxsize=1024)
def _named(title: str, asked: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    """Each of ``title``'s words and whether ``asked`` names it (remembered for the last
    lookups: the fusion reads it, and the learned ranker after it)."""
    heads, shorts = _prefixes(asked)
    return tuple(
        (w, w[:_PREFIX] in heads or any(w.startswith(a) for a in shorts))
        for w in title_words(title)
    )


@lru_cache(maxsize=64)
def _prefixes(asked: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """What ``title_coverage`` compares a title word with, set apart once per query: a
    word shorter than the prefix matches the query words it starts (``heads`` holds every
    prefix of the query's words down to its own length), and a query word shorter than
    the prefix matches the title words that start with it (``shorts``)."""
    heads = {a[:n] for a in asked for n in range(1, min(len(a), _PREFIX) + 1)}
    return frozenset(heads), tuple(a for a in asked if len(a) < _PREFIX)
