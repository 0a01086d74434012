"""Reading versions: one set of reads (``VersionReads``: SQL text with named
parameters, which both drivers take), run over one transaction by one of two
readers, chosen when the store opens (``open_reader``):

* ``SqliteReader``: the standard ``sqlite3`` on a SQLite file at schema ``HEAD``,
  read-only, importing neither SQLAlchemy nor Alembic (a fresh process that lists
  versions, looks up a token or encodes starts in a fraction of the time);
* ``SqlAlchemyReader``: the store's engine, on every database (the modules that
  write read versions with ``VersionReads.over(conn)`` in their own transactions).

Same statements, same answers and errors. Nothing of SQLAlchemy, the encoder or
the records is imported until a call needs it.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

from ..errors import DatabaseError, InvalidArgumentError, NotFoundError
from ..spec import EncoderFacts, TokenizerSpec
from .db import HEAD, lock_wait_seconds
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ..encoder import Tokenizer
    from ..records import Merge, VersionInfo

# Executes one statement (SQL text, named parameters) and returns its rows as sequences.
Run = Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]

NUMBER = re.compile(r"[0-9]+")  # a version number (ASCII digits only)

REVISION = "SELECT version_num FROM alembic_version"
TOKENIZER_ID = "SELECT id FROM tokenizers WHERE name = :name"
TOKENIZER_NAMES = "SELECT name FROM tokenizers ORDER BY name"
VERSIONS_OF = "SELECT id, number, status FROM versions WHERE tokenizer_id = :tokenizer_id ORDER BY number"
ALIAS_TARGET = "SELECT version_id FROM aliases WHERE tokenizer_id = :tokenizer_id AND name = :name"
VERSION_ROW = ("SELECT tokenizers.name, versions.number, versions.spec, versions.status, versions.fingerprint "
               "FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
               "WHERE versions.id = :version_id")
SNAPSHOT_ROW = ("SELECT version_facts.format, version_facts.packed, version_facts.fast_problem, "
             "version_facts.digest, versions.fingerprint "
             "FROM version_facts JOIN versions ON versions.id = version_facts.version_id "
             "WHERE version_facts.version_id = :version_id")
VERSION_INFOS = (
    "SELECT versions.id, tokenizers.name, versions.number, versions.status, versions.source, "
    "(SELECT count(*) FROM tokens WHERE tokens.version_id = versions.id), "
    "(SELECT count(*) FROM merges WHERE merges.version_id = versions.id), "
    "versions.target_vocab_size, versions.target_merges, COALESCE(corpora.name, versions.corpus_name), "
    "versions.parent_id, "
    "parent_tokenizer.name, parent.number, versions.spec, versions.min_frequency, versions.max_token_length, "
    "versions.corpus_digest, versions.fingerprint, versions.created_at, versions.updated_at, "
    "versions.corpus_generation, versions.corpus_name "
    "FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
    "LEFT JOIN corpora ON corpora.id = versions.corpus_id "
    "LEFT JOIN versions AS parent ON parent.id = versions.parent_id "
    "LEFT JOIN tokenizers AS parent_tokenizer ON parent_tokenizer.id = parent.tokenizer_id "
    "{where} ORDER BY tokenizers.name, versions.number")
ALIASES_OF = ("SELECT aliases.version_id, aliases.name FROM aliases "
              "JOIN versions ON versions.id = aliases.version_id "
              "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id {where} ORDER BY aliases.name")
TOKEN_ROWS = "SELECT id, bytes, kind FROM tokens WHERE version_id = :version_id ORDER BY id"
MERGE_ROWS = ('SELECT "rank", left_id, right_id, token_id, "count" FROM merges '
              'WHERE version_id = :version_id ORDER BY "rank"')
N_MERGES = "SELECT count(*) FROM merges WHERE version_id = :version_id"
# The other root version trained on the same counts with the same spec and limits, with the most merges.
EQUAL_RUN = (
    "SELECT versions.id FROM versions JOIN versions AS new ON new.id = :version_id "
    "WHERE versions.id <> :version_id AND versions.source = 'trained' AND versions.parent_id IS NULL "
    "AND versions.corpus_id = new.corpus_id AND versions.corpus_digest = new.corpus_digest "
    "AND versions.spec = new.spec AND versions.min_frequency = new.min_frequency "
    "AND (versions.max_token_length = new.max_token_length "
    "OR versions.max_token_length IS NULL AND new.max_token_length IS NULL) "
    "AND EXISTS (SELECT 1 FROM merges WHERE merges.version_id = versions.id) "
    "ORDER BY (SELECT count(*) FROM merges WHERE merges.version_id = versions.id) DESC, versions.id LIMIT 1")
# A complete version's merges, where its snapshot says all of them pass tiktoken's check; none otherwise.
PASSING_MERGES = ("SELECT (SELECT count(*) FROM merges WHERE version_id = :version_id) FROM version_facts "
                  "WHERE version_id = :version_id AND fast_problem IS NULL")



def unstorable(name: str, what: str) -> None:
    """NotFoundError for a name no store can hold (a NUL character, which PostgreSQL's
    text refuses to be even compared with): the same answer on both databases."""
    if "\0" in name:
        raise NotFoundError(f"no {what} named {name!r}: names hold no NUL character")

MAX_NAME = 200  # characters of a corpus, tokenizer or alias name


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


class VersionRow(NamedTuple):
    """What loading a version needs of its row."""

    name: str
    number: int
    spec: str  # TokenizerSpec JSON
    status: str
    fingerprint: str | None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.number}"

    @property
    def complete(self) -> bool:
        """It never changes again, and has (or should have) its snapshot."""
        return self.status == "complete" and self.fingerprint is not None


class SnapshotRow(NamedTuple):
    """A version's stored snapshot (its row of version_facts), with the fingerprint its digest covers."""

    format: int
    packed: bytes
    fast_problem: str | None
    digest: str
    fingerprint: str | None

    def checked(self, version_id: int) -> tuple[Vocabulary, EncoderFacts]:
        from .snapshot import checked  # its digest and unpacking: what listing versions does without

        return checked(self, version_id)


class VersionReads:
    """The reads of versions, over one transaction (``run``)."""

    def __init__(self, run: Run, sqlite: sqlite3.Connection | None = None) -> None:
        self.run = run
        self.sqlite = sqlite  # the sqlite3 connection beneath, on SQLite (for functions a query calls)

    @classmethod
    def over(cls, conn: Connection) -> VersionReads:
        """The reads over a SQLAlchemy connection's transaction."""
        from sqlalchemy import text  # loaded already: the caller holds a connection

        sqlite = conn.connection.driver_connection if conn.dialect.name == "sqlite" else None
        return cls(lambda sql, params: conn.execute(text(sql), params).all(), sqlite)

    def resolve(self, ref: str) -> int:
        """The version id of ``NAME`` (newest complete), ``NAME@N`` or ``NAME@ALIAS``."""
        name, at, tag = ref.partition("@")
        if at and not tag:
            raise InvalidArgumentError(f"{ref!r}: after '@' comes a version number or an alias "
                                       f"(e.g. {name}@1)")
        unstorable(ref, "version")
        found = self.run(TOKENIZER_ID, {"name": name})
        if not found:
            raise self.no_tokenizer(name)
        tokenizer_id = found[0][0]
        rows = self.run(VERSIONS_OF, {"tokenizer_id": tokenizer_id})
        numbers = ", ".join(f"{name}@{number}" for _, number, _ in rows)
        if not tag:
            complete = [version_id for version_id, _, status in rows if status == "complete"]
            if not complete:
                raise NotFoundError(f"{name} has no complete version yet ({numbers}); name one, "
                                    f"or resume {name}@N to finish it")
            return complete[-1]
        if NUMBER.fullmatch(tag):
            for version_id, number, _ in rows:
                if number == int(tag):
                    return version_id
            raise NotFoundError(f"{name} has no version {tag} (versions: {numbers})")
        target = self.run(ALIAS_TARGET, {"tokenizer_id": tokenizer_id, "name": tag})
        if not target:
            raise NotFoundError(f"{name} has no version or alias {tag!r} (versions: {numbers})")
        return target[0][0]

    def no_tokenizer(self, name: str) -> NotFoundError:
        """The error for an unknown tokenizer name, naming those there are."""
        known = [row[0] for row in self.run(TOKENIZER_NAMES, {})]
        return NotFoundError(f"no tokenizer named {name!r} "
                             f"({'known: ' + ', '.join(known) if known else 'none yet: train or import one'})")

    def row(self, version_id: int) -> VersionRow:
        return VersionRow(*self.run(VERSION_ROW, {"version_id": version_id})[0])

    def info(self, version_id: int) -> VersionInfo:
        return self.infos(ids=[version_id])[0]

    def infos(self, *, name: str | None = None, ids: Sequence[int] | None = None) -> list[VersionInfo]:
        """The versions of tokenizer ``name``, or with these ids, or all; by name and
        number. Two statements however many versions there are."""
        from ..records import VersionInfo  # listing versions needs the records; loading one does not

        params: dict[str, Any] = {}
        where = ""
        if name is not None:
            unstorable(name, "tokenizer")
            where, params = "WHERE tokenizers.name = :name", {"name": name}
        elif ids is not None:
            params = {f"id{i}": version_id for i, version_id in enumerate(ids)}
            where = f"WHERE versions.id IN ({', '.join(':' + key for key in params) or 'NULL'})"
        rows = self.run(VERSION_INFOS.format(where=where), params)
        if name is not None and not rows and not self.run(TOKENIZER_ID, {"name": name}):
            raise self.no_tokenizer(name)
        aliases_of: dict[int, list[str]] = {}
        for version_id, alias in self.run(ALIASES_OF.format(where=where), params):
            aliases_of.setdefault(version_id, []).append(alias)
        return [VersionInfo(
            id=v[0], name=v[1], number=v[2], status=v[3], source=v[4], vocab_size=v[5], n_merges=v[6],
            target_vocab_size=v[7], target_merges=v[8], corpus=v[9],
            parent=None if v[10] is None else f"{v[11]}@{v[12]}", spec=TokenizerSpec.from_json(v[13]),
            min_frequency=v[14], max_token_length=v[15], corpus_digest=v[16], fingerprint=v[17],
            created_at=moment(v[18]), updated_at=moment(v[19]), aliases=tuple(aliases_of.get(v[0], ())),
            corpus_generation=v[20], without_counts=v[21] is not None) for v in rows]

    def snapshot_row(self, version_id: int) -> SnapshotRow | None:
        """A complete version's stored snapshot, unchecked; None where it has none
        (a version still training)."""
        rows = self.run(SNAPSHOT_ROW, {"version_id": version_id})
        return SnapshotRow(*rows[0]) if rows else None

    def snapshot(self, version_id: int) -> tuple[Vocabulary, EncoderFacts] | None:
        """A complete version's vocabulary and facts from its stored snapshot, checked;
        None where it has none (a version still training)."""
        row = self.snapshot_row(version_id)
        return None if row is None else row.checked(version_id)

    def rows_vocabulary(self, version_id: int) -> Vocabulary:
        """A version's vocabulary read from its token and merge rows."""
        return Vocabulary.from_rows(self.run(TOKEN_ROWS, {"version_id": version_id}),
                                    self.run(MERGE_ROWS, {"version_id": version_id}))

    def vocabulary(self, version_id: int) -> Vocabulary:
        """A version's vocabulary: from its snapshot where it is complete, else from its rows."""
        found = self.snapshot(version_id)
        return found[0] if found is not None else self.rows_vocabulary(version_id)

    def state(self, version_id: int, row: VersionRow) -> str:
        """What changes when a version does: its fingerprint, or while training its merge count."""
        if row.fingerprint is not None:
            return row.fingerprint
        return f"training:{self.run(N_MERGES, {'version_id': version_id})[0][0]}"

    def longest_equal_run(self, version_id: int) -> tuple[int, list[Merge]] | None:
        """The other version that trained like this one, with the most merges, and its merges.

        Like this one: a root version trained by bpestore on the same corpus with
        the same counts (corpus digest), spec, min_frequency and max_token_length.
        None when there is none with a merge.
        """
        from ..records import Merge

        found = self.run(EQUAL_RUN, {"version_id": version_id})
        if not found:
            return None
        donor = found[0][0]
        return donor, [Merge(*row) for row in self.run(MERGE_ROWS, {"version_id": donor})]

    def passing_merges(self, version_id: int) -> int:
        """How many first merges of a complete version are known to pass tiktoken's
        check: all of them where its snapshot says so, else none."""
        rows = self.run(PASSING_MERGES, {"version_id": version_id})
        return rows[0][0] if rows else 0


def moment(value: datetime | str) -> datetime:
    """A stored timestamp as an aware datetime: PostgreSQL's as it comes, SQLite's
    from its text; every timestamp bpestore writes is UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


class TokenizerCache:
    """Tokenizers loaded in this process, by (database URL, version id, version
    state); the state changes with the version, so a changed version is never
    served stale. When full, the oldest goes. Safe to share between threads
    (a web server's requests)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._loaded: dict[tuple[str, int, str], Tokenizer] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str]) -> Tokenizer | None:
        with self._lock:
            return self._loaded.get(key)

    def put(self, key: tuple[str, int, str], tokenizer: Tokenizer) -> None:
        with self._lock:
            if key not in self._loaded and len(self._loaded) >= self.size:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[key] = tokenizer

    def clear(self) -> None:
        with self._lock:
            self._loaded.clear()


class VersionReader:
    """Versions read in transactions of their own (``reading``, which each reader makes)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def reading(self) -> AbstractContextManager[VersionReads]:
        raise NotImplementedError

    def close(self) -> None:
        """Close what the reader keeps open between transactions (nothing, unless it says)."""

    def vocabulary(self, ref: str) -> Vocabulary:
        """A version's vocabulary: from its snapshot where it is complete (unpacked once
        the transaction is over), else from its rows."""
        with self.reading() as reads:
            version_id = reads.resolve(ref)
            row = reads.snapshot_row(version_id)
            vocab = reads.rows_vocabulary(version_id) if row is None else None
        return vocab if row is None else row.checked(version_id)[0]  # type: ignore[return-value]

    def load(self, ref: str, cache: TokenizerCache) -> Tokenizer:
        """The Tokenizer of a version: from ``cache`` where it holds this state of it, else
        read (a complete version: its snapshot; one still training: its rows) and cached."""
        from ..encoder import Tokenizer  # loading a tokenizer needs the encoder; queries do not
        from ..processes import gc_paused

        with self.reading() as reads:
            version_id = reads.resolve(ref)
            row = reads.row(version_id)
            key = (self.url, version_id, reads.state(version_id, row))
            cached = cache.get(key)
            if cached is not None:
                return cached
            found = reads.snapshot_row(version_id) if row.complete else None
            with gc_paused():  # 50,000 tokens and merges: objects without cycles
                vocab = reads.rows_vocabulary(version_id) if found is None else None
        with gc_paused():
            known: EncoderFacts | None = None
            if vocab is None:  # a snapshot: unpacked once the transaction is over
                vocab, known = found.checked(version_id)  # type: ignore[union-attr]
            # A complete version's byte pairs are made when first needed (decoding and short texts need none).
            tok = Tokenizer(vocab.tokens, None if known is not None else vocab.pairs, vocab.special_ids(),
                            spec=TokenizerSpec.from_json(row.spec), name=row.ref, facts=known,
                            merge_ids=vocab.columns[:3])
        cache.put(key, tok)
        return tok


class SqlAlchemyReader(VersionReader):
    """Reads through the store's engine (``reading``: its read transactions)."""

    def __init__(self, url: str, transaction: Callable[[], AbstractContextManager[Connection]]) -> None:
        super().__init__(url)
        self._transaction = transaction

    @contextmanager
    def reading(self) -> Iterator[VersionReads]:
        with self._transaction() as conn:
            yield VersionReads.over(conn)


class SqliteReader(VersionReader):
    """Reads a SQLite file at ``HEAD`` through ``sqlite3``, read-only, one snapshot
    per transaction. Where the file is not at ``HEAD`` any more (another
    bpestore changed its schema), or ``sqlite3`` cannot open it, ``fallback`` reads."""

    def __init__(self, url: str, uri: str, fallback: VersionReader) -> None:
        super().__init__(url)
        self.uri = uri
        self.fallback = fallback

    @contextmanager
    def reading(self) -> Iterator[VersionReads]:
        conn = sqlite_transaction(self.uri, timeout=lock_wait_seconds())
        if conn is None:
            with self.fallback.reading() as reads:
                yield reads
            return
        try:
            yield VersionReads(lambda sql, params: conn.execute(sql, params).fetchall(), conn)
        except sqlite3.Error as exc:
            raise DatabaseError(f"database error: {exc}") from exc
        finally:
            conn.close()


def open_reader(url: str, transaction: Callable[[], AbstractContextManager[Connection]]) -> VersionReader:
    """The reader of a store: ``sqlite3`` on a SQLite file at ``HEAD``, psycopg on a
    PostgreSQL store at ``HEAD`` (store/psycopg_reader.py), else SQLAlchemy."""
    engine = SqlAlchemyReader(url, transaction)
    uri = sqlite_uri(url)
    if uri is not None:
        return SqliteReader(url, uri, engine) if at_head(uri) else engine
    from .psycopg_reader import open_reader as psycopg_reader

    return psycopg_reader(url, engine) or engine


# -- the sqlite3 path ------------------------------------------------------------------
def sqlite_uri(url: str) -> str | None:
    """The ``sqlite3`` URI of a SQLite file as ``db.resolve_url`` names it, opened
    without creating it; None for any other URL (PostgreSQL, in-memory, a URL
    given by hand with options of its own)."""
    if url.startswith("sqlite:///file:") and url.endswith("&uri=true"):  # read-only: mode=ro[&immutable=1]
        return url[len("sqlite:///"):-len("&uri=true")]
    if url.startswith("sqlite:///") and "?" not in url and len(url) > len("sqlite:///"):
        return f"file:{quote(url[len('sqlite:///'):])}?mode=rw"
    return None


def at_head(uri: str) -> bool:
    """Whether the SQLite file ``uri`` exists and its schema is at ``HEAD``."""
    conn = sqlite_transaction(uri)
    if conn is not None:
        conn.close()
    return conn is not None


def sqlite_transaction(uri: str, *, timeout: float = 30.0) -> sqlite3.Connection | None:
    """A read transaction begun on a SQLite file through ``sqlite3``, or None where
    this path does not apply (no such file, not at ``HEAD``, or ``sqlite3`` failed:
    then SQLAlchemy's path reads, and says why where it must)."""
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        conn.execute("BEGIN")  # one snapshot for every statement
        ready = revision_is_head(conn, sqlite3.Error)
    except sqlite3.Error:
        ready = False
    if not ready:
        conn.close()
        return None
    return conn


def revision_is_head(conn: Any, error: type[Exception]) -> bool:
    """Whether the store on ``conn`` (a DB-API connection whose driver raises ``error``)
    is at ``HEAD``; False where it has no revision to read."""
    try:
        current = conn.execute(REVISION).fetchone()
    except error:
        return False
    return current is not None and current[0] == HEAD
