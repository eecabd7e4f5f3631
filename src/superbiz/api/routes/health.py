"""Service status: info for the page, liveness and readiness, Prometheus metrics.

``/livez`` answers as long as the event loop runs (a liveness probe: restart when it
fails); ``/healthz`` checks the stores and waits for a running turn (a readiness probe:
stop sending traffic when it fails, never restart for it).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from superbiz.api.deps import AuthDep, Authorized, AuthRequired, StatusDep
from superbiz.api.errors import INTERNAL, UNAUTHORIZED
from superbiz.api.responses.status import Health, Liveness, ServiceInfo

router = APIRouter(tags=["service"], responses=INTERNAL)

PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/api/info", summary="Model, governance marks, upload limits")
async def info(status: StatusDep, auth_required: AuthRequired, auth: AuthDep) -> ServiceInfo:
    sign_in = "oidc" if auth.oidc is not None else "key" if auth_required else "none"
    return status.info(auth_required=auth_required, sign_in=sign_in)


@router.get("/livez")
async def livez() -> Liveness:
    """200 while the process serves requests; touches no store and takes no lock."""
    return Liveness(status="alive")


@router.get(
    "/healthz",
    response_model_exclude_unset=True,
    responses={503: {"model": Health, "description": "A store failed or stayed busy."}},
)
async def healthz(status: StatusDep, response: Response) -> Health:
    """200 when the database answers a query and the vector store is reachable."""
    health = await asyncio.to_thread(status.health)  # takes the lock itself, with a timeout
    if health.status != "ok":
        response.status_code = 503
    return health


@router.get(
    "/metrics", response_class=PlainTextResponse, dependencies=Authorized, responses=UNAUTHORIZED
)
async def metrics(status: StatusDep) -> PlainTextResponse:
    """Prometheus text: lookups by outcome and dedup reason, levels, latencies. With
    `service.api-key` set it needs the key (Prometheus: `authorization: {credentials: KEY}`)."""
    return PlainTextResponse(status.metrics.exposition(), media_type=PROMETHEUS)
