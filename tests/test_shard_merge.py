"""The count core's merge of a shard's packed pieces with the key each counts for
(``merge_shard(pieces, keys)``): every key's distinct words from the one pass, against sets.
.ci/sanitize runs this file on cores built with the address and UB sanitizers."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.dictionaries(st.binary(max_size=5), st.integers(1, 9), max_size=12)),
                min_size=1, max_size=7), st.booleans())
def test_the_keyed_merge_counts_each_keys_distinct_words_in_the_one_pass(parts, with_firsts):
    """``merge_shard(pieces, keys)``: the same counts and ordinals as without keys, and each
    key's distinct words: those of the union of its pieces (a word in two keys is one of each)."""
    from bpestore.ingest import pool

    if pool.COUNT_CORE is None:
        pytest.skip("the compiled counting core is not built here")
    order = {key: i for i, key in enumerate(dict.fromkeys(key for key, _ in parts))}
    pieces = [pool.shard_counts(Counter(part), 1, [(0, n + 1)] if with_firsts else None)[0]
              for n, (_, part) in enumerate(parts)]
    merged = pool.COUNT_CORE.merge_shard(pieces, [order[key] for key, _ in parts])
    plain = pool.COUNT_CORE.merge_shard(pieces)
    assert merged[:2] == (plain if with_firsts else (plain, None))
    assert merged[2] == [len(set().union(*(part for k, part in parts if k == key))) for key in order]
    reduced = pool.reduce_shard(list(zip([key for key, _ in parts], pieces)), set(order))
    assert reduced.distinct == dict(zip(order, merged[2])) and reduced.counts == merged[0]
    with pytest.raises(ValueError, match="each key"):
        pool.COUNT_CORE.merge_shard(pieces, [len(pieces)] * len(pieces))
    with pytest.raises(TypeError, match="one per piece"):
        pool.COUNT_CORE.merge_shard(pieces, [0] * (len(pieces) + 1))
