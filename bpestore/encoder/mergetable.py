"""The tables the pure-Python encoder works with, each made by one explicit constructor.

* ``TokenIndex.build``: each ordinary token's id by its bytes, and how a
  pre-token becomes initial ids (its bytes, or the spec's own symbols);
* ``MergeTable.from_ids`` / ``from_pairs``: pair of ids -> rank, and the id each
  rank makes (with a longest-match table where the spec segments so).

Both are built once per tokenizer and never change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .. import alphabet
from ..bpe import PAIR_SHIFT, LongestMatch
from ..errors import InvalidArgumentError
from ..spec import TokenizerSpec

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
        id_of = alphabet.ordinary_ids(vocab, special_ids)
        return cls(id_of, alphabet.symbolizer(spec, id_of), alphabet.byte_ids(id_of) if spec.byte_level else [])

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


def tiktoken_ranks(vocab: dict[int, bytes], index: TokenIndex, made: Sequence[int] | None,
                   pairs: Callable[[], Pairs]) -> dict[bytes, int]:
    """Each byte's and each merged token's bytes, with its id (tiktoken's ranks):
    usually the ordinary tokens themselves, where every one is a byte or one
    merge's. ``made``: each merge's made id, where known; else the ``pairs``."""
    id_of = index.id_of
    if len(id_of) == 256 + (len(made) if made is not None else len(pairs())):
        return id_of
    ranks = {bytes([b]): index.byte_ids[b] for b in range(256)}
    tokens = map(vocab.__getitem__, made) if made is not None else (a + b for a, b in pairs())
    ranks.update((token, id_of[token]) for token in tokens)
    return ranks
