"""What routes receive through FastAPI's dependencies: the app's ``Service``, its set of
background turns, and the API-key check of write endpoints.

The factory puts them on ``app.state``; routes never read the state themselves, so a
test can swap any of them with ``app.dependency_overrides``.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from superbiz.api.service import Service

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="X-API-Key")
bearer = HTTPBearer(auto_error=False, scheme_name="Bearer")


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def get_background(request: Request) -> set[asyncio.Task[None]]:
    """Streamed turns still running: the app waits for them before it closes."""
    background: set[asyncio.Task[None]] = request.app.state.background
    return background


def auth_required(request: Request) -> bool:
    return bool(request.app.state.api_key)


def require_api_key(
    request: Request,
    key: Annotated[str | None, Security(api_key_header)] = None,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
) -> None:
    """Write endpoints need the configured key; without one configured, they are open."""
    expected: str | None = request.app.state.api_key
    if not expected:
        return
    given = key or (credentials.credentials if credentials else None)
    if not given or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            401,
            "missing or wrong API key: send it as X-API-Key or Authorization: Bearer",
            headers={"WWW-Authenticate": "Bearer"},
        )


ServiceDep = Annotated[Service, Depends(get_service)]
Background = Annotated[set[asyncio.Task[None]], Depends(get_background)]
AuthRequired = Annotated[bool, Depends(auth_required)]
Authorized = [Depends(require_api_key)]
