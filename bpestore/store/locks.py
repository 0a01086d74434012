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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_GETLK = getattr(fcntl, "F_OFD_GETLK", None)


def lock_file(url: str) -> Path | None:
    """``<database>-train.lock`` of a writable SQLite file; None for other databases."""
    if not url.startswith("sqlite"):
        return None
    if url.startswith("sqlite:///") and "?" not in url:  # a file as db.resolve_url names it
        database = url[len("sqlite:///"):]
        return Path(f"{database}-train.lock") if database and database != ":memory:" else None
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.query.get("mode") == "ro":
        return None
    if parsed.database.startswith("file:"):
        return None
    return Path(f"{parsed.database}-train.lock")


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
    if not url.startswith("sqlite") or _GETLK is None:
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database or ""
    database = database.removeprefix("file:") if "uri=true" in url else database
    if not database or database == ":memory:":
        return None
    try:
        fd = os.open(f"{database}-train.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False  # no run ever locked a version of this file
    except OSError:
        return None
    try:
        asked = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, version_id, 1, 0)
        answer = fcntl.fcntl(fd, _GETLK, asked)
    except OSError:
        return None
    finally:
        os.close(fd)
    return struct.unpack("hhqqi4x", answer)[0] != fcntl.F_UNLCK


def _try_lock(fd: int, offset: int) -> bool:
    try:
        if _SETLK is not None:
            # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks), padded.
            fcntl.fcntl(fd, _SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
        else:  # pragma: no cover - not Linux
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError:
        return False
    return True
