"""The pieces of sources a counting task holds, and how each is read and decoded; a large file's
hash, read beside its counting (``FileHash``). No SQL.

A ``FileRange`` is bytes of a large plain file (read by the worker itself), ``SmallFiles`` a task's
small files (each read whole, and checked unchanged, by the worker), a ``FileBytes`` a small file the caller
read, a ``TextPiece`` text the caller read and decoded (standard input, a compressed file, JSON Lines).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import SourceError
from ..sources import changed_while_read, decode, read_range
from ..text import COUNT_CORE

_READ_ONLY = os.O_RDONLY | getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class FileRange:
    """Bytes ``start:end`` of a plain file."""

    name: str
    start: int
    end: int
    first_line = 1

    @property
    def size(self) -> int:
        return self.end - self.start

    def decoded(self, errors: str) -> str:
        return decode(read_range(self.name, self.start, self.end), self.name, errors, self.start)


@dataclass(frozen=True)
class FileBytes:
    """The content of a small file."""

    name: str
    data: bytes
    first_line = 1

    @property
    def size(self) -> int:
        return len(self.data)

    def decoded(self, errors: str) -> str:
        return decode(self.data, self.name, errors)


def read_file(name: str, stamp: tuple[int, int, int] | None) -> bytes:
    """A small file's bytes (the Python reference of ``SmallFiles.read``): one read of the size
    listed in ``stamp`` and a byte more (a file grown is read to its end); a file whose size,
    modification time or inode is no longer ``stamp`` after reading fails (None: not checked)."""
    try:
        fd = os.open(name, _READ_ONLY)  # (not inherited: PEP 446)
        try:
            data = os.read(fd, want := (stamp[0] if stamp else 0) + 1)
            data += b"".join(iter(lambda: os.read(fd, 1 << 20), b"")) if len(data) == want else b""
            found = os.fstat(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise unreadable(name, exc.strerror or str(exc)) from None
    if stamp is not None and (found.st_size, found.st_mtime_ns, found.st_ino) != stamp:
        raise changed_while_read(name)
    return data


@dataclass(frozen=True)
class SmallFiles:
    """A task's small files, which the worker reads whole, in order: their names, and each one's
    size, modification time and inode when the caller listed it (``stamps``: read again after
    reading, a file written meanwhile fails); ``size``: their bytes as listed."""

    names: list[str]
    stamps: list[tuple[int, int, int] | None]
    size: int
    first_line = 1

    def read(self) -> tuple[list[bytes], SourceError | None]:
        """The bytes of each file, as ``read_file`` reads it, up to the first that fails (and its
        error): in one call of the counting core where it is built."""
        if COUNT_CORE is None:
            datas = []
            for name, stamp in zip(self.names, self.stamps):
                try:
                    datas.append(read_file(name, stamp))
                except SourceError as exc:
                    return datas, exc
            return datas, None
        datas, failure = COUNT_CORE.read_files(self.names, self.stamps)
        if failure is None:
            return datas, None
        name = self.names[len(datas)]
        return datas, changed_while_read(name) if failure == 0 else unreadable(name, os.strerror(failure))


def unreadable(name: str, why: str) -> SourceError:
    return SourceError(f"cannot read {name}: {why}", source=name)


@dataclass(frozen=True)
class TextPiece:
    """Text of source ``name`` whose first line is line ``first_line`` of the
    source (for JSON Lines messages)."""

    name: str
    text: str
    first_line: int = 1

    @property
    def size(self) -> int:
        return len(self.text)

    def decoded(self, errors: str) -> str:
        return self.text


Piece = FileRange | SmallFiles | FileBytes | TextPiece


class FileHash:
    """The hash of a file's first ``size`` bytes (``hasher``: a hashlib object, or None: none),
    read and hashed in a thread of its own while the file is counted (a read and a hash update of
    a large block let go of the GIL: with one worker they run beside the counting core). Leaving
    the ``with`` block stops it."""

    BLOCK = 1 << 20  # bytes read and hashed at a time (8 MiB: ~2% more CPU, the block out of the caches)

    def __init__(self, path: str, size: int, hasher: Any) -> None:
        self.path, self.size, self.hasher = path, size, hasher
        self.error: OSError | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="bpestore-hash", daemon=True)

    def __enter__(self) -> FileHash:
        if self.hasher is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped = True
        if self.thread.is_alive():
            self.thread.join()

    def _run(self) -> None:
        view = memoryview(bytearray(min(self.BLOCK, self.size)))
        left = self.size
        try:
            with open(self.path, "rb", buffering=0) as f:
                while left and not self.stopped and (n := f.readinto(view[:min(left, self.BLOCK)])):
                    self.hasher.update(view[:n])
                    left -= n
        except OSError as exc:
            self.error = exc

    def hexdigest(self) -> str:
        """The file's sha256, once all of it is read."""
        self.thread.join()
        if self.error is not None:
            raise SourceError(f"cannot read {self.path}: {self.error.strerror or self.error}",
                              source=self.path) from None
        return self.hasher.hexdigest()
