"""``superbiz calibrate``: measure the embedder on this KB and propose thresholds.

Probes come from the KB itself: each distinctive section heading (one that names a
single document) and each title is a query whose right answer is its own document.
For each probe we measure the cosine with its own best chunk (gold pairs), with a
random chunk of another document (random pairs) and whether a dense search ranks its
own document first. Proposed:

* ``reference-threshold``: the 95th percentile of random-pair cosines, i.e. a result
  must at least beat what an unrelated chunk scores 19 times out of 20;
* ``highly-relevant-threshold``: the lowest cosine from which the top-1 document is the
  probe's own in ≥ 95 % of probes (at least 10 probes above it).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from superbiz.evaluation.metrics import percentile
from superbiz.exceptions import SuperbizError
from superbiz.knowledge.base import KnowledgeBase
from superbiz.retrieval.exact_index import is_specific
from superbiz.retrieval.records import DENSE_METRIC
from superbiz.retrieval.relevance import similarity_from_score

TARGET_PRECISION = 0.95
MIN_SUPPORT = 10
#: fewer probes than this and the proposal is noise (a 15-document KB gives about 40)
MIN_PROBES = 100


def propose_highly_relevant(
    top1: list[tuple[float, bool]], reference: float, target: float = TARGET_PRECISION
) -> float | None:
    """Lowest threshold (step 0.01) at which top-1 precision reaches ``target`` with at
    least ``MIN_SUPPORT`` probes above it; ``None`` when the KB is too small to tell.

    >>> propose_highly_relevant([(0.9, True)] * 10 + [(0.5, False)] * 10, 0.3)
    0.51
    """
    for step in range(round(reference * 100) + 1, 100):
        threshold = step / 100
        above = [ok for sim, ok in top1 if sim >= threshold]
        if len(above) >= MIN_SUPPORT and sum(above) / len(above) >= target:
            return threshold
    return None


def calibrate(kb: KnowledgeBase, *, sample: int = 400, seed: int = 7) -> dict[str, Any]:
    docs = kb.documents.all()
    if len(docs) < 2:
        raise SuperbizError("calibration needs at least two ingested documents")
    rng = random.Random(seed)
    store, embedder = kb.store, kb.embedder
    kb.check_index()

    chunks = {doc.path: store.chunks_of(doc.path) for doc in docs}
    heading_owners: Counter[str] = Counter()
    for doc_chunks in chunks.values():
        for heading in {c.heading.split(" > ")[-1] for c in doc_chunks if c.heading}:
            heading_owners[heading] += 1
    probes: list[tuple[str, str]] = []
    for doc in docs:
        probes.append((doc.title, doc.path))
        # sorted: a set's order changes with each process's string hashing, and so would
        # the shuffle below and the proposal
        for heading in sorted({c.heading.split(" > ")[-1] for c in chunks[doc.path] if c.heading}):
            if heading_owners[heading] == 1 and heading != doc.title and is_specific(heading):
                probes.append((heading, doc.path))
    rng.shuffle(probes)
    probes = probes[:sample]

    vectors = embedder.embed([text for text, _ in probes])
    gold_sims: list[float] = []
    random_sims: list[float] = []
    top1: list[tuple[float, bool]] = []
    paths = [doc.path for doc in docs]
    for (_, path), vector in zip(probes, vectors, strict=True):
        own = [c.vector for c in chunks[path] if c.vector is not None]
        if own:
            gold_sims.append(float(np.max(np.stack(own) @ vector)))
        other = rng.choice([p for p in paths if p != path])
        other_vectors = [c.vector for c in chunks[other] if c.vector is not None]
        if other_vectors:
            random_sims.append(float(rng.choice(other_vectors) @ vector))
        hits = store.search_dense(vector, 1)
        if hits:
            similarity = similarity_from_score(hits[0].score, DENSE_METRIC)
            top1.append((similarity, hits[0].doc_path == path))

    reference = round(percentile(random_sims, 95), 2)
    highly = propose_highly_relevant(top1, reference)
    return {
        "embedder": embedder.name,
        "documents": len(docs),
        "probes": len(probes),
        "gold_pairs": _distribution(gold_sims),
        "random_pairs": _distribution(random_sims),
        "top1_precision": round(sum(ok for _, ok in top1) / len(top1), 4) if top1 else None,
        "proposed": {"highly-relevant-threshold": highly, "reference-threshold": reference},
        "current": {
            "highly-relevant-threshold": kb.thresholds.highly_relevant,
            "reference-threshold": kb.thresholds.reference,
        },
    }


def _distribution(values: list[float]) -> dict[str, float]:
    return {
        "p5": round(percentile(values, 5), 3),
        "median": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
    }


def render_calibration(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['embedder']} on {report['documents']} documents")
    for column in ("pairs", "p5", "median", "p95"):
        table.add_column(column)
    for name in ("gold_pairs", "random_pairs"):
        row = report[name]
        table.add_row(name.replace("_", " "), *(f"{row[k]:.3f}" for k in ("p5", "median", "p95")))
    console.print(table)
    console.print(f"probes: {report['probes']}; dense top-1 precision {report['top1_precision']}")
    if report["probes"] < MIN_PROBES:
        console.print(
            f"[yellow]only {report['probes']} probes (titles and distinct headings): too few for "
            f"thresholds to trust (at least {MIN_PROBES}); keep the defaults for a KB this small[/]"
        )
    proposed, current = report["proposed"], report["current"]
    if proposed["highly-relevant-threshold"] is None:
        console.print(
            f"[yellow]too few distinct probes to propose a highly-relevant threshold "
            f"(needs {MIN_SUPPORT} above it); keep the current value[/]"
        )
        proposed = {**proposed, "highly-relevant-threshold": current["highly-relevant-threshold"]}
    console.print("proposed settings (superbiz.yaml):")
    console.print(
        "retrieval:\n  normalization:\n"
        f"    highly-relevant-threshold: {proposed['highly-relevant-threshold']}"
        f"   # now {current['highly-relevant-threshold']}\n"
        f"    reference-threshold: {proposed['reference-threshold']}"
        f"   # now {current['reference-threshold']}",
        highlight=False,
    )
