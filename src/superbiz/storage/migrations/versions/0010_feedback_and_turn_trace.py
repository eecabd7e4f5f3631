"""turn_feedback (a person's thumbs up/down on an answer), each turn's trace id and answer
source, and the indexes the knowledge-gaps report reads by.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turn_feedback",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("turn", sa.Integer(), primary_key=True),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_turn_feedback_updated_at", "turn_feedback", ["updated_at"])
    with op.batch_alter_table("chat_messages") as batch:
        batch.add_column(sa.Column("answer_source", sa.String(16), nullable=True))
        batch.add_column(sa.Column("trace_id", sa.String(32), nullable=True))
    with op.batch_alter_table("tool_invocation") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(32), nullable=True))
    op.create_index("ix_chat_messages_session_turn", "chat_messages", ["session_id", "turn"])
    op.create_index("ix_tool_invocation_created_at", "tool_invocation", ["created_at"])
    op.create_index("ix_tool_invocation_session_turn", "tool_invocation", ["session_id", "turn"])


def downgrade() -> None:
    op.drop_index("ix_tool_invocation_session_turn", table_name="tool_invocation")
    op.drop_index("ix_tool_invocation_created_at", table_name="tool_invocation")
    op.drop_index("ix_chat_messages_session_turn", table_name="chat_messages")
    with op.batch_alter_table("tool_invocation") as batch:
        batch.drop_column("trace_id")
    with op.batch_alter_table("chat_messages") as batch:
        batch.drop_column("trace_id")
        batch.drop_column("answer_source")
    op.drop_index("ix_turn_feedback_updated_at", table_name="turn_feedback")
    op.drop_table("turn_feedback")
