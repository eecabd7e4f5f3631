"""Fusion of ranked lists. Pure functions: ids and scores (and the texts the lexical reach
reads) in, fused scores out.

Measured on the dev set (see README): min-max fusion of BM25 and dense chunk scores
(MRR 0.944) beat reciprocal-rank fusion at k=60 (MRR 0.916).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from superbiz._text import has_cjk, has_latin, indexed_terms

#: a name that identifies what it names in any language: CamelCase of three humps or more
#: (``CICDTooManyPendingJobsPerNamespace``) or words joined by ``_`` or ``.``, each begun
#: by a letter, six characters at least (``max_connections``, ``java.lang.NoSuchFieldError``;
#: not "e.g" nor "v1.2")
_IDENTIFIER = re.compile(
    r"(?<![\w.])(?:[A-Z]+[a-z0-9]+){3,}(?![\w.])"
    r"|(?<![\w.])(?=[\w.]{6})[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z][A-Za-z0-9]*)+(?![\w.])"
)


def minmax_normalize(scores: Mapping[str, float]) -> dict[str, float]:
    """Scale scores to [0, 1] (higher is better); one score, or all equal, gives 1.0.

    >>> minmax_normalize({"a": 3.0, "b": 1.0, "c": 2.0})
    {'a': 1.0, 'b': 0.0, 'c': 0.5}
    """
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def minmax_fusion(
    dense: Mapping[str, float],
    sparse: Mapping[str, float],
    dense_weight: float = 0.5,
    reach: float = 1.0,
) -> dict[str, float]:
    """Weighted sum of min-max normalised scores; an id missing from a list scores 0 there.

    Both inputs must be "higher is better" (e.g. cosine, BM25). The sparse scores weigh
    ``reach`` × (1 − ``dense_weight``) (``lexical_reach``).

    >>> fused = minmax_fusion({"a": 0.9, "b": 0.5}, {"b": 7.0, "c": 3.0})
    >>> sorted(fused.items())
    [('a', 0.5), ('b', 0.5), ('c', 0.0)]
    """
    d, s = minmax_normalize(dense), minmax_normalize(sparse)
    return {
        key: dense_weight * d.get(key, 0.0) + reach * (1.0 - dense_weight) * s.get(key, 0.0)
        for key in dict.fromkeys([*d, *s])
    }


def length_prior(
    fused: Mapping[str, float], chunks: Mapping[str, int], weight: float
) -> dict[str, float]:
    """Each document's fused score less ``weight`` × the natural log of its chunk count
    (``chunks``; one chunk where unknown).

    A document is scored by its best chunk's cosine and its best chunk's BM25: for a
    long page, the best of many draws, high by chance as much as by answering. On dev2 a
    connector's reference page ranked above the FAQ entry that answers the question
    (``flink-sources/mongodb-cdc.md`` over ``faq/q030.md``). 0.05 was chosen on dev +
    dev-answer-only and checked on dev2 + dev2-answer-only (docs/benchmarks/retrieval.md,
    "A long page pays for its many chunks").

    >>> scored = length_prior({"faq": 0.9, "page": 1.0}, {"page": 20}, 0.05)
    >>> {key: round(score, 3) for key, score in scored.items()}
    {'faq': 0.9, 'page': 0.85}
    """
    return {
        key: score - weight * math.log(max(1, chunks.get(key, 1))) for key, score in fused.items()
    }


def lexical_reach(query: str, hits: Iterable[str]) -> float:
    """The share of ``query``'s indexed terms written in a script (CJK or Latin) that the BM25
    ``hits`` (their texts) use at all; 1.0 when every term's script is there.

    BM25 cannot match a Chinese word in English runbooks, yet min-max fusion stretches
    whatever it did match (the one Latin word a Chinese question shares with all of them,
    ``pip``) to [0, 1], and that noise outweighed the dense cosine, which reads across
    languages. Scaled by the reach, the lexical signals count as much as the share of
    the question they could see. A question in the hits' own script keeps 1.0, however
    few of its words the hits contain: a paraphrase is still visible to BM25. The query's
    words are cut only when one of its scripts is missing from the hits.

    >>> lexical_reach("pip 安装时证书校验失败", ["pip install --cert"])
    0.2
    >>> lexical_reach("Redis 连接池耗尽", ["Redis 超时", "pool"])
    1.0
    >>> lexical_reach("KubePodCrashLooping 告警怎么处理", ["Alert: KubePodCrashLooping"])
    1.0
    """
    texts = list(hits)
    missing_cjk = has_cjk(query) and not any(has_cjk(text) for text in texts)
    missing_latin = has_latin(query) and not any(has_latin(text) for text in texts)
    if not (missing_cjk or missing_latin):
        return 1.0
    # an identifier the hits contain is what BM25 saw of the question, and it names its
    # document whatever language the rest is in ("CICDTooManyPendingJobsPerNamespace
    # 告警了，要怎么排查？": one term of three, its page second behind a neighbour's cosine)
    named = [m.lower() for m in _IDENTIFIER.findall(query)]
    if named:
        lowered = [text.lower() for text in texts]
        if any(name in text for name in named for text in lowered):
            return 1.0
    terms = indexed_terms(query)
    if not terms:
        return 1.0
    unseen = sum(missing_cjk if has_cjk(term) else missing_latin for term in terms)
    return (len(terms) - unseen) / len(terms)


def rrf_fusion(*rankings: list[str], k: int = 60) -> dict[str, float]:
    """Reciprocal-rank fusion: ``Σ 1 / (k + rank)``, rank starting at 1.

    >>> rrf_fusion(["a", "b"], ["b", "c"], k=1)
    {'a': 0.5, 'b': 0.8333333333333333, 'c': 0.3333333333333333}
    """
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def answer_fusion(
    fused: Mapping[str, float], answers: Mapping[str, float], weight: float
) -> dict[str, float]:
    """The hybrid ranking's fused scores and the answer model's cosines, each min-max
    normalised over the candidates in ``fused``, summed with ``weight`` on the answers.

    A candidate without an answer cosine (no vector yet) scores 0 there; measured on
    dev and answer-only, a weight of 3 beat 2, 4 and 6 (README).

    >>> answer_fusion({"a": 2.0, "b": 1.5, "c": 1.0}, {"a": 0.5, "b": 1.0, "c": 0.75}, 3.0)
    {'a': 1.0, 'b': 3.5, 'c': 1.5}
    """
    hybrid = minmax_normalize(fused)
    answer = minmax_normalize({key: answers[key] for key in fused if key in answers})
    return {key: hybrid[key] + weight * answer.get(key, 0.0) for key in fused}
