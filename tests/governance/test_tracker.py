"""The SessionTracker protocol, in memory and in the relational store (SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine, inspect, text

from superbiz.governance.tracker import (
    InMemorySessionTracker,
    SessionTracker,
    SqlSessionTracker,
    make_tracker,
)
from superbiz.storage.db import open_database


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    opened: list[Engine] = []
    yield opened
    for engine in opened:
        engine.dispose()


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def tracker(
    request: pytest.FixtureRequest,
    database_factory: Callable[[str], str],
    engines: list[Engine],
) -> SessionTracker:
    if request.param == "memory":
        return InMemorySessionTracker()
    engine = open_database(database_factory(request.param))
    engines.append(engine)
    return SqlSessionTracker(engine)


def test_marked_documents_and_domains_are_retrieved(tracker: SessionTracker) -> None:
    assert "payment/a.md" not in tracker.retrieved_docs("s1")
    assert "payment" not in tracker.retrieved_domains("s1")
    assert tracker.retrieved_domains("s1") == []
    assert tracker.retrieved_docs("s1") == {}

    tracker.mark_many("s1", [("payment", "payment/a.md")])
    assert "payment/a.md" in tracker.retrieved_docs("s1")
    assert "payment" in tracker.retrieved_domains("s1")
    assert "payment/b.md" not in tracker.retrieved_docs("s1")
    assert "api" not in tracker.retrieved_domains("s1")
    assert tracker.retrieved_domains("s1") == ["payment"]
    assert tracker.retrieved_docs("s1") == {"payment/a.md": "payment"}


def test_retrieved_domains_in_first_retrieval_order(tracker: SessionTracker) -> None:
    tracker.mark_many("s", [("zeta", "zeta/1.md")])
    tracker.mark_many("s", [("alpha", "alpha/1.md")])
    tracker.mark_many("s", [("zeta", "zeta/2.md")])
    tracker.mark_many("s", [("mid", "a-first-by-name.md")])
    assert tracker.retrieved_domains("s") == ["zeta", "alpha", "mid"]
    assert list(tracker.retrieved_docs("s")) == [
        "zeta/1.md",
        "alpha/1.md",
        "zeta/2.md",
        "a-first-by-name.md",
    ]


def test_mark_many(tracker: SessionTracker) -> None:
    tracker.mark_many("s", [("infrastructure", "infra/redis.md"), ("api", "api/limit.md")])
    assert tracker.retrieved_docs("s") == {
        "infra/redis.md": "infrastructure",
        "api/limit.md": "api",
    }
    assert set(tracker.retrieved_domains("s")) == {"infrastructure", "api"}
    tracker.mark_many("s", [])  # nothing to do
    assert len(tracker.retrieved_docs("s")) == 2


def test_mark_many_keeps_the_given_order(tracker: SessionTracker) -> None:
    tracker.mark_many("s", [("zeta", "z.md"), ("alpha", "a.md"), ("zeta", "y.md")])
    assert tracker.retrieved_domains("s") == ["zeta", "alpha"]


def test_mark_many_is_idempotent(tracker: SessionTracker) -> None:
    items = [("payment", "payment/a.md"), ("api", "api/b.md")]
    tracker.mark_many("s", items)
    tracker.mark_many("s", items)
    tracker.mark_many("s", [*items, ("payment", "payment/a.md")])  # duplicates in one call
    tracker.mark_many("s", [("payment", "payment/a.md")])
    assert tracker.retrieved_docs("s") == {"payment/a.md": "payment", "api/b.md": "api"}
    assert sorted(tracker.retrieved_domains("s")) == ["api", "payment"]


def test_marking_again_keeps_the_first_domain_and_position(tracker: SessionTracker) -> None:
    tracker.mark_many("s", [("payment", "shared.md")])
    tracker.mark_many("s", [("api", "api/b.md")])
    tracker.mark_many("s", [("other", "shared.md")])
    assert tracker.retrieved_docs("s") == {"shared.md": "payment", "api/b.md": "api"}
    assert tracker.retrieved_domains("s") == ["payment", "api"]


def test_sessions_are_isolated(tracker: SessionTracker) -> None:
    tracker.mark_many("alice", [("payment", "payment/a.md")])
    tracker.mark_many("bob", [("api", "api/b.md")])
    assert "payment/a.md" in tracker.retrieved_docs("alice")
    assert "payment/a.md" not in tracker.retrieved_docs("bob")
    assert "api" not in tracker.retrieved_domains("alice")
    assert tracker.retrieved_domains("alice") == ["payment"]
    assert tracker.retrieved_domains("bob") == ["api"]
    assert tracker.retrieved_domains("carol") == []


def test_clear_session(tracker: SessionTracker) -> None:
    tracker.mark_many("alice", [("payment", "payment/a.md"), ("api", "api/b.md")])
    tracker.mark_many("bob", [("payment", "payment/a.md")])
    tracker.clear_session("alice")
    assert tracker.retrieved_docs("alice") == {}
    assert tracker.retrieved_domains("alice") == []
    assert "payment/a.md" not in tracker.retrieved_docs("alice")
    assert "payment" not in tracker.retrieved_domains("alice")
    assert "payment/a.md" in tracker.retrieved_docs("bob")  # other sessions untouched
    tracker.clear_session("alice")  # clearing twice, or an unknown session, is fine
    tracker.clear_session("nobody")
    tracker.mark_many("alice", [("api", "api/b.md")])  # a cleared session starts over
    assert tracker.retrieved_domains("alice") == ["api"]


def test_unicode_paths_and_domains(tracker: SessionTracker) -> None:
    tracker.mark_many("会话-1", [("支付", "支付/支付失败排查.md")])
    assert "支付/支付失败排查.md" in tracker.retrieved_docs("会话-1")
    assert tracker.retrieved_domains("会话-1") == ["支付"]


def test_concurrent_marks(tracker: SessionTracker) -> None:
    def mark(worker: int) -> None:
        for i in range(10):
            tracker.mark_many("s", [(f"d{i % 3}", f"doc{i}.md")])  # all workers, same docs
            tracker.mark_many("s", [("own", f"w{worker}-{i}.md")])

    threads = [threading.Thread(target=mark, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(tracker.retrieved_docs("s")) == 10 + 40
    assert set(tracker.retrieved_domains("s")) == {"d0", "d1", "d2", "own"}


# -- the SQL backend ---------------------------------------------------------------------------


def test_sql_tracker_survives_a_new_engine(database_url: str, engines: list[Engine]) -> None:
    """A CLI session: one process marks, the next one (a new engine) sees it."""
    first = open_database(database_url)
    engines.append(first)
    SqlSessionTracker(first).mark_many("cli", [("payment", "p.md"), ("api", "a.md")])
    first.dispose()
    second = open_database(database_url)
    engines.append(second)
    tracker = SqlSessionTracker(second)
    assert tracker.retrieved_docs("cli") == {"p.md": "payment", "a.md": "api"}
    assert "api" in tracker.retrieved_domains("cli")


def test_make_tracker(database_url: str, engines: list[Engine]) -> None:
    engine = open_database(database_url)
    engines.append(engine)
    assert isinstance(make_tracker("sql", engine), SqlSessionTracker)
    assert isinstance(make_tracker("memory", engine), InMemorySessionTracker)


def test_migrations_create_the_tables_in_the_test_schema(
    database_url: str, engines: list[Engine]
) -> None:
    engine = open_database(database_url)
    engines.append(engine)
    expected = {"alembic_version", "documents", "session_retrievals", "kb_meta"}
    assert expected <= set(inspect(engine).get_table_names())
    if engine.dialect.name == "postgresql":
        schema = database_url.split("search_path%3D", 1)[1].split("&", 1)[0]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT current_schema()")).scalar() == schema
            tables = conn.execute(
                text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                {"s": schema},
            ).scalars()
            assert expected <= set(tables)
            version = conn.execute(text(f'SELECT version_num FROM "{schema}".alembic_version'))
            assert version.scalar() is not None
    # migrating an up-to-date database again is a no-op
    open_database(database_url).dispose()


def test_forget_unmarks_only_the_given_documents(tracker: SessionTracker) -> None:
    tracker.mark_many("s1", [("payment", "p/a.md"), ("database", "d/b.md"), ("api", "a/c.md")])
    tracker.mark_many("s2", [("payment", "p/a.md")])
    tracker.forget("s1", ["d/b.md", "a/c.md", "never/marked.md"])
    tracker.forget("s1", [])
    assert tracker.retrieved_docs("s1") == {"p/a.md": "payment"}
    assert tracker.retrieved_domains("s1") == ["payment"]
    assert "p/a.md" in tracker.retrieved_docs("s2")
