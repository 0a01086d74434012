"""Sources on their way to becoming one batch of counts (``scheduler``): what came back of them. No SQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..records import Source
from ..sources import file_stamp
from .shards import Packed, join_firsts, merge_counts


@dataclass(eq=False)
class Group:
    """Sources on their way to becoming one CountedBatch: large ones, each counted
    under a key of its own (or, counted here, all under one: ``shared``), or small
    ones, counted under one key."""

    sources: list[Source] = field(default_factory=list)
    large: dict[int, Source] = field(default_factory=dict)  # a large source's key -> it
    key: int = 0  # the small sources' key (0: a group of large ones)
    # Counted here (one worker): the key its large plain files are counted under, together, each a
    # piece of one table (``Task.shared``; -1: no more, its table held a source not kept), and theirs.
    shared: int = 0
    pieced: set[int] = field(default_factory=set)
    counts: dict[int, Counter] | None = field(default_factory=dict)  # whole counts per key; None: not kept
    firsts: dict[int, dict[bytes, int]] = field(default_factory=dict)  # their ordinals
    dropped: set[int] = field(default_factory=set)  # keys whose counts are not kept (a repeat, a failure)
    size: int = 0  # bytes of its sources
    pending: int = 0  # its tasks not yet answered
    closed: bool = False  # no more sources or tasks come
    flushed: bool = False  # the workers were asked for its counts
    checked: bool = False  # its large sources were checked unchanged, once all was read
    shards: list[list[tuple[int, Packed]]] | None = None  # counts workers handed on, per shard, not yet reduced
    held: int = 0  # bytes of those shards
    reduced: list[tuple[dict[bytes, int], dict[bytes, int]]] = field(default_factory=list)  # counts, ordinals
    distinct: Counter = field(default_factory=Counter)  # each large source's distinct words, from the shards
    repeats: list[Source] = field(default_factory=list)  # small sources counted, then found to repeat one

    def joined(self) -> tuple[Counter, dict[bytes, int]]:
        """Its counts and their ordinals: the reduced shards (no word in two of them: joined
        without adding, each let go once in: the parent never holds the counts twice) and
        the whole counts of each key kept; each large source's distinct words."""
        if self.counts is None:
            return Counter(), {}
        for key in self.dropped:
            self.counts.pop(key, None)
            self.firsts.pop(key, None)
        firsts: dict[bytes, int] = {}
        for part in [reduced[1] for reduced in self.reduced] + list(self.firsts.values()):
            firsts = join_firsts(firsts, part)  # (the shards' are disjoint)
        self.firsts = {}
        for key, source in self.large.items():
            if key not in self.dropped and key not in self.pieced:  # (a piece's are the table's)
                # A key's counts come all whole or all in shards (``Pool.flush``).
                source.n_distinct = self.distinct[key] + len(self.counts.get(key, ()))
        if not self.reduced and len(self.counts) == 1:
            return next(iter(self.counts.values())), firsts
        total: Counter = Counter()
        while self.reduced:
            dict.update(total, self.reduced.pop(0)[0])
        for counts in self.counts.values():
            merge_counts(total, counts)
        return total, firsts

    def piece_of(self, key: int, keys: Iterator[int]) -> int:
        """The key of its shared table (the next of ``keys`` for the first), source ``key`` counted there."""
        self.shared = self.shared or next(keys)
        self.pieced.add(key)
        return self.shared

    def holds_pieces_of(self, sources: list[Source]) -> bool:
        """Whether its shared table holds counts of one of these sources."""
        return any(k in self.pieced and any(s is source for s in sources) for k, source in self.large.items())

    def pieces_kept(self) -> list[Source]:
        """Its large sources counted in its shared table, and kept."""
        return [s for k, s in self.large.items() if k in self.pieced and k not in self.dropped and not s.skipped]

    def changed(self, stamps: dict[str, tuple[int, int, int] | None]) -> Source | None:
        """Once: the first large source changed since it was listed (a small one is checked where read)."""
        if not self.checked:
            self.checked = True
            for key, src in self.large.items():
                if key not in self.dropped and not src.skipped and file_stamp(src.source) != stamps.get(src.source):
                    return src
        return None

    @property
    def done(self) -> bool:
        return self.closed and self.pending == 0 and not self.shards

    def drop(self) -> None:
        """Keep nothing of it."""
        self.sources, self.counts, self.closed, self.shards, self.reduced, self.firsts = [], None, True, None, [], {}
