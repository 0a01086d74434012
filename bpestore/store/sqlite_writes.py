"""A small batch of counted sources written through ``sqlite3``: a fresh process that
ingests a few small files into a SQLite store at ``HEAD`` writes them without
importing SQLAlchemy (a third of what it would pay before any work).

The same rows as the engine's path (``corpora.add_batch``: ``repository.lock_corpus``,
``present_shas``, ``wordcounts.add_generation``), in one transaction that takes the
write lock at its start; a larger batch, another database or a file at another
revision go the engine's way (``add_batch`` returns ``NOT_HERE``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Final

from ..errors import DatabaseError, InvalidArgumentError
from ..records import Source
from ..spec import TokenizerSpec
from .db import HEAD, _sqlite_pragmas, gave_up_waiting, lock_wait_seconds
from .reader import REVISION, VersionReads, sqlite_uri
from .reads import CorpusReads, in_list, sources_digest

SMALL_BATCH: Final = 10_000  # distinct words of a batch written this way
MAX_INTEGER: Final = 2**63 - 1
NOT_HERE: Final = -1  # this path does not apply: the engine writes

NEW_CORPUS = "INSERT INTO corpora (name, spec, created_at) VALUES (:name, :spec, :now) ON CONFLICT (name) DO NOTHING"
CORPUS = "SELECT id, spec FROM corpora WHERE name = :name"
PRESENT = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id AND sha256 {listed}"
PREVIOUS = ("SELECT number, n_sources, size_bytes, n_words FROM generations WHERE corpus_id = :corpus_id "
            "ORDER BY number DESC LIMIT 1")
PINNED_ROW = ('SELECT word, "count", changed_in FROM word_counts '
              "WHERE corpus_id = :corpus_id AND word = :word AND changed_in <= :pin")
HISTORY = ('INSERT INTO word_count_history (corpus_id, word, "count", valid_from, valid_to) '
           "VALUES (:corpus_id, :word, :count, :valid_from, :valid_to)")
INGEST = ("INSERT INTO ingests (corpus_id, source, sha256, size_bytes, n_words, n_distinct, created_at, generation) "
          "VALUES (:corpus_id, :source, :sha256, :size_bytes, :n_words, :n_distinct, :now, :generation)")
UPSERT = ('INSERT INTO word_counts (corpus_id, word, "count", changed_in) VALUES (?, ?, ?, ?) '
          'ON CONFLICT (corpus_id, word) DO UPDATE SET "count" = word_counts."count" + excluded."count", '
          "changed_in = excluded.changed_in")
SPEC = "SELECT spec FROM corpora WHERE id = :corpus_id"
N_DISTINCT = "SELECT count(*) FROM word_counts WHERE corpus_id = :corpus_id"
SHAS = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id"
GENERATION = ("INSERT INTO generations (corpus_id, number, n_sources, size_bytes, n_words, n_distinct, digest, "
              "created_at) VALUES (:corpus_id, :number, :n_sources, :size_bytes, :n_words, :n_distinct, :digest, :now)")


class Conflict(Exception):
    """The corpus was just created with another spec (``stored``) by a concurrent ingest."""


def add_batch(url: str, corpus: str, spec: TokenizerSpec, counted: Sequence[Source], counts: Mapping[bytes, int],
              *, force: bool) -> tuple[set[str], int]:
    """Write ``counted`` and ``counts`` as the corpus' next generation (the corpus
    created if new), in one transaction; returns the sha256 of those already in the
    corpus (then nothing is written) and the generation (``NOT_HERE``: not written,
    this path does not apply). ``Conflict`` where the stored spec is another."""
    uri = sqlite_uri(url)
    if uri is None or not uri.endswith("mode=rw") or len(counts) > SMALL_BATCH:
        return set(), NOT_HERE
    with writing(uri) as conn:
        if conn is None:
            return set(), NOT_HERE
        run = _runner(conn)
        now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")  # as SQLAlchemy writes a DateTime
        run(NEW_CORPUS, {"name": corpus, "spec": spec.to_json(), "now": now})
        corpus_id, stored = run(CORPUS, {"name": corpus})[0]
        if TokenizerSpec.from_json(stored).corpus_key() != spec.corpus_key():
            raise Conflict(stored)
        present: set[str] = set()
        if not force:
            shas = [s.sha256 for s in counted]
            for start in range(0, len(shas), 500):
                listed, params = in_list("sha", shas[start:start + 500])
                present.update(row[0] for row in run(PRESENT.format(listed=listed), {**params, "corpus_id": corpus_id}))
        if present:
            return present, NOT_HERE
        return present, _add_generation(conn, corpus_id, counted, counts, now)


def _add_generation(conn: sqlite3.Connection, corpus_id: int, sources: Sequence[Source],
                    counts: Mapping[bytes, int], now: str) -> int:
    """``wordcounts.add_generation``, through sqlite3: the history of pinned rows about
    to change (a lookup per word: the batch is small), the sources, the upsert, the totals."""
    run = _runner(conn)
    at = {"corpus_id": corpus_id}
    previous = run(PREVIOUS, at)
    last = previous[0] if previous else (0, 0, 0, 0)
    number, n_words = last[0] + 1, last[3] + sum(s.n_words for s in sources)
    if n_words > MAX_INTEGER:
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({MAX_INTEGER:,}); nothing was added", params=("files",))
    pinned = CorpusReads(VersionReads(run)).pinned_generations(corpus_id)
    if pinned:
        rows = [row for word in counts for row in run(PINNED_ROW, {**at, "word": word, "pin": pinned[-1]})]
        conn.executemany(HISTORY, [{**at, "word": word, "count": count, "valid_from": changed_in,
                                    "valid_to": number} for word, count, changed_in in rows])
    conn.executemany(INGEST, [
        {**at, "source": s.source, "sha256": s.sha256, "size_bytes": s.size_bytes, "n_words": s.n_words,
         "n_distinct": s.n_distinct, "now": now, "generation": number} for s in sources])
    conn.executemany(UPSERT, [(corpus_id, word, counts[word], number) for word in sorted(counts)])
    run(GENERATION, {
        **at, "number": number, "n_sources": last[1] + len(sources),
        "size_bytes": last[2] + sum(s.size_bytes for s in sources), "n_words": n_words,
        "n_distinct": run(N_DISTINCT, at)[0][0],
        "digest": sources_digest(run(SPEC, at)[0][0], (row[0] for row in run(SHAS, at))), "now": now})
    return number


def _runner(conn: sqlite3.Connection) -> Any:
    return lambda sql, params: conn.execute(sql, params).fetchall()


@contextmanager
def writing(uri: str) -> Any:
    """A write transaction on the SQLite file ``uri`` (the write lock taken at its
    start, waited for as the engine waits), committed at the end, rolled back on an
    error; yields None where the file is not at ``HEAD``."""
    wait = lock_wait_seconds()
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=wait, isolation_level=None)
    except sqlite3.Error:
        yield None
        return
    try:
        _sqlite_pragmas(conn, None, False, max(1, round(wait * 1000)))
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = conn.execute(REVISION).fetchone()
        except sqlite3.OperationalError:  # no such table: not a store at HEAD
            current = None
        if current is None or current[0] != HEAD:
            conn.execute("ROLLBACK")
            yield None
            return
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except OverflowError as exc:  # a number the driver cannot bind
        raise DatabaseError(f"a number too large for the database: {exc}") from exc
    except sqlite3.Error as exc:
        if "database is locked" in str(exc):
            raise gave_up_waiting("the SQLite database's write lock") from exc
        raise DatabaseError(f"database error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    finally:
        conn.close()
