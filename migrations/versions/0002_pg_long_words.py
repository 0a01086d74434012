"""PostgreSQL: key word_counts by (corpus_id, sha256(word)), so words of any length fit.

A btree index entry holds at most 2704 bytes, so a primary key on the word
itself refuses long words (pre-tokenizer 'none' makes whole documents words).
SQLite has no such limit and keeps its key (corpus_id, word).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_constraint("word_counts_pkey", "word_counts", type_="primary")
    op.execute("CREATE UNIQUE INDEX ux_word_counts_corpus_word_sha256 "
               "ON word_counts (corpus_id, sha256(word))")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX ux_word_counts_corpus_word_sha256")
    op.create_primary_key("word_counts_pkey", "word_counts", ["corpus_id", "word"])
