"""Engines and schema upgrades: the connection set-up shared by every store.

Alembic is imported only where the database is not at ``HEAD``: opening an
up-to-date store costs one query (``tests/test_schema.py`` checks that
``HEAD`` is the newest revision in migrations/).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from ..errors import ConflictError, DamagedDataError, DatabaseError, InvalidArgumentError, NotFoundError

if TYPE_CHECKING:
    from alembic.config import Config

DEFAULT_DB = "bpestore.db"
HEAD = "0004"  # the newest revision in migrations/versions


def resolve_url(db: str | os.PathLike | None = None) -> str:
    """``--db`` value, else $BPESTORE_DB, else ./bpestore.db; a plain path is SQLite.

    ``:memory:`` is a private in-memory SQLite database.
    """
    db = os.fspath(db) if db is not None else os.environ.get("BPESTORE_DB") or DEFAULT_DB
    if not db.strip():
        raise InvalidArgumentError("db is empty: give a path or a database URL (or set BPESTORE_DB)", params=("db",))
    if db == ":memory:":
        return "sqlite://"
    if "://" in db:
        try:
            make_url(db)
        except ArgumentError as exc:
            raise InvalidArgumentError(f"not a database URL: {db} ({exc})") from None
        return db
    path = Path(db).expanduser()
    if path.parent and not path.parent.exists():
        raise NotFoundError(f"folder {path.parent} does not exist (database {db})")
    if path.is_dir():
        raise InvalidArgumentError(f"{db} is a folder; give a database file path, e.g. {path / DEFAULT_DB}")
    return f"sqlite:///{path.resolve()}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # Let SQLAlchemy, not the driver, decide where transactions begin (see below).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(conn) -> None:
    # An explicit BEGIN so every transaction, reads included, is one unit. A
    # transaction that will write takes the write lock at once (IMMEDIATE): one
    # that reads first and upgrades later would fail with "database is locked"
    # when another writer is there, instead of waiting out the busy timeout.
    mode = "IMMEDIATE" if conn.get_execution_options().get("bpestore_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


def display_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def make_engine(url: str) -> Engine:
    """An engine for url; SQLite gets foreign keys, WAL and a busy timeout."""
    options = {"poolclass": StaticPool} if url == "sqlite://" else {}
    try:
        engine = create_engine(url, **options)
    except ModuleNotFoundError as exc:
        raise DatabaseError(f"no driver for {display_url(url)} ({exc}); for PostgreSQL: "
                            "pip install 'bpestore[postgres]'") from None
    except Exception as exc:  # unknown dialect
        raise DatabaseError(f"cannot open database {display_url(url)}: {exc}") from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


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
    try:
        with conn.begin_nested():
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError:
        return None


def upgrade_schema(engine: Engine) -> str:
    """Create or upgrade the schema to the newest revision; returns it.

    A database stamped with a revision this bpestore does not know was written
    by a newer bpestore, and is refused rather than touched.
    """
    with engine.connect() as conn, conn.begin():
        if stored_revision(conn) == HEAD:
            return HEAD
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    config = alembic_config()
    script = ScriptDirectory.from_config(config)
    head = script.get_current_head()
    if head is None:
        raise DamagedDataError("bpestore's migrations have no head revision; reinstall bpestore")
    with engine.connect().execution_options(bpestore_write=True) as conn, conn.begin():
        current = MigrationContext.configure(conn).get_current_revision()
        if current == head:
            return head
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


def schema_revision(engine: Engine) -> str | None:
    with engine.connect() as conn, conn.begin():
        return stored_revision(conn)
