"""Writing a corpus' next generation: its row (made if new, then locked), its sources,
the history of the counts a pinned generation reads, the upsert of the counts and
the totals; SQL text with named parameters over one write transaction (``Writes``),
as store/reads.py reads. ``writing`` opens the transaction:

* through the driver alone (``sqlite3`` on a SQLite file, psycopg on a
  ``postgresql+psycopg://`` store, both at ``HEAD``): a fresh process that
  ingests imports no SQLAlchemy (on SQLite two thirds of what it paid before any work);
* else through the store's engine (``Writes.over``): a new, in-memory or read-only
  store, another schema revision or driver; the engine's errors then say why.

Same statements, same rows. Bulk rows go through the driver beneath either: on
SQLite many rows to a statement, on PostgreSQL with psycopg a COPY.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

from .. import native
from ..errors import DatabaseError, InvalidArgumentError
from ..records import Source
from ..spec import TokenizerSpec
from .db import _sqlite_pragmas, gave_up_waiting, lock_wait_seconds
from .reader import Run, VersionReads, revision_is_head, sqlite_uri
from .reads import CorpusReads, in_list, sources_digest

if TYPE_CHECKING:
    from sqlalchemy import Connection

MAX_INTEGER: Final = 2**63 - 1  # the largest integer SQLite and PostgreSQL's bigint hold
PARAMETERS: Final = 1000  # parameters of one SQLite statement of many rows
UPSERT_BATCH: Final = 20_000  # words whose rows are made at once
COUNT_CORE, _ = native.load("_countcore")  # interleave: the parameters of the upsert's statements in C
LOOKUPS: Final = 16  # pinned rows looked up word by word where the corpus has this many times the batch's words

NEW_CORPUS = "INSERT INTO corpora (name, spec, created_at) VALUES (:name, :spec, :now) ON CONFLICT (name) DO NOTHING"
CORPUS = "SELECT id, spec FROM corpora WHERE name = :name"
PRESENT = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id AND sha256 {listed}"
PREVIOUS = ("SELECT number, n_sources, size_bytes, n_words, n_distinct FROM generations "
            "WHERE corpus_id = :corpus_id ORDER BY number DESC LIMIT 1")
# The rows a pinned generation reads: of the words looked up (on SQLite one lookup a word; on
# PostgreSQL, whose unique index is on sha256(word), one statement), or all of the corpus'.
PINNED_ROW = ('SELECT word, "count", changed_in FROM word_counts '
              "WHERE corpus_id = :corpus_id AND word = :word AND changed_in <= :pin")
PINNED_ROWS = ('SELECT word, "count", changed_in FROM word_counts WHERE corpus_id = :corpus_id '
               "AND sha256(word) IN (SELECT sha256(w) FROM unnest(:words) AS w) AND changed_in <= :pin")
PINNED_SCAN = 'SELECT word, "count", changed_in FROM word_counts WHERE corpus_id = :corpus_id AND changed_in <= :pin'
HISTORY = ("word_count_history", ("corpus_id", "word", "count", "valid_from", "valid_to"))
INGEST = ("INSERT INTO ingests (corpus_id, source, sha256, size_bytes, n_words, n_distinct, created_at, generation) "
          "VALUES (:corpus_id, :source, :sha256, :size_bytes, :n_words, :n_distinct, :now, :generation)")
UPSERT = ('INSERT INTO word_counts (corpus_id, word, "count", changed_in) VALUES {rows} ON CONFLICT {key} '
          'DO UPDATE SET "count" = word_counts."count" + excluded."count", changed_in = excluded.changed_in')
STAGING = ("CREATE TEMPORARY TABLE bpestore_staged_counts (word bytea NOT NULL, count bigint NOT NULL) "
           "ON COMMIT DROP")
STAGED = ('INSERT INTO word_counts (corpus_id, word, "count", changed_in) SELECT %s, word, "count", %s '
          "FROM bpestore_staged_counts ORDER BY sha256(word) ON CONFLICT (corpus_id, sha256(word)) DO UPDATE "
          'SET "count" = word_counts."count" + excluded."count", changed_in = excluded.changed_in')
SPEC = "SELECT spec FROM corpora WHERE id = :corpus_id"
N_DISTINCT = "SELECT count(*) FROM word_counts WHERE corpus_id = :corpus_id"
SHAS = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id"
GENERATION = ("INSERT INTO generations (corpus_id, number, n_sources, size_bytes, n_words, n_distinct, digest, "
              "created_at) VALUES (:corpus_id, :number, :n_sources, :size_bytes, :n_words, :n_distinct, :digest, :now)")


class Writes(NamedTuple):
    """One write transaction: ``run`` a statement (SQL text, named parameters), ``many``
    one statement once per row of parameters; ``raw``: the driver's connection beneath
    (``sqlite3`` or psycopg; None for another driver), for bulk rows."""

    run: Run
    many: Callable[[str, list[dict[str, Any]]], Any]
    raw: Any
    postgresql: bool
    now: Any  # the transaction's timestamp, as SQLAlchemy's DateTime stores it

    @classmethod
    def over(cls, conn: Connection) -> Writes:
        """The writes in a SQLAlchemy connection's transaction."""
        from sqlalchemy import text  # loaded already: the caller holds a connection

        def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
            result = conn.execute(text(sql), params)
            return result.all() if result.returns_rows else []
        raw = conn.connection.driver_connection if conn.dialect.driver in ("pysqlite", "psycopg") else None
        many = _many(raw) if raw is not None else lambda sql, rows: rows and conn.execute(text(sql), rows)
        postgresql = conn.dialect.name == "postgresql"
        return cls(run, many, raw, postgresql, _now(postgresql))


class Writable(Protocol):
    """What ``writing`` opens transactions on (the Store)."""

    url: str
    read_only: bool

    def writing(self) -> AbstractContextManager[Connection]: ...


@contextmanager
def writing(store: Writable) -> Iterator[Writes]:
    """One write transaction on ``store``: through the driver alone where it applies, else
    through the engine (which refuses a read-only store and upgrades an old schema)."""
    if not store.read_only:
        with _driver_writing(store.url) as db:
            if db is not None:
                yield db
                return
    with store.writing() as conn:
        yield Writes.over(conn)


def lock_corpus(db: Writes, name: str, spec: TokenizerSpec) -> tuple[int, TokenizerSpec]:
    """Create the corpus with ``spec`` if it is new (race-free), lock its row until
    the transaction ends (on SQLite the write lock does); returns its id and stored spec."""
    db.run(NEW_CORPUS, {"name": name, "spec": spec.to_json(), "now": db.now})
    found, stored = db.run(CORPUS + (" FOR UPDATE" if db.postgresql else ""), {"name": name})[0]
    return found, TokenizerSpec.from_json(stored)


def present_shas(db: Writes, corpus_id: int, shas: Sequence[str]) -> set[str]:
    """Which of these contents are already sources of the corpus."""
    present: set[str] = set()
    for start in range(0, len(shas), 500):
        listed, params = in_list("sha", shas[start:start + 500])
        present.update(row[0] for row in db.run(PRESENT.format(listed=listed), {**params, "corpus_id": corpus_id}))
    return present


def add_generation(db: Writes, corpus_id: int, sources: Sequence[Source], counts: Mapping[bytes, int]) -> int:
    """The corpus' next generation: its sources, counts and totals; returns its number.

    Call with the corpus row locked (``lock_corpus``). Before a count changes, its
    row is copied to word_count_history if a version pins a generation the row is
    valid in; with nothing pinned, this is one upsert."""
    at = {"corpus_id": corpus_id}
    previous = db.run(PREVIOUS, at)
    last = previous[0] if previous else (0, 0, 0, 0, 0)
    number, n_words = last[0] + 1, last[3] + sum(s.n_words for s in sources)
    if n_words > MAX_INTEGER:  # then no word's count can pass it either (SQLite would make it a float)
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({MAX_INTEGER:,}); nothing was added", params=("files",))
    pinned = CorpusReads(VersionReads(db.run)).pinned_generations(corpus_id)
    if pinned:
        keep_history(db, corpus_id, counts, pinned[-1], number, corpus_words=last[4])
    db.many(INGEST, [{**at, "source": s.source, "sha256": s.sha256, "size_bytes": s.size_bytes,
                      "n_words": s.n_words, "n_distinct": s.n_distinct, "now": db.now, "generation": number}
                     for s in sources])
    upsert_counts(db, corpus_id, counts, number)
    # A corpus' rows come with its generations: before its first, it has none, and then
    # holds the batch's words (counting its rows cost a scan of them all).
    n_distinct = len(counts) if not previous else db.run(N_DISTINCT, at)[0][0]
    db.run(GENERATION, {
        **at, "number": number, "n_sources": last[1] + len(sources),
        "size_bytes": last[2] + sum(s.size_bytes for s in sources), "n_words": n_words,
        "n_distinct": n_distinct,
        "digest": sources_digest(db.run(SPEC, at)[0][0], (row[0] for row in db.run(SHAS, at))), "now": db.now})
    return number


def keep_history(db: Writes, corpus_id: int, counts: Mapping[bytes, int], newest_pin: int, number: int, *,
                 corpus_words: int | None = None) -> None:
    """Copy the rows of the words about to change that a pinned generation reads
    (changed in ``newest_pin`` or before) to word_count_history, valid until ``number``.
    A batch of few words for the corpus' ``corpus_words`` (distinct) looks its rows
    up; a larger one scans the corpus' rows once (a lookup per word costs more when
    a batch touches much of the corpus)."""
    at = {"corpus_id": corpus_id, "pin": newest_pin}
    if corpus_words is not None and len(counts) * LOOKUPS <= corpus_words:
        rows = db.run(PINNED_ROWS, {**at, "words": list(counts)}) if db.postgresql else \
            [row for word in counts for row in db.run(PINNED_ROW, {**at, "word": word})]
    else:
        rows = db.run(PINNED_SCAN, at)
    insert_rows(db, *HISTORY, [(corpus_id, word, count, changed_in, number) for word, count, changed_in
                               in ((bytes(r[0]), r[1], r[2]) for r in rows) if word in counts])


def insert_rows(db: Writes, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    """INSERT rows (tuples in ``columns``' order): on SQLite many to a statement, elsewhere
    one statement per row."""
    if not rows:
        return
    names = ", ".join(f'"{c}"' for c in columns)  # quoted: "count" is a keyword
    sql = f"INSERT INTO {table} ({names}) VALUES "
    if isinstance(db.raw, sqlite3.Connection):
        _sqlite_rows(db.raw, sql, f"({', '.join('?' * len(columns))})", "", [v for row in rows for v in row],
                     len(columns))
        return
    db.many(sql + f"({', '.join(':' + c for c in columns)})", [dict(zip(columns, row)) for row in rows])


def upsert_counts(db: Writes, corpus_id: int, counts: Mapping[bytes, int], generation: int) -> None:
    """Add counts to word_counts, marking the rows changed in ``generation``:
    INSERT ... ON CONFLICT DO UPDATE.

    Millions of distinct words are the common case (one large source), so the rows
    never go through a Python step per row: on SQLite many rows to a statement, in
    word order (the index grows at its end); on PostgreSQL with psycopg, one binary
    COPY into a temporary table and one INSERT ... SELECT of it (a round trip per
    row cost 30 s per million words)."""
    if not counts:
        return
    if db.postgresql and db.raw is not None and _staging_table(db.raw):
        _upsert_copy(db.raw, corpus_id, counts, generation)
        return
    # In word order: the index grows at its end, and concurrent upserts on PostgreSQL
    # lock rows in one order (sorting the words alone: comparing (word, count) tuples costs more).
    ordered = sorted(counts)
    if not isinstance(db.raw, sqlite3.Connection):
        key = "(corpus_id, sha256(word))" if db.postgresql else "(corpus_id, word)"
        db.many(UPSERT.format(rows="(:corpus_id, :word, :count, :generation)", key=key),
                [{"corpus_id": corpus_id, "word": word, "count": counts[word], "generation": generation}
                 for word in ordered])
        return
    # The corpus id and generation are the same in every row: written into the statement
    # (ints), a row binds only its word and count.
    head, tail = UPSERT.split("{rows}")
    tail = tail.format(key="(corpus_id, word)")
    row = f"({int(corpus_id)}, ?, ?, {int(generation)})"
    for start in range(0, len(ordered), UPSERT_BATCH):
        chunk = ordered[start:start + UPSERT_BATCH]
        _sqlite_groups(db.raw, head, row, tail, interleave(chunk, counts, PARAMETERS // 2), 2)


def interleave(words: list[bytes], counts: Mapping[bytes, int], per: int) -> list[Sequence[bytes | int]]:
    """The parameters of statements of ``per`` rows (word, count, word, count, ...), the
    last statement's fewer: no tuple per row (in the counting core where built).

    >>> interleave([b"a", b"b", b"c"], {b"a": 1, b"b": 2, b"c": 3}, 2)
    [(b'a', 1, b'b', 2), (b'c', 3)]
    """
    # A Counter too (the ingest's batches): its own lookup differs only for a word it lacks.
    if COUNT_CORE is not None and type(counts) in (dict, Counter):
        return COUNT_CORE.interleave(words, counts, per)
    flat: list[bytes | int | None] = [None] * (2 * len(words))
    flat[::2] = words
    flat[1::2] = map(counts.__getitem__, words)
    return [tuple(flat[i:i + 2 * per]) for i in range(0, len(flat), 2 * per)]  # type: ignore[arg-type]


def _sqlite_rows(conn: sqlite3.Connection, head: str, row: str, tail: str, values: list, width: int) -> None:
    """``head`` + rows + ``tail`` over ``values`` (``width`` to a row), as few statements as
    the parameters allow."""
    step = PARAMETERS // width * width
    _sqlite_groups(conn, head, row, tail, [values[i:i + step] for i in range(0, len(values), step)], width)


def _sqlite_groups(conn: sqlite3.Connection, head: str, row: str, tail: str, groups: list[Sequence[Any]],
                   width: int) -> None:
    """``head`` + rows + ``tail`` once per group of parameters (``width`` to a row, each group
    ``PARAMETERS // width`` rows but the last): the sqlite3 module's cost per statement run
    is most of an executemany's time, and one statement runs without the GIL."""
    step = PARAMETERS // width * width
    last = groups.pop() if groups and len(groups[-1]) < step else None
    if groups:
        conn.executemany(head + ", ".join([row] * (step // width)) + tail, groups)
    if last:
        conn.execute(head + ", ".join([row] * (len(last) // width)) + tail, last)


def _staging_table(pg: Any) -> bool:
    """Make the temporary table the COPY upsert fills (dropped at commit); False where
    this role may not make temporary tables (then the rows go by executemany)."""
    import psycopg

    pg.execute("SAVEPOINT bpestore_staging")  # a refusal must not abort the ingest's transaction
    try:
        pg.execute("DROP TABLE IF EXISTS pg_temp.bpestore_staged_counts")
        pg.execute(STAGING)
    except psycopg.errors.InsufficientPrivilege:
        pg.execute("ROLLBACK TO SAVEPOINT bpestore_staging")
        return False
    pg.execute("RELEASE SAVEPOINT bpestore_staging")
    return True


def _upsert_copy(pg: Any, corpus_id: int, counts: Mapping[bytes, int], generation: int) -> None:
    """COPY the rows into the temporary table (``_staging_table``), then one upsert
    from it, ordered by the key of the unique index (sha256 of the word): the index
    is walked in order, and concurrent ingests lock rows in one order."""
    with pg.cursor() as cursor:
        with cursor.copy("COPY bpestore_staged_counts (word, count) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["bytea", "int8"])
            for item in counts.items():
                copy.write_row(item)
        cursor.execute(STAGED, (corpus_id, generation))
        cursor.execute("DROP TABLE bpestore_staged_counts")


def _many(raw: Any) -> Callable[[str, list[dict[str, Any]]], Any]:
    """``Writes.many`` on the driver's connection."""
    if isinstance(raw, sqlite3.Connection):
        return raw.executemany
    from .psycopg_reader import pyformat

    return lambda sql, rows: rows and raw.cursor().executemany(pyformat(sql), rows)


def _now(postgresql: bool) -> Any:
    now = datetime.now(timezone.utc)
    return now if postgresql else now.strftime("%Y-%m-%d %H:%M:%S.%f")  # as SQLAlchemy stores a DateTime in SQLite


@contextmanager
def _driver_writing(url: str) -> Iterator[Writes | None]:
    """A write transaction through the driver alone, committed at the end, rolled back
    on an error; None where this path does not apply."""
    uri = sqlite_uri(url)
    if uri is not None:
        if not uri.endswith("mode=rw"):  # read-only: the engine refuses the write
            yield None
            return
        with _sqlite_writing(uri) as db:
            yield db
        return
    from .psycopg_reader import conninfo

    info = conninfo(url)
    if info is None:
        yield None
        return
    with _psycopg_writing(info) as db:
        yield db


@contextmanager
def _sqlite_writing(uri: str) -> Iterator[Writes | None]:
    wait = lock_wait_seconds()
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=wait, isolation_level=None)
    except sqlite3.Error:
        yield None
        return
    try:
        _sqlite_pragmas(conn, None, False, max(1, round(wait * 1000)))
        conn.execute("BEGIN IMMEDIATE")  # the write lock, waited for as the engine waits
        if not revision_is_head(conn, sqlite3.Error):
            conn.execute("ROLLBACK")
            yield None
            return
        try:
            yield Writes(lambda sql, params: conn.execute(sql, params).fetchall(), conn.executemany, conn, False,
                         _now(False))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except OverflowError as exc:  # a number the driver cannot bind
        raise DatabaseError(f"a number too large for the database: {exc}") from exc
    except sqlite3.Error as exc:
        if "database is locked" in str(exc):
            raise gave_up_waiting("the SQLite database's write lock") from exc
        raise _database_error(exc) from exc
    finally:
        conn.close()


@contextmanager
def _psycopg_writing(info: str) -> Iterator[Writes | None]:
    try:
        import psycopg
    except ImportError:
        yield None
        return
    from .psycopg_reader import pyformat
    from .store import _lock_given_up

    try:
        conn = psycopg.connect(info, autocommit=True)
    except psycopg.Error:
        yield None
        return
    sql = ""
    many = _many(conn)

    def run(statement: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        nonlocal sql
        sql = statement
        cursor = conn.execute(pyformat(statement), params)
        return cursor.fetchall() if cursor.description else []

    def run_many(statement: str, rows: list[dict[str, Any]]) -> Any:
        nonlocal sql
        sql = statement
        return many(statement, rows)
    try:
        with conn:
            if not revision_is_head(conn, psycopg.Error):
                yield None
                return
            conn.execute(f"SET lock_timeout = {max(1, round(lock_wait_seconds() * 1000))}")
            conn.autocommit = False
            with conn.transaction():
                yield Writes(run, run_many, conn, True, _now(True))
    except psycopg.Error as exc:
        lock = _lock_given_up(SimpleNamespace(orig=exc, statement=sql))  # type: ignore[arg-type]
        raise (gave_up_waiting(lock) if lock else _database_error(exc)) from exc


def _database_error(exc: Exception) -> DatabaseError:
    return DatabaseError(f"database error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
