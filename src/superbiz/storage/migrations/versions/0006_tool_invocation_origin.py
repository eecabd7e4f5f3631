"""tool_invocation.origin: who asked for the call (``model``, or ``plan`` when code ran a
planned lookup before the model's first step).

Revision ID: 0006
Revises: 0005 (after the knowledge version, so a database already at 0005 gets it too)
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_invocation") as batch:
        batch.add_column(sa.Column("origin", sa.String(8), nullable=False, server_default="model"))


def downgrade() -> None:
    with op.batch_alter_table("tool_invocation") as batch:
        batch.drop_column("origin")
