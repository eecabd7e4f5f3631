"""Service status: info for the page, the health check, Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from fastapi.responses import PlainTextResponse

from superbiz.api.deps import AuthRequired, ServiceDep
from superbiz.api.errors import INTERNAL
from superbiz.api.responses import Health, ServiceInfo

router = APIRouter(tags=["service"], responses=INTERNAL)

PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/api/info", summary="Model, governance marks, upload limits")
async def info(service: ServiceDep, auth_required: AuthRequired) -> ServiceInfo:
    return service.info(auth_required=auth_required)


@router.get(
    "/healthz",
    response_model_exclude_unset=True,
    responses={503: {"model": Health, "description": "A store failed or stayed busy."}},
)
async def healthz(service: ServiceDep, response: Response) -> Health:
    """200 when the database answers a query and the vector store is reachable."""
    health = await asyncio.to_thread(service.health)  # takes the lock itself, with a timeout
    if health.status != "ok":
        response.status_code = 503
    return health


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(service: ServiceDep) -> PlainTextResponse:
    """Prometheus text: lookups by outcome and dedup reason, levels, latencies."""
    return PlainTextResponse(service.metrics.exposition(), media_type=PROMETHEUS)
