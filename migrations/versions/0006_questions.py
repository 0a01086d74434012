"""Versions trained on a weighted mixture of corpus generations.

* ``version_inputs``: one row per part of a version's training mixture, in order
  (``position`` 0 is the version's own ``corpus_id`` and ``corpus_generation``):
  the generation and its integer weight (each count is multiplied by it). Only
  versions trained on a mixture have rows; every other version, and its
  fingerprint, is as before.

Revision ID: 0006_questions
Revises: 0005
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0006_questions"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "version_inputs",
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id"), nullable=False),
        sa.Column("corpus_generation", sa.Integer, nullable=False),
        sa.Column("weight", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("version_inputs")
