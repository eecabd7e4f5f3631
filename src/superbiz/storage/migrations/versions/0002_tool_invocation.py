"""tool_invocation: every lookup call, executed or blocked, with its scores.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tool_invocation",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("tool_name", sa.String(64), nullable=False),
        sa.Column("arguments", JSON, nullable=False),
        sa.Column("domain", sa.String(128), nullable=True),
        sa.Column("relevance_level", sa.String(20), nullable=True),
        sa.Column("dedup_reason", sa.String(32), nullable=True),
        sa.Column("retrieval_details", JSON, nullable=True),
        sa.Column("executed", sa.Boolean(), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("water_level", sa.String(8), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tool_invocation_session_id", "tool_invocation", ["session_id"])


def downgrade() -> None:
    op.drop_index("ix_tool_invocation_session_id", table_name="tool_invocation")
    op.drop_table("tool_invocation")
