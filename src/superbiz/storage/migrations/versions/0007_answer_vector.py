"""answer_vector: each document opening's vector under the answer model
(``retrieval.answers``), kept beside its document's content hash.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answer_vector",
        sa.Column("path", sa.String(1024), primary_key=True),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("answer_vector")
