"""SQLite: word_counts stored as the b-tree of its key (corpus_id, word), ``WITHOUT ROWID``.

Before, a rowid table held the rows and an index on (corpus_id, word) held every word
again: an ingest wrote each word twice, a training read the rows through the index.
The table is made anew and its rows copied (SQLite cannot change a table's kind in
place). PostgreSQL: nothing changes (its key is the word's hash, revision 0002).

Revision ID: 0008_word_counts_key
Revises: 0007_ordinals
Create Date: 2026-11-29
"""
from alembic import op

revision = "0008_word_counts_key"
down_revision = "0007_ordinals"
branch_labels = None
depends_on = None

COLUMNS = "corpus_id, word, count, changed_in, ordinal"
TABLE = ("CREATE TABLE {name} (corpus_id INTEGER NOT NULL, word BLOB NOT NULL, count BIGINT NOT NULL, "
         "changed_in INTEGER DEFAULT '1' NOT NULL, ordinal BIGINT, PRIMARY KEY (corpus_id, word), "
         "FOREIGN KEY(corpus_id) REFERENCES corpora (id) ON DELETE CASCADE){rowid}")


def _remake(rowid: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    op.execute(TABLE.format(name="word_counts_remade", rowid="" if rowid else " WITHOUT ROWID"))
    op.execute(f"INSERT INTO word_counts_remade ({COLUMNS}) SELECT {COLUMNS} FROM word_counts ORDER BY corpus_id, word")
    op.execute("DROP TABLE word_counts")
    op.execute("ALTER TABLE word_counts_remade RENAME TO word_counts")


def upgrade() -> None:
    _remake(rowid=False)


def downgrade() -> None:
    _remake(rowid=True)
