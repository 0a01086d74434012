"""The compression curve of a version on a text, and what goes beside it in a
chart (merge counts by rank, token lengths). Pure: no SQL, no files.

The curve costs one encoding of each distinct pre-token, not one encoding of
the text per point. Merging applies the lowest rank present, so a tokenizer
keeping only the first K merges applies, in each stretch of a word, exactly the
merges of the full run before the first one of rank K or more
(``Tokenizer.merge_ranks``): a merge counts for every K above the highest rank
applied up to it. Binned by that rank, the token counts at every K are one
running sum: ``tokens(K) = tokens(0) - sum(bins[:K])``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import InvalidArgumentError
from .records import CurvePoint, VersionChart

if TYPE_CHECKING:
    from .encoder import Tokenizer

MAX_POINTS = 100_000


@dataclass
class TextCounts:
    """A text as the curve needs it: its UTF-8 ``bytes``, its pre-tokens with
    their counts and the special tokens in it with theirs
    (``Tokenizer.count_pretokens``)."""

    bytes: int
    words: Mapping[str, int]
    specials: Mapping[str, int] = field(default_factory=dict)


def curve_ranks(n_merges: int, points: int) -> list[int]:
    """The merge counts K at which to take ``points`` points, evenly spaced from
    0 to ``n_merges`` (both included; fewer where there are fewer merges).

    >>> curve_ranks(10, 3), curve_ranks(2, 5), curve_ranks(0, 5)
    ([0, 5, 10], [0, 1, 2], [0])
    """
    if not 2 <= points <= MAX_POINTS:
        raise InvalidArgumentError(f"points must be between 2 and {MAX_POINTS:,}, not {points}",
                                   params=("points",))
    return sorted({round(i * n_merges / (points - 1)) for i in range(points)})


def version_chart(tok: Tokenizer, text: TextCounts, *, ref: str, file: str, points: int = 50,
                  merge_counts: Sequence[int] | None = None) -> VersionChart:
    """The chart data of tokenizer ``tok`` on a counted text: the curve at
    ``points`` merge counts, merge uses and counts by rank, token lengths.
    ``merge_counts``: each merge's pair count when it was made (the store's;
    zeros where not given)."""
    merges = tok.merges
    n_merges = len(merges)
    ks = curve_ranks(n_merges, points)
    vocab = tok.vocab
    # Every merge applied, binned by the highest rank applied up to it in its stretch.
    bins = [0] * (n_merges + 1)
    uses = [0] * n_merges
    final: Counter[int] = Counter()
    for word, count in text.words.items():
        ids, ranks, needed = tok.merge_ranks(word)
        for i in ids:
            final[i] += count
        for rank in ranks:
            uses[rank] += count
        for level in needed:
            bins[level] += count
    for special, count in text.specials.items():
        final[tok.special_tokens[special]] += count
    tokens = sum(final.values())
    # With no merge at all every applied merge is undone: one more token each.
    tokens_at = tokens + sum(bins)
    # The vocabulary after K merges: the tokens no merge makes, and those the first K make.
    first_made: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(merges):
        first_made.setdefault(left + right, rank)
    made_from = [0] * (n_merges + 1)
    for rank in first_made.values():
        made_from[rank] += 1
    size = len(vocab) - len(first_made)
    curve = []
    k = 0
    for target in ks:
        while k < target:
            tokens_at -= bins[k]
            size += made_from[k]
            k += 1
        curve.append(CurvePoint(target, size, tokens_at, text.bytes / tokens_at if tokens_at else 0.0))
    counts = tuple(merge_counts) if merge_counts is not None else (0,) * n_merges
    if len(counts) != n_merges:
        raise InvalidArgumentError(f"merge_counts holds {len(counts)} counts for {n_merges} merges",
                                   params=("merge_counts",))
    vocab_lengths = Counter(len(data) for data in vocab.values())
    text_lengths: Counter[int] = Counter()
    for i, count in final.items():
        text_lengths[len(vocab[i])] += count
    return VersionChart(
        ref=ref, file=file, bytes=text.bytes, tokens=tokens, vocab_size=len(vocab), curve=tuple(curve),
        merge_counts=counts, merge_uses=tuple(uses),
        vocab_lengths=tuple(sorted(vocab_lengths.items())), text_lengths=tuple(sorted(text_lengths.items())))
