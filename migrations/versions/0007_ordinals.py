"""Ordinals: where each word first occurred, for tie_break="first-seen" from stored counts.

* ``word_counts.ordinal``: the word's first occurrence in the text of its corpus'
  sources in order (smaller: earlier). Rows from before stay NULL.
* ``generations.ordinal_end``: the ordinals of the generation's words are below
  it; NULL for the generations from before (and every one after them in that
  corpus), which training with ``first-seen`` refuses by name.

Revision ID: 0007_ordinals
Revises: 0006_questions
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0007_ordinals"
down_revision = "0006_questions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("word_counts", sa.Column("ordinal", sa.BigInteger, nullable=True))
    op.add_column("generations", sa.Column("ordinal_end", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("ordinal_end")
    with op.batch_alter_table("word_counts") as batch:
        batch.drop_column("ordinal")
