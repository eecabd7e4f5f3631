"""This process's memory settings, and the worker processes it hands work to.

Memory: the settings the ``superbiz`` command makes for itself.

Milvus Lite's flush copies a collection's new rows several times over (memtable,
Parquet, segment); what a copy frees should go back to the system, not stay in the
peak (a 6 MB ingest: 659 MB before these, README "Large files"). Made by the command
line at start-up, before pyarrow is imported, and never by importing the package: an
application that embeds superbiz keeps its own allocator settings.

* Arrow (Lite's storage) allocates from the system allocator unless told otherwise
  before it starts; its default, mimalloc, keeps the pages a flush frees;
* glibc gives each thread that allocates under contention an arena of its own, up to 8
  per core, and freed memory stays in its arena; two arenas are enough for this
  process's few busy threads (Arrow's readers, two embedding threads, the insert).

Environment variables that are already set (``ARROW_DEFAULT_MEMORY_POOL``,
``MALLOC_ARENA_MAX``) win.

``release_freed_memory`` is the one call made from the library: after an ingest, what
the run freed goes back to the system instead of staying in the process's footprint
for as long as it lives (a service, a chat). It changes no setting, so it is safe in
any host process.

Workers (``WorkerProcess``): ``python -m`` a module of superbiz, spoken to in pickles
through its standard input and output; the key count's and the embedding's use it. Not
a ``multiprocessing`` child, which imports the host program's ``__main__`` again (a
script that embeds superbiz without a ``__main__`` guard would run twice).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import subprocess
import sys

#: glibc's ``mallopt`` parameter number for the arena limit
_M_ARENA_MAX = -8


def tune_memory(arenas: int = 2) -> None:
    """Arrow on the system allocator and at most ``arenas`` glibc arenas (see above)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):  # musl or another libc: its own way
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, arenas)


def release_freed_memory() -> None:
    """Hand the pages freed memory sits on back to the system (glibc's ``malloc_trim``;
    Arrow on the system allocator frees through it too). Where the C library has no such
    call it does nothing.

    Measured after ingesting 2,385 documents (10,390 chunks) with the command's settings:
    the process's resident memory 862 MB before, 730 MB after; it took milliseconds.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class WorkerFailed(Exception):
    """A worker process stopped or cannot be reached: its caller does the work itself."""


class WorkerProcess:
    """``python -m module``, its standard input and output carrying pickles (both are
    this package's own, on a pipe only this process holds). ``stop`` it, done or failed:
    a worker is never left behind."""

    def __init__(self, module: str, setup: object) -> None:
        """Start the worker and send it ``setup``, what it works with (the keys, the token
        cap). ``OSError``: no process started; ``WorkerFailed``: it started and did not
        take ``setup``, and is stopped."""
        self._process = subprocess.Popen(
            [sys.executable, "-m", module],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # jieba and the model announce themselves there
        )
        try:
            self.send(setup)
        except WorkerFailed:
            self.stop()
            raise

    def send(self, work: object) -> None:
        """Write to the worker; it reads while it is not working (a full pipe waits)."""
        assert self._process.stdin is not None
        try:
            pickle.dump(work, self._process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._process.stdin.flush()
        except OSError as exc:  # a broken pipe among them
            raise WorkerFailed(f"it stopped reading: {exc}") from exc

    def receive(self, *, last: bool = False) -> object:
        """The worker's next answer; ``last``: nothing more is sent first (its input is
        closed, so a worker reading to the end answers)."""
        assert self._process.stdin is not None and self._process.stdout is not None
        if last:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        try:
            return pickle.load(self._process.stdout)
        except (EOFError, OSError, pickle.UnpicklingError, ValueError) as exc:
            # ValueError: the pipe was closed by ``stop`` from another thread meanwhile
            raise WorkerFailed(f"it sent nothing: {exc!r}") from exc

    def stop(self) -> None:
        process = self._process
        process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
