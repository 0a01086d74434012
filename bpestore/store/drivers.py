"""The database through its DB-API driver: one object per driver (``SqliteDriver``:
``sqlite3`` on a SQLite file; ``PsycopgDriver``: psycopg on a ``postgresql+psycopg://``
store) that owns connecting, the check that the schema is at ``HEAD``, the
parameter style and the translation of the driver's errors; both hand out one kind
of transaction (``Transaction``: SQL text with ``:name`` parameters) for reads and writes.

A fresh process that lists, loads or ingests pays for its driver's import, not for
SQLAlchemy's. Where a driver does not apply (a new, in-memory or other-driver
store, or one at another revision), ``open_driver`` or a transaction gives None and
the store's engine runs the same statements (``Transaction.over``).
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from ..errors import BpestoreError, DatabaseError
from .db import HEAD, REVISION, gave_up_waiting, lock_wait_seconds, postgresql_lock_timeout, sqlite_pragmas

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from .fresh import FreshCounts

# sqlite3 adapts every bytes parameter (not int, float or str): with no adapter registered
# for bytes it asks sqlite3.PrepareProtocol for __adapt__, an AttributeError formatted and
# dropped per value, a third of inserting a corpus' words. With an identity adapter it finds
# one in its registry instead and binds the same bytes. (One registered already is kept.)
if (bytes, sqlite3.PrepareProtocol) not in sqlite3.adapters:
    sqlite3.register_adapter(bytes, getattr(bytes, "__bytes__", bytes))  # (bytes.__bytes__: Python 3.11+)

PSYCOPG_URL = "postgresql+psycopg://"
ROW_VARIABLES = 2000  # the most variables a multi-row INSERT binds on SQLite (``Transaction.insert``)
# A string literal, a quoted name, a cast, a named parameter or a per cent sign, in SQL text.
_SQL_PARTS = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|::|(?<!\w):([A-Za-z_]\w*)|%""")


def pyformat(sql: str) -> str:
    """SQL text with ``:name`` parameters in psycopg's style (``%(name)s``); string
    literals, quoted names and ``::`` casts are left as they are (each ``%`` doubled).

    >>> pyformat("SELECT ':word', x::text, '5%' FROM t WHERE a = :a")
    "SELECT ':word', x::text, '5%%' FROM t WHERE a = %(a)s"
    """
    def part(found: re.Match) -> str:
        return f"%({found.group(1)})s" if found.group(1) else found.group(0).replace("%", "%%")
    return _SQL_PARTS.sub(part, sql)


# -- the one translation of database errors --------------------------------------------
# What holds a row lock of each table on PostgreSQL.
_ROW_LOCKS = {"corpora": "an ingest into it, or a training pinning it",
              "versions": "a training or removal of it", "tokenizers": "a new version of it"}


def database_error(exc: BaseException, statement: str = "") -> BpestoreError | None:
    """The ``DatabaseError`` for a failure of the database (the driver's error, or
    SQLAlchemy's around it), naming the lock where the bounded wait ran out;
    None for any other exception."""
    if isinstance(exc, OverflowError):  # a number the driver cannot bind
        return DatabaseError(f"a number too large for the database: {exc}")
    orig: Any = exc
    if type(exc).__module__.partition(".")[0] == "sqlalchemy":
        orig, statement = getattr(exc, "orig", None) or exc, getattr(exc, "statement", None) or statement
    elif type(exc).__module__.partition(".")[0] not in ("psycopg", "psycopg2", "sqlite3"):
        return None
    lock = _lock_given_up(orig, statement)
    if lock is not None:
        return gave_up_waiting(lock)
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DatabaseError(f"database error: {message}")


@contextmanager
def translated(statement: Callable[[], str] = str) -> Iterator[None]:
    """Raise a failure of the database as ``database_error`` says (``statement``: the
    one that ran last, for the lock's name)."""
    try:
        yield
    except Exception as exc:
        error = database_error(exc, statement())
        if error is None:
            raise
        raise error from exc


def _lock_given_up(orig: Any, statement: str) -> str | None:
    """The lock a statement gave up waiting for (the bounded lock wait ran out), in words; None otherwise."""
    text = str(orig)
    if "database is locked" in text or "database table is locked" in text:
        return "the SQLite database's write lock"
    if getattr(orig, "sqlstate", None) != "55P03":  # PostgreSQL's lock_not_available
        return None
    diag = getattr(orig, "diag", None)
    context = " ".join((getattr(diag, "context", None) or "").split())
    if "advisory" in statement:
        return "PostgreSQL's schema lock (another process is creating or upgrading the schema)" \
            if "schema" in statement else "a PostgreSQL advisory lock"
    found = re.search(r'relation "([^"]+)"', context) or re.search(r"\bFROM (\w+)", statement)
    if found:
        table = found.group(1)
        held = _ROW_LOCKS.get(table)
        return f"a lock on table {table} ({context or 'a row'}){f'; held by {held}' if held else ''}"
    return f"a PostgreSQL lock ({context or statement.split(chr(10))[0][:80]})"


# -- one transaction, whichever driver runs it -------------------------------------------
class Transaction:
    """One transaction: ``run`` a statement (SQL text, ``:name`` parameters) for its rows,
    ``many`` one statement once per row of parameters. ``raw``: the driver's connection
    beneath (``sqlite3`` or psycopg; None for another driver), for bulk rows; ``sqlite``:
    it where it is ``sqlite3`` (for functions a query calls); ``now``: the transaction's
    timestamp, as the schema's DateTime columns store it."""

    def __init__(self, run: Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]],
                 many: Callable[[str, list[dict[str, Any]]], Any], raw: Any, postgresql: bool) -> None:
        self.run, self.many, self.raw, self.postgresql = run, many, raw, postgresql
        self.sqlite: sqlite3.Connection | None = raw if isinstance(raw, sqlite3.Connection) else None
        now = datetime.now(timezone.utc)
        self.now: Any = now if postgresql else now.strftime("%Y-%m-%d %H:%M:%S.%f")

    @classmethod
    def of_sqlite(cls, conn: sqlite3.Connection) -> Transaction:
        return cls(lambda sql, params: conn.execute(sql, params).fetchall(), conn.executemany, conn, False)

    @classmethod
    def of_psycopg(cls, conn: Any) -> Transaction:
        tx: Transaction

        def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
            tx.statement = sql
            cursor = conn.execute(pyformat(sql), params)
            return cursor.fetchall() if cursor.description else []

        def many(sql: str, rows: list[dict[str, Any]]) -> Any:
            tx.statement = sql
            return rows and conn.cursor().executemany(pyformat(sql), rows)
        tx = cls(run, many, conn, True)
        return tx

    @classmethod
    def over(cls, conn: Connection) -> Transaction:
        """The transaction of a SQLAlchemy connection (the store's engine)."""
        from sqlalchemy import text  # loaded already: the caller holds a connection

        raw = conn.connection.driver_connection if conn.dialect.driver in ("pysqlite", "psycopg") else None
        postgresql = conn.dialect.name == "postgresql"
        if raw is not None:
            return cls.of_sqlite(raw) if isinstance(raw, sqlite3.Connection) else cls.of_psycopg(raw)

        def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
            result = conn.execute(text(sql), params)
            return result.all() if result.returns_rows else []
        return cls(run, lambda sql, rows: rows and conn.execute(text(sql), rows), None, postgresql)

    statement = ""  # the statement that ran last (psycopg), for the name of a lock waited for

    def one(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row (None where there is none)."""
        rows = self.run(sql, params or {})
        return rows[0][0] if rows else None

    def stamp(self, moment: datetime | None) -> Any:
        """A timestamp as the schema's DateTime columns store it (``now``'s form)."""
        return moment if self.postgresql or moment is None else moment.strftime("%Y-%m-%d %H:%M:%S.%f")

    def insert(self, table: str, columns: Mapping[str, Sequence[Any]],
               fixed: Mapping[str, int | str] | None = None) -> None:
        """INSERT rows given as ``columns`` (name: values, all as long), each row with the
        ``fixed`` values too. On SQLite, statements of many rows each, the fixed values
        written into them and a row binding only its own values, laid out by slices (no
        tuple per row); elsewhere the driver's executemany."""
        fixed = fixed or {}
        names, values = [*fixed, *columns], list(columns.values())
        n = len(values[0]) if values else 0
        if not n:
            return
        quoted = ", ".join(f'"{c}"' for c in names)  # quoted: "rank" and "count" are keywords
        sql = f"INSERT INTO {table} ({quoted}) VALUES "
        if self.sqlite is None:
            rows = list(zip(*[itertools.repeat(v, n) for v in fixed.values()], *values))
            if self.postgresql and self.raw is not None:
                self.statement = sql
                self.raw.cursor().executemany(sql + f"({', '.join(['%s'] * len(names))})", rows)
            else:
                self.many(sql + f"({', '.join(':' + c for c in names)})", [dict(zip(names, r)) for r in rows])
            return
        # One statement is one step of SQLite's, which the driver runs without the GIL
        # (executemany takes the GIL back after each row): about half the time, and a
        # thread beside it (training's checkpoint writer) is hardly held up.
        literals = [str(int(v)) if isinstance(v, int) else "'" + v.replace("'", "''") + "'" for v in fixed.values()]
        k = len(values)
        row = f"({', '.join([*literals, *'?' * k])})"
        # Variables a statement takes, at most ``ROW_VARIABLES``: binding grows faster than their
        # number (2,000 rows of 8 columns in one statement cost twice what 250 rows a statement do).
        limit = self.sqlite.getlimit(9) if hasattr(self.sqlite, "getlimit") else 999
        per = max(1, min(limit, ROW_VARIABLES) // k)
        for start in range(0, n, per):
            stop = min(n, start + per)
            flat: list[Any] = [None] * (k * (stop - start))
            for i, column in enumerate(values):
                flat[i::k] = column[start:stop]
            self.sqlite.execute(sql + ", ".join([row] * (stop - start)), flat)


def by_column(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """Rows (sequences in ``names``' order) as the columns ``Transaction.insert`` takes."""
    return dict(zip(names, zip(*rows)))


class Transactions(Protocol):
    """What the services open transactions with (the Store)."""

    url: str
    fresh_counts: FreshCounts  # the counts of a generation just written, for the training after

    def reading(self) -> AbstractContextManager[Transaction]: ...

    def writing(self) -> AbstractContextManager[Transaction]: ...

    def session(self) -> AbstractContextManager[Transaction]: ...


def at_head(tx: Transaction, error: type[Exception]) -> bool:
    """Whether the store is at ``HEAD``; False where it has no revision to read."""
    try:
        current = tx.run(REVISION, {})
    except error:
        return False
    return bool(current) and current[0][0] == HEAD


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``IN (:name0, :name1, ...)`` and its parameters (never empty: ``IN (NULL)``)."""
    params = {f"{name}{i}": value for i, value in enumerate(values)}
    return f"IN ({', '.join(':' + key for key in params) or 'NULL'})", params


# -- the drivers -----------------------------------------------------------------------
class Driver:
    """A store at ``HEAD`` through its DB-API driver: ``transaction`` yields a
    ``Transaction`` (committed at the end of a write, rolled back on an error), or
    None where the store is not (any more) at ``HEAD`` or cannot be reached."""

    error: type[Exception] = Exception
    KEEP = 0  # connections kept between transactions, of each kind (read, write)

    def __init__(self) -> None:
        self._idle: dict[bool, list[Any]] = {False: [], True: []}  # by write
        self._lock = threading.Lock()

    def connect(self, write: bool) -> Any:
        """A connection in a new transaction; None where the driver cannot reach the store."""
        raise NotImplementedError

    def transaction_of(self, conn: Any) -> Transaction:
        raise NotImplementedError

    def end(self, conn: Any, commit: bool, write: bool) -> None:
        raise NotImplementedError

    def put_back(self, conn: Any, write: bool) -> bool:
        """Keep conn for the next transaction of its kind where there is room; whether it was kept."""
        with self._lock:
            if len(self._idle[write]) < self.KEEP:
                self._idle[write].append(conn)
                return True
        return False

    def close(self) -> None:
        """Close the connections kept open between transactions."""
        with self._lock:
            idle, self._idle = self._idle[False] + self._idle[True], {False: [], True: []}
        for conn in idle:
            conn.close()

    def open(self) -> Any:
        """A new connection outside any transaction (each statement commits), waiting for
        a lock at most the bounded wait."""
        raise NotImplementedError

    @contextmanager
    def session(self) -> Iterator[Transaction]:
        """A connection of its own outside any transaction, for what lasts beyond one (a session lock)."""
        with translated():
            conn = self.open()
            try:
                yield self.transaction_of(conn)
            finally:
                conn.close()

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Transaction | None]:
        tx = None
        with translated(lambda: tx.statement if tx is not None else ""):
            conn = self.connect(write)
            if conn is None:
                yield None
                return
            committed = False
            try:
                tx = self.transaction_of(conn)
                if not at_head(tx, self.error):
                    yield None
                    return
                yield tx
                committed = write
            finally:
                self.end(conn, committed, write)


class SqliteDriver(Driver):
    """A SQLite file through ``sqlite3`` (``uri``: opened without creating it; ``mode=ro``:
    read-only); a read is one snapshot, a write takes the write lock at BEGIN. Reads and
    writes each on connections kept for the next of their kind (at most ``KEEP``; opening
    one and setting its pragmas costs more than most transactions), in this process only."""

    error = sqlite3.Error
    KEEP = 2

    def __init__(self, uri: str) -> None:
        super().__init__()
        self.uri = uri
        self.read_only = not uri.endswith("mode=rw")
        self._pid = os.getpid()
        self._inherited: list[sqlite3.Connection] = []

    def open(self) -> sqlite3.Connection:
        return sqlite3.connect(self.uri, uri=True, timeout=lock_wait_seconds(), isolation_level=None,
                               check_same_thread=False)

    def connect(self, write: bool) -> sqlite3.Connection | None:
        if write and self.read_only:  # the engine refuses the write, saying why
            return None
        conn = self._kept(write)
        try:
            if conn is None:
                conn = self.open()
                if write:
                    sqlite_pragmas(conn)
        except sqlite3.Error:
            if conn is not None:
                conn.close()
            if write:
                raise
            return None
        try:
            # Every statement in one snapshot; a write takes the lock at once, waited for as the engine waits.
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error:
            conn.close()
            if write:
                raise
            return None
        return conn

    def _kept(self, write: bool) -> sqlite3.Connection | None:
        with self._lock:
            if self._pid != os.getpid():
                # A forked child: the parent's connections are not its own, and closing
                # one here could end the parent's WAL (kept, never used or closed).
                self._inherited.extend(self._idle[False] + self._idle[True])
                self._idle, self._pid = {False: [], True: []}, os.getpid()
            return self._idle[write].pop() if self._idle[write] else None

    def transaction_of(self, conn: sqlite3.Connection) -> Transaction:
        return Transaction.of_sqlite(conn)

    def end(self, conn: sqlite3.Connection, commit: bool, write: bool) -> None:
        try:
            if commit:
                conn.execute("COMMIT")
            elif conn.in_transaction:  # SQLite rolls back by itself after some errors (a full disk)
                conn.execute("ROLLBACK")
        except BaseException:
            conn.close()
            raise
        with self._lock:
            keep = not conn.in_transaction and self._pid == os.getpid() and len(self._idle[write]) < self.KEEP
        if keep:
            try:  # a kept connection keeps no page cache (MBs after a big write)
                conn.execute("PRAGMA shrink_memory")
            except sqlite3.Error:  # (the transaction ended as it did: only this connection is not kept)
                keep = False
        if not (keep and self.put_back(conn, write)):
            conn.close()

    def at_head(self) -> bool:
        """Whether the file exists and its schema is at ``HEAD``."""
        with self.transaction() as tx:
            return tx is not None


class PsycopgDriver(Driver):
    """A PostgreSQL store through psycopg 3 (``info``: libpq's URI). Reads are read-only
    REPEATABLE READ transactions; reads and writes each on connections kept for the next
    of their kind (at most ``KEEP``; a server process reads on as many threads). Every
    connection waits for a lock at most the bounded wait."""

    KEEP = 4

    def __init__(self, info: str, psycopg: Any) -> None:
        super().__init__()
        self.info = info
        self.psycopg = psycopg
        self.error = psycopg.Error

    def connect(self, write: bool) -> Any:
        with self._lock:
            while self._idle[write]:
                conn = self._idle[write].pop()
                if not conn.closed:
                    return conn
        psycopg = self.psycopg
        try:
            conn = self.open()
        except psycopg.Error:
            return None
        conn.autocommit = False
        if not write:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
        return conn

    def open(self) -> Any:
        conn = self.psycopg.connect(self.info, autocommit=True)
        postgresql_lock_timeout(conn)
        return conn

    def transaction_of(self, conn: Any) -> Transaction:
        return Transaction.of_psycopg(conn)

    def end(self, conn: Any, commit: bool, write: bool) -> None:
        try:
            conn.commit() if commit else conn.rollback()
        except self.psycopg.Error:
            conn.close()
            if commit:
                raise
        if conn.closed or not self.put_back(conn, write):
            conn.close()


def sqlite_uri(url: str) -> str | None:
    """The ``sqlite3`` URI of a SQLite file as ``db.resolve_url`` names it, opened
    without creating it; None for any other URL (PostgreSQL, in-memory, a URL
    given by hand with options of its own)."""
    if url.startswith("sqlite:///file:") and url.endswith("&uri=true"):  # read-only: mode=ro[&immutable=1]
        return url[len("sqlite:///"):-len("&uri=true")]
    if url.startswith("sqlite:///") and "?" not in url and len(url) > len("sqlite:///"):
        return f"file:{quote(url[len('sqlite:///'):])}?mode=rw"
    return None


def conninfo(url: str) -> str | None:
    """The libpq URI of a ``postgresql+psycopg://`` URL; None for any other."""
    return "postgresql://" + url[len(PSYCOPG_URL):] if url.startswith(PSYCOPG_URL) else None


def open_driver(url: str) -> Driver | None:
    """The driver of the store at ``url`` where it applies: ``sqlite3`` on a SQLite file,
    psycopg on a ``postgresql+psycopg://`` store, either at ``HEAD``; else None."""
    uri = sqlite_uri(url)
    if uri is not None:
        driver: Driver = SqliteDriver(uri)
    else:
        info = conninfo(url)
        if info is None:
            return None
        try:
            import psycopg
        except ImportError:
            return None
        driver = PsycopgDriver(info, psycopg)
    try:
        with driver.transaction() as tx:
            if tx is not None:
                return driver
    except BpestoreError:
        pass
    driver.close()
    return None
