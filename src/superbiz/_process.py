"""Process-wide memory settings the ``superbiz`` command makes for itself.

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
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

#: glibc's ``mallopt`` parameter number for the arena limit
_M_ARENA_MAX = -8


def tune_memory(arenas: int = 2) -> None:
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    with contextlib.suppress(OSError, AttributeError):  # musl or another libc: its own way
        ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, arenas)
