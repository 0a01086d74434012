"""Training locks on SQLite: one run per version at a time, and no removal of a
version while it trains. No SQL.

PostgreSQL has advisory locks (``repository.try_lock_training``); SQLite has none,
so a version's lock is byte ``version_id`` of the file ``<database>-train.lock``
beside the database, locked with an open-file-description lock (Linux ``F_OFD_SETLK``;
a POSIX record lock elsewhere). The kernel drops it when its holder ends, killed or
not, so a stopped run never leaves a version locked.
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
_FLOCK = "hhqqi4x"  # struct flock, padded


def _database(url: str) -> tuple[str, Mapping[str, Any]] | None:
    """The file a SQLite URL names and the URL's query; None for other databases and memory."""
    if not url.startswith("sqlite"):
        return None
    query: Mapping[str, Any] = {}
    if url.startswith("sqlite:///") and "?" not in url:  # a file as db.resolve_url names it
        database = url[len("sqlite:///"):]
    else:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        if parsed.get_backend_name() != "sqlite":
            return None
        database, query = parsed.database or "", parsed.query
    return (database, query) if database and database != ":memory:" else None


def lock_file(url: str) -> Path | None:
    """``<database>-train.lock`` of a writable SQLite file; None for other databases."""
    named = _database(url)
    if named is None or named[1].get("mode") == "ro" or named[0].startswith("file:"):
        return None
    return Path(f"{named[0]}-train.lock")


@contextmanager
def version_lock(url: str, version_id: int) -> Iterator[bool]:
    """Hold version ``version_id``'s training lock while the block runs; yields False
    (holding nothing) when another process or file holds it. True where there is
    no file to lock (PostgreSQL locks in the database; an in-memory SQLite)."""
    path = lock_file(url)
    if path is None:
        yield True
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        yield _try_lock(fd, version_id)
    finally:
        os.close(fd)  # drops the lock


def held(url: str, version_id: int) -> bool | None:
    """Whether a process holds version ``version_id``'s training lock in the SQLite file
    of ``url`` (a read-only URL too), asked without taking it (``F_OFD_GETLK``): a
    viewer never keeps a run from starting. None where this cannot be asked here
    (not a file, not Linux)."""
    named = _database(url)
    if named is None or _GETLK is None:
        return None
    database = named[0].removeprefix("file:") if "uri=true" in url else named[0]
    try:
        fd = os.open(f"{database}-train.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False  # no run ever locked a version of this file
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, _GETLK, _flock(version_id))
    except OSError:
        return None
    finally:
        os.close(fd)
    return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK


def _flock(offset: int) -> bytes:
    """A write lock of byte ``offset``: ``struct flock`` (l_type, l_whence, l_start, l_len, l_pid 0 for OFD)."""
    return struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0)


def _try_lock(fd: int, offset: int) -> bool:
    try:
        if _SETLK is not None:
            fcntl.fcntl(fd, _SETLK, _flock(offset))
        else:  # pragma: no cover - not Linux
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        return False
    return True
