"""The HTTP routes, one ``APIRouter`` per area; ``create_app`` includes them all."""

from superbiz.api.routes import chat, documents, gaps, health, knowledge, page, sessions

ROUTERS = (
    page.router,
    chat.router,
    sessions.router,
    gaps.router,
    documents.router,
    knowledge.router,
    health.router,
)

__all__ = ["ROUTERS"]
