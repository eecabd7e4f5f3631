"""documents.access: the groups that may read a document (frontmatter ``access:``).

A document ingested before superbiz read ``access:`` kept it in ``metadata.extra`` (an
unknown key then): it moves to the column here, so that it is obeyed without a
re-ingest. A value there that is no access list becomes ``[]``: no group reads the
document, only an unrestricted reader, until its file is fixed and ingested again
(opened to everyone, a typo would have published it).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from superbiz.access import AccessListError, parse_access

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("access", JSON, nullable=True))
    documents = sa.table(
        "documents",
        sa.column("id", sa.Integer()),
        sa.column("metadata", JSON),
        sa.column("access", JSON),
    )
    connection = op.get_bind()
    rows = connection.execute(sa.select(documents.c.id, documents.c.metadata)).all()
    for row_id, metadata in rows:
        extra = (metadata or {}).get("extra")
        if not isinstance(extra, dict) or "access" not in extra:
            continue
        try:
            groups: list[str] = list(parse_access(extra["access"]))
            kept = {key: value for key, value in extra.items() if key != "access"}
        except AccessListError:
            groups, kept = [], extra
        connection.execute(
            documents.update()
            .where(documents.c.id == row_id)
            .values(access=groups, metadata={**metadata, "extra": kept})
        )


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("access")
