"""A restricted reader's dense searches beside everyone's, at one size of ``eval scale``.

Past ``_lite.search.EXACT_ROWS`` rows a Lite file's search walks each segment's graph, and
a filter that admits most of a segment's rows (a reader denied one domain, a lookup scoped
to a large domain) walks it among those rows: what such a search costs grows with the
segments, not with the hits, so it is measured apart from the lookups.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from superbiz.evaluation.metrics import percentile
from superbiz.knowledge.kb.base import KnowledgeBase
from superbiz.retrieval.search import candidate_depth
from superbiz.retrieval.visibility import Visibility


def restricted_searches(
    kb: KnowledgeBase, questions: Sequence[str], documents: int, rounds: int
) -> dict[str, Any]:
    """The dense search p50 (ms) of ``questions`` for everyone and for a reader denied one
    domain (the last by name), each the median of ``rounds`` passes' p50s, as deep as a
    lookup searches a KB of ``documents``."""
    domains = sorted(kb.domains())
    if not domains or not questions:
        return {}
    reader = Visibility(frozenset(), frozenset(domains[-1:]), frozenset(), lists_in_use=False)
    limit = candidate_depth(kb.settings.retrieval_config.candidates, documents)
    vectors = [kb.embedder.embed_query(question) for question in questions]
    store = kb.store
    passes: dict[str, list[float]] = {"everyone": [], "restricted": []}
    for _ in range(max(rounds, 1)):
        for name, visibility in (("everyone", None), ("restricted", reader)):
            elapsed = []
            for vector in vectors:
                started = time.perf_counter()
                store.search_dense(vector, limit, None, visibility)
                elapsed.append((time.perf_counter() - started) * 1000)
            passes[name].append(percentile(elapsed, 50))
    return {
        "denied_domain": domains[-1],
        "dense_p50_ms": round(percentile(passes["everyone"], 50), 2),
        "restricted_dense_p50_ms": round(percentile(passes["restricted"], 50), 2),
    }


def described(searches: dict[str, Any]) -> str:
    """``restricted_searches``' figures as the scale report's line says them ("": none)."""
    if not searches:
        return ""
    return (
        f"dense search p50 {searches['dense_p50_ms']} ms, a reader denied "
        f"{searches['denied_domain']} {searches['restricted_dense_p50_ms']} ms; "
    )
