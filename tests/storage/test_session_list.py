"""The page's session list: summaries and names (migration 0013), SQLite and PostgreSQL."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, text

from superbiz.storage.chat import ChatMessage, ChatRepository
from superbiz.storage.db import alembic_config, open_database


def test_sessions_of_before_the_migration_have_no_name(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        command.upgrade(alembic_config(engine), "0010")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO chat_sessions (session_id, created_at, updated_at)"
                    " VALUES ('old', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
    finally:
        engine.dispose()
    migrated = open_database(database_url)
    try:
        [old] = ChatRepository(migrated).summaries(["old"])
        assert (old.title, old.first_question, old.turns) == (None, "", 0)
        command.downgrade(alembic_config(migrated), "0010")
        command.upgrade(alembic_config(migrated), "head")
    finally:
        migrated.dispose()


def test_summaries_latest_first_and_rename_keeps_the_time(database_url: str) -> None:
    engine = open_database(database_url)
    try:
        chats = ChatRepository(engine)
        chats.add_turn("a", 1, "第一个问题", ChatMessage("a", 1, "assistant", "答"))
        chats.add_turn("b", 1, "other", ChatMessage("b", 1, "assistant", "x"))
        chats.add_turn("a", 2, "第二个问题", ChatMessage("a", 2, "assistant", "答"))
        listed = chats.summaries(["a", "b", "nobody"])
        assert [(s.session_id, s.first_question, s.turns) for s in listed] == [
            ("a", "第一个问题", 2),
            ("b", "other", 1),
        ]
        assert [s.session_id for s in chats.summaries()] == ["a", "b"]
        assert chats.rename("b", "名字") and not chats.rename("nobody", "x")
        named = {s.session_id: s for s in chats.summaries()}
        assert named["b"].title == "名字"
        assert named["b"].updated_at == listed[1].updated_at  # naming is not using
        assert chats.rename("b", None) and chats.summaries(["b"])[0].title is None
    finally:
        engine.dispose()
