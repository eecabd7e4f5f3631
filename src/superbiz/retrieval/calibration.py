"""Level thresholds measured by the knowledge base's embedder on its own documents.

The cosine at which a result "answers the question" (HIGHLY_RELEVANT) and the one under
which it is noise (no result) depend on the embedder *and* on the documents: a KB of
sibling FAQ sections sharing a title needs a higher cosine before its top document can be
trusted than a KB of runbooks with distinct titles. So each KB measures them itself, with
pseudo-questions whose answer is known: each document's title and each section heading
that only one document has are asked of the KB, and the right answer is their own
document. Pure computation: the caller reads the chunks and embeds the probes.

* ``reference``: the 95th percentile of the cosines of probes with a random chunk of
  another document — a result must beat what an unrelated chunk scores 19 times in 20;
* ``highly_relevant`` and ``highly_relevant_lead``: the rule "the top document's cosine is
  at least ``highly_relevant`` and leads the next documents' by ``highly_relevant_lead``"
  that admits the most probes while the nearest document is the probe's own for
  ``TARGET_PRECISION`` of them (at least ``MIN_SUPPORT``). A lead is asked for because a
  high cosine alone does not single out one of several sibling documents (OpenShift's
  runbooks, FAQ sections under one page): on dev2 the top document was right for 0.75 of
  the lookups at any cosine up to 0.7. When no rule gets there, ``highly_relevant`` is
  1.0: this KB's cosines do not single out a document, nothing is HIGHLY_RELEVANT on them.

Fewer than ``MIN_PROBES`` probes and no thresholds are proposed: the shipped per-embedder
numbers stand for a KB too small to measure.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from superbiz.retrieval.exact_index import is_specific

TARGET_PRECISION = 0.95
MIN_SUPPORT = 10
#: fewer probes than this and the thresholds are noise (a 15-document KB gives about 40)
MIN_PROBES = 100
SAMPLE = 400
#: the largest lead over the next document a rule may ask for
MAX_LEAD = 0.2
SEED = 7


@dataclass(frozen=True, slots=True)
class Probe:
    """A pseudo-question (a title or a distinct heading) and the document it comes from."""

    text: str
    path: str


@dataclass(frozen=True, slots=True)
class Distribution:
    p5: float
    median: float
    p95: float


@dataclass(frozen=True, slots=True)
class LevelCalibration:
    """What one measurement found; ``highly_relevant``/``reference`` are None when the KB
    was too small to measure (``MIN_PROBES``)."""

    embedder: str
    documents: int
    probes: int
    highly_relevant: float | None
    reference: float | None
    highly_relevant_lead: float | None
    top1_precision: float | None
    gold_pairs: Distribution | None
    random_pairs: Distribution | None
    target_precision: float = TARGET_PRECISION

    @property
    def measured(self) -> bool:
        return self.highly_relevant is not None and self.reference is not None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> LevelCalibration | None:
        """The stored calibration, or None when there is none or it cannot be read (the
        shipped numbers are used then, as for a KB never measured)."""
        if not text:
            return None
        try:
            data: dict[str, Any] = json.loads(text)
            for name in ("gold_pairs", "random_pairs"):
                if data.get(name) is not None:
                    data[name] = Distribution(**data[name])
            return cls(**data)
        except (TypeError, ValueError):
            return None


def choose_probes(
    titles: Mapping[str, str],
    headings: Mapping[str, Sequence[str]],
    *,
    sample: int = SAMPLE,
    seed: int = SEED,
) -> list[Probe]:
    """Each document's title, and each specific section heading that only one document
    has (its last part, ``A > B`` → ``B``), shuffled reproducibly and cut to ``sample``.

    >>> probes = choose_probes({"a.md": "Alpha", "b.md": "Beta"},
    ...                        {"a.md": ["Alpha > Disk full"], "b.md": ["Beta > Impact"]})
    >>> sorted((p.text, p.path) for p in probes)
    [('Alpha', 'a.md'), ('Beta', 'b.md'), ('Disk full', 'a.md'), ('Impact', 'b.md')]
    """
    last = {path: {h.split(" > ")[-1] for h in hs if h} for path, hs in headings.items()}
    owners: Counter[str] = Counter(h for hs in last.values() for h in hs)
    probes: list[Probe] = []
    for path in sorted(titles):
        title = titles[path]
        probes.append(Probe(title, path))
        # sorted: a set's order changes with each process's string hashing
        for heading in sorted(last.get(path, ())):
            if owners[heading] == 1 and heading != title and is_specific(heading):
                probes.append(Probe(heading, path))
    random.Random(seed).shuffle(probes)
    return probes[:sample]


def calibrate_levels(
    embedder: str,
    documents: int,
    probes: Sequence[Probe],
    probe_vectors: np.ndarray,
    chunk_paths: Sequence[str],
    chunk_vectors: np.ndarray,
    *,
    seed: int = SEED,
    target: float = TARGET_PRECISION,
) -> LevelCalibration:
    """The thresholds from the probes' cosines with every chunk (rows of unit vectors):
    the nearest chunk (an exact dense search), the best of their own document's and a
    random one of another document's."""
    rng = random.Random(seed)
    if len(probes) < MIN_PROBES or not len(chunk_paths):
        return LevelCalibration(
            embedder, documents, len(probes), None, None, None, None, None, None
        )
    paths = np.asarray(chunk_paths)
    owners = sorted(set(chunk_paths))
    rows_of = [np.flatnonzero(paths == path) for path in owners]
    owner_index = {path: i for i, path in enumerate(owners)}
    cosines = probe_vectors @ chunk_vectors.T
    # each probe's cosine with each document: its best chunk's (an exact dense search)
    by_document = np.stack([cosines[:, rows].max(axis=1) for rows in rows_of], axis=1)
    gold: list[float] = []
    unrelated: list[float] = []
    top1: list[tuple[float, float, bool]] = []
    for probe, row in zip(probes, by_document, strict=True):
        own = owner_index.get(probe.path)
        if own is not None:
            gold.append(float(row[own]))
        if len(owners) > 1:
            other = rng.choice([i for i in range(len(owners)) if i != own])
            unrelated.append(float(cosines[len(top1), rng.choice(list(rows_of[other]))]))
        first, second = np.argsort(-row)[:2] if len(owners) > 1 else (0, 0)
        lead = float(row[first] - row[second]) if len(owners) > 1 else 0.0
        top1.append((float(row[first]), lead, owners[first] == probe.path))
    reference = round(float(np.percentile(unrelated, 95)), 2) if unrelated else 0.0
    highly, lead = propose_highly_relevant(top1, reference, target)
    return LevelCalibration(
        embedder,
        documents,
        len(probes),
        highly,
        reference,
        lead,
        round(sum(ok for _, _, ok in top1) / len(top1), 4),
        _distribution(gold),
        _distribution(unrelated),
        target,
    )


def propose_highly_relevant(
    top1: Sequence[tuple[float, float, bool]],
    reference: float,
    target: float = TARGET_PRECISION,
) -> tuple[float, float]:
    """(cosine, lead): of the rules "cosine ≥ c and lead ≥ l" (steps of 0.01, c above
    ``reference``, l up to ``MAX_LEAD``) whose top-1 precision over the probes ``top1``
    (cosine, lead over the next document, right?) reaches ``target`` with at least
    ``MIN_SUPPORT`` probes, the one that admits the most; (1.0, 0.0) when none does.

    >>> sure = [(0.9, 0.2, True)] * 10
    >>> propose_highly_relevant(sure + [(0.5, 0.2, False)] * 10, 0.3)
    (0.51, 0.0)
    >>> propose_highly_relevant(sure + [(0.9, 0.01, False)] * 10, 0.3)
    (0.31, 0.02)
    >>> propose_highly_relevant([(0.9, 0.2, True), (0.9, 0.2, False)] * 10, 0.3)
    (1.0, 0.0)
    """
    best: tuple[int, float, float] | None = None
    for lead_step in range(round(MAX_LEAD * 100) + 1):
        lead = lead_step / 100
        for step in range(round(reference * 100) + 1, 100):
            threshold = step / 100
            above = [ok for sim, margin, ok in top1 if sim >= threshold and margin >= lead]
            if len(above) < MIN_SUPPORT:
                break
            if sum(above) / len(above) >= target:
                if best is None or len(above) > best[0]:
                    best = (len(above), threshold, lead)
                break
    return (1.0, 0.0) if best is None else (best[1], best[2])


def _distribution(values: Sequence[float]) -> Distribution | None:
    if not values:
        return None
    p5, median, p95 = (round(float(v), 3) for v in np.percentile(values, [5, 50, 95]))
    return Distribution(p5, median, p95)
