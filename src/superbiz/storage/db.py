"""Engine creation and schema migration (Alembic, run in-process)."""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from superbiz.exceptions import StoreError, first_line

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
#: first key of the advisory lock held while the schema is brought up to date (after
#: ``replica_turn_order.LOCK_NAMESPACE`` and ``kb_writes.WRITE_NAMESPACE``); the second
#: is the schema's hash, so databases in other schemas never wait
SCHEMA_NAMESPACE = 0x5B12 + 2


#: a migration's own revision and the one it revises, as each file of ``versions/`` says
_REVISION = re.compile(r'^(down_revision|revision) = (?:"(\w+)"|None)$', re.MULTILINE)


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def open_database(
    url: str, *, migrate: bool = True, pool_size: int = 5, max_overflow: int = 10
) -> Engine:
    """Connect to ``url`` (SQLite file or PostgreSQL) and bring the schema up to date;
    a server's connections are pooled, ``pool_size`` kept open plus ``max_overflow``."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("sqlite"):
        engine = create_engine(url, pool_pre_ping=False)
    else:
        engine = create_engine(
            url, pool_pre_ping=True, pool_size=pool_size, max_overflow=max_overflow
        )
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    if migrate and not _at_head(engine):
        from alembic import command

        try:
            with _schema_lock(engine):
                command.upgrade(alembic_config(engine), "head")
        except StoreError:
            engine.dispose()
            raise
        except OperationalError as exc:
            engine.dispose()
            raise StoreError(f"cannot reach the database at {engine.url!r}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot migrate the database at {engine.url!r}: {exc}") from exc
    event.listen(engine, "handle_error", _unavailable_store)
    return engine


def _at_head(engine: Engine) -> bool:
    """Whether the schema is at the newest migration already, read with one query:
    Alembic (importing it, reading its scripts, 0.25 s of every command) is needed only
    to change the schema. Anything unexpected (no version table, a database that does not
    answer, migrations that branch) says no, and Alembic decides."""
    head = _head_revision()
    if head is None:
        return False
    try:
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT version_num FROM alembic_version"))
            return list(stored.scalars()) == [head]
    except SQLAlchemyError:
        return False


@cache
def _head_revision() -> str | None:
    """The revision no migration revises (None unless exactly one), from the migration
    files as Alembic reads them: ``revision = "0016"`` beside ``down_revision = "0015"``."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in (MIGRATIONS / "versions").glob("*.py"):
        said = dict(_REVISION.findall(script.read_text(encoding="utf-8")))
        if "revision" not in said or not said["revision"]:
            return None
        revisions.add(said["revision"])
        if said.get("down_revision"):
            revised.add(said["down_revision"])
    heads = revisions - revised
    return heads.pop() if len(heads) == 1 else None


def _schema_lock(engine: Engine) -> AbstractContextManager[None]:
    """One process at a time brings the schema up to date: replicas started together on
    an empty schema, or ``superbiz serve`` and ``superbiz ingest`` on a new data folder,
    each ran the migrations, and all but the first stopped on a table the first had
    just made ("table documents already exists"). The next one in finds the schema
    current and changes nothing. Its own lock file on SQLite, not the write lock's: a
    process opening the database while another ingests must not wait for the ingest."""
    return process_lock(engine, SCHEMA_NAMESPACE, ".schema-lock")


@contextmanager
def process_lock(engine: Engine, namespace: int, suffix: str) -> Iterator[None]:
    """A lock across every process using ``engine``'s database, released with the
    process if it dies: on PostgreSQL a session-level advisory lock ``(namespace, the
    schema's hash)`` on a connection of its own, on SQLite an ``flock`` on the file
    ``<database><suffix>``; none for an in-memory database (no other process shares it)."""
    if engine.dialect.name == "postgresql":
        with _advisory_lock(engine, namespace):
            yield
    elif engine.dialect.name == "sqlite" and engine.url.database:
        with _file_lock(Path(engine.url.database), suffix):
            yield
    else:
        yield


_LOCK = text("SELECT pg_advisory_lock(:namespace, hashtext(current_schema()))")
_UNLOCK = text("SELECT pg_advisory_unlock(:namespace, hashtext(current_schema()))")


@contextmanager
def _advisory_lock(engine: Engine, namespace: int) -> Iterator[None]:
    params: dict[str, object] = {"namespace": namespace}
    connection = dedicated_connection(engine)
    try:
        connection.execute(_LOCK, params)
        connection.commit()
    except BaseException as exc:
        connection.close()
        if isinstance(exc, DBAPIError):
            raise relational_store_error(engine, exc) from exc
        raise
    try:
        yield
    finally:
        try:
            connection.execute(_UNLOCK, params)
            connection.commit()
        except DBAPIError:
            connection.invalidate()  # the connection is gone, and with it the lock
        finally:
            connection.close()


@contextmanager
def _file_lock(database: Path, suffix: str) -> Iterator[None]:
    if database.name in ("", ":memory:"):
        yield
        return
    with open(database.with_name(database.name + suffix), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def upsert_insert(engine: Engine, table: Table | type[Any]) -> Any:
    """An ``INSERT`` into ``table`` that takes ``on_conflict_do_…`` on both stores (SQLite
    and PostgreSQL spell it alike): two writers of one key do not collide."""
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _unavailable_store(context: ExceptionContext) -> None:
    """A database that went away (or never answers) as a ``StoreError`` naming it, so that
    every caller reports it as such (503 over HTTP) and the next call, once it is back,
    reconnects: the pool still drops the dead connection. Pre-ping failures are left
    alone: the pool handles them by reconnecting."""
    error = context.sqlalchemy_exception
    if context.is_pre_ping or not isinstance(error, (OperationalError, InterfaceError)):
        return
    raise relational_store_error(context.engine, error) from error


def relational_store_error(engine: Engine | None, exc: BaseException) -> StoreError:
    """``exc`` as a ``StoreError`` that names the database (password hidden)."""
    where = engine.url.render_as_string(hide_password=True) if engine else "the database"
    return StoreError(f"the relational store ({where}) failed: {first_line(exc)}")


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    # the wait first: a new file's switch to WAL beside another process's waits for it
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def dedicated_connection(engine: Engine) -> Connection:
    """A connection of ``engine`` for a lock held on it; ``StoreError`` when there is none."""
    try:
        return engine.connect()
    except DBAPIError as exc:
        raise relational_store_error(engine, exc) from exc
