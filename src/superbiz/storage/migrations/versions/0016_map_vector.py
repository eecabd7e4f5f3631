"""map_vector: each knowledge-map entry's vector as the deterministic planner embeds it,
kept beside a hash of the text it was made from (a new process no longer embeds the whole
map before its first plan).

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
        sa.Column("kind", sa.String(8), primary_key=True),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("text_hash", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("map_vector")
