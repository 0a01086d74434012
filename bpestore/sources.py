"""Text sources: naming them, opening them (decompressing), reading, hashing, decoding, and
cutting a plain file where each range can be read alone. Used by ingest and the encoder. No SQL.

A source is a file, ``-`` for standard input, or a ``.gz``/``.xz``/``.bz2`` file.
Decoding follows an ``errors`` policy (one of ``ERROR_POLICIES``): ``strict``
raises ``SourceError`` naming the byte of the first invalid UTF-8 sequence (or NUL
byte: text holds none), ``replace`` substitutes U+FFFD, ``skip`` drops the invalid bytes.
"""

from __future__ import annotations

import codecs
import fnmatch
import hashlib
import importlib
import os
import stat
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from .errors import BpestoreWarning, InvalidArgumentError, NotFoundError, SourceError
from .spec import ERROR_POLICIES

if TYPE_CHECKING:
    from .text import TextPipeline

COMPRESSED_SUFFIXES = (".gz", ".xz", ".bz2")
_MODULES = {".gz": "gzip", ".xz": "lzma", ".bz2": "bz2"}  # imported only for a compressed file


def _opener(suffix: str) -> Callable[..., Any] | None:
    """The ``open`` of the module that decompresses files with this suffix, or None."""
    module = _MODULES.get(suffix)
    return None if module is None else importlib.import_module(module).open


def _read_errors() -> tuple[type[Exception], ...]:
    """What reading a source may raise (an except clause evaluates it only when one is raised)."""
    import lzma

    return OSError, EOFError, lzma.LZMAError

# Bytes read at a time.
READ_BYTES = 1 << 20


def expand_paths(paths: Iterable[str | Path], *, glob: str | None = None) -> list[str]:
    """The files to read: each path as given, and the files under each directory
    (recursively, sorted, those matching ``glob`` such as ``"*.txt"``)."""
    files: list[str] = []
    for path in map(str, paths):
        if path == "-":
            if "-" in files:
                raise InvalidArgumentError("'-' (standard input) can be given only once")
            files.append(path)
            continue
        p = Path(path)
        if p.is_dir():
            found = sorted(_files_under(p, glob))
            if not found:
                raise NotFoundError(f"no files{f' matching {glob!r}' if glob else ''} under {path}")
            for name in found:
                _check_file_name(name)
            files.extend(found)
        elif p.exists():
            _check_file_name(path)
            if p.is_file() and p.stat().st_size == 0:
                raise SourceError(f"{path} is empty: there is nothing to count in it", source=path)
            files.append(path)
        else:
            raise NotFoundError(f"file not found: {path}")
    return files


def _files_under(folder: Path, glob: str | None) -> Iterator[str]:
    """The files under a folder, recursively, whose names match ``glob`` (as ``Path.rglob``
    finds them: hidden ones too, no folder reached through a link), named as ``Path`` names
    them; one directory listing per folder, no ``stat`` per regular file."""
    if glob is not None and ("/" in glob or "**" in glob):
        yield from (str(f) for f in folder.rglob(glob) if f.is_file())
        return
    root = str(folder)
    folders = ["" if root == "." else root]  # Path(".") / "x" is named "x"
    while folders:
        here = folders.pop()
        with os.scandir(here or ".") as entries:
            for entry in entries:
                name = entry.path if here else entry.name  # (os.path.join(here, entry.name))
                if entry.is_dir():
                    if not entry.is_symlink():
                        folders.append(name)
                elif (glob is None or fnmatch.fnmatchcase(entry.name, glob)) and entry.is_file():
                    yield name


JSON_LINES_SUFFIXES = (".jsonl", ".ndjson")
_JSON_NAMES = tuple(s + c for s in JSON_LINES_SUFFIXES for c in ("", *COMPRESSED_SUFFIXES))


def warn_raw_json(files: Sequence[str]) -> None:
    """Warn where files named as JSON Lines are about to be counted as raw text (no field given)."""
    named = [f for f in files if f.lower().endswith(_JSON_NAMES)]
    if named:
        more = f" and {len(named) - 1:,} more" if len(named) > 1 else ""
        warnings.warn(BpestoreWarning(
            f"{named[0]}{more} look{'' if more else 's'} like JSON Lines, but no field was named: the raw JSON "
            "(keys, quotes, escapes) is counted as text; name the field to count with jsonl_field",
            params=("jsonl_field",)), stacklevel=3)


def _check_file_name(name: str) -> None:
    """A file's name is stored as text: one that is not UTF-8 is named (its bytes escaped) and refused."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(name).decode("utf-8", "backslashreplace")
        raise SourceError(f"the file name {shown} is not valid UTF-8; rename it, or leave it out "
                          "(glob='*.txt')", source=shown, params=("glob",)) from None


def is_compressed(path: str) -> bool:
    return path.endswith(COMPRESSED_SUFFIXES)


def file_size(path: str) -> int | None:
    """The size of a file on disk; None for standard input and for what is read as
    a stream like it (a pipe, a FIFO, ``<(cmd)``, a device such as /dev/zero: no
    size to cut it by, read once)."""
    if path == "-":
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        raise NotFoundError(f"file not found: {path}") from None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


class Opened:
    """A source opened for binary reading: ``stream`` gives its (decompressed)
    bytes, ``position()`` how far into the file on disk reading has got."""

    def __init__(self, name: str, stdin: BinaryIO | None = None) -> None:
        self.raw: BinaryIO | None = None
        if name == "-":
            self.stream = stdin if stdin is not None else sys.stdin.buffer
            return
        try:
            self.raw = open(name, "rb")
        except FileNotFoundError:
            raise NotFoundError(f"file not found: {name}") from None
        except IsADirectoryError:
            raise InvalidArgumentError(f"{name} is a directory; give the files in it") from None
        except OSError as exc:
            raise SourceError(f"cannot read {name}: {exc.strerror or exc}", source=name) from None
        opener = _opener(Path(name).suffix)
        self.stream = opener(self.raw, "rb") if opener else self.raw

    def position(self) -> int | None:
        if self.raw is None or not self.raw.seekable():
            return None  # a stream (a pipe, a FIFO, a device): as stdin
        return self.raw.tell()

    def close(self) -> None:
        if self.raw is not None:
            if self.stream is not self.raw:
                self.stream.close()
            self.raw.close()

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """What changes when a file is written: its size, modification time and inode (None: stdin, a
    stream such as a FIFO (read once: its time changes as it is read), or gone)."""
    if path == "-":
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return found.st_size, found.st_mtime_ns, found.st_ino


def open_source(path: str | Path) -> BinaryIO:
    """A source opened for binary reading, .gz/.xz/.bz2 decompressed; '-' is
    stdin. Closing the stream closes the file."""
    name = str(path)
    if name == "-":
        return sys.stdin.buffer
    opened = Opened(name)  # the checks and their messages
    if opened.stream is opened.raw:
        return opened.raw
    opened.close()
    # A decompressing stream opened by name owns (and closes) its file.
    return cast("Callable[..., BinaryIO]", _opener(Path(name).suffix))(name, "rb")


def read_range(path: str, start: int = 0, end: int | None = None) -> bytes:
    """Bytes ``start:end`` of a plain file (to its end if ``end`` is None)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read() if end is None else f.read(end - start)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}", source=path) from None


class TextReader:
    """Iterate the decoded text of a binary stream, hashing the bytes as read
    (unless ``hashed`` is False).

    ``errors``: one of ``ERROR_POLICIES`` (see the module).
    """

    def __init__(self, stream: BinaryIO, name: str, *, errors: str = "strict",
                 chunk_bytes: int = READ_BYTES, hashed: bool = True) -> None:
        check_errors(errors)
        self.stream = stream
        self.name = name
        self.errors = _CODEC_ERRORS[errors]
        self.chunk_bytes = chunk_bytes
        self.sha256 = hashlib.sha256()
        self.hashed = hashed
        self.size = 0

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(self.errors)
        while True:
            try:
                data = self.stream.read(self.chunk_bytes)
            except _read_errors() as exc:
                raise SourceError(f"cannot read {self.name}: {exc}", source=self.name,
                                  offset=self.size) from None
            final = not data
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(data, final)
            except UnicodeDecodeError as exc:
                raise invalid_utf8(self.name, self.size - pending + exc.start) from None
            if self.errors == "strict" and (nul := data.find(b"\0")) >= 0:
                raise nul_byte(self.name, self.size + nul)
            if self.hashed:
                self.sha256.update(data)
            self.size += len(data)
            if text:
                yield text
            if final:
                return


def decode(data: bytes, name: str, errors: str, offset: int = 0) -> str:
    """The text of bytes found at ``offset`` in a source, under an ``errors`` policy."""
    try:
        text = data.decode("utf-8", _CODEC_ERRORS[errors])
    except UnicodeDecodeError as exc:
        raise invalid_utf8(name, offset + exc.start) from None
    if errors == "strict" and (nul := data.find(b"\0")) >= 0:
        raise nul_byte(name, offset + nul)
    return text


_CODEC_ERRORS = {"strict": "strict", "replace": "replace", "skip": "ignore"}


def invalid_utf8(name: str, offset: int) -> SourceError:
    return SourceError(f"{name} is not valid UTF-8 at byte {offset}; "
                       "pass errors='replace' or errors='skip' to accept it",
                       source=name, offset=offset, params=("errors",))


def nul_byte(name: str, offset: int) -> SourceError:
    return SourceError(f"{name} holds a NUL byte at byte {offset}: it looks like a binary file, not text; "
                       "pass errors='replace' to count it as text anyway",
                       source=name, offset=offset, params=("errors",))


def changed_while_read(name: str) -> SourceError:
    return SourceError(f"{name} changed while it was read; nothing of it was stored: "
                       "ingest it again once it stays as it is", source=name)


def check_errors(errors: str) -> None:
    if errors not in ERROR_POLICIES:
        raise InvalidArgumentError(f"errors must be one of {', '.join(ERROR_POLICIES)}, not {errors!r}",
                                   params=("errors",))


def file_sha256(path: str | Path) -> str:
    """sha256 of a source's content (decompressed), read in chunks."""
    h = hashlib.sha256()
    with Opened(str(path)) as opened:
        try:
            while data := opened.stream.read(READ_BYTES):
                h.update(data)
        except _read_errors() as exc:
            raise SourceError(f"cannot read {path}: {exc}", source=str(path)) from None
    return h.hexdigest()


def cut_points(path: str, size: int, pipeline: TextPipeline, *, step: int, window: int) -> list[int]:
    """Byte offsets that cut a plain file into ranges of about ``step`` bytes,
    each readable and pre-tokenizable alone (``TextPipeline.cut_anywhere``,
    looked for within ``window`` bytes), from 0 to ``size``."""
    points = [0]
    with open(path, "rb") as f:
        target = step
        while target + step // 2 < size:
            f.seek(target)
            data = f.read(window)
            # Start at a character: skip the continuation bytes of one cut in two.
            skip = 0
            while skip < 3 and skip < len(data) and 0x80 <= data[skip] < 0xC0:
                skip += 1
            # surrogateescape: any bytes decode, and encode back to the same length.
            text = data[skip:].decode("utf-8", "surrogateescape")
            cut = pipeline.cut_anywhere(text)
            if cut:
                points.append(target + skip + len(text[:cut].encode("utf-8", "surrogateescape")))
                target = points[-1] + step
            else:
                target += window  # no place to cut here: look further on
    points.append(size)
    return points
