"""A version's tokens and merges in memory: what its rows and its packed snapshot
(``snapshot.unpack``) both give. Plain data: no SQL."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from ..records import Merge


class KindCodes(NamedTuple):
    """Tokens' kinds as codes: ``names[codes[k]]`` is the kind of token ``ids[k]``."""

    ids: Sequence[int]
    codes: Sequence[int]  # one byte each
    names: list[str]


class Vocabulary:
    """A version's tokens (in id order) and merges (in rank order), from its rows
    or from its packed snapshot (``snapshot.unpack``).

    The merges are kept as columns of ints and made into byte pairs or Merge
    records only when asked: for GPT-2's 50,000 merges, a record (or a tuple)
    per merge would add a quarter to the load.
    """

    def __init__(self, tokens: dict[int, bytes], kinds: dict[int, str] | KindCodes, lefts: Sequence[int],
                 rights: Sequence[int], made: Sequence[int], counts: Sequence[int]) -> None:
        """``kinds``: each token's kind, or the same as codes (``KindCodes``),
        made into a dict only when asked (loading a tokenizer needs only the
        special tokens)."""
        self.tokens = tokens
        self._kinds = kinds
        self.columns = lefts, rights, made, counts

    @cached_property
    def kinds(self) -> dict[int, str]:
        """Each token's kind: byte, special, merge or char."""
        if isinstance(self._kinds, KindCodes):
            ids, codes, names = self._kinds
            return dict(zip(ids, map(names.__getitem__, codes)))
        return self._kinds

    @classmethod
    def from_rows(cls, token_rows: Iterable[Any], merge_rows: Iterable[Any]) -> Vocabulary:
        tokens: dict[int, bytes] = {}
        kinds: dict[int, str] = {}
        for token_id, data, kind in token_rows:
            tokens[token_id] = bytes(data)
            kinds[token_id] = kind
        lefts: list[int] = []
        rights: list[int] = []
        made: list[int] = []
        counts: list[int] = []
        for _rank, left, right, token, count in merge_rows:
            lefts.append(left)
            rights.append(right)
            made.append(token)
            counts.append(count)
        return cls(tokens, kinds, lefts, rights, made, counts)

    @cached_property
    def pairs(self) -> list[tuple[bytes, bytes]]:
        """The merges as byte pairs (what a Tokenizer takes)."""
        lefts, rights = self.columns[:2]
        return list(zip(map(self.tokens.__getitem__, lefts), map(self.tokens.__getitem__, rights)))

    @cached_property
    def merges(self) -> list[Merge]:
        from ..records import Merge

        return list(map(Merge, range(len(self.columns[0])), *self.columns))

    def made_by(self) -> Mapping[int, Merge]:
        """The merge that first made each token (``queries.first_merges``), each
        Merge record made when looked up."""
        made = self.columns[2]
        first = dict(zip(reversed(made), range(len(made) - 1, -1, -1)))  # the lowest rank wins
        return _MadeBy(first, self.columns)

    def special_ids(self) -> dict[str, int]:
        """Each special token's text and id."""
        if isinstance(self._kinds, KindCodes) and "kinds" not in self.__dict__:
            ids, codes, names = self._kinds
            if "special" not in names:
                return {}
            code = bytes([names.index("special")])
            data = bytes(codes)  # the positions of the special tokens' code, found in C
            found = []
            at = data.find(code)
            while at >= 0:
                found.append(ids[at])
                at = data.find(code, at + 1)
            return {self.tokens[i].decode("utf-8"): i for i in found}
        return {self.tokens[i].decode("utf-8"): i for i, kind in self.kinds.items() if kind == "special"}


class _MadeBy(Mapping[int, "Merge"]):
    def __init__(self, first: dict[int, int], columns: tuple[Sequence[int], ...]) -> None:
        self._first, self._columns = first, columns

    def __getitem__(self, token: int) -> Merge:
        from ..records import Merge

        rank = self._first[token]
        return Merge(rank, *(column[rank] for column in self._columns))

    def __iter__(self) -> Iterator[int]:
        return iter(self._first)

    def __len__(self) -> int:
        return len(self._first)
