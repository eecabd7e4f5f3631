"""How far ahead of the next domain the map must put one before a plan may be scoped to it.

The map planner scores each domain by its best entry's cosine with the question. A plan
scoped to the best domain hides every other domain's documents, so it is only worth the
risk when the map clearly points to one domain. "Clearly" is measured on the knowledge
base itself, not chosen on a benchmark: each document's title is asked as a question of
the map without that document's own entry (leave one out), and the clear margin is the
smallest lead of the best domain over the next at which the best domain is the title's
own at least ``precision`` of the time, for each domain the map can point to. Pure
numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: the margin of a map the planner cannot measure: no lead is clear, every plan unscoped
UNMEASURED = math.inf
#: titles asked at most: past it a reproducible sample (each is scored against every
#: entry; 50,000 documents all asked took a 50,000² matrix, 20 GB)
MAX_TITLES = 4000
#: titles scored at once (a block × entries matrix of float32)
_BLOCK = 256


def domain_scores(scores: np.ndarray, domains: Sequence[str]) -> dict[str, float]:
    """Each domain's best score among its entries (``scores[i]`` is entry ``i``'s).

    >>> domain_scores(np.array([0.2, 0.5, 0.4]), ["a", "b", "a"])
    {'a': 0.4, 'b': 0.5}
    """
    best: dict[str, float] = {}
    for domain, score in zip(domains, scores.tolist(), strict=True):
        if score > best.get(domain, -math.inf):
            best[domain] = float(score)
    return best


def lead(scores: dict[str, float]) -> float:
    """The best domain's lead over the next (``inf`` with a single domain).

    >>> round(lead({"a": 0.4, "b": 0.55, "c": 0.1}), 2)
    0.15
    """
    ranked = sorted(scores.values(), reverse=True)
    if len(ranked) < 2:
        return math.inf
    return ranked[0] - ranked[1]


def min_rows(precision: float) -> int:
    """Titles needed before ``precision`` can be measured at all: one miss among fewer
    would already be more than ``1 - precision`` of them (20 for 0.95).

    >>> min_rows(0.95), min_rows(0.9)
    (20, 10)
    """
    return math.ceil(round(1 / (1 - precision), 9))


def clear_margins(
    titles: np.ndarray, entries: np.ndarray, domains: Sequence[str], precision: float
) -> dict[str, float]:
    """Per domain D, the smallest lead at which the map's own titles that it puts in D
    belong to D at least ``precision`` of the time (``UNMEASURED`` where that cannot be
    measured or is never reached).

    ``titles[i]`` is document ``i``'s title embedded as a question, ``entries[i]`` its map
    entry, ``domains[i]`` its domain. A title is asked without its own entry; a document
    alone in its domain cannot be found that way and is left out. Measured per domain, as
    the plan is scoped to one: a large, easily told domain must not vouch for a small one
    that overlaps another. Fewer than ``min_rows(precision)`` titles put in D measure
    nothing for D.

    >>> rng = np.random.default_rng(0)
    >>> centres = np.eye(3)
    >>> entries = np.repeat(centres, 30, axis=0) + rng.normal(0, 0.05, (90, 3))
    >>> titles = entries + rng.normal(0, 0.05, (90, 3))
    >>> margins = clear_margins(titles, entries, ["a"] * 30 + ["b"] * 30 + ["c"] * 30, 0.95)
    >>> sorted(margins), all(m < 1 for m in margins.values())
    (['a', 'b', 'c'], True)
    >>> clear_margins(titles[:4], entries[:4], ["a", "a", "b", "b"], 0.95)
    {'a': inf, 'b': inf}
    """
    n = len(domains)
    names = sorted(set(domains))
    margins = dict.fromkeys(names, UNMEASURED)
    if n == 0 or len(names) < 2:
        return margins
    column = {name: i for i, name in enumerate(names)}
    owner = np.array([column[d] for d in domains])
    sizes = np.bincount(owner, minlength=len(names))
    rows = np.nonzero(sizes[owner] > 1)[0]
    if len(rows) > MAX_TITLES:  # a large map: a reproducible sample of its titles
        rows = np.sort(np.random.default_rng(0).choice(rows, MAX_TITLES, replace=False))
    scores = _best_per_domain(titles, entries, owner, rows, len(names))
    order = np.sort(scores, axis=1)
    leads = order[:, -1] - order[:, -2]
    chosen = scores.argmax(axis=1)
    right = chosen == owner[rows]
    need = min_rows(precision)
    for j, name in enumerate(names):
        mine = np.nonzero(chosen == j)[0]
        if len(mine) < need:
            continue
        # from the largest lead down: the share right among titles leading at least this
        by_lead = mine[np.argsort(-leads[mine], kind="stable")]
        counted = np.arange(1, len(mine) + 1)
        held = (np.cumsum(right[by_lead]) / counted >= precision) & (counted >= need)
        reached = np.nonzero(held)[0]
        if len(reached):
            margins[name] = float(leads[by_lead][reached[-1]])
    return margins


def _best_per_domain(
    titles: np.ndarray, entries: np.ndarray, owner: np.ndarray, rows: np.ndarray, count: int
) -> np.ndarray:
    """For each title in ``rows``, its best cosine with each domain's entries, its own
    entry left out; a block of titles at a time, the entries grouped by domain (copied
    only where a domain's entries are not already together: 0.1 GB at 50,000)."""
    runs = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    if len(runs) == count:  # each domain's entries together, as a map lists them: no copy
        grouped, starts, columns = entries, runs, owner[runs]
        where = np.arange(len(owner))
    else:
        order = np.argsort(owner, kind="stable")
        starts = np.searchsorted(owner[order], np.arange(count))
        grouped, columns = entries[order], np.arange(count)
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order))  # an entry's column once grouped
    out = np.empty((len(rows), count))
    for begin in range(0, len(rows), _BLOCK):
        block = rows[begin : begin + _BLOCK]
        similarity = titles[block] @ grouped.T
        similarity[np.arange(len(block)), where[block]] = -np.inf
        out[begin : begin + len(block), columns] = np.maximum.reduceat(similarity, starts, axis=1)
    return out
