"""superbiz: governed retrieval over Markdown runbooks.

Two process-wide memory settings are made here, before anything allocates much, because
Milvus Lite's flush copies a collection's new rows several times over (memtable,
Parquet, segment) and what a copy frees should go back to the system, not stay in the
peak (a 6 MB ingest: 659 MB before these, README "Large files"):

* Arrow (Lite's storage) allocates from the system allocator unless told otherwise
  before it starts; its default, mimalloc, keeps the pages a flush frees;
* glibc gives each thread that allocates under contention an arena of its own, up to 8
  per core, and freed memory stays in its arena; two arenas are enough for this
  process's few busy threads (Arrow's readers, two embedding threads, the insert).
"""

import contextlib
import ctypes
import os
import sys

os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _limit_malloc_arenas(arenas: int = 2) -> None:
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):  # musl or another libc: its own way
        ctypes.CDLL("libc.so.6").mallopt(-8, arenas)  # M_ARENA_MAX; glibc only


_limit_malloc_arenas()
