"""The key count of many documents, a batch at a time, on two cores.

After a bulk ingest the statistics count every key in each new document (``measure``).
Since the count runs an automaton over the keys (``retrieval._key_scan``) it takes about
1 ms a document (12,000 documents of the scale KB: 42.9 → 12.3 s on one core). From
``PARALLEL_DOCUMENTS`` on, every other batch is counted in a worker process meanwhile,
and the counts added in the batches' order (``KeyFrequency.total``): the same counts and
users. Below it a worker's start (an interpreter, jieba's dictionary, the index and the
automaton of every key) costs what it saves: measured at 4,000 and 8,000 documents it
did, at 12,000 it saved a tenth. The documents come a batch at a time because their
texts, read at once, held 0.47 GB at 38,075 documents.

The worker is ``python -m`` this module (``WorkerProcess``), given the keys and then the
batches through a pipe.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from contextlib import nullcontext
from types import TracebackType

from superbiz._process import WorkerFailed, WorkerProcess
from superbiz.retrieval.exact_index import ExactEntry, ExactIndex, KeyText
from superbiz.retrieval.key_frequency import KeyFrequency
from superbiz.retrieval.store import Outside

log = logging.getLogger(__name__)

#: documents to count from which every other batch goes to a worker process
PARALLEL_DOCUMENTS = 10_000

#: a batch of documents: each one's path and text (or its text as read before)
Texts = list[tuple[str, str | KeyText]]


def count_keys(
    entries: Sequence[ExactEntry],
    batches: Callable[[], Iterable[Texts]],
    *,
    documents: int,
    outside: Outside = nullcontext,
    read: MutableMapping[str, KeyText] | None = None,
    index: ExactIndex | None = None,
) -> KeyFrequency:
    """``ExactIndex(entries).frequency`` over the (path, text) of ``documents`` documents
    (``index``: that index, where the caller holds it),
    which ``batches()`` reads a batch at a time; each batch is counted inside
    ``outside()``. From ``PARALLEL_DOCUMENTS`` on, on two cores; if the worker fails,
    ``batches()`` is read again and counted on one. ``read``: as for ``frequency`` (the
    texts a worker reads are not given).

    >>> entries = [ExactEntry("a.md", "Kafka lag", "ops", (), (), ())]
    >>> texts = [("a.md", "Kafka lag grows"), ("b.md", "see Kafka lag")]
    >>> count_keys(entries, lambda: [texts[:1], texts[1:]], documents=2).counts["kafka lag"]
    2
    """
    try:
        parallel = documents >= PARALLEL_DOCUMENTS
        return _count(entries, batches(), parallel, outside, read, index)
    except WorkerFailed as exc:
        log.warning("key count: the worker failed (%s); counting on one core", exc)
        return _count(entries, batches(), False, outside, read, index)


def _count(
    entries: Sequence[ExactEntry],
    batches: Iterable[Texts],
    parallel: bool,
    outside: Outside,
    read: MutableMapping[str, KeyText] | None,
    index: ExactIndex | None,
) -> KeyFrequency:
    with outside():
        counter = _KeyCounter(entries, parallel=parallel, read=read, index=index)
    with counter:
        for texts in batches:
            with outside():
                counter.add(texts)
        with outside():
            return counter.result()


class _KeyCounter:
    """``ExactIndex(entries).frequency`` over documents handed over in batches (``add``),
    in their order. Where ``parallel`` and there are two cores, every other batch is
    counted by a worker process; ``result`` raises ``WorkerFailed`` if it stopped. A
    context manager: the worker never outlives it."""

    def __init__(
        self,
        entries: Sequence[ExactEntry],
        *,
        parallel: bool,
        read: MutableMapping[str, KeyText] | None = None,
        index: ExactIndex | None = None,
    ) -> None:
        self.index = ExactIndex(entries) if index is None else index
        self._read = read
        self._counted: list[KeyFrequency | None] = []  # None: a batch the worker counts
        self._worker = self._start(entries) if parallel and (os.cpu_count() or 1) > 1 else None

    def add(self, texts: Texts) -> None:
        """Count the (path, text) of a batch of documents."""
        if self._worker is not None and len(self._counted) % 2:
            self._worker.send(texts)
            self._counted.append(None)
        else:
            self._counted.append(self.index.frequency(texts, self._read))

    def result(self) -> KeyFrequency:
        """The counts of every batch added, as one pass over them gives them."""
        theirs: Iterator[KeyFrequency] = iter(())
        if self._worker is not None:
            self._worker.send(None)
            theirs = iter(_receive(self._worker, self._counted.count(None)))
        return KeyFrequency.total(
            counted if counted is not None else next(theirs) for counted in self._counted
        )

    def _start(self, entries: Sequence[ExactEntry]) -> WorkerProcess | None:
        try:
            return WorkerProcess(__name__, list(entries))
        except OSError as exc:
            log.warning("key count: no worker process (%s); counting on one core", exc)
        except WorkerFailed as exc:
            log.warning("key count: the worker failed (%s); counting on one core", exc)
        return None

    def __enter__(self) -> _KeyCounter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()


def _receive(worker: WorkerProcess, batches: int) -> list[KeyFrequency]:
    """The worker's counts, a ``KeyFrequency`` for each of its ``batches``."""
    counted = worker.receive(last=True)
    if not (
        isinstance(counted, list)
        and len(counted) == batches
        and all(isinstance(c, KeyFrequency) for c in counted)
    ):
        raise WorkerFailed(f"it sent a {type(counted).__name__}, not {batches} counts")
    return counted


def _serve() -> None:
    """The worker: the keys, then batches until ``None``; a count per batch out."""
    source = sys.stdin.buffer
    index = ExactIndex(pickle.load(source))
    counted = []
    while (texts := pickle.load(source)) is not None:
        counted.append(index.frequency(texts))
    pickle.dump(counted, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
