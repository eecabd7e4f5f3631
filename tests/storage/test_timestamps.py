"""Timestamps read back aware, in UTC, on SQLite (which keeps no offset) and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from superbiz.storage.db import open_database
from superbiz.storage.invocations import Invocation, InvocationRepository
from superbiz.storage.models import utcnow


def test_a_recorded_call_reads_back_in_utc(database_url: str) -> None:
    engine = open_database(database_url)
    try:
        repo = InvocationRepository(engine)
        before = utcnow()
        repo.add(
            Invocation(
                "s",
                1,
                1,
                "lookup_knowledge",
                {},
                None,
                None,
                None,
                None,
                True,
                "answer",
                "low",
                1.0,
            )
        )
        [row] = repo.for_session("s")
    finally:
        engine.dispose()

    assert row.created_at.utcoffset() == timedelta(0)
    assert row.created_at.isoformat().endswith("+00:00")  # what the API's trace returns
    assert before - timedelta(seconds=1) <= row.created_at <= datetime.now(UTC)
