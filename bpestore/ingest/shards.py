"""Shards of counts, packed to travel between processes (``pack_shard``), and the
ordinals that say where each word first occurred (``firsts_of``, ``merge_firsts``). No SQL."""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from ..text import COUNT_CORE

if TYPE_CHECKING:
    from .._countcore import CountTable

# A shard's words and counts as three byte strings: the words end to end, their
# lengths, their counts (each a LEB128 number: a byte or two for most), and a fourth,
# each word's ordinal. Bytes travel between processes without a step per word, and
# nothing here is unpickled.
Packed = tuple[bytes, ...]
_LAST = bytes(range(128, 256))  # the bytes a LEB128 number goes on after

# A word's ordinal: (task << 32) | its place in the counts that task was counted into.
# A counts dict holds its words in the order they first occurred; ``Segments``
# [(start, task), ...] say that the words from place ``start`` on came with ``task``.
Segments = list[tuple[int, int]]
TASK_SHIFT = 32

# Counts kept while a source is counted: a Counter, or the counting core's own table.
Counts: TypeAlias = "Counter | CountTable"


def pack_shard(words: list[bytes], counts: list[int], firsts: list[int] | None = None) -> Packed:
    """Distinct words and their counts (and ordinals) as a ``Packed`` shard."""
    packed = b"".join(words), _leb128(map(len, words)), _leb128(counts)
    return packed if firsts is None else (*packed, _leb128(firsts))


def unpack_shard(packed: Packed) -> tuple[list[bytes], list[int]]:
    """A ``Packed`` shard's words and counts, in order."""
    data, lengths, counts = packed[:3]
    ends = list(itertools.accumulate(_numbers(lengths)))
    words = list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))
    return words, _numbers(counts)


def packed_firsts(packed: Packed) -> list[int] | None:
    """A ``Packed`` shard's ordinals, in order (None: it has none)."""
    return _numbers(packed[3]) if len(packed) > 3 else None


def ordinals(n: int, segments: Segments) -> Iterator[int]:
    """The ordinals of the ``n`` words of counts in order, from their segments."""
    ends = [start for start, _ in segments[1:]] + [n]
    # Ranges chained (C-level): no Python step per word.
    return itertools.chain.from_iterable([range((task << TASK_SHIFT) + start, (task << TASK_SHIFT) + end)
                                          for (start, task), end in zip(segments, ends)])


def firsts_of(counts: Mapping[bytes, Any], segments: Segments) -> dict[bytes, int]:
    """Each word of counts (in the order they first occurred) with its ordinal."""
    return dict(zip(counts, ordinals(len(counts), segments)))


def keep_into(held: dict[int, Counts], segments: dict[int, Segments], key: int, task: int,
              new: Callable[[], Counts] = Counter) -> Counts:
    """The counts kept under ``key`` (``new()`` where none are), their words from here on
    marked as ``task``'s."""
    counts = held.get(key)
    if counts is None:
        counts = held[key] = new()
    segments.setdefault(key, []).append((len(counts), task))
    return counts


def join_firsts(a: dict[bytes, int], b: dict[bytes, int]) -> dict[bytes, int]:
    """The smaller ordinal of each word of either (the smaller dict merged into the larger)."""
    small, large = sorted((a, b), key=len)
    merge_firsts(large, small)
    return large


def merge_firsts(total: dict[bytes, int], part: Mapping[bytes, int]) -> None:
    """Keep the smaller ordinal of each word of ``part`` in ``total`` (C-level)."""
    if not total:
        total.update(part)
        return
    words = list(part)
    total.update(zip(words, map(min, map(total.get, words, part.values()), part.values())))


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


def merge_counts(total: Counter, part: dict[bytes, int]) -> None:
    """Add ``part`` to ``total`` in one C-level ``dict.update`` (no Python step
    per word: the parent merges millions of partial counts while the workers count)."""
    if not total or not part:
        total.update(part)  # Counter's own fast path for an empty total
        return
    merge_pairs(total, part, part.values())


def merge_pairs(total: Counter, words: Iterable[bytes], counts: Iterable[int]) -> None:
    """Add the counts of distinct ``words`` to ``total``, C-level: each word is read
    from total before it is written back, once."""
    words = list(words)
    dict.update(total, zip(words, map(operator.add, map(total.get, words, itertools.repeat(0)), counts)))


def in_word_order(counts: Counts, segments: Segments) -> tuple[dict[bytes, int], dict[bytes, int]] | None:
    """Counts in first-occurrence order (UTF-8 keys or a ``CountTable``; emptied) and their
    ordinals, made anew in word order by the counting core, the words' objects too: the rows
    are then sorted, looked up and written in memory order. None (counts left alone) where
    the core is not built."""
    if COUNT_CORE is None or not counts:
        return None
    if not isinstance(counts, dict):
        return COUNT_CORE.merge_shard(counts.shard(1, segments))
    if not isinstance(next(iter(counts)), bytes):
        return None
    counts_in_order, firsts = COUNT_CORE.merge_shard(COUNT_CORE.shard(counts, 1, segments))
    return counts_in_order, firsts


def merge_tables(held: dict[int, Counts], segments: dict[int, Segments], dropped: Collection[int]
                 ) -> tuple[dict[bytes, int], dict[bytes, int], dict[int, int]] | None:
    """The counting core's tables of several keys merged at once (emptied; ``dropped`` keys' let
    go), as a worker's shard is reduced: the counts in word order, their ordinals, each key's
    distinct words. None (counts left alone) where they are not all the core's tables."""
    if COUNT_CORE is None or any(isinstance(counts, dict) for counts in held.values()):
        return None
    pieces: list[Packed] = []
    distinct: dict[int, int] = {}
    while held:
        key, counts = held.popitem()
        order = segments.pop(key)
        if key not in dropped and counts:
            distinct[key] = len(counts)
            pieces += counts.shard(1, order)  # type: ignore[union-attr]
    if not pieces:
        return {}, {}, distinct
    merged, firsts = COUNT_CORE.merge_shard(pieces)
    return merged, firsts, distinct


def utf8_keys(counts: Counts) -> bool:
    """Whether counts are keyed by UTF-8 already (counted by the counting core)."""
    return not isinstance(counts, dict) or not counts or isinstance(next(iter(counts)), bytes)


def as_bytes(counts: Counts) -> dict[bytes, int]:
    """The counts with UTF-8 keys (they pickle without re-encoding, and the store
    wants them), in the same order; ``counts`` is emptied."""
    if not isinstance(counts, dict):
        return counts.take()
    if utf8_keys(counts):
        return counts
    converted = {word.encode("utf-8", "surrogatepass"): n for word, n in counts.items()}  # in order (ordinals)
    counts.clear()
    return converted
