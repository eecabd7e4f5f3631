"""The HTTP routes, one ``APIRouter`` per area; ``create_app`` includes them all."""

from superbiz.api.routes import (
    api_docs,
    auth,
    chat,
    documents,
    gaps,
    health,
    knowledge,
    page,
    sessions,
    sources,
    users,
)

ROUTERS = (
    page.router,
    api_docs.router,
    auth.router,
    auth.me_router,
    chat.router,
    sessions.router,
    gaps.router,
    documents.router,
    knowledge.router,
    sources.router,
    users.router,
    health.router,
)

__all__ = ["ROUTERS"]
