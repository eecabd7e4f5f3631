"""The knowledge-gaps report: the questions the knowledge base could not answer.

With ``service.api-key`` set it needs the key, like the sessions' reads: it quotes the
questions people asked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from superbiz.api._reader import ReaderDep
from superbiz.api._threads import in_thread
from superbiz.api.deps import Authorized, GapsDep
from superbiz.api.errors import INTERNAL, INVALID, UNAUTHORIZED
from superbiz.knowledge.coverage.gaps import GapReport, parse_since

router = APIRouter(
    prefix="/api",
    tags=["gaps"],
    dependencies=Authorized,
    responses={**UNAUTHORIZED, **INVALID, **INTERNAL},
)

#: the window a report covers when the client names none
DEFAULT_SINCE = "30d"


@router.get("/gaps")
async def gaps(
    gaps: GapsDep,
    reader: ReaderDep,
    since: Annotated[
        str,
        Query(description="A duration back from now (30m, 24h, 7d, 2w) or an ISO date."),
    ] = DEFAULT_SINCE,
    domain: Annotated[str | None, Query(description="Only this domain's gaps.")] = None,
) -> GapReport:
    """Clusters of questions that found no good evidence, the runbook most worth
    writing first (see the README, "Knowledge gaps")."""
    try:
        start = parse_since(since, datetime.now(UTC))
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return await in_thread(gaps.report, start, domain, reader)
