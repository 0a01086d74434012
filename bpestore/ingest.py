"""Reading sources into word counts: streaming, hashing, UTF-8 checking. No SQL.

A source is read in binary chunks (never whole), hashed as it is read, decoded
incrementally (an error names the source and the byte offset), re-cut at safe
places (``text.rechunk``) and counted by the spec's pipeline.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import hashlib
import lzma
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from .errors import BpestoreError
from .text import TextPipeline, rechunk

CHUNK_BYTES = 1 << 20
ERROR_POLICIES = ("strict", "replace", "skip")


@dataclass
class SourceCounts:
    """What one source contributed: its identity and its word counts."""

    source: str
    sha256: str = ""
    size: int = 0
    n_words: int = 0
    counts: Counter = field(default_factory=Counter)


def open_source(path: str | Path) -> BinaryIO:
    """Open a file for binary reading, decompressing .gz/.xz/.bz2; '-' is stdin."""
    name = str(path)
    if name == "-":
        return sys.stdin.buffer
    p = Path(name)
    if not p.exists():
        raise BpestoreError(f"file not found: {name}")
    if p.is_dir():
        raise BpestoreError(f"{name} is a directory; give the files in it")
    if name.endswith(".gz"):
        return gzip.open(p, "rb")
    if name.endswith(".xz"):
        return lzma.open(p, "rb")
    if name.endswith(".bz2"):
        return bz2.open(p, "rb")
    return open(p, "rb")


class TextReader:
    """Iterate the decoded text of a binary stream, hashing the bytes as read.

    ``errors``: ``strict`` raises BpestoreError naming the byte offset of the
    first invalid UTF-8 sequence; ``replace`` substitutes U+FFFD; ``skip`` drops
    the invalid bytes.
    """

    def __init__(self, stream: BinaryIO, name: str, *, errors: str = "strict",
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        if errors not in ERROR_POLICIES:
            raise BpestoreError(f"--errors must be one of {', '.join(ERROR_POLICIES)}, not {errors!r}")
        self.stream = stream
        self.name = name
        self.errors = {"skip": "ignore"}.get(errors, errors)
        self.chunk_bytes = chunk_bytes
        self.sha256 = hashlib.sha256()
        self.size = 0

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(self.errors)
        while True:
            try:
                data = self.stream.read(self.chunk_bytes)
            except (OSError, EOFError, lzma.LZMAError) as exc:
                raise BpestoreError(f"cannot read {self.name}: {exc}") from None
            final = not data
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(data, final)
            except UnicodeDecodeError as exc:
                offset = self.size - pending + exc.start
                raise BpestoreError(
                    f"{self.name} is not valid UTF-8 at byte {offset}; "
                    "pass --errors replace or --errors skip to accept it") from None
            self.sha256.update(data)
            self.size += len(data)
            if text:
                yield text
            if final:
                return


def file_sha256(path: str | Path) -> str:
    """sha256 of a source's content (decompressed), read in chunks."""
    h = hashlib.sha256()
    with open_source(path) as stream:
        try:
            while data := stream.read(CHUNK_BYTES):
                h.update(data)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise BpestoreError(f"cannot read {path}: {exc}") from None
    return h.hexdigest()


def count_source(path: str | Path, pipeline: TextPipeline, *, errors: str = "strict") -> SourceCounts:
    """Count the pre-tokens of one source (a file path or '-')."""
    name = str(path)
    result = SourceCounts(source=name)
    stream = open_source(path)
    try:
        reader = TextReader(stream, name, errors=errors)
        for piece in rechunk(reader, pipeline):
            pipeline.count_words(piece, result.counts)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    result.sha256 = reader.sha256.hexdigest()
    result.size = reader.size
    result.n_words = sum(result.counts.values())
    return result
