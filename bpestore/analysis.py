"""The compression curve of a version on a text, and what goes beside it in a
chart (merge counts by rank, token lengths). Pure: no SQL, no files.

The curve costs one encoding of each distinct pre-token, not one encoding of
the text per point. Merging applies the lowest rank present, so a tokenizer
keeping only the first K merges applies, in each stretch of a word, exactly the
merges of the full run before the first one of rank K or more
(``Tokenizer.merge_ranks``): a merge counts for every K above the highest rank
applied up to it. Binned by that rank, the token counts at every K are one
running sum: ``tokens(K) = tokens(0) - sum(bins[:K])``.

Most versions need even less (``tree_merges``): where every token is made by
one merge only, from tokens made before it, and the symbols are the bytes,
merging a word applies its merges in rising rank order and exactly the merges
of the final tokens' merge trees. Then the count of each id in the encoded
text, pushed down the merge trees, gives every merge's uses (and bins): one
encoding of the text (tiktoken's core where the version allows it), as
``stats``.
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
    n_merges = len(tok.merges)
    # Every merge applied, binned by the highest rank applied up to it in its word.
    bins = [0] * n_merges
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
    return _chart(tok, text.bytes, final, uses, bins, ref=ref, file=file, points=points, merge_counts=merge_counts)


def tree_merges(tok: Tokenizer) -> list[tuple[int, int, int]] | None:
    """The merges of ``tok`` as ids ``(left, right, made)`` by rank where the
    uses of its merges follow from the ids of an encoded text (``chart_of_ids``):
    a byte-level version segmenting by merges, without word markers, each
    token made by one merge only and from tokens made before it (or bytes);
    else None (``version_chart`` then)."""
    spec = tok.spec
    if not spec.byte_level or spec.end_of_word or spec.start_of_word or spec.segmentation != "merge":
        return None
    merges = tok.merge_ids()
    products = {made for _, _, made in merges}
    if len(products) < len(merges):
        return None  # a token made by two merges
    made: set[int] = set()
    for left, right, token in merges:
        if (left in products and left not in made) or (right in products and right not in made):
            return None  # a merge using a token made later
        made.add(token)
    return merges


def chart_of_ids(tok: Tokenizer, merges: Sequence[tuple[int, int, int]], n_bytes: int,
                 id_counts: Mapping[int, int], *, ref: str, file: str, points: int = 50,
                 merge_counts: Sequence[int] | None = None) -> VersionChart:
    """``version_chart`` from the count of each id in the encoded text, for a
    version whose ``tree_merges`` are ``merges``: each merge is applied as
    often as its token occurs, whole or inside a longer token's merge tree."""
    node = Counter(id_counts)
    uses = [0] * len(merges)
    for rank in range(len(merges) - 1, -1, -1):  # a token before the tokens made from it
        left, right, made = merges[rank]
        count = uses[rank] = node[made]
        if count:
            node[left] += count
            node[right] += count
    # The merges of a word run in rising rank order: each is binned at its own rank.
    return _chart(tok, n_bytes, Counter(id_counts), uses, list(uses), ref=ref, file=file, points=points,
                  merge_counts=merge_counts)


def _chart(tok: Tokenizer, n_bytes: int, final: Counter[int], uses: list[int], bins: list[int], *, ref: str,
           file: str, points: int, merge_counts: Sequence[int] | None) -> VersionChart:
    """The chart from the ids of the encoded text (``final``: id -> count) and
    the merges' uses and bins by rank."""
    merges = tok.merges
    n_merges = len(merges)
    ks = curve_ranks(n_merges, points)
    vocab = tok.vocab
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
        curve.append(CurvePoint(target, size, tokens_at, n_bytes / tokens_at if tokens_at else 0.0))
    counts = tuple(merge_counts) if merge_counts is not None else (0,) * n_merges
    if len(counts) != n_merges:
        raise InvalidArgumentError(f"merge_counts holds {len(counts)} counts for {n_merges} merges",
                                   params=("merge_counts",))
    vocab_lengths = Counter(len(data) for data in vocab.values())
    text_lengths: Counter[int] = Counter()
    for i, count in final.items():
        text_lengths[len(vocab[i])] += count
    return VersionChart(
        ref=ref, file=file, bytes=n_bytes, tokens=tokens, vocab_size=len(vocab), curve=tuple(curve),
        merge_counts=counts, merge_uses=tuple(uses),
        vocab_lengths=tuple(sorted(vocab_lengths.items())), text_lengths=tuple(sorted(text_lengths.items())))
