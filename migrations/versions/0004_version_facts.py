"""Facts of complete versions, computed once and stored.

* ``version_facts``: one row per complete version: its tokens and merges packed
  in one blob (what loading its tokenizer reads), why tiktoken's core may not
  encode with it (NULL: it may), and a digest of both and of the version's
  fingerprint (see bpestore/store/facts.py).

Every complete version of an existing store gets its row here (reading its
rows with this revision's own SQL; the packing and the check are bpestore's
pure functions of format 1). Versions still training get theirs when they complete.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "version_facts",
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("format", sa.Integer, nullable=False),
        sa.Column("packed", sa.LargeBinary, nullable=False),
        sa.Column("fast_problem", sa.Text, nullable=True),
        sa.Column("digest", sa.String(64), nullable=False),
    )
    fill(op.get_bind(), table)


def fill(conn: sa.Connection, table: sa.Table) -> None:
    from bpestore.spec import TokenizerSpec
    from bpestore.store.facts import FORMAT, digest, encoder_facts, pack
    from bpestore.store.repository import Vocabulary

    complete = conn.execute(sa.text("SELECT id, spec, fingerprint FROM versions "
                                    "WHERE status = 'complete' ORDER BY id")).all()
    for version_id, spec, fingerprint in complete:
        vocab = Vocabulary.from_rows(
            conn.execute(sa.text("SELECT id, bytes, kind FROM tokens WHERE version_id = :v ORDER BY id"),
                         {"v": version_id}),
            conn.execute(sa.text('SELECT "rank", left_id, right_id, token_id, "count" FROM merges '
                                 'WHERE version_id = :v ORDER BY "rank"'), {"v": version_id}))
        facts = encoder_facts(TokenizerSpec.from_json(spec), vocab)
        packed = pack(vocab)
        conn.execute(table.insert().values(version_id=version_id, format=FORMAT, packed=packed,
                                           fast_problem=facts.fast_problem,
                                           digest=digest(fingerprint, facts.fast_problem, packed)))


def downgrade() -> None:
    op.drop_table("version_facts")
