"""When the words stand in for the cosine: a first document under the reference threshold
that the query's own terms or codes name is a REFERENCE answer (``Retriever.retrieve``).
Pure: the query and the ranking in, a yes or no out.
"""

from __future__ import annotations

from collections.abc import Callable

from superbiz._text import codes, key_terms, normalize, stem
from superbiz.retrieval.search import DocHit

#: a code of this many digits is an error number ("ERROR 1290", 42903), not an HTTP status
#: every API runbook mentions: it names the first document that holds it even when others
#: hold it too (the MySQL failover runbook and the pool runbook both explain 1290)
SPECIFIC_CODE_DIGITS = 4
#: the fewest key terms of a query of which the dense search's first document may lack one
ALL_BUT_ONE_TERMS = 3


def lexically_agreed(query: str, ranked: list[DocHit]) -> bool:
    """Whether the first of ``ranked`` is a REFERENCE answer although its cosine is under
    the reference threshold: it holds every key term of the query (title or retrieved
    chunks; an English term with or without its inflection), or every code the query
    names and no other ranked document holds them all (codes of ``SPECIFIC_CODE_DIGITS``
    or more: whoever else holds them), or it heads both the dense and the BM25 list, or it
    heads the dense list and holds every key term but one of three or more, where no other
    ranked document holds them all ("What happens on my first day?": the handbook's
    onboarding page, dense-first, says "first day" and not "happens").

    A short keyword query ("redis pool", "api 429") embeds far from any passage: the
    cosine rule showed nothing for the example KB's Redis and rate-limit runbooks, which
    both lists put first. Of the lookups left without a level on dev and answer-only,
    this rule raises 3 and 9, 3 and 7 of them gold (README). "What does error 42903
    mean?" found nothing either, the rate-limit runbook first but dense-second: only it
    holds the code (the codes raise no lookup of the four sets).

    >>> from superbiz.retrieval.search import ScoredChunk
    >>> from superbiz.retrieval.records import ChunkHit
    >>> chunk = lambda text, bm25: ScoredChunk(
    ...     ChunkHit("c", "d", "ops", "", "", 0, text, 0.0), 0.2, 1.0, bm25)
    >>> redis = DocHit("redis.md", "Redis 连接池", "ops", 1.4, 0.29, 1.0,
    ...                [chunk("could not get a resource from the pool, code 5003, HTTP 503", 9.0)])
    >>> other = DocHit("kafka.md", "Kafka", "ops", 0.7, 0.31, 0.9,
    ...                [chunk("lag 5003, HTTP 503", None)])
    >>> lexically_agreed("redis pool", [redis, other])  # every term, though not dense-first
    True
    >>> lexically_agreed("redis lag", [redis, other])
    False
    >>> lexically_agreed("redis pool resource leak", [redis, other])  # all but one, not dense-first
    False
    >>> lexically_agreed("kafka lag spike", [other, redis])  # dense-first, all but one
    True
    >>> lexically_agreed("what is 503 exactly", [redis, other])  # a status both hold
    False
    >>> lexically_agreed("what is 5003 exactly", [redis, other])  # an error number
    True
    """
    if not ranked:
        return False
    top, terms = ranked[0], key_terms(query)
    text = _text(top)
    held = sum(_holds(text, term) for term in terms)
    if terms and held == len(terms):
        return True
    dense = [d for d in ranked if d.raw_dense is not None]
    dense_first = bool(dense) and max(dense, key=lambda d: d.similarity) is top
    all_but_one = len(terms) >= ALL_BUT_ONE_TERMS and held == len(terms) - 1
    if (
        dense_first
        and all_but_one
        and not _another_holds(ranked, lambda other: all(_holds(other, t) for t in terms))
    ):
        return True
    named = codes(query)
    if named and all(code in text for code in named):
        if all(len(code) >= SPECIFIC_CODE_DIGITS for code in named):
            return True
        if not _another_holds(ranked, lambda other: all(code in other for code in named)):
            return True
    lexical = [(bm25, d) for d in ranked if (bm25 := _best_bm25(d)) is not None]
    return dense_first and bool(lexical) and max(lexical, key=lambda pair: pair[0])[1] is top


def _another_holds(ranked: list[DocHit], holds: Callable[[str], bool]) -> bool:
    """Whether a ranked document after the first ``holds`` what the query asks, in what
    it shows (``_text``)."""
    return any(holds(_text(doc)) for doc in ranked[1:])


def _holds(text: str, term: str) -> bool:
    """Whether ``text`` names ``term``, an English one with or without its inflection."""
    return term in text or stem(term) in text


def _text(doc: DocHit) -> str:
    """What a ranked document shows of itself: its title and retrieved chunks."""
    return normalize(" ".join([doc.title, *(c.hit.text for c in doc.chunks)]))


def _best_bm25(doc: DocHit) -> float | None:
    return max((c.raw_bm25 for c in doc.chunks if c.raw_bm25 is not None), default=None)
