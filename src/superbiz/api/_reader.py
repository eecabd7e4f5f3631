"""Who is asking: the one place a route learns its reader.

Authentication (sign-in, per-user keys) sets ``request.state.reader`` before a route
runs; without it (no users configured: the single admin key, or no key at all) the
reader may read everything, as before access lists existed. Routes take ``ReaderDep``
and hand the reader down explicitly; nothing below reads the request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from superbiz.access import Reader


def current_reader(request: Request) -> Reader:
    """``request.state.reader`` when authentication set one, else ``Reader.everyone()``."""
    reader = getattr(request.state, "reader", None)
    return reader if isinstance(reader, Reader) else Reader.everyone()


ReaderDep = Annotated[Reader, Depends(current_reader)]
