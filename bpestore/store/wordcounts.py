"""The word counts of corpora: their rows written in bulk (the upsert), read by
generation, their history kept for pinned generations and compacted.

Bulk rows go through the driver's own ``executemany`` on plain tuples: per row,
SQLAlchemy's parameter handling would cost more than the database (2.5x on SQLite).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select
from sqlalchemy.exc import DBAPIError

from ..errors import InvalidArgumentError
from ..records import Source
from . import repository
from .schema import corpora, generations, ingests, versions, word_count_history, word_counts

UPSERT_BATCH = 20_000
ROWS_PER_STATEMENT = 500  # rows in one INSERT statement of the SQLite upsert (2 parameters each)
HISTORY_ROW_BYTES = 8 + 4 + 4 + 4  # a history row's count, generations and corpus id


def keep_history(conn: Connection, corpus_id: int, counts: Mapping[bytes, int], newest_pin: int,
                  number: int) -> None:
    """Copy the rows of the words about to change that a pinned generation reads
    (changed in ``newest_pin`` or before) to word_count_history, valid until ``number``:
    one scan of those rows, then one executemany of the copies (a lookup per word of
    the batch cost more when a batch touches most of the corpus)."""
    rows = conn.execute(select(word_counts.c.word, word_counts.c["count"], word_counts.c.changed_in)
                        .where(word_counts.c.corpus_id == corpus_id, word_counts.c.changed_in <= newest_pin))
    copies = []
    for word, count, changed_in in rows:
        word = bytes(word)
        if word in counts:
            copies.append((corpus_id, word, count, changed_in, number))
    repository.insert_rows(conn, word_count_history, copies)


def upsert_counts(conn: Connection, corpus_id: int, counts: Mapping[bytes, int], generation: int) -> None:
    """Add counts to word_counts, marking the rows changed in ``generation``:
    INSERT ... ON CONFLICT DO UPDATE.

    Millions of distinct words are the common case (one large source), so the
    rows never go through SQLAlchemy or a Python step per row: on SQLite, many
    rows per statement, in word order (the index grows at its end); on
    PostgreSQL with psycopg, one binary COPY into a temporary table and one
    INSERT ... SELECT of it (a round trip per row cost 30 s per million words).
    """
    if not counts:
        return
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg" and _staging_table(conn):
        _upsert_counts_copy(conn, corpus_id, counts, generation)
        return
    # In word order: the index grows at its end, and concurrent upserts on
    # PostgreSQL lock rows in one order (sorting the words alone: comparing
    # (word, count) tuples costs more).
    ordered = sorted(counts)
    if conn.dialect.name == "sqlite":
        _upsert_sqlite(conn, corpus_id, ordered, counts, generation)
        return
    stmt = repository.dialect(conn).insert(word_counts)
    stmt = stmt.on_conflict_do_update(index_elements=word_count_key(conn),
                                      set_={"count": word_counts.c.count + stmt.excluded["count"],
                                            "changed_in": stmt.excluded["changed_in"]})
    _execute_many(conn, stmt, ("corpus_id", "word", "count", "changed_in"),
                  zip(itertools.repeat(corpus_id), ordered, map(counts.__getitem__, ordered),
                      itertools.repeat(generation)))


def _upsert_sqlite(conn: Connection, corpus_id: int, ordered: list[bytes], counts: Mapping[bytes, int],
                   generation: int) -> None:
    """The upsert with ``ROWS_PER_STATEMENT`` rows to a statement: the sqlite3
    module's cost per statement run is most of an executemany's time. The
    corpus id and generation are the same in every row: written into the
    statement (ints), a row binds only its word and count."""
    row = f"({int(corpus_id)}, ?, ?, {int(generation)})"

    def statement(n: int) -> str:
        return (f"INSERT INTO {word_counts.name} (corpus_id, word, count, changed_in) VALUES "
                f"{', '.join([row] * n)} ON CONFLICT (corpus_id, word) DO UPDATE "
                "SET count = word_counts.count + excluded.count, changed_in = excluded.changed_in")
    full, step = statement(ROWS_PER_STATEMENT), 2 * ROWS_PER_STATEMENT
    get = counts.__getitem__
    for start in range(0, len(ordered), UPSERT_BATCH):
        chunk = ordered[start:start + UPSERT_BATCH]
        # word, count, word, count, ...: two slice assignments, no tuple per row
        flat: list[bytes | int | None] = [None] * (2 * len(chunk))
        flat[::2] = chunk
        flat[1::2] = map(get, chunk)
        whole = len(chunk) // ROWS_PER_STATEMENT * ROWS_PER_STATEMENT
        if whole:
            conn.exec_driver_sql(full, [tuple(flat[i:i + step]) for i in range(0, 2 * whole, step)])
        if whole < len(chunk):
            conn.exec_driver_sql(statement(len(chunk) - whole), tuple(flat[2 * whole:]))


def _staging_table(conn: Connection) -> bool:
    """Make the temporary table the COPY upsert fills (dropped at commit); False where
    this role may not make temporary tables (then the rows go by executemany)."""
    try:
        with conn.begin_nested():  # a refusal must not abort the ingest's transaction
            conn.exec_driver_sql("DROP TABLE IF EXISTS pg_temp.bpestore_staged_counts")
            conn.exec_driver_sql("CREATE TEMPORARY TABLE bpestore_staged_counts "
                                 "(word bytea NOT NULL, count bigint NOT NULL) ON COMMIT DROP")
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == "42501":  # insufficient_privilege
            return False
        raise
    return True


def _upsert_counts_copy(conn: Connection, corpus_id: int, counts: Mapping[bytes, int], generation: int) -> None:
    """PostgreSQL (psycopg): COPY the rows into the temporary table (``_staging_table``),
    then one upsert from it.

    The rows go in ordered by the key of the unique index (sha256 of the word),
    so the index is walked in order, and concurrent ingests lock rows in one order."""
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy("COPY bpestore_staged_counts (word, count) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["bytea", "int8"])
        for item in counts.items():
            copy.write_row(item)
    cursor.execute(
        f"INSERT INTO {word_counts.name} (corpus_id, word, count, changed_in) "
        "SELECT %s, word, count, %s FROM bpestore_staged_counts ORDER BY sha256(word) "
        "ON CONFLICT (corpus_id, sha256(word)) DO UPDATE "
        "SET count = word_counts.count + excluded.count, changed_in = excluded.changed_in",
        (corpus_id, generation))
    cursor.execute("DROP TABLE bpestore_staged_counts")
    cursor.close()


def _execute_many(conn: Connection, stmt: Any, names: Sequence[str], rows: Iterable[tuple]) -> None:
    """Run ``stmt`` once per row (tuples of the parameters ``names``), in batches:
    compiled once with SQLAlchemy Core, run with the driver's executemany."""
    compiled = stmt.compile(dialect=conn.dialect)
    sql = str(compiled)
    order = list(compiled.positiontup) if compiled.positional else None
    items = iter(rows)
    while batch := list(itertools.islice(items, UPSERT_BATCH)):
        if order == list(names):  # "?" or "%s" parameters, in our order
            conn.exec_driver_sql(sql, batch)
            continue
        dicts = [dict(zip(names, row)) for row in batch]
        if order is not None:
            conn.exec_driver_sql(sql, [tuple(d[name] for name in order) for d in dicts])
        else:
            conn.exec_driver_sql(sql, dicts)


def word_count_key(conn: Connection) -> list:
    """The unique key of word_counts: (corpus_id, word), or on PostgreSQL
    (corpus_id, sha256(word)) since its index entries cannot hold long words
    (revision 0002)."""
    if conn.dialect.name == "postgresql":
        return [word_counts.c.corpus_id, func.sha256(word_counts.c.word)]
    return [word_counts.c.corpus_id, word_counts.c.word]


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


def add_generation(conn: Connection, corpus_id: int, sources: Sequence[Source], counts: Mapping[bytes, int]) -> int:
    """The corpus' next generation: its sources, counts and totals; returns its number.

    Call with the corpus row locked (``lock_corpus``). Before a count changes,
    its row is copied to word_count_history if a version pins a generation the
    row is valid in; with nothing pinned, this is one upsert, as before
    generations.
    """
    previous = conn.execute(select(generations).where(generations.c.corpus_id == corpus_id)
                            .order_by(generations.c.number.desc()).limit(1)).first()
    number = (previous.number if previous else 0) + 1
    n_words = (previous.n_words if previous else 0) + sum(s.n_words for s in sources)
    if n_words > repository.MAX_INTEGER:  # then no word's count can pass it either (SQLite would make it a float)
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({repository.MAX_INTEGER:,}); nothing was added",
                                   params=("files",))
    pinned = repository.pinned_generations(conn, corpus_id)
    if pinned:
        keep_history(conn, corpus_id, counts, pinned[-1], number)
    now = repository.utc_now()
    conn.execute(insert(ingests), [
        {"corpus_id": corpus_id, "source": s.source, "sha256": s.sha256, "size_bytes": s.size_bytes,
         "n_words": s.n_words, "n_distinct": s.n_distinct, "created_at": now, "generation": number}
        for s in sources])
    upsert_counts(conn, corpus_id, counts, number)
    spec = conn.execute(select(corpora.c.spec).where(corpora.c.id == corpus_id)).scalar_one()
    conn.execute(insert(generations).values(
        corpus_id=corpus_id, number=number,
        n_sources=(previous.n_sources if previous else 0) + len(sources),
        size_bytes=(previous.size_bytes if previous else 0) + sum(s.size_bytes for s in sources),
        n_words=n_words,
        n_distinct=conn.execute(select(func.count()).select_from(word_counts)
                                .where(word_counts.c.corpus_id == corpus_id)).scalar_one(),
        digest=repository.sources_digest(spec, conn.execute(select(ingests.c.sha256)
                                          .where(ingests.c.corpus_id == corpus_id)).scalars()),
        created_at=now))
    return number
