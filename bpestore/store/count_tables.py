"""The SQL of word_counts and word_count_history: a corpus generation's counts read
(whole, streamed, the most frequent), added (the upsert), kept for the generations
versions pin (the history) and compacted, over one ``drivers.Transaction``.

Millions of distinct words are the common case (one large source), so rows in bulk
never go through a Python step per row where it can be helped: on SQLite many rows
to a statement, on PostgreSQL with psycopg a binary COPY.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from .. import native
from .drivers import Transaction, by_column

PARAMETERS: Final = 1000  # parameters of one SQLite statement of many rows
UPSERT_BATCH: Final = 20_000  # words whose rows are made at once
COUNT_CORE, _ = native.load("_countcore")  # interleave: the parameters of the upsert's statements in C
LOOKUPS: Final = 16  # pinned rows looked up word by word where the corpus has this many times the batch's words
HISTORY_ROW_BYTES = 8 + 4 + 4 + 4  # a history row's count, generations and corpus id

# (word, count) of a generation: the newest's rows, or those unchanged since it and the history valid in it.
NEWEST_COUNTS = 'SELECT word, "count" FROM word_counts WHERE corpus_id = :corpus_id'
COUNTS_AT = (NEWEST_COUNTS + ' AND changed_in <= :generation UNION ALL SELECT word, "count" FROM word_count_history '
             "WHERE corpus_id = :corpus_id AND valid_from <= :generation AND valid_to > :generation")
# ... with each word's ordinal (a history row's is its word's current row's: a word keeps it).
ORDINALS_AT = ('SELECT word, "count", ordinal FROM word_counts WHERE corpus_id = :corpus_id AND changed_in <= '
               ':generation UNION ALL SELECT h.word, h."count", w.ordinal FROM word_count_history AS h JOIN '
               "word_counts AS w ON w.corpus_id = h.corpus_id AND w.word = h.word WHERE h.corpus_id = :corpus_id "
               "AND h.valid_from <= :generation AND h.valid_to > :generation")
IN_FIRST_SEEN_ORDER = 'SELECT word, "count" FROM ({counts}) AS counted ORDER BY ordinal'
TOP_WORDS = 'SELECT word, "count" FROM ({counts}) AS counted ORDER BY "count" DESC, word LIMIT :n'
ANY_WORD = "SELECT 1 FROM ({counts}) AS counted LIMIT 1"
N_DISTINCT = "SELECT count(*) FROM word_counts WHERE corpus_id = :corpus_id"
CURRENT_ROWS = 'SELECT word, "count", changed_in FROM word_counts WHERE corpus_id = :corpus_id'
HISTORY_AT = ('SELECT word, "count" FROM word_count_history WHERE corpus_id = :corpus_id '
              "AND valid_from <= :generation AND valid_to > :generation")
# The rows a pinned generation reads: of the words looked up (on SQLite one lookup a word; on
# PostgreSQL, whose unique index is on sha256(word), one statement), or all of the corpus'.
PINNED_ROW = CURRENT_ROWS + " AND word = :word AND changed_in <= :pin"
PINNED_ROWS = (CURRENT_ROWS + " AND sha256(word) IN (SELECT sha256(w) FROM unnest(:words) AS w) "
               "AND changed_in <= :pin")
PINNED_SCAN = CURRENT_ROWS + " AND changed_in <= :pin"
HISTORY_COLUMNS = ("corpus_id", "word", "count", "valid_from", "valid_to")
# A word's ordinal is written with its first row and never changed.
UPSERT = ('INSERT INTO word_counts (corpus_id, word, "count", ordinal, changed_in) VALUES {rows} ON CONFLICT {key} '
          'DO UPDATE SET "count" = word_counts."count" + excluded."count", changed_in = excluded.changed_in')
STAGING = ("CREATE TEMPORARY TABLE bpestore_staged_counts (word bytea NOT NULL, count bigint NOT NULL, "
           "ordinal bigint) ON COMMIT DROP")
STAGED = ('INSERT INTO word_counts (corpus_id, word, "count", ordinal, changed_in) SELECT %s, word, "count", '
          "ordinal + %s, %s FROM bpestore_staged_counts ORDER BY sha256(word) ON CONFLICT (corpus_id, sha256(word)) "
          'DO UPDATE SET "count" = word_counts."count" + excluded."count", changed_in = excluded.changed_in')
# History rows no pinned generation reads.
UNNEEDED = ("FROM word_count_history WHERE corpus_id = :corpus_id AND NOT EXISTS (SELECT 1 FROM versions "
            "WHERE versions.corpus_id = :corpus_id AND versions.corpus_generation >= word_count_history.valid_from "
            "AND versions.corpus_generation < word_count_history.valid_to) "
            "AND NOT EXISTS (SELECT 1 FROM version_inputs WHERE version_inputs.corpus_id = :corpus_id "
            "AND version_inputs.corpus_generation >= "
            "word_count_history.valid_from AND version_inputs.corpus_generation < word_count_history.valid_to)")


def counts_of(corpus_id: int, generation: int | None) -> tuple[str, dict[str, Any]]:
    """(word, count) of a corpus' generation (None: the newest) as one statement, so
    it reads one snapshot. The generation must be kept (``readable_generation``)."""
    if generation is None:
        return NEWEST_COUNTS, {"corpus_id": corpus_id}
    return COUNTS_AT, {"corpus_id": corpus_id, "generation": generation}


def counts(tx: Transaction, corpus_id: int, generation: int | None = None, *,
           first_seen: bool = False) -> dict[bytes, int]:
    """Every word of a corpus' generation (None: the newest) with its count; ``first_seen``
    (a generation named): in the order the words first occurred."""
    statement = first_seen_counts(corpus_id, generation) if first_seen and generation is not None \
        else counts_of(corpus_id, generation)
    return {bytes(word): count for word, count in tx.run(*statement)}


def first_seen_counts(corpus_id: int, generation: int) -> tuple[str, dict[str, Any]]:
    """``counts_of`` a kept generation, its words in the order they first occurred."""
    return IN_FIRST_SEEN_ORDER.format(counts=ORDINALS_AT), {"corpus_id": corpus_id, "generation": generation}


def top_words(tx: Transaction, corpus_id: int, n: int, generation: int | None = None) -> list[tuple[bytes, int]]:
    """The ``n`` most frequent words of a corpus' generation with their counts (ties by bytes)."""
    sql, params = counts_of(corpus_id, generation)
    return [(bytes(word), count) for word, count in tx.run(TOP_WORDS.format(counts=sql), {**params, "n": n})]


def has_words(tx: Transaction, corpus_id: int, generation: int | None = None) -> bool:
    sql, params = counts_of(corpus_id, generation)
    return bool(tx.run(ANY_WORD.format(counts=sql), params))


def count_rows(tx: Transaction, corpus_id: int, generation: int | None = None, *,
               batch: int = 1 << 16, first_seen: bool = False) -> Iterable[tuple[bytes, int]]:
    """Every (word, count) of a corpus' generation (None: the newest), streamed
    from the driver's cursor ``batch`` rows at a time: for millions of words,
    never a dict of them all; ``first_seen`` (a generation named): in the order the
    words first occurred. The statement runs when iterated; iterate it inside the transaction."""
    sql, params = first_seen_counts(corpus_id, generation) if first_seen and generation is not None \
        else counts_of(corpus_id, generation)
    if tx.sqlite is not None:
        return _SqliteRows(tx.sqlite, sql, params)
    return _streamed(tx, sql, params, batch)


class _SqliteRows:
    """``count_rows`` on SQLite: iterated, sqlite3's own cursor, which steps the statement
    as rows are taken (no Python step a row: a fifth of reading 100,000 words)."""

    def __init__(self, conn: Any, sql: str, params: Mapping[str, Any]) -> None:
        self.conn, self.sql, self.params = conn, sql, params

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        return self.conn.execute(self.sql, self.params)


def _streamed(tx: Transaction, sql: str, params: Mapping[str, Any], batch: int) -> Iterator[tuple[bytes, int]]:
    if tx.raw is None:  # another driver: all at once
        for word, count in tx.run(sql, params):
            yield bytes(word), count
        return
    if tx.postgresql:  # a server-side cursor: rows come as they are read, not all at once
        from .drivers import pyformat

        cursor = tx.raw.cursor(name="bpestore_count_rows")
        sql = pyformat(sql)
    else:
        cursor = tx.raw.cursor()
    try:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(batch):
            yield from rows
    finally:
        cursor.close()


def n_distinct(tx: Transaction, corpus_id: int) -> int:
    return tx.one(N_DISTINCT, {"corpus_id": corpus_id})


def current_rows(tx: Transaction, corpus_id: int) -> dict[bytes, tuple[int, int]]:
    """Each word's row of the newest counts: (count, the generation that changed it)."""
    return {bytes(word): (count, changed_in)
            for word, count, changed_in in tx.run(CURRENT_ROWS, {"corpus_id": corpus_id})}


def history_at(tx: Transaction, corpus_id: int, generation: int) -> dict[bytes, int]:
    """The history rows valid in a generation: the counts of the words changed since."""
    return {bytes(word): count
            for word, count in tx.run(HISTORY_AT, {"corpus_id": corpus_id, "generation": generation})}


def add_history(tx: Transaction, rows: Sequence[tuple[int, bytes, int, int, int]]) -> None:
    """Insert history rows (corpus id, word, count, valid from, valid to)."""
    tx.insert("word_count_history", by_column(HISTORY_COLUMNS, rows))


def keep_history(tx: Transaction, corpus_id: int, counts: Mapping[bytes, int], newest_pin: int, number: int, *,
                 corpus_words: int | None = None) -> None:
    """Copy the rows of the words about to change that a pinned generation reads
    (changed in ``newest_pin`` or before) to word_count_history, valid until ``number``.
    A batch of few words for the corpus' ``corpus_words`` (distinct) looks its rows
    up; a larger one scans the corpus' rows once (a lookup per word costs more when
    a batch touches much of the corpus)."""
    at = {"corpus_id": corpus_id, "pin": newest_pin}
    if corpus_words is not None and len(counts) * LOOKUPS <= corpus_words:
        rows = tx.run(PINNED_ROWS, {**at, "words": list(counts)}) if tx.postgresql else \
            [row for word in counts for row in tx.run(PINNED_ROW, {**at, "word": word})]
    else:
        rows = tx.run(PINNED_SCAN, at)
    add_history(tx, [(corpus_id, word, count, changed_in, number) for word, count, changed_in
                     in ((bytes(r[0]), r[1], r[2]) for r in rows) if word in counts])


def upsert_counts(tx: Transaction, corpus_id: int, counts: Mapping[bytes, int], generation: int,
                  firsts: Mapping[bytes, int] | None = None, shift: int = 0) -> None:
    """Add counts to word_counts, marking the rows changed in ``generation``:
    INSERT ... ON CONFLICT DO UPDATE. A new word's ordinal is ``firsts[word] + shift``
    (no ``firsts``: none). On SQLite many rows to a statement, in word
    order (the index grows at its end); on PostgreSQL with psycopg, one binary COPY
    into a temporary table and one INSERT ... SELECT of it (a round trip per row
    cost 30 s per million words)."""
    if not counts:
        return
    if tx.postgresql and tx.raw is not None and _staging_table(tx.raw):
        _upsert_copy(tx.raw, corpus_id, counts, generation, firsts, shift)
        return
    # In word order: the index grows at its end, and concurrent upserts on PostgreSQL
    # lock rows in one order (sorting the words alone: comparing (word, count) tuples costs more).
    ordered = sorted(counts)
    if tx.sqlite is None:
        key = "(corpus_id, sha256(word))" if tx.postgresql else "(corpus_id, word)"
        tx.many(UPSERT.format(rows="(:corpus_id, :word, :count, :ordinal, :generation)", key=key),
                [{"corpus_id": corpus_id, "word": word, "count": counts[word], "generation": generation,
                  "ordinal": None if firsts is None else firsts[word] + shift} for word in ordered])
        return
    # The corpus id and generation are the same in every row: written into the statement
    # (ints), a row binds only its word and count.
    head, tail = UPSERT.split("{rows}")
    tail = tail.format(key="(corpus_id, word)")
    if firsts is None:
        row = f"({int(corpus_id)}, ?, ?, NULL, {int(generation)})"
        for start in range(0, len(ordered), UPSERT_BATCH):
            chunk = ordered[start:start + UPSERT_BATCH]
            _sqlite_groups(tx.sqlite, head, row, tail, interleave(chunk, counts, PARAMETERS // 2, start), 2)
        return
    row = f"({int(corpus_id)}, ?, ?, ?, {int(generation)})"
    for start in range(0, len(ordered), UPSERT_BATCH):
        chunk = ordered[start:start + UPSERT_BATCH]
        _sqlite_groups(tx.sqlite, head, row, tail,
                       interleave_firsts(chunk, counts, firsts, PARAMETERS // 3, shift, start), 3)


def interleave(words: list[bytes], counts: Mapping[bytes, int], per: int, at: int = 0
               ) -> list[Sequence[bytearray | int]]:
    """The parameters of statements of ``per`` rows (word, count, word, count, ...), the
    last statement's fewer: no tuple per row (in the counting core where built). Each word
    comes as a bytearray: sqlite3 binds it as the same blob without looking up an adapter
    for it (as it does for every bytes: a third of the rows' binding). ``at``: where the
    words begin in counts' own order, if they come in it (the core then looks none up).

    >>> interleave([b"a", b"b", b"c"], {b"a": 1, b"b": 2, b"c": 3}, 2)
    [(bytearray(b'a'), 1, bytearray(b'b'), 2), (bytearray(b'c'), 3)]
    """
    # A Counter too (the ingest's batches): its own lookup differs only for a word it lacks.
    if COUNT_CORE is not None and type(counts) in (dict, Counter):
        return COUNT_CORE.interleave(words, counts, per, None, 0, at)
    flat: list[bytearray | int | None] = [None] * (2 * len(words))
    flat[::2] = map(bytearray, words)
    flat[1::2] = map(counts.__getitem__, words)
    return [tuple(flat[i:i + 2 * per]) for i in range(0, len(flat), 2 * per)]  # type: ignore[arg-type]


def interleave_firsts(words: list[bytes], counts: Mapping[bytes, int], firsts: Mapping[bytes, int],
                     per: int, shift: int = 0, at: int = 0) -> list[Sequence[bytearray | int]]:
    """``interleave`` with each word's ordinal (plus ``shift``) after its count.

    >>> interleave_firsts([b"a", b"b"], {b"a": 1, b"b": 2}, {b"a": 7, b"b": 5}, 2, 10)
    [(bytearray(b'a'), 1, 17, bytearray(b'b'), 2, 15)]
    """
    if COUNT_CORE is not None and type(counts) in (dict, Counter) and type(firsts) is dict:
        return COUNT_CORE.interleave(words, counts, per, firsts, shift, at)
    flat: list[bytearray | int | None] = [None] * (3 * len(words))
    flat[::3] = map(bytearray, words)
    flat[1::3] = map(counts.__getitem__, words)
    flat[2::3] = map(shift.__add__, map(firsts.__getitem__, words)) if shift else map(firsts.__getitem__, words)
    return [tuple(flat[i:i + 3 * per]) for i in range(0, len(flat), 3 * per)]  # type: ignore[arg-type]


def _sqlite_groups(conn: Any, head: str, row: str, tail: str, groups: list[Sequence[Any]], width: int) -> None:
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


def _upsert_copy(pg: Any, corpus_id: int, counts: Mapping[bytes, int], generation: int,
                 firsts: Mapping[bytes, int] | None, shift: int) -> None:
    """COPY the rows into the temporary table (``_staging_table``), then one upsert
    from it, ordered by the key of the unique index (sha256 of the word): the index
    is walked in order, and concurrent ingests lock rows in one order."""
    with pg.cursor() as cursor:
        if firsts is None:
            with cursor.copy("COPY bpestore_staged_counts (word, count) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["bytea", "int8"])
                for item in counts.items():
                    copy.write_row(item)
        else:
            with cursor.copy("COPY bpestore_staged_counts (word, count, ordinal) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["bytea", "int8", "int8"])
                for word, count in counts.items():
                    copy.write_row((word, count, firsts[word]))
        cursor.execute(STAGED, (corpus_id, shift, generation))
        cursor.execute("DROP TABLE bpestore_staged_counts")


def compact(tx: Transaction, corpus_id: int) -> tuple[int, int]:
    """Delete the history rows no pinned generation reads; returns (rows, bytes) freed,
    the bytes as the rows' data (word, count, generations)."""
    rows, size = tx.run("SELECT count(*), COALESCE(SUM(length(word)), 0) " + UNNEEDED, {"corpus_id": corpus_id})[0]
    if rows:
        tx.run("DELETE " + UNNEEDED, {"corpus_id": corpus_id})
    return rows, int(size) + rows * HISTORY_ROW_BYTES
