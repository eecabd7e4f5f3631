"""knowledge_version: one row counting every change to documents and domains, so that
every process serving the knowledge base notices another one's changes.

Revision ID: 0005
Revises: 0003 (issue 11's tool_invocation.origin came after, as 0006)
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "knowledge_version",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "version": 0}])


def downgrade() -> None:
    op.drop_table("knowledge_version")
