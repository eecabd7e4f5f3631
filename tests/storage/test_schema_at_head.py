"""A database whose schema is current opens without Alembic; any other is migrated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from superbiz.storage.db import _head_revision, alembic_config, open_database


def test_the_head_read_from_the_migration_files_is_alembics() -> None:
    engine = create_engine("sqlite://")
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    assert head is not None and _head_revision() == head


def test_a_schema_behind_the_head_is_migrated_and_one_at_it_is_left(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        command.upgrade(alembic_config(engine), "0015")
        assert "map_vector" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    migrated = open_database(database_url)
    try:
        assert "map_vector" in inspect(migrated).get_table_names()
        with migrated.connect() as connection:
            version = connection.execute(text("SELECT version_num FROM alembic_version"))
            assert list(version.scalars()) == [_head_revision()]
    finally:
        migrated.dispose()


def test_a_current_database_is_opened_without_importing_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'superbiz.db'}"
    open_database(url).dispose()  # a new file: migrated by Alembic
    opened = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from superbiz.storage.db import open_database; "
            f"open_database({url!r}).dispose(); print('alembic' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert opened.stdout.strip() == "False", opened.stderr
