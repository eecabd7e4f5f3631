"""What routes receive through FastAPI's dependencies: their route group's piece of the
service (``superbiz.api.services``: one dependency each), the set of background turns,
the person asking (``superbiz.api.guard`` found them), the ``Authenticator``, and the
API-key schemes of the routes that need a key.

The factory puts them on ``app.state`` (the pieces as one ``Services``, at
``app.state.service``); routes never read the state themselves, so a test can swap any
of them with ``app.dependency_overrides``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from superbiz.api.services import Services
from superbiz.api.services.chat import ChatService
from superbiz.api.services.documents import DocumentService
from superbiz.api.services.gaps import GapService
from superbiz.api.services.sessions import SessionService
from superbiz.api.services.status import StatusService
from superbiz.auth.authenticate import Authenticator
from superbiz.auth.principal import User, local_user

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, scheme_name="X-API-Key")
bearer = HTTPBearer(auto_error=False, scheme_name="Bearer")


def _services(request: Request) -> Services:
    services: Services = request.app.state.service
    return services


def get_chat(request: Request) -> ChatService:
    return _services(request).chat


def get_sessions(request: Request) -> SessionService:
    return _services(request).sessions


def get_documents(request: Request) -> DocumentService:
    return _services(request).documents


def get_gaps(request: Request) -> GapService:
    return _services(request).gaps


def get_status(request: Request) -> StatusService:
    return _services(request).status


def get_background(request: Request) -> set[asyncio.Task[None]]:
    """Streamed turns still running: the app waits for them before it closes."""
    background: set[asyncio.Task[None]] = request.app.state.background
    return background


def get_auth(request: Request) -> Authenticator:
    auth: Authenticator = request.app.state.auth
    return auth


def current_user(request: Request) -> User:
    """The person the guard found; the local user where nobody is asked (and on the
    routes open to anyone)."""
    user = getattr(request.state, "user", None)
    return user if isinstance(user, User) else local_user()


def client_address(request: Request) -> str | None:
    return request.client.host if request.client else None


async def auth_required(request: Request) -> bool:
    """Whether requests must say who they are (cached; the store is asked every few s)."""
    auth: Authenticator = request.app.state.auth
    return await anyio.to_thread.run_sync(auth.required)


def require_api_key(
    key: Annotated[str | None, Security(api_key_header)] = None,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None,
) -> None:
    """The key's two schemes, as ``/docs`` lists them. The check itself is made by
    ``superbiz.api.guard.RequestGuard`` before the body is read: a dependency runs only
    after FastAPI has parsed (and spooled) the body."""


ChatDep = Annotated[ChatService, Depends(get_chat)]
SessionsDep = Annotated[SessionService, Depends(get_sessions)]
DocumentsDep = Annotated[DocumentService, Depends(get_documents)]
GapsDep = Annotated[GapService, Depends(get_gaps)]
StatusDep = Annotated[StatusService, Depends(get_status)]
Background = Annotated[set[asyncio.Task[None]], Depends(get_background)]
AuthRequired = Annotated[bool, Depends(auth_required)]
AuthDep = Annotated[Authenticator, Depends(get_auth)]
CurrentUser = Annotated[User, Depends(current_user)]
ClientAddress = Annotated[str | None, Depends(client_address)]
Authorized = [Depends(require_api_key)]
