"""The word counts of corpora read by generation, and their history compacted
(written: store/writes.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, delete, func, select

from .schema import versions, word_count_history, word_counts

HISTORY_ROW_BYTES = 8 + 4 + 4 + 4  # a history row's count, generations and corpus id


def _counts_of(corpus_id: int, generation: int | None) -> Any:
    """(word, count) of a corpus' generation (None: the newest) as one statement,
    so it reads one snapshot: the rows unchanged since, and the history rows
    valid in it. The generation must be kept (``readable_generation``)."""
    newest = select(word_counts.c.word, word_counts.c["count"]).where(word_counts.c.corpus_id == corpus_id)
    if generation is None:
        return newest
    return newest.where(word_counts.c.changed_in <= generation).union_all(
        select(word_count_history.c.word, word_count_history.c["count"]).where(
            word_count_history.c.corpus_id == corpus_id, word_count_history.c.valid_from <= generation,
            word_count_history.c.valid_to > generation))


def counts(conn: Connection, corpus_id: int, generation: int | None = None) -> dict[bytes, int]:
    """Every word of a corpus' generation (None: the newest) with its count."""
    return {bytes(word): count for word, count in conn.execute(_counts_of(corpus_id, generation))}


def count_rows(conn: Connection, corpus_id: int, generation: int | None = None, *,
               batch: int = 1 << 16) -> Iterator[tuple[bytes, int]]:
    """Every (word, count) of a corpus' generation (None: the newest), streamed
    from the driver's cursor ``batch`` rows at a time: for millions of words,
    neither a dict of them all nor a SQLAlchemy row per word (a third of the
    time). Consume it inside the transaction of ``conn``."""
    stmt = _counts_of(corpus_id, generation)
    if conn.dialect.driver not in ("pysqlite", "psycopg"):  # other drivers: the portable way
        for word, count in conn.execute(stmt):
            yield bytes(word), count
        return
    compiled = stmt.compile(dialect=conn.dialect)
    params = compiled.construct_params()
    args = tuple(params[name] for name in compiled.positiontup or ()) if compiled.positional else params
    raw: Any = conn.connection.driver_connection
    # PostgreSQL: a server-side cursor (rows come as they are read, not all at once).
    cursor = raw.cursor(name="bpestore_count_rows") if conn.dialect.name == "postgresql" else raw.cursor()
    try:
        cursor.execute(str(compiled), args)
        while rows := cursor.fetchmany(batch):
            yield from rows
    finally:
        cursor.close()


def words(conn: Connection, corpus_id: int, generation: int | None = None) -> Iterator[bytes]:
    """Every distinct word of a corpus' generation, without counts."""
    for word, _count in conn.execute(_counts_of(corpus_id, generation)):
        yield bytes(word)


def has_words(conn: Connection, corpus_id: int, generation: int | None = None) -> bool:
    return conn.execute(_counts_of(corpus_id, generation).limit(1)).first() is not None


def compact(conn: Connection, corpus_id: int) -> tuple[int, int]:
    """Delete the history rows no pinned generation reads; returns (rows, bytes) freed,
    the bytes as the rows' data (word, count, generations)."""
    pinned = select(versions.c.id).where(
        versions.c.corpus_id == corpus_id, versions.c.corpus_generation >= word_count_history.c.valid_from,
        versions.c.corpus_generation < word_count_history.c.valid_to)
    unneeded = (word_count_history.c.corpus_id == corpus_id) & ~pinned.exists()
    rows, size = conn.execute(select(func.count(), func.coalesce(func.sum(func.length(word_count_history.c.word)), 0))
                              .where(unneeded)).one()
    if rows:
        conn.execute(delete(word_count_history).where(unneeded))
    return rows, int(size) + rows * HISTORY_ROW_BYTES
