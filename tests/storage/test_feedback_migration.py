"""Migration 0010: answers and calls recorded before it keep their rows (no trace id, no
answer source) and can be rated; it downgrades and upgrades again."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, text

from superbiz.storage.chat import ChatRepository
from superbiz.storage.db import alembic_config, open_database
from superbiz.storage.feedback import FeedbackRepository
from superbiz.storage.invocations import InvocationRepository


def test_rows_recorded_before_it_stay_and_can_be_rated(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        command.upgrade(alembic_config(engine), "0007")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO tool_invocation (session_id, turn, step, tool_name, arguments,"
                    " executed, verdict, water_level, latency_ms, created_at) VALUES ('s', 1, 1,"
                    " 'lookup_knowledge', '{}', true, 'answer', 'low', 1.0, CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO chat_messages (session_id, turn, role, content, created_at)"
                    " VALUES ('s', 1, 'assistant', 'an answer', CURRENT_TIMESTAMP)"
                )
            )
    finally:
        engine.dispose()
    migrated = open_database(database_url)
    try:
        [call] = InvocationRepository(migrated).for_session("s")
        assert call.trace_id is None
        [answer] = ChatRepository(migrated).messages("s")
        assert answer.answer_source is None and answer.trace_id is None
        rated = FeedbackRepository(migrated).rate("s", 1, "down", "stale")
        assert (rated.rating, rated.comment) == ("down", "stale")
        again = FeedbackRepository(migrated).rate("s", 1, "up", None)
        assert again.rating == "up" and again.created_at == rated.created_at
        assert FeedbackRepository(migrated).counts() == {"up": 1, "down": 0}
        command.downgrade(alembic_config(migrated), "0007")
        command.upgrade(alembic_config(migrated), "head")
    finally:
        migrated.dispose()
