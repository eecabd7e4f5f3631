"""The key count of many documents on two cores.

After a bulk ingest the statistics count every key in each new document (``measure``), in
Python, on one core: about 7 of the 30 minutes of a 38,075-document upload into a
50,000-document KB (``superbiz eval scale``, server profile). Half the documents are counted
in a worker process meanwhile, and the two counts added (``KeyFrequency.plus``): the same
counts. Below ``PARALLEL_DOCUMENTS`` a worker's start (an interpreter, jieba's dictionary,
the index of every key) costs more than it saves.

The worker is ``python -m`` this module, given its half through a pipe: not a
``multiprocessing`` child, which imports the host program's ``__main__`` again (a script
that embeds superbiz without a ``__main__`` guard would run twice).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import IO

from superbiz.retrieval.exact_index import ExactEntry, ExactIndex
from superbiz.retrieval.key_frequency import KeyFrequency

log = logging.getLogger(__name__)

#: documents counted at once from which half of them go to a worker process
PARALLEL_DOCUMENTS = 4_000


def count_keys(entries: Sequence[ExactEntry], texts: Iterable[tuple[str, str]]) -> KeyFrequency:
    """``ExactIndex(entries).frequency(texts)``, on two cores where there are two and
    ``texts`` is a list of at least ``PARALLEL_DOCUMENTS``. A worker that cannot start or
    fails leaves its half to this process."""
    index = ExactIndex(entries)
    if not isinstance(texts, list) or len(texts) < PARALLEL_DOCUMENTS or (os.cpu_count() or 1) < 2:
        return index.frequency(texts)
    half = len(texts) // 2
    try:
        worker = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # jieba announces its dictionary there
        )
    except OSError as exc:
        log.warning("key count: no worker process (%s); counting on one core", exc)
        return index.frequency(texts)
    assert worker.stdin is not None and worker.stdout is not None
    feeding = threading.Thread(
        target=_send, args=(worker.stdin, (list(entries), texts[half:])), daemon=True
    )
    feeding.start()
    mine = index.frequency(texts[:half])
    try:
        theirs = pickle.load(worker.stdout)
        if not isinstance(theirs, KeyFrequency):
            raise TypeError(f"the worker sent a {type(theirs).__name__}")
    except (EOFError, pickle.UnpicklingError, TypeError) as exc:
        log.warning("key count: the worker failed (%s); counting its half here", exc)
        theirs = index.frequency(texts[half:])
    finally:
        worker.kill()  # done or failed: never left behind
        worker.wait()
        worker.stdout.close()
        feeding.join()
    return mine.plus(theirs)


def _send(pipe: IO[bytes], work: object) -> None:
    """Write the worker's half; a worker gone meanwhile is found by the reader."""
    try:
        pickle.dump(work, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:  # a broken pipe among them
        pass
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def _serve() -> None:
    """The worker: a half in, its counts out."""
    entries, texts = pickle.load(sys.stdin.buffer)
    counted = ExactIndex(entries).frequency(texts)
    pickle.dump(counted, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
