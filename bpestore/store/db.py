"""Engines and schema upgrades: the connection set-up shared by every store.

Alembic is imported only where the database is at an older revision: opening
an up-to-date store costs one query (``tests/test_schema.py`` checks that
``HEAD`` is the newest revision in migrations/), and a new database gets the
tables of store/schema.py at once, stamped ``HEAD`` (the same tests check that
this equals what the migrations make); a new SQLite file gets them from their
DDL (``create_sqlite_file``). SQLAlchemy is imported only where an engine is made
or a URL parsed: a SQLite store at ``HEAD`` is made, read and written without it
(``store/drivers.py``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from ..errors import ConflictError, DamagedDataError, DatabaseError, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import Connection, Engine

DEFAULT_DB = "bpestore.db"
HEAD = "0008_word_counts_key"  # the newest revision in migrations/versions
# How long a statement waits for a lock another process holds before it gives up
# (SQLite's busy timeout, PostgreSQL's lock_timeout); $BPESTORE_LOCK_WAIT_SECONDS sets it.
LOCK_WAIT_SECONDS = 30.0
REVISION = "SELECT version_num FROM alembic_version"  # the schema's revision, where it has one


def lock_wait_seconds() -> float:
    """The bounded lock wait: $BPESTORE_LOCK_WAIT_SECONDS, else LOCK_WAIT_SECONDS."""
    value = os.environ.get("BPESTORE_LOCK_WAIT_SECONDS")
    if value is None or not value.strip():
        return LOCK_WAIT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 86_400:
        raise InvalidArgumentError(f"BPESTORE_LOCK_WAIT_SECONDS must be a number of seconds from 0 to 86400 "
                                   f"(not 0), not {value!r}")
    return seconds


def resolve_url(db: str | os.PathLike | None = None, *, read_only: bool = False) -> str:
    """``--db`` value, else $BPESTORE_DB, else ./bpestore.db; a plain path is SQLite.

    ``:memory:`` is a private in-memory SQLite database. ``read_only``: a SQLite
    file is opened with ``mode=ro`` (it must exist); other URLs are left as they are.
    """
    db = os.fspath(db) if db is not None else os.environ.get("BPESTORE_DB") or DEFAULT_DB
    if not db.strip():
        raise InvalidArgumentError("db is empty: give a path or a database URL (or set BPESTORE_DB)", params=("db",))
    if db == ":memory:":
        return "sqlite://"
    if "://" in db:
        if _plain_psycopg_url(db):
            return db
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(db)
            url.port  # noqa: B018 (parsed lazily: a port that is not a number raises here)
        except (ArgumentError, ValueError) as exc:
            raise InvalidArgumentError(f"not a database URL: {display_url(db)} ({exc})", params=("db",)) from None
        return db
    path = Path(db).expanduser()
    if path.parent and not path.parent.exists():
        raise NotFoundError(f"folder {path.parent} does not exist (database {db})")
    if path.is_dir():
        raise InvalidArgumentError(f"{db} is a folder; give a database file path, e.g. {path / DEFAULT_DB}")
    path = path.resolve()
    if read_only and not path.exists():
        raise NotFoundError(f"no database at {db} (a read-only store opens an existing one)", params=("db",))
    if path.exists() and (read_only or not _writable(path)):
        # Read it without writing anything: no WAL files are made, and in a
        # read-only folder without them, nothing can change it (immutable).
        immutable = "" if os.access(path.parent, os.W_OK) or Path(f"{path}-wal").exists() else "&immutable=1"
        return f"sqlite:///file:{quote(str(path))}?mode=ro{immutable}&uri=true"
    return f"sqlite:///{path}"


def _plain_psycopg_url(url: str) -> bool:
    """A ``postgresql+psycopg://`` URL whose parts parse (what psycopg's reader takes
    without SQLAlchemy); any other goes through SQLAlchemy's parser and its errors."""
    if not url.startswith("postgresql+psycopg://"):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        return False
    return bool(parts.hostname or parts.path.strip("/"))


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def is_read_only(engine: Engine) -> bool:
    """A SQLite database opened read-only (its file or folder is not writable)."""
    return engine.dialect.name == "sqlite" and engine.url.query.get("mode") == "ro"


def gave_up_waiting(lock: str) -> DatabaseError:
    """The error for a lock waited for longer than the bounded wait."""
    return DatabaseError(f"gave up after {lock_wait_seconds():g} s waiting for {lock}, which another "
                         "process holds; try again when it is done (BPESTORE_LOCK_WAIT_SECONDS sets "
                         "how long to wait)")


def lock_wait_ms() -> int:
    return max(1, round(lock_wait_seconds() * 1000))


def sqlite_pragmas(dbapi_connection, _record=None, read_only: bool = False, wait_ms: int | None = None) -> None:
    """Foreign keys, WAL and the bounded lock wait, on a new sqlite3 connection."""
    # Let SQLAlchemy, not the driver, decide where transactions begin (see below).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={wait_ms or lock_wait_ms()}")  # first: the pragmas below may wait for a writer
    cursor.execute("PRAGMA foreign_keys=ON")
    if not read_only:  # a read-only file stays as it is (its journal mode included)
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def postgresql_lock_timeout(dbapi_connection, _record=None, wait_ms: int | None = None) -> None:
    # A lock held by another session is waited for this long, then the statement fails
    # (LockNotAvailable), which becomes an Error naming the lock; never an endless wait.
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    with dbapi_connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = {wait_ms or lock_wait_ms()}")
    dbapi_connection.autocommit = autocommit


def _sqlite_begin(conn) -> None:
    # An explicit BEGIN so every transaction, reads included, is one unit. A
    # transaction that will write takes the write lock at once (IMMEDIATE): one
    # that reads first and upgrades later would fail with "database is locked"
    # when another writer is there, instead of waiting out the busy timeout.
    mode = "IMMEDIATE" if conn.get_execution_options().get("bpestore_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


def display_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for url; SQLite gets foreign keys, WAL and a busy timeout, PostgreSQL a
    lock_timeout (both ``lock_wait_seconds()``).

    ``read_only`` on PostgreSQL: every transaction of every connection is read-only
    (``default_transaction_read_only``), so the server itself refuses writes.
    """
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import StaticPool

    options: dict = {"poolclass": StaticPool} if url == "sqlite://" else {}
    wait_ms = lock_wait_ms()
    if url.startswith("sqlite"):
        options["connect_args"] = {"timeout": wait_ms / 1000}  # the driver's own wait, the same
    try:
        engine = create_engine(url, **options)
    except ModuleNotFoundError as exc:
        raise DatabaseError(f"no driver for {display_url(url)} ({exc}); for PostgreSQL: "
                            "pip install 'bpestore[postgres]'") from None
    except Exception as exc:  # unknown dialect
        raise DatabaseError(f"cannot open database {display_url(url)}: {exc}") from None
    if engine.dialect.name == "sqlite":
        read_only = is_read_only(engine)
        event.listen(engine, "connect", lambda dbapi_connection, record: sqlite_pragmas(
            dbapi_connection, record, read_only, wait_ms))
        event.listen(engine, "begin", _sqlite_begin)
    else:
        if engine.dialect.name == "postgresql":
            event.listen(engine, "connect", lambda dbapi_connection, record: postgresql_lock_timeout(
                dbapi_connection, record, wait_ms))
        if read_only:
            event.listen(engine, "connect", _read_only_session)
            if engine.dialect.name == "postgresql":
                # SQLAlchemy resets a returned connection to READ WRITE; this keeps every checkout read-only.
                engine = engine.execution_options(postgresql_readonly=True)
    return engine


def _read_only_session(dbapi_connection, _record) -> None:
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    cursor = dbapi_connection.cursor()
    cursor.execute("SET default_transaction_read_only = on")
    cursor.close()
    dbapi_connection.autocommit = autocommit


def migrations_dir() -> Path:
    """Where the Alembic revisions are: inside the installed package, or the source tree."""
    here = Path(__file__).resolve()
    for candidate in (here.parent.parent / "migrations", here.parents[2] / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise DamagedDataError("bpestore's migrations are missing from this installation; reinstall bpestore")


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    return config


def stored_revision(conn: Connection) -> str | None:
    """The revision stamped in the database; None where it has none (a new database).

    One query, without Alembic. The failed query of a database without the
    table is rolled back to a savepoint (PostgreSQL aborts the transaction otherwise).
    """
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with conn.begin_nested():
            return conn.execute(text(REVISION)).scalar()
    except SQLAlchemyError:
        return None


def upgrade_schema(engine: Engine, *, read_only: bool = False) -> str:
    """Create or upgrade the schema to the newest revision; returns it.

    A database stamped with a revision this bpestore does not know was written
    by a newer bpestore, and is refused rather than touched. A read-only one
    (``read_only``, or a SQLite file opened ``mode=ro``) is only checked.
    """
    with engine.connect() as conn, conn.begin():
        if stored_revision(conn) == HEAD:
            return HEAD
    if not (read_only or is_read_only(engine)):
        with engine.connect().execution_options(bpestore_write=True) as conn, conn.begin():
            _lock_schema(conn)
            current = stored_revision(conn)
            if current == HEAD:
                return HEAD
            if current is None:  # a new database: made at once, without Alembic
                _refuse_foreign(conn)
                create_schema(conn)
                return HEAD
    return migrate(engine, read_only=read_only)


def _lock_schema(conn: Connection) -> None:
    """PostgreSQL: processes opening a new database at once: one creates or upgrades
    the schema, the others wait for it here (until this transaction ends)."""
    from sqlalchemy import text

    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('bpestore schema ' || current_schema()))"))


SQLITE_SCHEMA = Path(__file__).with_name("schema_sqlite.sql")


def create_sqlite_file(url: str) -> bool:
    """A new SQLite store made at once from ``schema_sqlite.sql``: ``create_schema``'s
    tables as SQLite's own DDL, stamped ``HEAD`` (tests/test_schema.py checks the two are
    the same), without importing SQLAlchemy or Alembic. False, and nothing done, where
    ``url`` is not a plain SQLite file or the file already holds something: that is
    opened the usual way, which creates, upgrades or refuses it, and says why."""
    import sqlite3
    from urllib.parse import quote

    if not url.startswith("sqlite:///") or "?" in url or url == "sqlite:///:memory:":
        return False
    path = url[len("sqlite:///"):]
    if os.path.exists(path) and os.path.getsize(path) > 0:
        return False
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=rwc", uri=True, timeout=lock_wait_seconds(),
                               isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        sqlite_pragmas(conn)
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            conn.execute("ROLLBACK")  # another process made it meanwhile
            return False
        for statement in SQLITE_SCHEMA.read_text(encoding="utf-8").split(";\n\n"):
            conn.execute(statement)
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD,))
        conn.execute("COMMIT")
        return True
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False
    finally:
        conn.close()


def create_schema(conn: Connection) -> None:
    """The newest schema in an empty database, stamped ``HEAD``: the tables of
    store/schema.py, which are what the migrations make (tests/test_schema.py
    checks that a store made this way equals one ``alembic upgrade head`` made)."""
    from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table

    from .schema import metadata

    metadata.create_all(conn)
    # Alembic's own table, as Alembic makes it.
    version = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    version.create(conn, checkfirst=True)
    conn.execute(version.insert().values(version_num=HEAD))


def migrate(engine: Engine, *, read_only: bool = False) -> str:
    """Alembic's upgrade to the newest revision (a database at an older one); a
    read-only database, or one at a revision this bpestore does not know, is only checked."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    config = alembic_config()
    script = ScriptDirectory.from_config(config)
    head = script.get_current_head()
    if head is None:
        raise DamagedDataError("bpestore's migrations have no head revision; reinstall bpestore")
    if read_only or is_read_only(engine):
        return _check_read_only(engine, script, head)
    with engine.connect().execution_options(bpestore_write=True) as conn, conn.begin():
        _lock_schema(conn)
        current = MigrationContext.configure(conn).get_current_revision()
        if current == head:
            return head
        if current is None:
            _refuse_foreign(conn)
        if current is not None:
            try:
                script.get_revision(current)
            except (CommandError, KeyError):
                raise ConflictError(
                    f"this database has schema revision {current}, which this bpestore "
                    f"(schema {head}) does not know: it was written by a newer bpestore. "
                    "Upgrade bpestore (pip install -U bpestore) to open it.") from None
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    return head


def _refuse_foreign(conn: Connection) -> None:
    """A database that holds tables but no bpestore schema belongs to something else: leave it alone."""
    from sqlalchemy import inspect

    tables = [t for t in inspect(conn).get_table_names() if t != "alembic_version"]
    if tables:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise ConflictError(f"{display_url(str(conn.engine.url))} is not a bpestore database (it holds other "
                            f"tables: {shown}); give a new file or an empty database", params=("db",))


def _check_read_only(engine: Engine, script: ScriptDirectory, head: str) -> str:
    """A read-only database is used as it is: it must be at this bpestore's schema."""
    from alembic.util.exc import CommandError

    with engine.connect() as conn:
        current = stored_revision(conn)
        if current is None:
            _refuse_foreign(conn)
    if current != head:
        where = display_url(str(engine.url))
        if current is None:
            raise NotFoundError(f"{where} is read-only and holds no bpestore schema yet", params=("db",))
        try:
            script.get_revision(current)
        except (CommandError, KeyError):
            raise ConflictError(f"{where} has schema revision {current}, unknown to this bpestore (schema "
                                f"{head}): it was written by a newer bpestore. Upgrade bpestore to open it.") from None
        raise ConflictError(f"{where} is read-only and at schema revision {current}; this bpestore needs "
                            f"{head}: open it once where it is writable to upgrade it", params=("db",))
    return head


def schema_revision(engine: Engine) -> str | None:
    with engine.connect() as conn, conn.begin():
        return stored_revision(conn)
