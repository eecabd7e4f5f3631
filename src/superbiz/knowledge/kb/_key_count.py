"""The key count of many documents on two cores.

After a bulk ingest the statistics count every key in each new document (``measure``), in
Python, on one core: about 7 of the 30 minutes of a 38,075-document upload into a
50,000-document KB (``superbiz eval scale``, server profile). Half the documents are counted
in a worker process meanwhile, and the two counts added (``KeyFrequency.plus``): the same
counts. Below ``PARALLEL_DOCUMENTS`` a worker's start (an interpreter, jieba's dictionary,
the index of every key) costs more than it saves.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor

from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.key_frequency import KeyFrequency

log = logging.getLogger(__name__)

#: documents counted at once from which half of them go to a worker process
PARALLEL_DOCUMENTS = 4_000


def count_keys(
    entries: Sequence[ExactEntry], texts: Iterable[tuple[str, str]], index: ExactIndex
) -> KeyFrequency:
    """``index.frequency(texts)`` (``index`` holds ``entries``), on two cores where there
    are two and ``texts`` is a list of at least ``PARALLEL_DOCUMENTS``. A worker that
    cannot start or dies leaves its half to this process."""
    if not isinstance(texts, list) or len(texts) < PARALLEL_DOCUMENTS or (os.cpu_count() or 1) < 2:
        return index.frequency(texts)
    half = len(texts) // 2
    spawn = multiprocessing.get_context("spawn")  # never fork a process with threads
    try:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=spawn)
        other = pool.submit(_frequency, list(entries), texts[half:])
    except Exception as exc:  # no process to start here: one core it is
        log.warning("key count: no worker process (%s); counting on one core", exc)
        return index.frequency(texts)
    with pool:
        mine = index.frequency(texts[:half])
        try:
            theirs = other.result()
        except Exception as exc:  # the worker died or could not be given its half
            log.warning("key count: the worker failed (%s); counting its half here", exc)
            theirs = index.frequency(texts[half:])
    return mine.plus(theirs)


def _frequency(entries: list[ExactEntry], texts: list[tuple[str, str]]) -> KeyFrequency:
    """A worker's half: its own index of the same keys."""
    return ExactIndex(entries).frequency(texts)
