"""The reference encoder: ordinary text (no special tokens) to ids in pure
Python. Every accelerated backend gives its ids.

Its tables are each made by one explicit constructor and never change:

* ``TokenIndex.build``: each ordinary token's id by its bytes, and how a
  pre-token becomes initial ids (its bytes, or the spec's own symbols);
* ``MergeTable.from_ids`` / ``from_pairs``: pair of ids -> rank, and the id each
  rank makes (with a longest-match table where the spec segments so).

``PythonEncoder`` cuts each pre-token's bytes where no token can span them and
merges the pieces by rank (``bpe.merge_word``) or segments them by longest
match; bounded caches remember the ids of recent pre-tokens and of the pieces
long pre-tokens split into."""

from __future__ import annotations

import dataclasses
import random
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from .. import alphabet
from ..bpe import (
    PAIR_SHIFT,
    LongestMatch,
    joinable_table,
    merge_word,
    merge_word_dropout,
    piece_ranks,
    split_bytes,
)
from ..errors import InvalidArgumentError
from ..processes import gc_paused
from ..spec import TokenizerSpec
from ..text import TextPipeline

WORD_CACHE_SIZE = 100_000  # pre-tokens remembered (cleared when full)
CACHED_WORD_CHARS = 1_000  # longer pre-tokens are not remembered
PIECE_CACHE_SIZE = 100_000  # pieces of long pre-tokens remembered
SHORT_WORD = 16  # bytes of a pre-token merged whole until a longer one needed the joinable table
Pairs = Sequence[tuple[bytes, bytes]]
MergeIds = tuple[Sequence[int], Sequence[int], Sequence[int]]  # each merge's left, right and made ids


@dataclass(frozen=True)
class TokenIndex:
    """The id of each ordinary token's bytes, and how a pre-token becomes initial ids."""

    id_of: dict[bytes, int]
    word_symbols: Callable[[str], list[int]] | None  # the spec's own symbols (characters, markers); None: bytes
    byte_ids: list[int]  # the id of each byte, on byte-level specs

    @classmethod
    def build(cls, vocab: dict[int, bytes], special_ids: Iterable[int], spec: TokenizerSpec) -> TokenIndex:
        # Byte fallback: where a byte is also a character, the character's id is the token, the byte's the fallback.
        special_ids = list(special_ids)
        id_of = alphabet.ordinary_ids(vocab, special_ids, chars_over_bytes=spec.byte_fallback)
        fallback = alphabet.fallback_byte_ids(vocab, special_ids) if spec.byte_fallback else None
        return cls(id_of, alphabet.symbolizer(spec, id_of, fallback),
                   alphabet.byte_ids(id_of) if spec.byte_level else [])

    def symbolize(self, data: bytes) -> list[int]:
        """A word's (or token's) initial symbols: its bytes, as ids."""
        byte_ids = self.byte_ids
        return [byte_ids[b] for b in data]

    def initial_ids(self, word: str) -> list[int]:
        """A pre-token's initial symbols: the spec's own, or its bytes."""
        if self.word_symbols is not None:
            return self.word_symbols(word)
        return self.symbolize(word.encode("utf-8"))


@dataclass(frozen=True)
class MergeTable:
    """Pair of ids (``left << PAIR_SHIFT | right``) -> its lowest rank, the id
    each rank makes, and the longest-match table where the spec asks for it."""

    ranks: dict[int, int]
    merged_ids: list[int]
    longest_match: LongestMatch | None = None

    @classmethod
    def from_ids(cls, lefts: Sequence[int], rights: Sequence[int], made: Sequence[int]) -> MergeTable:
        """From each merge's ids (where every ordinary token's bytes are its own)."""
        keys = [(left << PAIR_SHIFT) | right for left, right in zip(lefts, rights)]
        # Where a pair repeats, its lowest rank wins: the dict keeps the last value written.
        return cls(dict(zip(reversed(keys), range(len(keys) - 1, -1, -1))), list(made))

    @classmethod
    def from_pairs(cls, pairs: Pairs, id_of: dict[bytes, int]) -> MergeTable:
        """From the merges' bytes; an error where a merge uses or makes a token the vocabulary lacks."""
        ranks: dict[int, int] = {}
        merged_ids: list[int] = []
        for rank, (left, right) in enumerate(pairs):
            try:
                key = (id_of[left] << PAIR_SHIFT) | id_of[right]
                merged = id_of[left + right]
            except KeyError:
                raise InvalidArgumentError(f"merge {rank} ({left!r}, {right!r}) uses or makes a "
                                           "token missing from the vocabulary", params=("merges",)) from None
            ranks.setdefault(key, rank)
            merged_ids.append(merged)
        return cls(ranks, merged_ids)

    def with_longest_match(self, pairs: Pairs, index: TokenIndex, byte_level: bool) -> MergeTable:
        return dataclasses.replace(self, longest_match=LongestMatch(
            _token_symbols(pairs, self.merged_ids, index, byte_level)))


def _token_symbols(pairs: Pairs, merged_ids: list[int], index: TokenIndex,
                   byte_level: bool) -> dict[tuple[int, ...], int]:
    """Each ordinary token as the initial symbols a word holds where the
    token stands (what longest match looks for): a merged token, its pair's
    symbols joined; any other token, itself (a byte, a character, a word
    marker, the unknown token), or on byte-level specs its bytes."""
    id_of = index.id_of
    spelled = byte_level and index.word_symbols is None
    symbols: dict[int, tuple[int, ...]] = {}

    def symbols_of(data: bytes) -> tuple[int, ...]:
        token_id = id_of[data]
        found = symbols.get(token_id)
        if found is not None:
            return found
        return tuple(index.symbolize(data)) if spelled else (token_id,)

    for (left, right), made in zip(pairs, merged_ids):
        if made not in symbols:
            symbols[made] = symbols_of(left) + symbols_of(right)
    tokens: dict[tuple[int, ...], int] = {}
    for data, token_id in id_of.items():
        tokens.setdefault(symbols.get(token_id) or symbols_of(data), token_id)
    return tokens


def pairs_of(vocab: dict[int, bytes], merge_ids: MergeIds) -> list[tuple[bytes, bytes]]:
    """The merges as byte pairs, from their left and right ids; an error where an id is not in the vocabulary."""
    try:
        return list(zip(map(vocab.__getitem__, merge_ids[0]), map(vocab.__getitem__, merge_ids[1])))
    except KeyError as exc:
        raise InvalidArgumentError(f"a merge uses id {exc.args[0]}, which the vocabulary lacks",
                                   params=("merge_ids",)) from None


class PythonEncoder:
    """Ordinary text to ids. The tables are built on first use (``index``,
    ``table``, ``merges``, ``joinable``), each once: decoding and short texts
    need few of them. ``merges`` (byte pairs) are checked against the
    vocabulary when the table is built from them; ``merge_ids`` (each merge's
    left, right and made ids, which a store has checked) spare looking up
    every merge's bytes, and give the byte pairs where ``merges`` is None."""

    def __init__(self, vocab: dict[int, bytes], special_ids: Sequence[int], spec: TokenizerSpec,
                 merges: Pairs | Callable[[], Pairs] | None, merge_ids: MergeIds | None) -> None:
        """``merges``: the byte pairs, or a function that gives them when first needed."""
        self.vocab = vocab
        self.special_ids = special_ids
        self.spec = spec
        self.merge_ids = merge_ids
        self._derive = merges if callable(merges) else None
        if merges is not None and not callable(merges):
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
            elif self.spec.segmentation == "piece":
                made = map(self.vocab.__getitem__, table.merged_ids)
                table = dataclasses.replace(table, ranks=piece_ranks(made, index.id_of,
                                                                     whole_chars=not self.spec.byte_level))
        return table

    @cached_property
    def merges(self) -> list[tuple[bytes, bytes]]:
        if self._derive is not None:
            return list(self._derive())
        assert self.merge_ids is not None, "an encoder made without merges has merge_ids"
        return pairs_of(self.vocab, self.merge_ids)

    @cached_property
    def joinable(self) -> bytes:
        # Byte pairs that some token holds side by side: a word is cut
        # between any other two bytes (bpe.split_bytes).
        return joinable_table(self.merges)

    def encode_into(self, text: str, out: list[int] | array[int], first: bool = True) -> bool:
        """Append the ids of ``text`` to ``out`` (always: this encoder declines nothing);
        ``first``: the text starts a whole text (``TextPipeline.pretokenize``)."""
        cache = self.words
        for word in self.pipeline.pretokenize(text, first):
            ids = cache.get(word)
            if ids is None:
                if len(word) > CACHED_WORD_CHARS:  # kept, a long word would hold its memory after
                    out.extend(self.encode_word(word))
                    continue
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                ids = cache[word] = tuple(self.encode_word(word))
            out.extend(ids)
        return True

    def encode_dropout(self, text: str, out: list[int] | array[int], dropout: float, rng: random.Random,
                       first: bool = True) -> None:
        """Append the ids of ``text``, each merge skipped with probability ``dropout`` (no cache)."""
        table, initial_ids = self.table, self.index.initial_ids
        for word in self.pipeline.pretokenize(text, first):
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
