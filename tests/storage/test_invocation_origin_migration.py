"""Migration 0006: rows recorded before ``tool_invocation.origin`` existed read as ``model``."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, text

from superbiz.storage.db import alembic_config, open_database
from superbiz.storage.invocations import InvocationRepository


def test_existing_rows_get_origin_model(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        command.upgrade(alembic_config(engine), "0003")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO tool_invocation (session_id, turn, step, tool_name, arguments,"
                    " executed, verdict, water_level, latency_ms, created_at) VALUES ('s', 1, 1,"
                    " 'lookup_knowledge', '{}', true, 'answer', 'low', 1.0, CURRENT_TIMESTAMP)"
                )
            )
    finally:
        engine.dispose()
    migrated = open_database(database_url)
    try:
        [row] = InvocationRepository(migrated).for_session("s")
        assert row.origin == "model"
        command.downgrade(alembic_config(migrated), "0003")
        command.upgrade(alembic_config(migrated), "head")
    finally:
        migrated.dispose()
