"""Sources: every folder and Git repository documents come from, with its last sync."""

from __future__ import annotations

from fastapi import APIRouter

from superbiz.api._threads import in_thread
from superbiz.api.deps import Authorized, DocumentsDep
from superbiz.api.errors import INTERNAL, UNAUTHORIZED
from superbiz.knowledge.sources.source_list import SourceList

router = APIRouter(
    prefix="/api/sources",
    tags=["sources"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **INTERNAL},
)


@router.get("")
async def sources(documents: DocumentsDep) -> SourceList:
    """Each source's last sync: commit, time, counts, skipped items and the error of a
    failed attempt (its last good state stays searchable)."""
    return await in_thread(documents.sources)
