"""A small batch of counted sources written through the driver alone (``sqlite3``
on a SQLite file, psycopg on a ``postgresql+psycopg://`` store), both at ``HEAD``:
a fresh process that ingests a few small files writes them without importing
SQLAlchemy (on SQLite two thirds of what it paid before any work).

The same rows as the engine's path (``corpora._add_batch``: ``repository.lock_corpus``,
``present_shas``, ``wordcounts.add_generation``), in one transaction that takes the
lock on the corpus first (SQLite: the write lock, at BEGIN; PostgreSQL: the corpus'
row); a larger batch, a read-only store or another database go the engine's way
(``add_batch`` returns ``NOT_HERE``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any, Final, NamedTuple

from ..errors import DatabaseError, InvalidArgumentError
from ..records import Source
from ..spec import TokenizerSpec
from .db import _sqlite_pragmas, gave_up_waiting, lock_wait_seconds
from .reader import VersionReads, revision_is_head, sqlite_uri
from .reads import CorpusReads, in_list, sources_digest

SMALL_BATCH: Final = 10_000  # distinct words of a batch written this way
MAX_INTEGER: Final = 2**63 - 1
NOT_HERE: Final = -1  # this path does not apply: the engine writes

NEW_CORPUS = "INSERT INTO corpora (name, spec, created_at) VALUES (:name, :spec, :now) ON CONFLICT (name) DO NOTHING"
CORPUS = "SELECT id, spec FROM corpora WHERE name = :name"
PRESENT = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id AND sha256 {listed}"
PREVIOUS = ("SELECT number, n_sources, size_bytes, n_words FROM generations WHERE corpus_id = :corpus_id "
            "ORDER BY number DESC LIMIT 1")
# The rows a pinned generation reads that the batch changes: on SQLite a lookup per word;
# on PostgreSQL (whose unique index is on sha256(word)) one statement for the batch.
PINNED_ROW = ('SELECT word, "count", changed_in FROM word_counts '
              "WHERE corpus_id = :corpus_id AND word = :word AND changed_in <= :pin")
PINNED_ROWS = ('SELECT word, "count", changed_in FROM word_counts WHERE corpus_id = :corpus_id '
               "AND sha256(word) IN (SELECT sha256(w) FROM unnest(:words) AS w) AND changed_in <= :pin")
HISTORY = ('INSERT INTO word_count_history (corpus_id, word, "count", valid_from, valid_to) '
           "VALUES (:corpus_id, :word, :count, :valid_from, :valid_to)")
INGEST = ("INSERT INTO ingests (corpus_id, source, sha256, size_bytes, n_words, n_distinct, created_at, generation) "
          "VALUES (:corpus_id, :source, :sha256, :size_bytes, :n_words, :n_distinct, :now, :generation)")
UPSERT = ('INSERT INTO word_counts (corpus_id, word, "count", changed_in) '
          "VALUES (:corpus_id, :word, :count, :generation) ON CONFLICT {key} DO UPDATE "
          'SET "count" = word_counts."count" + excluded."count", changed_in = excluded.changed_in')
SPEC = "SELECT spec FROM corpora WHERE id = :corpus_id"
N_DISTINCT = "SELECT count(*) FROM word_counts WHERE corpus_id = :corpus_id"
SHAS = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id"
GENERATION = ("INSERT INTO generations (corpus_id, number, n_sources, size_bytes, n_words, n_distinct, digest, "
              "created_at) VALUES (:corpus_id, :number, :n_sources, :size_bytes, :n_words, :n_distinct, :digest, :now)")


class Conflict(Exception):
    """The corpus was just created with another spec by a concurrent ingest."""


class Writes(NamedTuple):
    """One write transaction: statements (SQL text, named parameters) and the database's ways."""

    run: Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]
    many: Callable[[str, list[dict[str, Any]]], Any]
    postgresql: bool
    now: Any  # the transaction's timestamp, as the engine's path writes it


def add_batch(url: str, corpus: str, spec: TokenizerSpec, counted: Sequence[Source], counts: Mapping[bytes, int],
              *, force: bool, writable: bool) -> tuple[set[str], int]:
    """Write ``counted`` and ``counts`` as the corpus' next generation (the corpus
    created if new), in one transaction; returns the sha256 of those already in the
    corpus (then nothing is written) and the generation (``NOT_HERE``: not written,
    this path does not apply). ``Conflict`` where the stored spec is another."""
    if not writable or len(counts) > SMALL_BATCH:
        return set(), NOT_HERE
    with writing(url) as db:
        if db is None:
            return set(), NOT_HERE
        db.run(NEW_CORPUS, {"name": corpus, "spec": spec.to_json(), "now": db.now})
        corpus_id, stored = db.run(CORPUS + (" FOR UPDATE" if db.postgresql else ""), {"name": corpus})[0]
        if TokenizerSpec.from_json(stored).corpus_key() != spec.corpus_key():
            raise Conflict(stored)
        present: set[str] = set()
        if not force:
            shas = [s.sha256 for s in counted]
            for start in range(0, len(shas), 500):
                listed, params = in_list("sha", shas[start:start + 500])
                present.update(row[0] for row in db.run(PRESENT.format(listed=listed),
                                                        {**params, "corpus_id": corpus_id}))
        if present:
            return present, NOT_HERE
        return present, _add_generation(db, corpus_id, counted, counts)


def _add_generation(db: Writes, corpus_id: int, sources: Sequence[Source], counts: Mapping[bytes, int]) -> int:
    """``wordcounts.add_generation`` through the driver: the history of pinned rows about
    to change, the sources, the upsert, the totals."""
    at = {"corpus_id": corpus_id}
    previous = db.run(PREVIOUS, at)
    last = previous[0] if previous else (0, 0, 0, 0)
    number, n_words = last[0] + 1, last[3] + sum(s.n_words for s in sources)
    if n_words > MAX_INTEGER:
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({MAX_INTEGER:,}); nothing was added", params=("files",))
    pinned = CorpusReads(VersionReads(db.run)).pinned_generations(corpus_id)
    if pinned:
        if db.postgresql:
            rows = [r for r in db.run(PINNED_ROWS, {**at, "words": list(counts), "pin": pinned[-1]})
                    if bytes(r[0]) in counts]
        else:
            rows = [r for word in counts for r in db.run(PINNED_ROW, {**at, "word": word, "pin": pinned[-1]})]
        db.many(HISTORY, [{**at, "word": bytes(word), "count": count, "valid_from": changed_in, "valid_to": number}
                          for word, count, changed_in in rows])
    db.many(INGEST, [{**at, "source": s.source, "sha256": s.sha256, "size_bytes": s.size_bytes,
                      "n_words": s.n_words, "n_distinct": s.n_distinct, "now": db.now, "generation": number}
                     for s in sources])
    key = "(corpus_id, sha256(word))" if db.postgresql else "(corpus_id, word)"
    db.many(UPSERT.format(key=key), [{**at, "word": word, "count": counts[word], "generation": number}
                                     for word in sorted(counts)])
    db.run(GENERATION, {
        **at, "number": number, "n_sources": last[1] + len(sources),
        "size_bytes": last[2] + sum(s.size_bytes for s in sources), "n_words": n_words,
        "n_distinct": db.run(N_DISTINCT, at)[0][0],
        "digest": sources_digest(db.run(SPEC, at)[0][0], (row[0] for row in db.run(SHAS, at))), "now": db.now})
    return number


@contextmanager
def writing(url: str) -> Iterator[Writes | None]:
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
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")  # as SQLAlchemy writes a DateTime there
    try:
        _sqlite_pragmas(conn, None, False, max(1, round(wait * 1000)))
        conn.execute("BEGIN IMMEDIATE")  # the write lock, waited for as the engine waits
        if not revision_is_head(conn, sqlite3.Error):
            conn.execute("ROLLBACK")
            yield None
            return
        try:
            yield Writes(lambda sql, params: conn.execute(sql, params).fetchall(), conn.executemany, False, now)
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

    def run(statement: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        nonlocal sql
        sql = statement
        cursor = conn.execute(pyformat(statement), params)
        return cursor.fetchall() if cursor.description else []

    def many(statement: str, rows: list[dict[str, Any]]) -> None:
        nonlocal sql
        sql = statement
        if rows:
            conn.cursor().executemany(pyformat(statement), rows)
    try:
        with conn:
            if not revision_is_head(conn, psycopg.Error):
                yield None
                return
            conn.execute(f"SET lock_timeout = {max(1, round(lock_wait_seconds() * 1000))}")
            conn.autocommit = False
            with conn.transaction():
                yield Writes(run, many, True, datetime.now(timezone.utc))
    except psycopg.Error as exc:
        lock = _lock_given_up(SimpleNamespace(orig=exc, statement=sql))  # type: ignore[arg-type]
        raise (gave_up_waiting(lock) if lock else _database_error(exc)) from exc


def _database_error(exc: Exception) -> DatabaseError:
    return DatabaseError(f"database error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
