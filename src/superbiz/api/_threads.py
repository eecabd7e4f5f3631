"""Blocking calls of the routes, each in a worker thread (never on the event loop)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

T = TypeVar("T")


async def in_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a worker thread: the stores, the model, the identity
    provider and the files are all called from there."""
    return await anyio.to_thread.run_sync(partial(function, *args))
