"""How much of a document's title a query names: a field signal fused beside BM25 and cosine.

Runbook titles name their alert ("Kube Pod Not Ready", ``KubePodCrashLooping``), and an
alert text usually repeats those words in another form ("non-ready", "crash looping"),
which BM25 over whole chunks dilutes among sibling runbooks. Only Latin words count:
a Chinese FAQ section's title is its page title, shared by its siblings (measured in the
README: counting jieba words lowered HIGHLY_RELEVANT precision).
"""

from __future__ import annotations

import re
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


@lru_cache(maxsize=1024)
def title_coverage(title: str, asked: tuple[str, ...]) -> float:
    """The share of ``title``'s words that the query's words ``asked`` (its ``title_words``)
    contain: a query word that starts with the title word's first four letters, or the
    title word with the query word's ("ready" ~ "non-ready", "looping" ~ "loop").
    Remembered for the last lookups: the fusion reads it, and the learned ranker after it.

    >>> asked = title_words("Pod web has been in a non-ready state")
    >>> title_coverage("Kube Pod Not Ready", asked)
    0.6666666666666666
    >>> title_coverage("支付失败排查", title_words("支付失败")), title_coverage("Kube API Down", ())
    (0.0, 0.0)
    """
    words = title_words(title)
    if not words:
        return 0.0
    heads, shorts = _prefixes(asked)
    return sum(w[:_PREFIX] in heads or any(w.startswith(a) for a in shorts) for w in words) / len(
        words
    )


@lru_cache(maxsize=64)
def _prefixes(asked: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """What ``title_coverage`` compares a title word with, set apart once per query: a
    word shorter than the prefix matches the query words it starts (``heads`` holds every
    prefix of the query's words down to its own length), and a query word shorter than
    the prefix matches the title words that start with it (``shorts``)."""
    heads = {a[:n] for a in asked for n in range(1, min(len(a), _PREFIX) + 1)}
    return frozenset(heads), tuple(a for a in asked if len(a) < _PREFIX)
