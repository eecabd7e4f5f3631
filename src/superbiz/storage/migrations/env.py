"""Alembic environment: the engine comes from ``superbiz.storage.db``."""

from __future__ import annotations

from alembic import context

from superbiz.storage.models import Base

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    context.run_migrations()
