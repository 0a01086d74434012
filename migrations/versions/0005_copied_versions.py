"""Versions copied from another store without the word counts they were trained on.

* ``versions.corpus_name``: the name of the corpus such a version was trained
  on, whose counts stayed in the store it came from (its ``corpus_id`` is NULL
  here, its corpus digest and generation are kept). NULL for every other
  version: trained here (``corpus_id`` names the corpus) or imported.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("versions") as batch:
        batch.add_column(sa.Column("corpus_name", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("corpus_name")
