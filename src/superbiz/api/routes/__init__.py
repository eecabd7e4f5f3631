"""The HTTP routes, one ``APIRouter`` per area; ``create_app`` includes them all."""

from superbiz.api.routes import (
    api_docs,
    chat,
    documents,
    gaps,
    health,
    knowledge,
    page,
    sessions,
    sources,
)

ROUTERS = (
    page.router,
    api_docs.router,
    chat.router,
    sessions.router,
    gaps.router,
    documents.router,
    knowledge.router,
    sources.router,
    health.router,
)

__all__ = ["ROUTERS"]
