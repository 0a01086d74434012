"""Per-word segmentation: BPE merges by rank (shared by encoder and trainer),
BPE-dropout, greedy longest match, cutting a word where no token can span, and
the merges a rank table (tiktoken's) implies (``derive_merges``).

A merge table maps an adjacent pair of token ids to its rank (lower merges
first); ``merged_ids[rank]`` is the id of the token the merge makes. Applying
the lowest-ranked pair present (the leftmost among equals), again and again,
gives the same tokens as replaying the training merges in order: a pair made
with a new token always has a higher rank than the merge that made the token.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

from .errors import DamagedDataError, InvalidArgumentError

if TYPE_CHECKING:
    import random

PAIR_SHIFT = 32  # a pair of ids (a, b) is the int (a << 32) | b


def pair_key(left: int, right: int) -> int:
    return (left << PAIR_SHIFT) | right


def piece_ranks(made: Iterable[bytes], id_of: dict[bytes, int], *, whole_chars: bool) -> dict[int, int]:
    """The merge table of ``segmentation="piece"``: every split of each merged
    token (in rank order: ``made``) into two tokens of ``id_of`` is a pair
    with the rank of the merge that first made it (SentencePiece's BPE: two
    symbols merge where their concatenation is a piece, the highest score
    first). ``whole_chars``: split only between UTF-8 characters.

    >>> ids = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    >>> piece_ranks([b"ab", b"abc"], ids, whole_chars=True) == {
    ...     pair_key(0, 1): 0, pair_key(0, 4): 1, pair_key(3, 2): 1}
    True
    """
    ranks: dict[int, int] = {}
    for rank, data in enumerate(made):
        for cut in range(1, len(data)):
            if whole_chars and 0x80 <= data[cut] < 0xC0:
                continue
            left, right = id_of.get(data[:cut]), id_of.get(data[cut:])
            if left is not None and right is not None:
                ranks.setdefault((left << PAIR_SHIFT) | right, rank)
    return ranks


# Words longer than this use the heap-based merge, whose cost grows as
# n log n; below it the list-based loop (whose scans run in C) is faster.
_LONG_WORD = 48


def merge_word(ids: list[int], ranks: dict[int, int], merged_ids: list[int],
               applied: list[int] | None = None) -> list[int]:
    """Apply merges to one word, lowest rank first, leftmost first; returns the merged list.

    ``ids`` may be changed in place (pass a copy to keep it). ``applied``, where
    given, gets the rank of each merge applied, in order.

    >>> merge_word([97, 98, 99], {pair_key(97, 98): 0}, [256])
    [256, 99]
    """
    if len(ids) > _LONG_WORD:
        return _merge_long_word(ids, ranks, merged_ids, applied)
    get = ranks.get
    missing = len(merged_ids)
    # The rank of every adjacent pair, kept in step with ids: a merge at i
    # changes only the ranks of the pairs on either side of it. min() and
    # index() scan in C.
    pair_ranks = [get((a << PAIR_SHIFT) | b, missing) for a, b in zip(ids, ids[1:])]
    while pair_ranks:
        best = min(pair_ranks)
        if best == missing:
            break
        if applied is not None:
            applied.append(best)
        # The leftmost occurrence first: equal ranks are the same pair, and
        # merging left to right is what training did ("a a a" -> "aa a").
        i = pair_ranks.index(best)
        ids[i] = new_id = merged_ids[best]
        del ids[i + 1]
        del pair_ranks[i]
        if i > 0:
            pair_ranks[i - 1] = get((ids[i - 1] << PAIR_SHIFT) | new_id, missing)
        if i < len(pair_ranks):
            pair_ranks[i] = get((new_id << PAIR_SHIFT) | ids[i + 1], missing)
    return ids


def merge_ranks(ids: list[int], ranks: dict[int, int], merged_ids: list[int]) -> tuple[list[int], list[int]]:
    """``merge_word``, also returning the rank of each merge applied, in the order
    applied (``ids`` may be changed in place).

    >>> merge_ranks([97, 98, 99], {pair_key(97, 98): 1, pair_key(256, 99): 0}, [257, 256])
    ([257], [1, 0])
    """
    applied: list[int] = []
    return merge_word(ids, ranks, merged_ids, applied), applied


def merge_steps(ids: list[int], ranks: dict[int, int], merged_ids: list[int]) -> list[tuple[int, int, list[int]]]:
    """``merge_word`` one step at a time, for showing: each step as (rank,
    position, the ids after it). The last step's ids are ``merge_word``'s result
    (the word itself when there is no step).

    >>> merge_steps([97, 98, 99], {pair_key(97, 98): 0, pair_key(256, 99): 1}, [256, 257])
    [(0, 0, [256, 99]), (1, 0, [257])]
    """
    ids = list(ids)
    steps = []
    while len(ids) > 1:
        found = [(rank, i) for i, rank in enumerate(ranks.get(pair_key(a, b)) for a, b in zip(ids, ids[1:]))
                 if rank is not None]
        if not found:
            break
        rank, i = min(found)  # the lowest rank, leftmost among equals: as merge_word
        ids[i:i + 2] = [merged_ids[rank]]
        steps.append((rank, i, list(ids)))
    return steps


def _merge_long_word(ids: list[int], ranks: dict[int, int], merged_ids: list[int],
                     applied: list[int] | None = None) -> list[int]:
    """Heap + linked list version of merge_word for long words: O(n log n).

    A heap entry is the int (rank << 32) | position, so equal ranks pop
    leftmost first and overlapping pairs like 'a a a' merge exactly as in the
    list loop. A stale entry (its pair changed since it was pushed) is
    recognised by re-reading the pair at that position; a merged-away
    position holds -1, which makes a negative key that no merge has.
    ``applied``, where given, gets the rank of each merge applied, in order.
    """
    n = len(ids)
    # Machine-word arrays, not lists of int objects: a word of millions of
    # symbols costs tens of bytes per symbol, not hundreds.
    tokens = array("q", ids)
    nxt = array("q", range(1, n + 1))
    prev = array("q", range(-1, n - 1))
    get = ranks.get
    heap = [(r << 32) | i for i, r in enumerate(get((a << PAIR_SHIFT) | b) for a, b in zip(ids, islice(ids, 1, None)))
            if r is not None]
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        entry = pop(heap)
        r, i = entry >> 32, entry & 0xFFFFFFFF
        j = nxt[i]
        if j >= n or get((tokens[i] << PAIR_SHIFT) | tokens[j]) != r:
            continue  # stale
        if applied is not None:
            applied.append(r)
        # Merge tokens[i] and tokens[j] into position i; j leaves the list.
        new_id = tokens[i] = merged_ids[r]
        tokens[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prev[k] = i
            rk = get((new_id << PAIR_SHIFT) | tokens[k])
            if rk is not None:
                push(heap, (rk << 32) | i)
        p = prev[i]
        if p >= 0:
            rp = get((tokens[p] << PAIR_SHIFT) | new_id)
            if rp is not None:
                push(heap, (rp << 32) | p)
    return [t for t in tokens if t >= 0]


def merge_word_dropout(ids: list[int], ranks: dict[int, int], merged_ids: list[int],
                       dropout: float, rng: random.Random) -> list[int]:
    """BPE-dropout (Provilkov et al. 2020, as in Hugging Face ``tokenizers``).

    At each step the candidate merges are tried in (rank, position) order and
    each is skipped with probability ``dropout``; the first one not skipped
    is applied and the skipped ones become candidates again. The word is done
    when every candidate was skipped or none is left. ``dropout=0`` is
    ``merge_word``; ``dropout=1`` leaves the word as it came.
    """
    ids = list(ids)
    get = ranks.get
    while len(ids) > 1:
        candidates = sorted((r, i) for i, r in enumerate(
            get((a << PAIR_SHIFT) | b) for a, b in zip(ids, ids[1:])) if r is not None)
        for r, i in candidates:
            if rng.random() >= dropout:
                ids[i:i + 2] = [merged_ids[r]]
                break
        else:
            break
    return ids


def joinable_table(merges: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A 65,536-entry table: is byte y ever right after byte x inside a token?

    Inside a merged token every adjacent pair of bytes was joined by exactly
    one merge of its merge tree, whose left operand ends with the first byte
    and whose right operand starts with the second; so the pairs (last byte
    of left, first byte of right) over all merges are all of them. The entry
    for (x, y) is at (y << 8) | x: a little-endian uint16 read of the bytes x y.
    """
    table = bytearray(1 << 16)
    for left, right in merges:
        table[(right[0] << 8) | left[-1]] = 1
    return bytes(table)


def split_bytes(data: bytes, joinable: bytes) -> list[bytes]:
    """Cut a word between any two adjacent bytes that no token holds side by
    side (``joinable_table``).

    No merge can make a token across such a cut, so merging each piece on
    its own gives the tokens of the whole word (the lowest pair of the word
    is always the lowest pair of its piece). Pieces are short and repeat far
    more than words do (a run of Japanese without spaces is one pre-token),
    which is what makes a cache of pieces pay.

    >>> split_bytes(b"abcd", joinable_table([(b"a", b"b"), (b"c", b"d")]))
    [b'ab', b'cd']
    """
    n = len(data)
    if n < 2:
        return [data]
    # joined[i] says whether data[i] and data[i + 1] may stay together; the
    # table is read through uint16 views of the even and the odd byte pairs,
    # so the work per byte runs in C.
    joined = bytearray(n - 1)
    lookup = joinable.__getitem__
    even = array("H", data[:n - n % 2])
    odd = array("H", data[1:n - (n - 1) % 2])
    if sys.byteorder != "little":
        even.byteswap()
        odd.byteswap()
    joined[0::2] = bytes(map(lookup, even))
    joined[1::2] = bytes(map(lookup, odd))
    pieces = []
    start = 0
    cut = joined.find(0)
    while cut >= 0:
        pieces.append(data[start:cut + 1])
        start = cut + 1
        cut = joined.find(0, start)
    pieces.append(data[start:] if start else data)
    return pieces


class LongestMatch:
    """Greedy longest-match segmentation over a trie of the vocabulary (as in
    the Jurafsky & Martin notebook): from the left, take the longest token that matches, then go on
    after it. Every single symbol is a token, so a match always exists.

    >>> LongestMatch({(1,): 1, (2,): 2, (1, 2): 3, (1, 2, 1): 4}).segment([1, 2, 1, 2, 2])
    [4, 2, 2]
    """

    def __init__(self, tokens: dict[tuple[int, ...], int]) -> None:
        # A trie node is a dict: symbol -> child node; the key None holds the
        # id of the token that ends at the node.
        self.root: dict[int | None, Any] = {}
        for symbols, token_id in tokens.items():
            node = self.root
            for s in symbols:
                node = node.setdefault(s, {})
            node.setdefault(None, token_id)

    def segment(self, symbols: list[int]) -> list[int]:
        out = []
        n = len(symbols)
        i = 0
        while i < n:
            node = self.root
            best_id, best_end = symbols[i], i + 1  # an unknown symbol stands alone
            j = i
            while j < n:
                child = node.get(symbols[j])
                if child is None:
                    break
                node = child
                j += 1
                token_id = node.get(None)
                if token_id is not None:
                    best_id, best_end = token_id, j
            out.append(best_id)
            i = best_end
        return out


def derive_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge making each token of more than one byte of a rank table (tiktoken's),
    in rank order. A rank table has no merge list: tiktoken joins, at each step, the
    adjacent pair whose concatenation has the lowest rank. A token's merge is recovered
    the standard way (Hugging Face's converters, tiktoken's educational module): its
    bytes encoded by that rule with only the ranks below its own leave two parts. A
    token left in more than two parts can only come from tiktoken's whole-piece
    lookup, which has no merge: refused.

    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> derive_merges({**ranks, b"ab": 256, b"aab": 257, b"aa": 258})
    [(b'a', b'b'), (b'a', b'ab'), (b'a', b'a')]
    """
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise DamagedDataError(f"the rank file lacks {len(missing)} single bytes (first: {missing[0]}); "
                               "a tiktoken vocabulary holds all 256", params=("path",))
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = _encode_below(ranks, token, rank)
        if len(parts) != 2:
            shown = b" | ".join(parts[:6]) + (b" | ..." if len(parts) > 6 else b"")
            raise InvalidArgumentError(f"token {_short(token)!r} (rank {rank}) is not the join of two tokens of lower "
                                       f"rank (tiktoken's rule leaves {shown!r}); bpestore can only import "
                                       "tokens that merging makes", params=("path",))
        merges.append((parts[0], parts[1]))
    return merges


def _short(token: bytes, size: int = 40) -> bytes:
    return token if len(token) <= size else token[:size] + b"..."


def _encode_below(ranks: Mapping[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """tiktoken's rule on ``token``'s bytes, with only the ranks below ``max_rank``:
    the lowest-ranked adjacent pair joined first, the leftmost among equals. A
    heap of (rank, position) over a linked list of parts: n log n, not n squared
    (a stale entry, whose pair has changed since, is skipped when popped)."""
    n = len(token)
    if n <= 2:
        return [token[i:i + 1] for i in range(n)]
    start = list(range(n))  # part i is token[start[i]:end[i]]; a joined-away part has end -1
    end = list(range(1, n + 1))
    nxt = list(range(1, n + 1))
    prev = list(range(-1, n - 1))
    get = ranks.get

    def rank_at(i: int) -> int | None:
        j = nxt[i]
        if j >= n:
            return None
        r = get(token[start[i]:end[j]])
        return r if r is not None and r < max_rank else None

    heap = [(r, i) for i in range(n - 1) if (r := rank_at(i)) is not None]
    heapq.heapify(heap)
    parts = n
    while heap and parts > 2:
        r, i = heapq.heappop(heap)
        if end[i] < 0 or rank_at(i) != r:
            continue  # stale
        j = nxt[i]
        end[i], end[j] = end[j], -1
        nxt[i] = k = nxt[j]
        if k < n:
            prev[k] = i
        parts -= 1
        for at in (prev[i], i):
            if at >= 0 and (found := rank_at(at)) is not None:
                heapq.heappush(heap, (found, at))
    return [token[start[i]:end[i]] for i in range(n) if end[i] >= 0]
