"""Pack files (``*.bpestore``) are somebody else's files: read, never changed.

A pack is opened read-only and immutable (``mode=ro&immutable=1``: no lock, no
journal change, no ``-wal``/``-shm`` beside it; the file's bytes stay as they
were), and before any query touches its tables its schema is checked to be
exactly bpestore's at ``HEAD``: the same tables and indexes with the same SQL,
no view, trigger or other object (a view standing in for a table could make a
read run without end). What its versions hold is checked whole by
``transfer.check`` before anything is written elsewhere.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from functools import cache
from pathlib import Path
from urllib.parse import quote

from ..errors import DamagedDataError, InvalidArgumentError, NotFoundError
from .db import HEAD, SQLITE_SCHEMA

PACK_SUFFIX = ".bpestore"
SQLITE_HEADER = b"SQLite format 3\x00"
_OBJECTS = "SELECT type, name, tbl_name, sql FROM sqlite_master"


def is_pack(db: str | os.PathLike) -> bool:
    """Whether ``db`` names a pack file: a path ending in ``.bpestore``."""
    return "://" not in os.fspath(db) and os.fspath(db).endswith(PACK_SUFFIX)


def is_sqlite_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file that starts as a SQLite database does."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def pack_url(path: str | os.PathLike) -> str:
    """The URL a pack is read through, once ``check_pack`` passed."""
    resolved = Path(path).expanduser().resolve()
    return f"sqlite:///file:{quote(str(resolved))}?mode=ro&immutable=1&uri=true"


def check_pack(path: str | os.PathLike) -> None:
    """Refuse what is not a pack of this bpestore's schema, reading nothing but
    SQLite's own catalogue and the revision: NotFoundError (no such file),
    InvalidArgumentError (not a regular SQLite file), DamagedDataError (other
    objects, other SQL, another revision)."""
    name = os.fspath(path)
    if not os.path.exists(name):
        raise NotFoundError(f"no pack file at {name}", params=("db",))
    if not is_sqlite_file(name):
        raise InvalidArgumentError(f"{name} is not a pack: not a regular file holding a SQLite database",
                                   params=("db",))
    conn = sqlite3.connect(f"file:{quote(str(Path(name).resolve()))}?mode=ro&immutable=1", uri=True)
    try:
        conn.execute("PRAGMA trusted_schema=OFF")
        found = _objects(conn)
        expected = _expected_objects()
        if found != expected:
            raise DamagedDataError(f"{name} is not a pack of this bpestore: {_difference(found, expected)}")
        revision = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.DatabaseError as exc:
        raise DamagedDataError(f"{name} cannot be read as a pack ({exc})") from None
    finally:
        conn.close()
    if revision != [(HEAD,)]:
        shown = ", ".join(str(r[0]) for r in revision) or "none"
        raise DamagedDataError(f"{name} is at schema revision {shown}, this bpestore reads packs at {HEAD}")


def _objects(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple[str, str]]:
    """Each schema object by (type, name): its table and its SQL, spaces collapsed."""
    return {(kind, name): (table, " ".join((sql or "").split()))
            for kind, name, table, sql in conn.execute(_OBJECTS)}


@cache
def _expected_objects() -> dict[tuple[str, str], tuple[str, str]]:
    conn = sqlite3.connect(":memory:")
    try:
        for statement in SQLITE_SCHEMA.read_text(encoding="utf-8").split(";\n\n"):
            conn.execute(statement)
        return _objects(conn)
    finally:
        conn.close()


def _difference(found: dict, expected: dict) -> str:
    """The first difference, named."""
    for key in sorted(found.keys() - expected.keys()):
        return f"it holds a {key[0]} {key[1]!r} that bpestore's schema has not"
    for key in sorted(expected.keys() - found.keys()):
        return f"it lacks the {key[0]} {key[1]!r}"
    key = next(k for k in sorted(found) if found[k] != expected[k])
    return f"its {key[0]} {key[1]!r} is not bpestore's"
