"""The knowledge map, as JSON or as the YAML the Planner reads."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response

from superbiz.api._reader import ReaderDep
from superbiz.api._threads import in_thread
from superbiz.api.deps import Authorized, DocumentsDep
from superbiz.api.errors import INTERNAL, INVALID, UNAUTHORIZED
from superbiz.api.responses.documents import KnowledgeMapView

router = APIRouter(
    prefix="/api/knowledge",
    tags=["knowledge"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **INTERNAL},
)

YAML = "application/yaml; charset=utf-8"


@router.get(
    "/map",
    response_model=KnowledgeMapView,
    response_model_exclude_unset=True,
    responses={
        200: {"content": {"application/yaml": {"schema": {"type": "string"}}}},
        **INVALID,
    },
)
async def knowledge_map(
    documents: DocumentsDep,
    reader: ReaderDep,
    fmt: Annotated[Literal["json", "yaml"], Query(alias="format")] = "json",
) -> KnowledgeMapView | Response:
    """The knowledge map the Planner sees; `format=yaml` gives it as the Planner
    reads it, within the map token budget."""
    data = await in_thread(documents.knowledge_map, fmt, reader)
    if isinstance(data, str):
        return PlainTextResponse(data, media_type=YAML)
    return data
