"""Migration 0015: ``documents.access``. A document ingested before superbiz read
``access:`` kept it in ``metadata.extra``; the migration obeys it without a re-ingest,
and a value there that is no access list admits no group (never everyone)."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import create_engine, text

from superbiz.access import Reader
from superbiz.knowledge.kb.access_rules import AccessRules
from superbiz.storage.db import alembic_config, open_database
from superbiz.storage.repository import DocumentRepository

LEGACY = {
    "pay/recon.md": {"extra": {"access": ["payments", "sre"], "owner": "pay-team"}},
    "pay/typo.md": {"extra": {"access": {"group": "payments"}}},
    "pay/open.md": {"extra": {"owner": "pay-team"}},
    "pay/plain.md": {},
}


def test_legacy_access_in_extra_is_obeyed_without_a_reingest(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        command.upgrade(alembic_config(engine), "0013")
        with engine.begin() as conn:
            for path, metadata in LEGACY.items():
                conn.execute(
                    text(
                        "INSERT INTO documents (path, title, domain, content_hash, size_bytes,"
                        " chunk_count, source_file, metadata, created_at, updated_at) VALUES"
                        " (:path, :title, 'pay', 'h', 1, 1, :source, :metadata,"
                        " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                    ),
                    {"path": path, "title": path, "source": path, "metadata": json.dumps(metadata)},
                )
    finally:
        engine.dispose()
    migrated = open_database(database_url)
    try:
        docs = {d.path: d for d in DocumentRepository(migrated).all()}
        assert docs["pay/recon.md"].access == ("payments", "sre")
        assert docs["pay/recon.md"].metadata["extra"] == {"owner": "pay-team"}
        assert docs["pay/typo.md"].access == ()  # kept in extra, so the next ingest names it
        assert "access" in docs["pay/typo.md"].metadata["extra"]
        assert docs["pay/open.md"].access is None and docs["pay/plain.md"].access is None
        rules = AccessRules.of(DocumentRepository(migrated).access_lists(), {})
        sre = Reader.of_groups("s", ["sre"])
        assert [p for p in sorted(docs) if rules.may_read(sre, p)] == [
            "pay/open.md",
            "pay/plain.md",
            "pay/recon.md",
        ]
        command.downgrade(alembic_config(migrated), "0013")
        command.upgrade(alembic_config(migrated), "head")
    finally:
        migrated.dispose()
