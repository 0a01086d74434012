"""The tables, as SQLAlchemy Core objects: exactly what the Alembic revisions create.

Parts that exist on one database only are marked with ``ddl_if(dialect=...)``.
Every schema change is a new revision in migrations/ plus the same change here;
tests/test_schema.py compares the two on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.schema import SchemaItem

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
    Column("generation", Integer, nullable=False, server_default="1"),  # the generation it entered in
    Index("ix_ingests_corpus_sha256", "corpus_id", "sha256"),
)

# One row per generation of a corpus: its totals and digest as of that generation
# (revision 0003). Every ingest transaction that adds sources makes the next one.
generations = Table(
    "generations", metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), primary_key=True),
    Column("number", Integer, primary_key=True, autoincrement=False),
    Column("n_sources", Integer, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("n_words", BigInteger, nullable=False),
    Column("n_distinct", BigInteger, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # Its words' ordinals (word_counts.ordinal) are below this (revision 0007); NULL: some
    # word of it has none (ingested before ordinals were kept): no first-seen training on it.
    Column("ordinal_end", BigInteger, nullable=True),
)

word_counts = Table(
    "word_counts", metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False),
    Column("word", LargeBinary, nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("changed_in", Integer, nullable=False, server_default="1"),  # the generation that last changed it
    # Where the word first occurred in the text of the corpus' sources in order: the smaller,
    # the earlier (revision 0007; NULL: ingested before). A word keeps it in every generation.
    Column("ordinal", BigInteger, nullable=True),
    PrimaryKeyConstraint("corpus_id", "word").ddl_if(dialect="sqlite"),
    # SQLite: the rows are the key's b-tree (revision 0008), not a rowid table beside an index
    # holding every word again: an ingest writes each word once, a training reads it in key order.
    sqlite_with_rowid=False,
)
# A PostgreSQL btree entry holds at most 2704 bytes, too few for a long word
# (pre-tokenizer 'none' makes whole documents words): there the key is the word's hash
# (revision 0002).
Index("ux_word_counts_corpus_word_sha256", word_counts.c.corpus_id, func.sha256(word_counts.c.word),
      unique=True).ddl_if(dialect="postgresql")

# The count a word had in generations [valid_from, valid_to), copied from word_counts
# when an ingest changes it and a version pins a generation in that range (revision 0003).
word_count_history = Table(
    "word_count_history", metadata,
    Column("corpus_id", Integer, ForeignKey("corpora.id", ondelete="CASCADE"), nullable=False),
    Column("word", LargeBinary, nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("valid_from", Integer, nullable=False),
    Column("valid_to", Integer, nullable=False),
    Index("ix_word_count_history_corpus_to", "corpus_id", "valid_to"),
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
    # Last, where revisions 0003 and 0005 added them: a new store's columns are in the migrated order.
    Column("corpus_generation", Integer, nullable=True),  # the generation it was trained on
    # A version copied from another store without the counts it was trained on: the
    # name of that corpus, whose counts stayed there (corpus_id is NULL; revision 0005).
    Column("corpus_name", String(200), nullable=True),
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

# The facts of a complete version, computed once when it completes (revision 0004):
# its tokens and merges packed in one blob (what loading its tokenizer reads; see
# store/snapshot.py) and why tiktoken's core may not encode with it (NULL: it may).
version_facts = Table(
    "version_facts", metadata,
    Column("version_id", Integer, ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
    Column("format", Integer, nullable=False),
    Column("packed", LargeBinary, nullable=False),
    Column("fast_problem", Text, nullable=True),
    Column("digest", String(64), nullable=False),  # sha256 of the version's fingerprint and the columns above
)

# The parts of a version's training mixture (revision 0006_questions): position 0 is its own
# corpus generation; each count is multiplied by the part's weight. Only mixtures have rows.
version_inputs = Table(
    "version_inputs", metadata,
    Column("version_id", Integer, ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("corpus_id", Integer, ForeignKey("corpora.id"), nullable=False),
    Column("corpus_generation", Integer, nullable=False),
    Column("weight", BigInteger, nullable=False),
)


def created_on(item: SchemaItem, dialect: str) -> bool:
    """Whether the schema has item on databases of this dialect (see ``ddl_if``)."""
    condition = getattr(item, "_ddl_if", None)  # SQLAlchemy has no public reader for it
    if condition is None or condition.dialect is None:
        return True
    return dialect in ((condition.dialect,) if isinstance(condition.dialect, str) else condition.dialect)


def include_object(dialect: str) -> Callable[..., bool]:
    """Alembic's ``include_object`` hook for a database of this dialect.

    Alembic does not read ``ddl_if`` (sqlalchemy/alembic#1491): without this
    it would want the other dialect's parts created here.
    """
    def include(item, name, type_, reflected, compare_to) -> bool:
        return reflected or created_on(item, dialect)
    return include
