"""The word counts of a corpus generation this Store just wrote, kept in memory for the
training that usually comes next (a new corpus ingested, then trained on): the trainer
takes them instead of reading the rows back. The rows are written all the same.

Only a corpus' first generation is kept (its counts are exactly the batch's), after its
transaction committed, one at a time; taken once, by the next training, which uses them
where its version pins that generation (same corpus, number and digest) and trains on it
alone, in any word order (not ``first-seen``, whose order is the rows' ordinals).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ..records import VersionInfo

# Kept only up to this many distinct words (about 100 MB of Python objects, some 1 GB of
# English text): a larger generation is read back, as the rows stream into the trainer one by
# one, never beside it as a whole dict (the memory a large training peaks at).
MAX_WORDS = 1 << 20


class _Kept(NamedTuple):
    corpus: str
    generation: int
    digest: str
    counts: Mapping[bytes, int]


class FreshCounts:
    """The one kept generation of a Store (None: none); safe to share between threads."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self._lock = threading.Lock()

    def keep(self, corpus: str, generation: int, digest: str, counts: Mapping[bytes, int]) -> None:
        """Keep ``counts`` as generation ``generation`` of ``corpus`` (whose digest is ``digest``),
        committed just now; a generation after the first, or of more than ``MAX_WORDS`` words,
        is not kept (and drops what was)."""
        keep = generation == 1 and len(counts) <= MAX_WORDS
        with self._lock:
            self._kept = _Kept(corpus, generation, digest, counts) if keep else None

    def drop(self) -> None:
        with self._lock:
            self._kept = None

    def take(self, v: VersionInfo) -> Mapping[bytes, int] | None:
        """The counts version ``v`` trains on, where they are the ones kept (None: read them
        from the store); whatever was kept is let go either way."""
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is None or v.mixture or v.spec.tie_break == "first-seen" or v.without_counts:
            return None
        if (kept.corpus, kept.generation, kept.digest) != (v.corpus, v.corpus_generation, v.corpus_digest):
            return None
        return kept.counts
