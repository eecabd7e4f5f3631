"""Level thresholds measured by the knowledge base's embedder on its own documents.

The cosine at which a result "answers the question" (HIGHLY_RELEVANT) and the one under
which it is noise (no result) depend on the embedder *and* on the documents: a KB of
sibling FAQ sections sharing a title needs a higher cosine before its top document can be
trusted than a KB of runbooks with distinct titles. So each KB measures them itself, with
pseudo-questions whose answer is known: each document's title and each section heading
that only one document has are asked of the KB, and the right answer is their own
document. Pure computation: the caller reads the chunks and embeds the probes.

* ``reference``: the 95th percentile of the cosines of probes with a chunk of another
  document, each other document counting once (its chunks share its weight) — a result
  must beat what an unrelated chunk scores 19 times in 20. Unless that is at or above the
  median cosine of the probes with their own document: then another document is no
  unrelated one (a single product's manual: npm's 91 pages measured 0.45, above the 0.39
  half its own titles and headings reach, and 5 of 16 questions about it found nothing,
  their answer among the first three documents), and ``reference`` is None — the shipped
  number stands, as for a KB too small to measure;
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

Nothing is drawn at random. The probes are those whose hash comes first, and every
unrelated pair counts: so an edit to one document changes its own probes and pairs, not
the whole sample. With a shuffle and one random chunk per probe, three comment lines
taken out of one of dev's 401 documents moved ``reference`` from 0.30 to 0.35 and
``highly_relevant`` from 0.48 to 0.36, and the level of 14 of 476 unrelated lookups.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from superbiz.retrieval.exact_index import is_specific

#: how the thresholds are measured: raised whenever the same documents would measure other
#: thresholds, so that a knowledge base measured the older way is measured again by its next
#: ingest (2: a reference at or above the probes' own median is not one)
METHOD = 2
TARGET_PRECISION = 0.95
MIN_SUPPORT = 10
#: fewer probes than this and the thresholds are noise (a 15-document KB gives about 40)
MIN_PROBES = 100
SAMPLE = 400
#: the largest lead over the next document a rule may ask for
MAX_LEAD = 0.2
#: steps of the unrelated cosines' distribution per unit of cosine
_STEPS = 1000


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
    #: the ``METHOD`` that measured it (0: one stored before methods were numbered)
    method: int = 0

    @property
    def complete(self) -> bool:
        """Both thresholds measured: not a KB too small to measure, nor one about a single
        subject (``one_subject``), whose reference is the shipped one."""
        return self.highly_relevant is not None and self.reference is not None

    @property
    def current(self) -> bool:
        """Measured by this code's ``METHOD``."""
        return self.method == METHOD

    @property
    def one_subject(self) -> bool:
        """Measured, but the unrelated pairs reach the probes' own median (``reference``
        None): the KB's documents are about one subject, and its reference is shipped."""
        return self.highly_relevant is not None and self.reference is None

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
) -> list[Probe]:
    """Each document's title, and each specific section heading that only one document
    has (its last part, ``A > B`` → ``B``): the ``sample`` of them whose hash comes
    first, so that a document's edit changes its own probes only.

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
    return sorted(probes, key=_stable_order)[:sample]


def _stable_order(probe: Probe) -> tuple[str, str, str]:
    digest = hashlib.sha1(f"{probe.path}\0{probe.text}".encode()).hexdigest()
    return digest, probe.path, probe.text


def calibrate_levels(
    embedder: str,
    documents: int,
    probes: Sequence[Probe],
    probe_vectors: np.ndarray,
    chunk_paths: Sequence[str],
    chunk_vectors: np.ndarray,
    *,
    target: float = TARGET_PRECISION,
) -> LevelCalibration:
    """The thresholds from the probes' cosines with every chunk (rows of unit vectors):
    the nearest chunk (an exact dense search), the best of their own document's, and
    every other document's (``_unrelated``)."""
    if len(probes) < MIN_PROBES or not len(chunk_paths):
        return LevelCalibration(
            embedder, documents, len(probes), None, None, None, None, None, None, method=METHOD
        )
    paths = np.asarray(chunk_paths)
    owners = sorted(set(chunk_paths))
    rows_of = [np.flatnonzero(paths == path) for path in owners]
    owner_index = {path: i for i, path in enumerate(owners)}
    cosines = probe_vectors @ chunk_vectors.T
    # each probe's cosine with each document: its best chunk's (an exact dense search)
    by_document = np.stack([cosines[:, rows].max(axis=1) for rows in rows_of], axis=1)
    gold: list[float] = []
    top1: list[tuple[float, float, bool]] = []
    for probe, row in zip(probes, by_document, strict=True):
        own = owner_index.get(probe.path)
        if own is not None:
            gold.append(float(row[own]))
        first, second = np.argsort(-row)[:2] if len(owners) > 1 else (0, 0)
        lead = float(row[first] - row[second]) if len(owners) > 1 else 0.0
        top1.append((float(row[first]), lead, owners[first] == probe.path))
    owner_of_chunk = np.searchsorted(np.asarray(owners), paths)
    probe_owner = np.asarray([owner_index.get(probe.path, -1) for probe in probes])
    unrelated = _unrelated(cosines, owner_of_chunk, probe_owner, len(owners))
    floor = round(unrelated.p95, 2) if unrelated else 0.0
    highly, lead = propose_highly_relevant(top1, floor, target)
    gold_pairs = _distribution(gold)
    return LevelCalibration(
        embedder,
        documents,
        len(probes),
        highly,
        floor if gold_pairs is None or floor < gold_pairs.median else None,
        lead,
        round(sum(ok for _, _, ok in top1) / len(top1), 4),
        gold_pairs,
        unrelated,
        target,
        METHOD,
    )


def _unrelated(
    cosines: np.ndarray, owner_of_chunk: np.ndarray, probe_owner: np.ndarray, owners: int
) -> Distribution | None:
    """The cosines of the probes (rows) with the chunks (columns) of documents other than
    their own, each such document weighing one per probe, its chunks sharing the weight:
    the distribution of a random chunk of a random other document, without the draw.
    Counted in steps of 0.001 a probe at a time, so its memory does not grow with the KB.

    >>> cosines = np.array([[0.9, 0.1, 0.3, 0.5], [0.2, 0.8, 0.8, 0.4]])
    >>> _unrelated(cosines, np.array([0, 1, 1, 2]), np.array([0, 1]), 3)
    Distribution(p5=0.1, median=0.3, p95=0.5)
    """
    if owners < 2:
        return None
    steps = 2 * _STEPS + 1
    share = 1.0 / np.bincount(owner_of_chunk, minlength=owners)[owner_of_chunk]
    counts = np.zeros(steps)
    for row, own in zip(cosines, probe_owner, strict=True):
        weights = np.where(owner_of_chunk == own, 0.0, share)
        at = np.clip(np.rint((row + 1.0) * _STEPS), 0, steps - 1).astype(np.int64)
        counts += np.bincount(at, weights=weights, minlength=steps)
    cumulative = np.cumsum(counts)
    if cumulative[-1] <= 0:
        return None
    at = np.searchsorted(cumulative, np.array([0.05, 0.5, 0.95]) * cumulative[-1])
    p5, median, p95 = (round(float(i) / _STEPS - 1.0, 3) for i in at)
    return Distribution(p5, median, p95)


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
