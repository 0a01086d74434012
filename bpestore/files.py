"""Files written whole or not at all (a failure or a kill leaves the target as it was), and
somebody else's files read within bounds."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Sequence
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
    clear_leftovers(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".part")
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        with open(temp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(temp, 0o666 & ~_umask())  # as a file opened for writing would be (mkstemp's is private)
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


@contextmanager
def atomic_folder(path: Path, names: Sequence[str], *, force: bool = False) -> Iterator[Path]:
    """A temporary folder beside the folder ``path`` to write the files ``names``
    in; once the block ends they replace those of ``path`` all together: one
    rename of a folder (Linux swaps the two folders in one step), so a kill at any
    moment leaves ``path`` wholly old or wholly new. The other plain files of
    ``path`` are kept (linked into the new folder); a ``path`` holding folders is
    refused (InvalidArgumentError), as is, without ``force``, one already holding
    one of ``names`` (ConflictError).
    """
    old = _folder_entries(path, names, force=force) if path.exists() else None
    clear_leftovers(path)
    temp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=".part"))
    try:
        yield temp
        for name in names:
            with open(temp / name, "rb") as f:
                os.fsync(f.fileno())
            os.chmod(temp / name, 0o666 & ~_umask())
        if old is None:
            os.chmod(temp, 0o777 & ~_umask())
            _fsync_folder(temp)
            try:
                os.rename(temp, path)  # a folder made meanwhile: replaced only while empty
            except OSError:
                raise ConflictError(f"{path} was made meanwhile; run the export again", params=("out",)) from None
        else:
            os.chmod(temp, stat.S_IMODE(path.stat().st_mode))
            for name in _folder_entries(path, names, force=force):
                try:
                    os.link(path / name, temp / name)
                except OSError:
                    shutil.copy2(path / name, temp / name)
            _fsync_folder(temp)
            _swap_folders(temp, path)
            shutil.rmtree(temp, ignore_errors=True)
        _fsync_folder(path.parent)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _folder_entries(path: Path, names: Sequence[str], *, force: bool) -> list[str]:
    """The names in folder ``path`` other than ``names``: plain files only."""
    others = []
    for entry in os.scandir(path):
        if entry.name in names:
            if not force:
                raise ConflictError(f"{path / entry.name} exists; pass force=True to replace it",
                                    params=("force",))
            continue
        if not entry.is_file(follow_symlinks=False):
            raise InvalidArgumentError(f"{path} holds {entry.name!r}, which is not a plain file; export into a "
                                       "folder of its own (its files are replaced all together)", params=("out",))
        others.append(entry.name)
    return others


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _swap_folders(new: Path, path: Path) -> None:
    """Put folder ``new`` at ``path``, and ``path``'s old folder at ``new``:
    renameat2(RENAME_EXCHANGE), one step; where the system has no such call, two
    renames (a kill between them leaves ``path`` absent, the old folder beside it)."""
    import ctypes  # here: a plain write does without it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        renameat2 = None
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE) == 0:
            return
        errno = ctypes.get_errno()
        if errno not in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: no exchange here; two renames
            raise OSError(errno, os.strerror(errno), str(path))
    aside = new.with_name(new.name + ".old")
    os.rename(path, aside)
    os.rename(new, path)
    os.rename(aside, new)


def _temp_prefix(path: Path) -> str:
    """A temporary file's name beside ``path`` says whose it is: ``.NAME.PID.``."""
    return f".{path.name}.{os.getpid()}."


def read_bounded(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """A regular file's bytes, refused past ``limit`` bytes (opened without blocking:
    a FIFO is refused, not waited on); ``what`` names the file in messages
    (``"tokenizer.json"``)."""
    try:
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
            info = os.fstat(f.fileno())
            regular = stat.S_ISREG(info.st_mode)
            data = f.read(limit + 1) if regular and info.st_size <= limit else b""
    except FileNotFoundError:
        raise NotFoundError(f"file not found: {path}", params=("path",)) from None
    except OSError as exc:
        raise InvalidArgumentError(f"{path} cannot be read: {exc.strerror}", params=("path",)) from None
    if not regular:
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InvalidArgumentError(f"{path} is {kind}; give the {what} file", params=("path",))
    if max(info.st_size, len(data)) > limit:
        raise InvalidArgumentError(f"{path} is over {limit >> 20} MiB, the most a {what} may hold here",
                                   params=("path",))
    return data


def partial_path(path: Path, kind: str) -> Path:
    """Where this process writes ``path`` before it is renamed into place
    (``.NAME.PID.KIND.part``: ``clear_leftovers`` knows it, and SQLite's files beside it)."""
    return path.with_name(f"{_temp_prefix(path)}{kind}.part")


_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal", "-train.lock")


def clear_leftovers(path: Path, *, age: float = 0.0) -> list[Path]:
    """Remove the temporary files and folders that a killed writer of ``path`` left
    beside it (``.NAME.PID.*.part``, and a SQLite store's files beside one, of a
    process no longer running, untouched for ``age`` seconds); returns them."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    prefix = f".{path.name}."
    for entry in entries:
        base = next((entry.name[:-len(s)] for s in _SQLITE_SIDE_FILES if entry.name.endswith(s)), entry.name)
        if not (entry.name.startswith(prefix) and base.endswith((".part", ".part.old"))):
            continue
        pid = entry.name[len(prefix):].split(".", 1)[0]
        try:
            fresh = time.time() - entry.stat(follow_symlinks=False).st_mtime < age
            if not pid.isdigit() or fresh or _running(int(pid)):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            continue
        removed.append(Path(entry.path))
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


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
