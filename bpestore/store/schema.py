"""The tables, as SQLAlchemy Core objects (the Alembic revisions create them)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

corpora = Table(
    "corpora", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("spec", Text, nullable=False),  # TokenizerSpec JSON (its corpus fields decide the words)
    Column("created_at", DateTime(timezone=True), nullable=False),
)

ingests = Table(
    "ingests", metadata,
    Column("id", Integer, primary_key=True),
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False),
    Column("source", Text, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("n_words", BigInteger, nullable=False),
    Column("n_distinct", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index("ix_ingests_corpus_sha256", "corpus_id", "sha256"),
)

word_counts = Table(
    "word_counts", metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
    Column("word", LargeBinary, primary_key=True),
    Column("count", BigInteger, nullable=False),
)

tokenizers = Table(
    "tokenizers", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

versions = Table(
    "versions", metadata,
    Column("id", Integer, primary_key=True),
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("parent_id", Integer, ForeignKey("versions.id"), nullable=True),
    Column("corpus_id", Integer, ForeignKey("corpora.id"), nullable=True),  # None when imported
    Column("spec", Text, nullable=False),
    Column("target_vocab_size", Integer, nullable=True),
    Column("target_merges", Integer, nullable=True),
    Column("min_frequency", Integer, nullable=False, default=1),
    Column("max_token_length", Integer, nullable=True),
    Column("status", String(16), nullable=False),  # training | complete
    Column("source", String(32), nullable=False),  # trained | gpt2 (import)
    Column("corpus_digest", String(64), nullable=True),
    Column("fingerprint", String(64), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("tokenizer_id", "number"),
)

aliases = Table(
    "aliases", metadata,
    Column("tokenizer_id", Integer, ForeignKey("tokenizers.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(200), primary_key=True),
    Column("version_id", Integer, ForeignKey("versions.id", ondelete="CASCADE"), nullable=False),
)

merges = Table(
    "merges", metadata,
    Column("version_id", Integer, ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
    Column("rank", Integer, primary_key=True, autoincrement=False),
    Column("left_id", Integer, nullable=False),
    Column("right_id", Integer, nullable=False),
    Column("token_id", Integer, nullable=False),
    Column("count", BigInteger, nullable=False),  # pair frequency when merged (0: imported)
)

tokens = Table(
    "tokens", metadata,
    Column("version_id", Integer, ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("bytes", LargeBinary, nullable=False),
    Column("kind", String(8), nullable=False),  # byte | special | merge | char
)
