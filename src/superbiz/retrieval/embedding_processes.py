"""The embedded model in worker processes, for a bulk ingest.

An ingest embeds in two threads while its main thread reads files and inserts chunks.
The model's forward pass is mostly BLAS, off the GIL, but its tokenizer and the glue
between numpy calls are Python, and so are Milvus Lite's BM25 analysis and the reading
of files: measured on 4,407 documents (19,000 chunks, 2 cores), the two embedding
threads ran 1.3 cores' worth while the main thread waited for them 99 s of 120. With two
worker processes, each with its own GIL, the whole ingest took 110 s instead of 135.

A worker is ``python -m`` this module (``WorkerProcess``). It is told the token cap,
loads the model, says it is ready with its dimension, then answers each list of texts
with ``Embedder.embed``'s rows (equal to this process's to float rounding, as one of its
calls' rows are to the next's). A worker that fails in any way (does not start, dies,
sends something else) is stopped, and its batch and every later one it would have taken
are embedded in this process: slower, the same rows.
"""

from __future__ import annotations

import logging
import pickle
import queue
import sys
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

import numpy as np

from superbiz._process import WorkerFailed, WorkerProcess

if TYPE_CHECKING:
    from superbiz.retrieval.embedders import Embedder, EmbedTexts

log = logging.getLogger(__name__)


class _Worker:
    """One worker process, used by one thread at a time."""

    def __init__(self, max_tokens: int | None) -> None:
        self.dimension: int | None = None
        self.process = WorkerProcess(__name__, max_tokens)

    def wait_ready(self) -> None:
        """Wait for the model to load (the worker says its dimension)."""
        ready = self.process.receive()
        if not isinstance(ready, int) or ready < 1:
            raise WorkerFailed(f"it started with {ready!r}, not its dimension")
        self.dimension = ready

    def embed(self, texts: list[str]) -> np.ndarray:
        """The rows of ``texts``, once the worker is ready."""
        self.process.send(texts)
        rows = self.process.receive()
        if not (
            isinstance(rows, np.ndarray)
            and rows.dtype == np.float32
            and rows.shape == (len(texts), self.dimension)
        ):
            sent = (
                f"an array of shape {rows.shape}"
                if isinstance(rows, np.ndarray)
                else f"a {type(rows).__name__}"
            )
            raise WorkerFailed(f"it sent {sent}, not {len(texts)} rows")
        return rows


class EmbeddingProcesses:
    """``embed`` for several threads at once, each call in a worker process of its own
    while one is free and working; in ``embedder`` itself otherwise. A context manager:
    no worker outlives it.

    ``processes`` workers start at once and load the model (about 0.5 s from its kept
    files, ``_use_files``) while the calls embed here: a call takes a worker once it is
    ready.
    """

    def __init__(self, embedder: Embedder, processes: int, max_tokens: int | None) -> None:
        self._embedder = embedder
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        self._starting: list[threading.Thread] = []
        for _ in range(processes):
            try:
                worker = _Worker(max_tokens)
            except (OSError, WorkerFailed) as exc:
                log.warning("embedding: no worker process (%s); embedding here", exc)
                break
            self._all.append(worker)
            start = threading.Thread(
                target=self._when_ready, args=(worker,), name="embedding-worker", daemon=True
            )
            start.start()
            self._starting.append(start)

    def ready(self, timeout: float | None = None) -> int:
        """Wait until every worker has loaded its model or failed; the workers working."""
        for start in self._starting:
            start.join(timeout)
        return self.workers

    @property
    def workers(self) -> int:
        """Workers still working."""
        with self._lock:
            return len(self._all)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``embedder.embed(texts)``, in a free worker where there is one."""
        if self._closed:  # its workers are stopped; one may still wait in the queue
            return self._embedder.embed(texts)
        try:
            worker = self._idle.get_nowait()
        except queue.Empty:
            return self._embedder.embed(texts)
        try:
            rows = worker.embed(list(texts))
        except WorkerFailed as exc:
            log.warning("embedding: a worker process failed (%s); embedding here", exc)
            self._retire(worker)
            return self._embedder.embed(texts)
        self._idle.put(worker)
        return rows

    def _when_ready(self, worker: _Worker) -> None:
        try:
            worker.wait_ready()
        except WorkerFailed as exc:
            if not self._closed:
                log.warning("embedding: a worker process failed (%s); embedding here", exc)
            self._retire(worker)
            return
        self._idle.put(worker)

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        worker.process.stop()

    def __enter__(self) -> EmbedTexts:
        return self.embed

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            self._closed = True
            workers, self._all = self._all, []
        for worker in workers:
            worker.process.stop()


def _serve() -> None:
    """The worker: the token cap, then lists of texts until the pipe closes (or
    ``None``); the model's dimension first, then each list's rows."""
    from superbiz.retrieval.embedders import USEEmbedder

    source, sink = sys.stdin.buffer, sys.stdout.buffer
    embedder = USEEmbedder(threads=1, max_tokens=pickle.load(source))
    pickle.dump(embedder.dimension, sink, protocol=pickle.HIGHEST_PROTOCOL)
    sink.flush()
    while True:
        try:
            texts = pickle.load(source)
        except EOFError:
            return
        if texts is None:
            return
        rows = np.asarray(embedder.embed(texts), dtype=np.float32)
        pickle.dump(rows, sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()


if __name__ == "__main__":
    _serve()
