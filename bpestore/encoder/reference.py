"""The reference encoder: ordinary text (no special tokens) to ids in pure
Python, over the tables of ``mergetable``. Every accelerated backend
gives its ids. Each pre-token's bytes are cut where no token can span them
and merged by rank (``bpe.merge_word``) or segmented by longest match; bounded
caches remember the ids of recent pre-tokens and of the pieces long pre-tokens
split into."""

from __future__ import annotations

import random
from array import array
from collections.abc import Sequence
from functools import cached_property

from ..bpe import joinable_table, merge_word, merge_word_dropout, split_bytes
from ..processes import gc_paused
from ..spec import TokenizerSpec
from ..text import TextPipeline, fix_surrogates
from .mergetable import MergeIds, MergeTable, TokenIndex, pairs_of

WORD_CACHE_SIZE = 100_000  # pre-tokens remembered (cleared when full)
PIECE_CACHE_SIZE = 100_000  # pieces of long pre-tokens remembered
SHORT_WORD = 16  # bytes of a pre-token merged whole until a longer one needed the joinable table


class PythonEncoder:
    """Ordinary text to ids. The tables are built on first use (``index``,
    ``table``, ``merges``, ``joinable``), each once: decoding and short texts
    need few of them. ``merges`` (byte pairs) are checked against the
    vocabulary when the table is built from them; ``merge_ids`` (each merge's
    left, right and made ids, which a store has checked) spare looking up
    every merge's bytes, and give the byte pairs where ``merges`` is None."""

    def __init__(self, vocab: dict[int, bytes], special_ids: Sequence[int], spec: TokenizerSpec,
                 merges: Sequence[tuple[bytes, bytes]] | None, merge_ids: MergeIds | None) -> None:
        self.vocab = vocab
        self.special_ids = special_ids
        self.spec = spec
        self.merge_ids = merge_ids
        if merges is not None:
            self.merges = list(merges)
        self.pipeline = TextPipeline(spec.replace(special_tokens=()))
        self.words: dict[str, tuple[int, ...]] = {}
        self.pieces: dict[bytes, tuple[int, ...]] = {}

    @cached_property
    def index(self) -> TokenIndex:
        with gc_paused():
            return TokenIndex.build(self.vocab, self.special_ids, self.spec)

    @cached_property
    def table(self) -> MergeTable:
        index = self.index
        with gc_paused():
            ordinary = len(self.vocab) - len(set(self.special_ids))
            if self.merge_ids is not None and len(index.id_of) == ordinary:
                # Every ordinary token's bytes are its own: a merge's ids are those its bytes look up.
                table = MergeTable.from_ids(*self.merge_ids)
            else:
                table = MergeTable.from_pairs(self.merges, index.id_of)
            if self.spec.segmentation == "longest-match":
                table = table.with_longest_match(self.merges, index, self.spec.byte_level)
        return table

    @cached_property
    def merges(self) -> list[tuple[bytes, bytes]]:
        assert self.merge_ids is not None, "an encoder made without merges has merge_ids"
        return pairs_of(self.vocab, self.merge_ids)

    @cached_property
    def joinable(self) -> bytes:
        # Byte pairs that some token holds side by side: a word is cut
        # between any other two bytes (bpe.split_bytes).
        return joinable_table(self.merges)

    def encode_into(self, text: str, out: list[int] | array[int]) -> bool:
        """Append the ids of ``text`` to ``out`` (always: this encoder declines nothing)."""
        cache = self.words
        for word in self.pipeline.pretokenize(fix_surrogates(text)):
            ids = cache.get(word)
            if ids is None:
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                ids = cache[word] = tuple(self.encode_word(word))
            out.extend(ids)
        return True

    def encode_dropout(self, text: str, out: list[int] | array[int], dropout: float, rng: random.Random) -> None:
        """Append the ids of ``text``, each merge skipped with probability ``dropout`` (no cache)."""
        table, initial_ids = self.table, self.index.initial_ids
        for word in self.pipeline.pretokenize(fix_surrogates(text)):
            out.extend(merge_word_dropout(initial_ids(word), table.ranks, table.merged_ids, dropout, rng))

    def encode_bytes(self, data: bytes) -> list[int]:
        """One pre-token's bytes, merged by rank (no cutting, no cache)."""
        table = self.table
        return merge_word(self.index.symbolize(data), table.ranks, table.merged_ids)

    def encode_word(self, word: str) -> list[int]:
        """One pre-token to ids: its bytes, cut where no token can span them
        (one symbol per byte makes the cut valid; bpe.split_bytes), each
        piece turned into symbols and segmented; pieces are cached. Specs
        with characters or word markers use their own symbols, whole."""
        index, table = self.index, self.table
        ranks, merged_ids, longest_match = table.ranks, table.merged_ids, table.longest_match
        if index.word_symbols is not None:
            ids = index.word_symbols(word)
            if longest_match is not None:
                return longest_match.segment(ids)
            return merge_word(ids, ranks, merged_ids) if len(ids) > 1 else ids
        data = word.encode("utf-8")
        symbolize = index.symbolize
        if longest_match is not None:
            return longest_match.segment(symbolize(data))
        if len(data) <= SHORT_WORD and "joinable" not in self.__dict__:
            # Cutting is exact either way: a short text's few short words spare building the table.
            return merge_word(symbolize(data), ranks, merged_ids)
        pieces = split_bytes(data, self.joinable)
        if len(pieces) == 1:
            return merge_word(symbolize(data), ranks, merged_ids)
        byte_ids = index.byte_ids
        cache = self.pieces
        out: list[int] = []
        for piece in pieces:
            if len(piece) == 1:
                out.append(byte_ids[piece[0]])
                continue
            piece_ids = cache.get(piece)
            if piece_ids is None:
                if len(cache) >= PIECE_CACHE_SIZE:
                    cache.clear()
                piece_ids = cache[piece] = tuple(merge_word(symbolize(piece), ranks, merged_ids))
            out += piece_ids
        return out
