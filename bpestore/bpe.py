"""Per-word BPE with merge ranks: the model step shared by encoder and trainer.

A merge table maps an adjacent pair of token ids to its rank (lower merges
first); ``merged_ids[rank]`` is the id of the token the merge makes. Applying
the lowest-ranked pair present, again and again, gives the same tokens as
replaying the training merges in order: a pair made with a new token always
has a higher rank than the merge that made the token.
"""

from __future__ import annotations

import heapq

PAIR_SHIFT = 32  # a pair of ids (a, b) is the int (a << 32) | b


def pair_key(left: int, right: int) -> int:
    return (left << PAIR_SHIFT) | right


# Words longer than this use the heap-based merge, whose cost grows as
# n log n instead of n * merges.
_LONG_WORD = 64


def merge_word(ids: list[int], ranks: dict[int, int], merged_ids: list[int]) -> list[int]:
    """Apply merges to one word, lowest rank first; returns the merged list.

    ``ids`` may be changed in place (pass a copy to keep it).
    """
    if len(ids) > _LONG_WORD:
        return _merge_long_word(ids, ranks, merged_ids)
    get = ranks.get
    missing = len(merged_ids)
    # The rank of every adjacent pair, kept in step with ids: a merge at i
    # changes only the ranks of the pairs on either side of it.
    pair_ranks = [get((a << PAIR_SHIFT) | b, missing) for a, b in zip(ids, ids[1:])]
    while pair_ranks:
        best = min(pair_ranks)
        if best == missing:
            break
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


def _merge_long_word(ids: list[int], ranks: dict[int, int], merged_ids: list[int]) -> list[int]:
    """Heap + doubly linked list version of merge_word for long words.

    Each heap entry is (rank, position); a stale entry (its pair changed since
    it was pushed) is recognised by re-reading the pair at that position.
    Equal ranks pop leftmost first, so overlapping pairs like 'a a a' merge
    exactly as in the simple loop.
    """
    n = len(ids)
    tokens = list(ids)
    prev = list(range(-1, n - 1))
    nxt = list(range(1, n + 1))
    alive = [True] * n
    get = ranks.get
    heap = []
    for i in range(n - 1):
        r = get((tokens[i] << PAIR_SHIFT) | tokens[i + 1])
        if r is not None:
            heap.append((r, i))
    heapq.heapify(heap)
    while heap:
        r, i = heapq.heappop(heap)
        if not alive[i]:
            continue
        j = nxt[i]
        if j >= n or get((tokens[i] << PAIR_SHIFT) | tokens[j]) != r:
            continue
        # Merge tokens[i] and tokens[j] into position i.
        tokens[i] = merged_ids[r]
        alive[j] = False
        k = nxt[j]
        nxt[i] = k
        if k < n:
            prev[k] = i
            rk = get((tokens[i] << PAIR_SHIFT) | tokens[k])
            if rk is not None:
                heapq.heappush(heap, (rk, i))
        p = prev[i]
        if p >= 0:
            rp = get((tokens[p] << PAIR_SHIFT) | tokens[i])
            if rp is not None:
                heapq.heappush(heap, (rp, p))
    out = []
    i = 0
    while i < n:
        out.append(tokens[i])
        i = nxt[i]
    return out
