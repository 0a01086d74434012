"""Versions loaded as tokenizers (a complete version: its snapshot; one still
training: its rows), cached per process by the state of the version. Nothing of
the encoder or the records is imported until a call needs it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from ..spec import EncoderFacts, TokenizerSpec
from .drivers import Transaction
from .version_tables import VersionReads
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from ..encoder import Tokenizer

Reading = Callable[[], AbstractContextManager[Transaction]]  # the store's read transactions


class TokenizerCache:
    """Tokenizers loaded in this process, by (database URL, version id, version
    state); the state changes with the version, so a changed version is never
    served stale. When full, the oldest goes. Safe to share between threads
    (a web server's requests)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._loaded: dict[tuple[str, int, str], Tokenizer] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str]) -> Tokenizer | None:
        with self._lock:
            return self._loaded.get(key)

    def put(self, key: tuple[str, int, str], tokenizer: Tokenizer) -> None:
        with self._lock:
            if key not in self._loaded and len(self._loaded) >= self.size:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[key] = tokenizer

    def clear(self) -> None:
        with self._lock:
            self._loaded.clear()


def vocabulary(reading: Reading, ref: str) -> Vocabulary:
    """A version's vocabulary: from its snapshot where it is complete (unpacked once
    the transaction is over), else from its rows."""
    with reading() as tx:
        reads = VersionReads(tx)
        version_id = reads.resolve(ref)
        row = reads.snapshot_row(version_id)
        vocab = reads.rows_vocabulary(version_id) if row is None else None
    return vocab if row is None else row.checked(version_id)[0]  # type: ignore[return-value]


def load(reading: Reading, url: str, ref: str, cache: TokenizerCache) -> Tokenizer:
    """The Tokenizer of a version: from ``cache`` where it holds this state of it, else
    read (a complete version: its snapshot; one still training: its rows) and cached."""
    from ..encoder import Tokenizer  # loading a tokenizer needs the encoder; queries do not
    from ..processes import gc_paused

    with reading() as tx:
        reads = VersionReads(tx)
        version_id = reads.resolve(ref)
        row = reads.row(version_id)
        key = (url, version_id, reads.state(version_id, row))
        cached = cache.get(key)
        if cached is not None:
            return cached
        found = reads.snapshot_row(version_id) if row.complete else None
        with gc_paused():  # 50,000 tokens and merges: objects without cycles
            vocab = reads.rows_vocabulary(version_id) if found is None else None
    with gc_paused():
        known: EncoderFacts | None = None
        if vocab is None:  # a snapshot: unpacked once the transaction is over
            vocab, known = found.checked(version_id)  # type: ignore[union-attr]
        # A complete version's byte pairs are made when first needed (decoding and short texts need none).
        tok = Tokenizer(vocab.tokens, None if known is not None else vocab.pairs, vocab.special_ids(),
                        spec=TokenizerSpec.from_json(row.spec), name=row.ref, facts=known,
                        merge_ids=vocab.columns[:3])
    cache.put(key, tok)
    return tok
