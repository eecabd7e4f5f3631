"""map_vector: each knowledge-map entry's vectors (entry and title) as the deterministic
planner embeds them, kept beside hashes of the texts they were made from (a new process no
longer embeds the whole map before its first plan).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "map_vector",
        sa.Column("path", sa.String(1024), primary_key=True),
        sa.Column("model", sa.String(255), primary_key=True),
        sa.Column("entry_hash", sa.String(64), nullable=False),
        sa.Column("entry", sa.LargeBinary(), nullable=False),
        sa.Column("title_hash", sa.String(64), nullable=False),
        sa.Column("title", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("map_vector")
