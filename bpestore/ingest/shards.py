"""Shards of counts, packed to travel between processes (``pack_shard``). No SQL."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

# A shard's words and counts as three byte strings: the words end to end, their
# lengths, their counts (each a LEB128 number: a byte or two for most). Bytes travel
# between processes without a step per word, and nothing here is unpickled.
Packed = tuple[bytes, bytes, bytes]
_LAST = bytes(range(128, 256))  # the bytes a LEB128 number goes on after


def pack_shard(words: list[bytes], counts: list[int]) -> Packed:
    """Distinct words and their counts as a ``Packed`` shard."""
    return b"".join(words), _leb128(map(len, words)), _leb128(counts)


def unpack_shard(packed: Packed) -> tuple[list[bytes], list[int]]:
    """A ``Packed`` shard's words and counts, in order."""
    data, lengths, counts = packed
    ends = list(itertools.accumulate(_numbers(lengths)))
    words = list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))
    return words, _numbers(counts)


def n_packed(packed: Packed) -> int:
    """How many words a ``Packed`` shard holds (the last bytes of its lengths)."""
    return len(packed[1].translate(None, _LAST))


def _leb128(numbers: Iterable[int]) -> bytes:
    out = bytearray()
    for n in numbers:
        if n < 0:
            raise ValueError("shard: every count must be at least 0")
        while n >= 0x80:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        out.append(n)
    return bytes(out)


def _numbers(data: bytes) -> list[int]:
    numbers, n, shift = [], 0, 0
    for byte in data:
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            numbers.append(n)
            n, shift = 0, 0
    return numbers
