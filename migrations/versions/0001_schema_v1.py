"""Schema v1: corpora, ingests, word counts, tokenizers, versions, aliases, merges, tokens.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "corpora",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "ingests",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("n_words", sa.BigInteger, nullable=False),
        sa.Column("n_distinct", sa.BigInteger, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_ingests_corpus_sha256", "ingests", ["corpus_id", "sha256"])
    op.create_table(
        "word_counts",
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("word", sa.LargeBinary, primary_key=True),
        sa.Column("count", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tokenizers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "versions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("tokenizer_id", sa.Integer, sa.ForeignKey("tokenizers.id", ondelete="CASCADE"), nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("versions.id"), nullable=True),
        sa.Column("corpus_id", sa.Integer, sa.ForeignKey("corpora.id"), nullable=True),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("target_vocab_size", sa.Integer, nullable=True),
        sa.Column("target_merges", sa.Integer, nullable=True),
        sa.Column("min_frequency", sa.Integer, nullable=False),
        sa.Column("max_token_length", sa.Integer, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("corpus_digest", sa.String(64), nullable=True),
        sa.Column("fingerprint", sa.String(64), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("tokenizer_id", "number"),
    )
    op.create_table(
        "aliases",
        sa.Column("tokenizer_id", sa.Integer, sa.ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), nullable=False),
    )
    op.create_table(
        "merges",
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("rank", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("left_id", sa.Integer, nullable=False),
        sa.Column("right_id", sa.Integer, nullable=False),
        sa.Column("token_id", sa.Integer, nullable=False),
        sa.Column("count", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tokens",
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("bytes", sa.LargeBinary, nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
    )


def downgrade() -> None:
    for table in ("tokens", "merges", "aliases", "versions", "tokenizers", "word_counts", "ingests", "corpora"):
        op.drop_table(table)
