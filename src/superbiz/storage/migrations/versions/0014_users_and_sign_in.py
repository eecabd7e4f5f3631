"""users, their API keys and sign-ins, pending sign-ins, session owners, the audit trail.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

Json = sa.JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
When = sa.DateTime(timezone=True)
#: the columns the models mark ``index=True``
INDEXED = (
    ("api_keys", "user_id"),
    ("sign_ins", "user_id"),
    ("pending_sign_ins", "created_at"),
    ("session_owners", "owner"),
    ("audit_events", "at"),
)


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("groups", Json, nullable=False),
        sa.Column("subject", sa.String(255), nullable=True),
        sa.Column("created_at", When, nullable=False),
        sa.Column("last_seen_at", When, nullable=True),
        sa.Column("removed_at", When, nullable=True),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", When, nullable=False),
        sa.Column("last_used_at", When, nullable=True),
    )
    op.create_table(
        "sign_ins",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", When, nullable=False),
        sa.Column("expires_at", When, nullable=False),
        sa.Column("last_seen_at", When, nullable=False),
        sa.Column("id_token", sa.Text(), nullable=True),
    )
    op.create_table(
        "pending_sign_ins",
        sa.Column("state_hash", sa.String(64), primary_key=True),
        sa.Column("code_verifier", sa.String(128), nullable=False),
        sa.Column("nonce", sa.String(64), nullable=False),
        sa.Column("redirect_uri", sa.String(1024), nullable=False),
        sa.Column("return_to", sa.String(1024), nullable=False),
        sa.Column("created_at", When, nullable=False),
    )
    op.create_table(
        "session_owners",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("created_at", When, nullable=False),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", When, nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(1024), nullable=True),
        sa.Column("detail", Json, nullable=True),
        sa.Column("address", sa.String(64), nullable=True),
    )
    for table, column in INDEXED:
        op.create_index(f"ix_{table}_{column}", table, [column])


def downgrade() -> None:
    for table, column in INDEXED:
        op.drop_index(f"ix_{table}_{column}", table_name=table)
    for table in (
        "audit_events",
        "session_owners",
        "pending_sign_ins",
        "sign_ins",
        "api_keys",
        "users",
    ):
        op.drop_table(table)
