"""A value derived from the documents, remembered with the change it was built at.

The knowledge base counts every change of its documents (its own writes, and another
process's seen by ``catch_up``). A cache asked at a later count builds its value again; a
builder that can update by difference (the exact index, the answer index) keeps its own
state and redoes only what changed. Nothing resets a cache by hand, so a new cache cannot
be forgotten in a reset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Versioned(Generic[T]):
    """``build()``'s value, built again when asked at another version. A build that fails
    leaves the cache behind, so the next use builds again."""

    __slots__ = ("_build", "_held")

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._held: tuple[int, T] | None = None

    def get(self, version: int, *, fresh: bool = False) -> T:
        """The value at ``version``; ``fresh``: built again even when current."""
        held = self._held
        if held is None or held[0] != version or fresh:
            held = self._held = (version, self._build())
        return held[1]

    def current(self, version: int) -> bool:
        """Whether the value held was built at ``version``."""
        return self._held is not None and self._held[0] == version
