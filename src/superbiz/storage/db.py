"""Engine creation and schema migration (Alembic, run in-process)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from superbiz.exceptions import StoreError

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def open_database(url: str, *, migrate: bool = True) -> Engine:
    """Connect to ``url`` (SQLite file or PostgreSQL) and bring the schema up to date."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_pre_ping=not url.startswith("sqlite"))
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    if migrate:
        try:
            command.upgrade(alembic_config(engine), "head")
        except OperationalError as exc:
            engine.dispose()
            raise StoreError(f"cannot reach the database at {engine.url!r}: {exc.orig}") from exc
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot migrate the database at {engine.url!r}: {exc}") from exc
    return engine


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
