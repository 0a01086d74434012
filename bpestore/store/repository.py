"""Every SQL statement bpestore runs: queries and writes over a Connection.

Nothing else lives here: the modules above (the Store facade, ``training``,
``corpora``, ``imports``) open the transactions, pass their connection in and
get plain data or ``bpestore.records`` back. Lookups that find nothing raise
``NotFoundError`` saying what exists.

Bulk rows (checkpoints, counts) go through the driver's own ``executemany``
on plain tuples: per row, SQLAlchemy's parameter handling would cost more
than the database (2.5x on SQLite).
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    Select,
    Table,
    delete,
    func,
    insert,
    literal,
    select,
    text,
    update,
)

from ..errors import InvalidArgumentError, NotFoundError
from ..records import CorpusInfo, Merge, MergeInfo, Source, VersionInfo
from ..spec import TokenizerSpec
from . import reads
from .schema import (
    aliases,
    corpora,
    generations,
    ingests,
    merges,
    tokenizers,
    tokens,
    versions,
    word_count_history,
    word_counts,
)
from .schema import version_facts as version_facts_table
from .vocabulary import Vocabulary  # also imported from here (migrations/versions/0004)

UPSERT_BATCH = 20_000
MAX_NAME = 200  # characters of a corpus, tokenizer or alias name
MAX_INTEGER = 2**63 - 1  # the largest integer SQLite and PostgreSQL's bigint hold
MAX_RANK = 2**31 - 1  # the largest rank (an INTEGER column)
ROWS_PER_STATEMENT = 500  # rows in one INSERT statement of the SQLite upsert (2 parameters each)
HISTORY_ROW_BYTES = 8 + 4 + 4 + 4  # a history row's count, generations and corpus id
NUMBER = reads.NUMBER  # a version number (ASCII digits only)


class Transactions(Protocol):
    """What the modules above the repository open connections with (the Store)."""

    url: str

    def reading(self) -> AbstractContextManager[Connection]: ...

    def writing(self) -> AbstractContextManager[Connection]: ...

    def session(self) -> AbstractContextManager[Connection]: ...


def check_name(name: str, what: str, param: str) -> None:
    """Names are stored as text: printable, '@'-free UTF-8, not only spaces, at
    most ``MAX_NAME`` characters (the columns' size on PostgreSQL)."""
    if len(name) > MAX_NAME:
        raise InvalidArgumentError(f"a {what} name is at most {MAX_NAME} characters, not {len(name):,}",
                                   params=(param,))
    if not name.strip() or "@" in name or not name.isprintable():
        raise InvalidArgumentError(f"a {what} name must be printable text, not blank, without '@', "
                                   f"not {name!r}", params=(param,))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"a {what} name must be valid text, not {name!r}",
                                   params=(param,)) from None


# -- corpora and word counts --------------------------------------------------
def corpus_spec(conn: Connection, name: str) -> TokenizerSpec | None:
    """The spec a corpus' words were made with, or None for a new corpus."""
    reads.unstorable(name, "corpus")
    spec = conn.execute(select(corpora.c.spec).where(corpora.c.name == name)).scalar()
    return None if spec is None else TokenizerSpec.from_json(spec)


def corpus_id(conn: Connection, name: str) -> int:
    reads.unstorable(name, "corpus")
    found = conn.execute(select(corpora.c.id).where(corpora.c.name == name)).scalar()
    if found is None:
        raise _no_corpus(conn, name)
    return found


def _no_corpus(conn: Connection, name: str) -> NotFoundError:
    return _not_found(conn, corpora, f"no corpus named {name!r}", "corpora", "no corpus yet: ingest text first")


def _not_found(conn: Connection, table: Table, message: str, known_as: str, none_yet: str) -> NotFoundError:
    """``message``, with the names the table does hold (or ``none_yet``)."""
    known = conn.execute(select(table.c.name).order_by(table.c.name)).scalars().all()
    return NotFoundError(f"{message} ({f'{known_as}: ' + ', '.join(known) if known else none_yet})")


def corpus_ref(conn: Connection, ref: str) -> tuple[int, int | None]:
    """The corpus id and generation of ``C@N``; ``C`` alone: the newest (None)."""
    name, at, tag = ref.partition("@")
    found = corpus_id(conn, name)
    if not at:
        return found, None
    newest = newest_generation(conn, found)
    if not NUMBER.fullmatch(tag):
        raise InvalidArgumentError(f"{ref!r}: after '@' comes a generation number "
                                   f"(e.g. {name}@{max(newest, 1)})")
    if not 1 <= int(tag) <= newest:
        known = f"generations: {name}@1 to {name}@{newest}" if newest else "no generation yet: ingest text first"
        raise NotFoundError(f"corpus {name!r} has no generation {int(tag)} ({known})")
    return found, int(tag)


def readable_generation(conn: Connection, ref: str) -> tuple[int, int]:
    """Like ``corpus_ref``, for reading counts: the generation (the newest when
    not named) must be kept; one that is not raises NotFoundError naming those
    that are."""
    found, generation = corpus_ref(conn, ref)
    newest = newest_generation(conn, found)
    if generation is None or generation == newest:
        return found, newest
    kept = kept_generations(conn, found)
    if generation not in kept:
        name = ref.partition("@")[0]
        raise NotFoundError(f"the word counts of {name}@{generation} are not kept (kept: "
                            f"{', '.join(f'{name}@{g}' for g in kept)}): only the newest generation and "
                            "those a version was trained on are")
    return found, generation


def read_counts(conn: Connection, ref: str, read: Callable[[int, int | None], Any]) -> Any:
    """``read(corpus_id, generation)`` for the corpus generation ``ref`` (``C``:
    the newest, read as None); the generation must be kept. An unpinned newest
    generation that another ingest replaced during the read raises NotFoundError."""
    found, generation = readable_generation(conn, ref)
    if "@" not in ref:
        return read(found, None)
    result = read(found, generation)
    if generation != newest_generation(conn, found) and generation not in pinned_generations(conn, found):
        raise NotFoundError(f"{ref} stopped being the newest generation while it was read, and no version "
                            "keeps it; read it again by name, or train on it to keep it")
    return result


def newest_generation(conn: Connection, corpus_id: int) -> int:
    """The number of a corpus' newest generation; 0 before its first source."""
    return conn.execute(select(func.coalesce(func.max(generations.c.number), 0))
                        .where(generations.c.corpus_id == corpus_id)).scalar_one()


def pinned_generations(conn: Connection, corpus_id: int) -> list[int]:
    """The generations of a corpus that versions were trained on, ascending."""
    return sorted(conn.execute(select(versions.c.corpus_generation).distinct().where(
        versions.c.corpus_id == corpus_id, versions.c.corpus_generation.is_not(None))).scalars())


def kept_generations(conn: Connection, corpus_id: int) -> list[int]:
    """The generations whose counts are readable: the pinned ones and the newest."""
    newest = newest_generation(conn, corpus_id)
    return sorted(set(pinned_generations(conn, corpus_id)) | ({newest} if newest else set()))


def corpus_infos(conn: Connection, name: str | None = None) -> list[CorpusInfo]:
    """Every corpus (or the one named) as of its newest generation, in three queries."""
    later = generations.alias("later")
    newest = select(func.max(later.c.number)).where(later.c.corpus_id == corpora.c.id).scalar_subquery()
    query = (select(corpora, generations.c.number, generations.c.n_sources, generations.c.size_bytes,
                    generations.c.n_words, generations.c.n_distinct, generations.c.digest,
                    generations.c.created_at.label("generated_at"))
             .select_from(corpora)
             .outerjoin(generations, (generations.c.corpus_id == corpora.c.id) & (generations.c.number == newest))
             .order_by(corpora.c.name))
    if name is not None:
        reads.unstorable(name, "corpus")
        query = query.where(corpora.c.name == name)
    rows = conn.execute(query).all()
    if name is not None and not rows:
        raise _no_corpus(conn, name)
    pins = _pins(conn, None if name is None else rows[0].id)
    added = _sources_added(conn, None if name is None else rows[0].id)
    return [_corpus_info(r, r.number or 0, pins, added, kept=True) for r in rows]


def corpus_log(conn: Connection, corpus_id: int) -> list[CorpusInfo]:
    """Every generation of a corpus, oldest first."""
    corpus = conn.execute(select(corpora).where(corpora.c.id == corpus_id)).one()
    rows = conn.execute(select(generations, generations.c.created_at.label("generated_at"))
                        .where(generations.c.corpus_id == corpus_id).order_by(generations.c.number)).all()
    pins, added = _pins(conn, corpus_id), _sources_added(conn, corpus_id)
    newest = rows[-1].number if rows else 0
    return [_corpus_info(corpus, r.number, pins, added, kept=r.number == newest or (corpus_id, r.number) in pins,
                         totals=r) for r in rows]


def _corpus_info(corpus: Any, generation: int, pins: Mapping[tuple[int, int], list[str]],
                 added: Mapping[tuple[int, int], int], *, kept: bool, totals: Any = None) -> CorpusInfo:
    totals = corpus if totals is None else totals
    if not generation:  # no source yet
        return CorpusInfo(name=corpus.name, spec=TokenizerSpec.from_json(corpus.spec), n_sources=0,
                          size_bytes=0, n_words=0, n_distinct=0, created_at=_utc(corpus.created_at),
                          digest=_digest(corpus.spec, []))
    return CorpusInfo(
        name=corpus.name, spec=TokenizerSpec.from_json(corpus.spec), n_sources=totals.n_sources,
        size_bytes=int(totals.size_bytes), n_words=int(totals.n_words), n_distinct=int(totals.n_distinct),
        created_at=_utc(corpus.created_at), digest=totals.digest, generation=generation,
        sources_added=added.get((corpus.id, generation), 0), kept=kept,
        pinned_by=tuple(pins.get((corpus.id, generation), ())), generated_at=_utc(totals.generated_at))


def _pins(conn: Connection, corpus_id: int | None) -> dict[tuple[int, int], list[str]]:
    """The refs of the versions trained on each (corpus id, generation)."""
    query = (select(versions.c.corpus_id, versions.c.corpus_generation, tokenizers.c.name, versions.c.number)
             .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
             .where(versions.c.corpus_generation.is_not(None)).order_by(tokenizers.c.name, versions.c.number))
    if corpus_id is not None:
        query = query.where(versions.c.corpus_id == corpus_id)
    pins: dict[tuple[int, int], list[str]] = {}
    for cid, generation, name, number in conn.execute(query):
        pins.setdefault((cid, generation), []).append(f"{name}@{number}")
    return pins


def _sources_added(conn: Connection, corpus_id: int | None) -> dict[tuple[int, int], int]:
    query = select(ingests.c.corpus_id, ingests.c.generation, func.count()).group_by(
        ingests.c.corpus_id, ingests.c.generation)
    if corpus_id is not None:
        query = query.where(ingests.c.corpus_id == corpus_id)
    return {(cid, generation): n for cid, generation, n in conn.execute(query)}


def generation_digest(conn: Connection, corpus_id: int, generation: int | None) -> str:
    """The digest of a generation (None: the newest)."""
    if generation is None:
        generation = newest_generation(conn, corpus_id)
    digest = conn.execute(select(generations.c.digest).where(
        generations.c.corpus_id == corpus_id, generations.c.number == generation)).scalar()
    if digest is None:  # no source yet
        return _digest(conn.execute(select(corpora.c.spec).where(corpora.c.id == corpus_id)).scalar_one(), [])
    return digest


def _digest(spec_json: str, shas: Iterable[str]) -> str:
    """What a corpus' counts were made from: its spec and every source's sha256."""
    h = hashlib.sha256(spec_json.encode())
    for sha in sorted(shas):
        h.update(sha.encode())
    return h.hexdigest()


def corpus_sources(conn: Connection, corpus_id: int, generation: int | None = None) -> list[Source]:
    """The sources counted into a corpus (up to a generation), oldest first."""
    query = select(ingests).where(ingests.c.corpus_id == corpus_id).order_by(ingests.c.id)
    if generation is not None:
        query = query.where(ingests.c.generation <= generation)
    return [Source(r.source, r.sha256, r.size_bytes, r.n_words, r.n_distinct,
                   created_at=_utc(r.created_at), generation=r.generation) for r in conn.execute(query)]


def source_shas(conn: Connection, corpus: str) -> set[str]:
    """The sha256 of every source already counted into a corpus (none if it is new)."""
    return set(conn.execute(select(ingests.c.sha256).join(corpora, corpora.c.id == ingests.c.corpus_id)
                            .where(corpora.c.name == corpus)).scalars())


def lock_corpus(conn: Connection, name: str, spec: TokenizerSpec) -> tuple[int, TokenizerSpec]:
    """Create the corpus with ``spec`` if it is new (race-free), lock its row until
    the transaction ends; returns its id and its stored spec."""
    conn.execute(_dialect(conn).insert(corpora).values(name=name, spec=spec.to_json(), created_at=_now())
                 .on_conflict_do_nothing(index_elements=[corpora.c.name]))
    found, stored = conn.execute(select(corpora.c.id, corpora.c.spec).where(corpora.c.name == name)
                                 .with_for_update()).one()
    return found, TokenizerSpec.from_json(stored)


def lock_corpus_row(conn: Connection, corpus_id: int) -> None:
    """Lock a corpus' row until the transaction ends: ingests into it wait (PostgreSQL;
    on SQLite every writer holds the database's write lock)."""
    conn.execute(select(corpora.c.id).where(corpora.c.id == corpus_id).with_for_update())


def present_shas(conn: Connection, corpus_id: int, shas: Sequence[str]) -> set[str]:
    """Which of these contents are already sources of the corpus."""
    found: set[str] = set()
    for start in range(0, len(shas), 500):
        found.update(conn.execute(select(ingests.c.sha256).where(
            ingests.c.corpus_id == corpus_id, ingests.c.sha256.in_(shas[start:start + 500]))).scalars())
    return found


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
    if n_words > MAX_INTEGER:  # then no word's count can pass it either (SQLite would make it a float)
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({MAX_INTEGER:,}); nothing was added", params=("files",))
    pinned = pinned_generations(conn, corpus_id)
    if pinned:
        _keep_history(conn, corpus_id, counts, pinned[-1], number)
    now = _now()
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
        digest=_digest(spec, conn.execute(select(ingests.c.sha256)
                                          .where(ingests.c.corpus_id == corpus_id)).scalars()),
        created_at=now))
    return number


def _keep_history(conn: Connection, corpus_id: int, counts: Mapping[bytes, int], newest_pin: int,
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
    _insert_rows(conn, word_count_history, copies)


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
    stmt = _dialect(conn).insert(word_counts)
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
    from sqlalchemy.exc import DBAPIError

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


def top_words(conn: Connection, corpus_id: int, n: int, generation: int | None = None) -> list[tuple[bytes, int]]:
    """The ``n`` most frequent words of a corpus' generation with their counts (ties by bytes)."""
    rows = _counts_of(corpus_id, generation).subquery()
    result = conn.execute(select(rows.c.word, rows.c["count"])
                          .order_by(rows.c["count"].desc(), rows.c.word).limit(n))
    return [(bytes(word), count) for word, count in result]


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


# -- versions ---------------------------------------------------------------
def runner(conn: Connection) -> reads.Run:
    """``conn`` as the Run that store/reads.py's statements take (SQL text, named parameters)."""
    def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return conn.execute(text(sql), params).all()
    return run


def resolve(conn: Connection, ref: str) -> int:
    """The version id of ``NAME`` (newest complete), ``NAME@N`` or ``NAME@ALIAS``
    (``reads.resolve``: the same statements where ``sqlite3`` reads the store)."""
    return reads.resolve(runner(conn), ref)


def newest_version(conn: Connection, name: str) -> int:
    """The id of a tokenizer's newest version, complete or not."""
    found = conn.execute(select(versions.c.id).join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                         .where(tokenizers.c.name == name)
                         .order_by(versions.c.number.desc()).limit(1)).scalar()
    if found is None:
        raise _no_tokenizer(conn, name)
    return found


def _no_tokenizer(conn: Connection, name: str) -> NotFoundError:
    return reads.no_tokenizer(runner(conn), name)


def version_info(conn: Connection, version_id: int) -> VersionInfo:
    return version_infos(conn, ids=[version_id])[0]


def version_infos(conn: Connection, *, name: str | None = None,
                  ids: Sequence[int] | None = None) -> list[VersionInfo]:
    """The versions of one tokenizer, or with these ids, or all (``reads.version_infos``)."""
    return reads.version_infos(runner(conn), name=name, ids=ids)


def _rows_of(table: Table) -> Any:
    """How many rows of ``table`` belong to the version of the enclosing query."""
    return select(func.count()).select_from(table).where(table.c.version_id == versions.c.id).scalar_subquery()


def new_version(conn: Connection, name: str, *, spec: TokenizerSpec, status: str, source: str,
                corpus_id: int | None = None, parent_id: int | None = None,
                target_vocab_size: int | None = None, target_merges: int | None = None,
                min_frequency: int = 1, max_token_length: int | None = None,
                corpus_digest: str | None = None, corpus_generation: int | None = None,
                fingerprint: str | None = None) -> int:
    """Insert the next version row of tokenizer ``name`` (created if new); returns its id."""
    check_name(name, "tokenizer", "name")
    # Create the tokenizer row if missing, then lock it, so two processes
    # never take the same version number (SQLite's write lock does this alone).
    conn.execute(_dialect(conn).insert(tokenizers).values(name=name, created_at=_now())
                 .on_conflict_do_nothing(index_elements=[tokenizers.c.name]))
    tokenizer_id = conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name)
                                .with_for_update()).scalar()
    number = (conn.execute(select(func.max(versions.c.number))
                           .where(versions.c.tokenizer_id == tokenizer_id)).scalar() or 0) + 1
    now = _now()
    inserted = conn.execute(insert(versions).values(
        tokenizer_id=tokenizer_id, number=number, parent_id=parent_id, corpus_id=corpus_id,
        spec=spec.to_json(), target_vocab_size=target_vocab_size, target_merges=target_merges,
        min_frequency=min_frequency, max_token_length=max_token_length, status=status, source=source,
        corpus_digest=corpus_digest, corpus_generation=corpus_generation, fingerprint=fingerprint,
        created_at=now, updated_at=now))
    return inserted.inserted_primary_key[0]  # type: ignore[index]  # None only for statements that insert nothing


def version_state(conn: Connection, version_id: int) -> str:
    """What changes when a version does: its fingerprint, or while training its merge count."""
    fingerprint = conn.execute(select(versions.c.fingerprint).where(versions.c.id == version_id)).scalar()
    if fingerprint is not None:
        return fingerprint
    n_merges = conn.execute(select(func.count()).select_from(merges).where(merges.c.version_id == version_id))
    return f"training:{n_merges.scalar()}"


def next_rank(conn: Connection, version_id: int) -> int:
    """The rank of a version's next merge (its merges are ranks 0, 1, ...): one
    index lookup, where counting them reads every one (a checkpoint asks each time)."""
    return conn.execute(select(func.coalesce(func.max(merges.c.rank) + 1, 0))
                        .where(merges.c.version_id == version_id)).scalar_one()


def try_lock_training(conn: Connection, version_id: int) -> bool:
    """Claim the right to train a version for as long as ``conn`` stays open; False
    if another session holds it. PostgreSQL only (a session advisory lock);
    elsewhere True: the checkpoint's merge count check is the guard there."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.execute(select(func.pg_try_advisory_lock(_training_lock_space(), version_id))).scalar())


def try_lock_training_xact(conn: Connection, version_id: int) -> bool:
    """``try_lock_training`` until the transaction ends (PostgreSQL; elsewhere True)."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.execute(select(func.pg_try_advisory_xact_lock(_training_lock_space(), version_id))).scalar())


def unlock_training(conn: Connection, version_id: int) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_unlock(_training_lock_space(), version_id)))


def _training_lock_space() -> Any:
    """Advisory locks are database-wide: the schema's name keeps stores in other schemas apart."""
    return func.hashtext(func.concat("bpestore train ", func.current_schema()))


def record_checkpoint(conn: Connection, version_id: int, fingerprint: str | None = None) -> None:
    """Stamp a version's ``updated_at``; with its fingerprint, mark it complete."""
    values: dict[str, Any] = {"updated_at": _now()}
    if fingerprint is not None:
        values.update(status="complete", fingerprint=fingerprint)
    conn.execute(update(versions).where(versions.c.id == version_id).values(**values))


def set_alias(conn: Connection, ref: str, alias: str) -> int:
    """Point ``NAME@ALIAS`` at the version ``ref`` (moving it if it exists); returns its id."""
    check_name(alias, "alias", "alias")
    if NUMBER.fullmatch(alias):
        raise InvalidArgumentError(f"an alias cannot be a number ({alias!r} would read as a version)",
                                   params=("alias",))
    version_id = resolve(conn, ref)
    tokenizer_id = conn.execute(select(versions.c.tokenizer_id).where(versions.c.id == version_id)).scalar()
    stmt = _dialect(conn).insert(aliases).values(tokenizer_id=tokenizer_id, name=alias, version_id=version_id)
    conn.execute(stmt.on_conflict_do_update(index_elements=[aliases.c.tokenizer_id, aliases.c.name],
                                            set_={"version_id": version_id}))
    return version_id


# -- tokens and merges --------------------------------------------------------
def vocabulary(conn: Connection, version_id: int) -> Vocabulary:
    """A version's vocabulary read from its token and merge rows."""
    return Vocabulary.from_rows(conn.execute(select(tokens.c.id, tokens.c.bytes, tokens.c.kind)
                                             .where(tokens.c.version_id == version_id).order_by(tokens.c.id)),
                                conn.execute(_merges_of(version_id)))


def version_facts(conn: Connection, version_id: int) -> reads.FactsRow | None:
    """The version_facts row of a version, with its fingerprint; None where it has none."""
    return reads.facts_row(runner(conn), version_id)


def add_version_facts(conn: Connection, version_id: int, *, format: int, packed: bytes,  # noqa: A002
                      fast_problem: str | None, digest: str) -> None:
    conn.execute(insert(version_facts_table).values(version_id=version_id, format=format, packed=packed,
                                                    fast_problem=fast_problem, digest=digest))


def _merges_of(version_id: int) -> Select:
    return (select(merges.c.rank, merges.c.left_id, merges.c.right_id, merges.c.token_id, merges.c["count"])
            .where(merges.c.version_id == version_id).order_by(merges.c.rank))


def add_tokens(conn: Connection, version_id: int, rows: Iterable[tuple[int, bytes, str]]) -> None:
    """Insert tokens given as (id, bytes, kind)."""
    _insert_rows(conn, tokens, [(version_id, token_id, data, kind) for token_id, data, kind in rows])


def add_merges(conn: Connection, version_id: int, merge_rows: Iterable[Merge]) -> None:
    _insert_rows(conn, merges, [(version_id, m.rank, m.left, m.right, m.token, m.count) for m in merge_rows])


def _insert_rows(conn: Connection, table: Table, rows: list[tuple]) -> None:
    """INSERT rows (tuples in the table's column order) with the driver's executemany."""
    if not rows:
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(c.name for c in table.columns)
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({columns}) "
                         f"VALUES ({', '.join([mark] * len(table.columns))})", rows)


def copy_merges(conn: Connection, source_id: int, target_id: int, *, n_merges: int | None = None,
                token_ids: tuple[int, int | None] = (0, None)) -> None:
    """Copy version ``source_id``'s first ``n_merges`` merges (all when None) and its
    tokens with ids in ``token_ids`` (start, end; end None: all) into ``target_id``."""
    start, end = token_ids
    token_rows = select(literal(target_id), tokens.c.id, tokens.c.bytes, tokens.c.kind).where(
        tokens.c.version_id == source_id, tokens.c.id >= start)
    if end is not None:
        token_rows = token_rows.where(tokens.c.id < end)
    merge_rows = select(literal(target_id), merges.c.rank, merges.c.left_id, merges.c.right_id, merges.c.token_id,
                        merges.c["count"]).where(merges.c.version_id == source_id)
    if n_merges is not None:
        merge_rows = merge_rows.where(merges.c.rank < n_merges)
    conn.execute(insert(tokens).from_select(["version_id", "id", "bytes", "kind"], token_rows))
    conn.execute(insert(merges).from_select(
        ["version_id", "rank", "left_id", "right_id", "token_id", "count"], merge_rows))


def longest_equal_run(conn: Connection, version_id: int) -> tuple[VersionInfo, list[Merge]] | None:
    """The other version that trained like this one, with the most merges, and its merges.

    Like this one: a root version trained by bpestore on the same corpus with
    the same counts (corpus digest), spec, min_frequency and max_token_length.
    None when there is none with a merge.
    """
    new = versions.alias("new")
    n_merges = _rows_of(merges)
    best = conn.execute(
        select(versions.c.id).join(new, new.c.id == version_id).where(
            versions.c.id != version_id, versions.c.source == "trained", versions.c.parent_id.is_(None),
            versions.c.corpus_id == new.c.corpus_id, versions.c.corpus_digest == new.c.corpus_digest,
            versions.c.spec == new.c.spec, versions.c.min_frequency == new.c.min_frequency,
            versions.c.max_token_length.is_not_distinct_from(new.c.max_token_length), n_merges > 0)
        .order_by(n_merges.desc(), versions.c.id).limit(1)).scalar()
    if best is None:
        return None
    return version_info(conn, best), list(itertools.starmap(Merge, conn.execute(_merges_of(best))))


# -- queries over stored vocabularies, and removal ------------------------------
IN_LIST = 500  # ids per IN (...) list


def token_rows(conn: Connection, version_id: int, *, prefix: bytes = b"",
               match: Callable[[bytes], bool] | None = None) -> list[tuple[int, bytes, str]]:
    """The tokens of a version as (id, bytes, kind), by id: those starting with
    ``prefix`` and (if given) for whose bytes ``match`` is true. On SQLite
    ``match`` runs inside the query, so rows that fail it are never fetched."""
    query = (select(tokens.c.id, tokens.c.bytes, tokens.c.kind)
             .where(tokens.c.version_id == version_id).order_by(tokens.c.id))
    if prefix:
        query = query.where(func.substr(tokens.c.bytes, 1, len(prefix)) == prefix)
    in_query = match is not None and conn.dialect.name == "sqlite"
    if in_query:
        conn.connection.driver_connection.create_function(  # type: ignore[union-attr]
            "bpestore_match", 1, match, deterministic=True)
        query = query.where(func.bpestore_match(tokens.c.bytes) == 1)
    rows = [(token_id, bytes(data), kind) for token_id, data, kind in conn.execute(query).all()]
    return rows if match is None or in_query else [r for r in rows if match(r[1])]


def first_merges(conn: Connection, version_id: int, token_ids: Collection[int] | None = None
                 ) -> dict[int, tuple[int, int]]:
    """The (rank, count) of the merge that first made each token (of ``token_ids``,
    or all). A few ids are looked up; many read every merge once."""
    query = (select(merges.c.token_id, merges.c.rank, merges.c["count"])
             .where(merges.c.version_id == version_id).order_by(merges.c.rank))
    if token_ids is not None and len(token_ids) <= IN_LIST:
        query = query.where(merges.c.token_id.in_(list(token_ids)))
    made: dict[int, tuple[int, int]] = {}
    for token_id, rank, count in conn.execute(query):
        made.setdefault(token_id, (rank, count))
    return made


def merge_infos(conn: Connection, version_id: int, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
    """A version's merges from rank ``start`` on (``limit`` of them), with the bytes of each pair."""
    left, right = tokens.alias("left_token"), tokens.alias("right_token")
    query = (select(merges.c.rank, merges.c.left_id, merges.c.right_id, merges.c.token_id, merges.c["count"],
                    left.c.bytes, right.c.bytes)
             .join(left, (left.c.version_id == merges.c.version_id) & (left.c.id == merges.c.left_id))
             .join(right, (right.c.version_id == merges.c.version_id) & (right.c.id == merges.c.right_id))
             .where(merges.c.version_id == version_id, merges.c.rank >= start).order_by(merges.c.rank))
    if limit is not None:
        query = query.limit(limit)
    return [MergeInfo(rank, a, b, token, count, bytes(data_a), bytes(data_b))
            for rank, a, b, token, count, data_a, data_b in conn.execute(query)]


def descendants(conn: Connection, version_id: int) -> list[int]:
    """The versions extending ``version_id``, their extensions and so on: children before grandchildren."""
    found: list[int] = []
    frontier = [version_id]
    while frontier:
        frontier = list(conn.execute(select(versions.c.id).where(versions.c.parent_id.in_(frontier))
                                     .order_by(versions.c.id)).scalars())
        found += frontier
    return found


def alias_refs(conn: Connection, version_ids: Sequence[int]) -> list[str]:
    """The aliases pointing at these versions, as ``NAME@ALIAS``."""
    return list(conn.execute(select(tokenizers.c.name + "@" + aliases.c.name)
                             .join(tokenizers, tokenizers.c.id == aliases.c.tokenizer_id)
                             .where(aliases.c.version_id.in_(version_ids))
                             .order_by(tokenizers.c.name, aliases.c.name)).scalars())


def alias_target(conn: Connection, ref: str) -> int | None:
    """The version an alias ``NAME@ALIAS`` points at, or None when ``ref`` names no alias."""
    name, _, tag = ref.partition("@")
    return conn.execute(select(aliases.c.version_id).join(tokenizers, tokenizers.c.id == aliases.c.tokenizer_id)
                        .where(tokenizers.c.name == name, aliases.c.name == tag)).scalar()


def delete_alias(conn: Connection, ref: str) -> None:
    name, _, tag = ref.partition("@")
    tokenizer_id = select(tokenizers.c.id).where(tokenizers.c.name == name).scalar_subquery()
    conn.execute(delete(aliases).where(aliases.c.tokenizer_id == tokenizer_id, aliases.c.name == tag))


def delete_versions(conn: Connection, version_ids: Sequence[int]) -> None:
    """Delete versions (extensions after their parents in ``version_ids``), their
    merges, tokens and aliases, and the tokenizers left without a version."""
    owners = list(conn.execute(select(versions.c.tokenizer_id).distinct()
                               .where(versions.c.id.in_(version_ids))).scalars())
    for table in (aliases, merges, tokens):
        conn.execute(delete(table).where(table.c.version_id.in_(version_ids)))
    for version_id in reversed(version_ids):  # an extension goes before its parent
        conn.execute(delete(versions).where(versions.c.id == version_id))
    has_version = select(versions.c.id).where(versions.c.tokenizer_id == tokenizers.c.id).exists()
    conn.execute(delete(tokenizers).where(tokenizers.c.id.in_(owners), ~has_version))


# -- helpers -------------------------------------------------------------------
def _dialect(conn: Connection) -> Any:
    """The SQLAlchemy dialect module with INSERT ... ON CONFLICT for this database."""
    if conn.dialect.name not in ("sqlite", "postgresql"):
        raise InvalidArgumentError(f"bpestore supports SQLite and PostgreSQL, not {conn.dialect.name}",
                                   params=("db",))
    # Imported here: the PostgreSQL dialect alone costs a tenth of a query's start-up.
    return importlib.import_module(f"sqlalchemy.dialects.{conn.dialect.name}")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every timestamp bpestore writes is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
