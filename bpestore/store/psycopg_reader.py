"""Reading a PostgreSQL store at ``HEAD`` through psycopg alone: the reads of
``reader.VersionReads`` and ``reads`` (SQL text with named parameters) in a
read-only REPEATABLE READ transaction of a connection of their own, so that a
fresh process that lists, shows or loads pays for psycopg's import and not for
SQLAlchemy's and its PostgreSQL dialect's (a third of a second on a quiet machine).

Only ``postgresql+psycopg://`` URLs (the driver psycopg 3; the URL's query is
libpq's own parameters). Where psycopg is missing, the server cannot be reached
or the schema is not at ``HEAD``, the store's engine reads (and says why where it must).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import DatabaseError
from .db import gave_up_waiting, lock_wait_seconds
from .reader import VersionReader, VersionReads, revision_is_head

if TYPE_CHECKING:
    import psycopg

PREFIX = "postgresql+psycopg://"
NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")  # :name, not ::type


def conninfo(url: str) -> str | None:
    """The libpq URI of a ``postgresql+psycopg://`` URL; None for any other."""
    return "postgresql://" + url[len(PREFIX):] if url.startswith(PREFIX) else None


def pyformat(sql: str) -> str:
    """SQL text with ``:name`` parameters in psycopg's style (``%(name)s``)."""
    return NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


def connect(info: str) -> psycopg.Connection | None:
    """A connection for read-only REPEATABLE READ transactions with the bounded lock
    wait; None where psycopg is missing or the server cannot be reached."""
    try:
        import psycopg
    except ImportError:
        return None
    try:
        conn = psycopg.connect(info, autocommit=True)
        conn.execute(f"SET lock_timeout = {max(1, round(lock_wait_seconds() * 1000))}")
        conn.autocommit = False
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
    except psycopg.Error:
        return None
    return conn


def at_head(conn: psycopg.Connection) -> bool:
    """Begin a transaction on ``conn``: whether its store is at ``HEAD`` (if not, it is rolled back)."""
    import psycopg

    if revision_is_head(conn, psycopg.Error):
        return True
    conn.rollback()
    return False


class PsycopgReader(VersionReader):
    """Reads a PostgreSQL store at ``HEAD`` through psycopg, one snapshot per
    transaction, on connections kept for the next (at most ``KEEP``; a server
    process reads on as many threads); ``fallback`` (the engine) where that does not apply."""

    KEEP = 4

    def __init__(self, url: str, info: str, fallback: VersionReader, conn: psycopg.Connection | None = None) -> None:
        super().__init__(url)
        self.info = info
        self.fallback = fallback
        self._idle: list[psycopg.Connection] = [conn] if conn is not None else []
        self._lock = threading.Lock()

    @contextmanager
    def reading(self) -> Iterator[VersionReads]:
        import psycopg

        conn = self._take()
        if conn is None or not at_head(conn):
            if conn is not None:
                conn.close()
            with self.fallback.reading() as reads:
                yield reads
            return
        try:
            yield VersionReads(lambda sql, params: conn.execute(pyformat(sql), params).fetchall())
        except psycopg.Error as exc:
            conn.close()
            raise _database_error(exc) from exc
        finally:
            self._give_back(conn)

    def _take(self) -> psycopg.Connection | None:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed:
                    return conn
        return connect(self.info)

    def _give_back(self, conn: psycopg.Connection) -> None:
        """End the transaction (read-only: rolled back) and keep the connection for the next."""
        import psycopg

        try:
            conn.rollback()
        except psycopg.Error:
            conn.close()
        with self._lock:
            if len(self._idle) < self.KEEP and not conn.closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _database_error(exc: Any) -> DatabaseError:
    if getattr(exc, "sqlstate", None) == "55P03":  # lock_not_available: the bounded wait ran out
        return gave_up_waiting("a PostgreSQL lock (another process is changing the schema or the rows read)")
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DatabaseError(f"database error: {message}")


def open_reader(url: str, fallback: VersionReader) -> VersionReader | None:
    """A psycopg reader of the store at ``url``, where it is a PostgreSQL store at ``HEAD``; else None."""
    info = conninfo(url)
    conn = None if info is None else connect(info)
    if conn is None or not at_head(conn):
        if conn is not None:
            conn.close()
        return None
    conn.rollback()
    return PsycopgReader(url, info, fallback, conn)  # type: ignore[arg-type]  # (info: not None with conn)
