"""Corpus generations: every ingest that changes a corpus commits generation N+1.

* ``generations``: one row per generation of a corpus, with its totals and digest.
* ``ingests.generation``: the generation a source entered in.
* ``word_counts.changed_in``: the generation whose ingest last changed the count
  (the row holds the newest counts, as before).
* ``word_count_history``: a count as it was in generations [valid_from, valid_to),
  kept only where a version pins a generation in that range (copy-on-write).
* ``versions.corpus_generation``: the generation a version was trained on.

An existing store becomes generation 1 of each corpus (all its sources and
counts); versions whose corpus digest equals it are pinned to it. Versions
trained before their corpus last grew keep no generation: their counts were
overwritten before generations existed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""
import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "generations",
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n_sources", sa.Integer, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("n_words", sa.BigInteger, nullable=False),
        sa.Column("n_distinct", sa.BigInteger, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "word_count_history",
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False),
        sa.Column("word", sa.LargeBinary, nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
        sa.Column("valid_from", sa.Integer, nullable=False),
        sa.Column("valid_to", sa.Integer, nullable=False),
    )
    op.create_index("ix_word_count_history_corpus_to", "word_count_history", ["corpus_id", "valid_to"])
    with op.batch_alter_table("ingests") as batch:
        batch.add_column(sa.Column("generation", sa.Integer, nullable=False, server_default="1"))
    with op.batch_alter_table("word_counts") as batch:
        batch.add_column(sa.Column("changed_in", sa.Integer, nullable=False, server_default="1"))
    with op.batch_alter_table("versions") as batch:
        batch.add_column(sa.Column("corpus_generation", sa.Integer, nullable=True))

    conn = op.get_bind()
    meta = sa.MetaData()
    corpora, ingests, word_counts, versions, generations = (
        sa.Table(name, meta, autoload_with=conn)
        for name in ("corpora", "ingests", "word_counts", "versions", "generations"))
    for corpus in conn.execute(sa.select(corpora.c.id, corpora.c.spec, corpora.c.created_at)).all():
        sources = conn.execute(sa.select(ingests.c.sha256, ingests.c.size_bytes, ingests.c.n_words,
                                         ingests.c.created_at).where(ingests.c.corpus_id == corpus.id)).all()
        if not sources:
            continue
        # The digest bpestore computed before generations: the spec, then every source's sha256.
        digest = hashlib.sha256(corpus.spec.encode())
        for sha in sorted(s.sha256 for s in sources):
            digest.update(sha.encode())
        n_distinct = conn.execute(sa.select(sa.func.count()).select_from(word_counts)
                                  .where(word_counts.c.corpus_id == corpus.id)).scalar()
        conn.execute(generations.insert().values(
            corpus_id=corpus.id, number=1, n_sources=len(sources),
            size_bytes=sum(s.size_bytes for s in sources), n_words=sum(s.n_words for s in sources),
            n_distinct=n_distinct, digest=digest.hexdigest(),
            created_at=max(s.created_at for s in sources)))
        conn.execute(versions.update().where(versions.c.corpus_id == corpus.id,
                                             versions.c.corpus_digest == digest.hexdigest())
                     .values(corpus_generation=1))


def downgrade() -> None:
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("corpus_generation")
    with op.batch_alter_table("word_counts") as batch:
        batch.drop_column("changed_in")
    with op.batch_alter_table("ingests") as batch:
        batch.drop_column("generation")
    op.drop_index("ix_word_count_history_corpus_to", "word_count_history")
    op.drop_table("word_count_history")
    op.drop_table("generations")
