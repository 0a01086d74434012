"""Files written whole or not at all: a failure or a kill leaves the target as it was."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import ConflictError, InvalidArgumentError, NotFoundError


def check_target(path: Path, *, force: bool = False) -> None:
    """Refuse early, before any work, what ``atomic_path`` could not write: a
    missing folder (NotFoundError), a folder as ``path`` (InvalidArgumentError),
    an existing file without ``force`` (ConflictError; checked again on rename)."""
    if not path.parent.is_dir():
        raise NotFoundError(f"folder {path.parent} does not exist; create it first", params=("out",))
    if path.is_dir():
        raise InvalidArgumentError(f"{path} is a folder; give a file path", params=("out",))
    if path.exists() and not force:
        raise ConflictError(f"{path} exists; pass force=True to replace it", params=("force",))


@contextmanager
def atomic_path(path: Path, *, force: bool = False) -> Iterator[Path]:
    """A temporary file beside ``path`` to write by name; once the block ends it is
    put on disk (fsync) and renamed onto ``path``. Without ``force`` an existing
    ``path`` (even one made meanwhile) is not replaced: ConflictError.

    >>> with atomic_path(Path("chart.png"), force=True) as temp: fig.savefig(temp)  # doctest: +SKIP
    """
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # as a file opened for writing would be (mkstemp's is private)
        if force:
            os.replace(temp, path)
        else:
            try:
                os.link(temp, path)  # fails if path exists: no check-then-write race
            except FileExistsError:
                raise ConflictError(f"{path} exists; pass force=True to replace it", params=("force",)) from None
            temp.unlink()
        _fsync_folder(path.parent)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_file(path: Path, *, force: bool = False) -> Iterator[IO[str]]:
    """``atomic_path`` as an open text file.

    >>> with atomic_file(Path("t.json")) as f: f.write("{}")  # doctest: +SKIP
    """
    with atomic_path(path, force=force) as temp, open(temp, "w", encoding="utf-8") as f:
        yield f


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the system allows opening folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
