"""The compression curve of a version on a text, and what goes beside it in a
chart (merge counts by rank, token lengths); and how versions encode a file
(``file_stats``). No SQL: the store hands in its tokenizers.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import InvalidArgumentError
from .ingest import TextReader, open_source
from .queries import TextTotals
from .records import CurvePoint, EncodingStats, VersionChart
from .sources import check_errors

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


# -- how versions encode a file --------------------------------------------------------
def file_stats(refs: Sequence[str], file: str | Path, load: Callable[[str], Tokenizer], *,
               errors: str = "strict", workers: int = 1) -> list[EncodingStats]:
    """``Store.stats``: each version (``load(ref)``) encoding ``file`` once, side by side."""
    check_errors(errors)
    if not refs:
        raise InvalidArgumentError("refs must name at least one version", params=("refs",))
    if str(file) == "-" or len(refs) > 1 and Path(file).exists() and not Path(file).is_file():
        raise InvalidArgumentError(f"stats reads the file once per version: give a file, not "
                                   f"{file} (a stream reads once)", params=("file",))
    tokenizers = [load(ref) for ref in refs]  # every ref checked before any work
    totals = TextTotals()  # the file's bytes and words, counted in the first pass
    results = []
    for tok in tokenizers:
        unknown = _unknown_ids(tok)
        count_unknown = _counter(unknown or set())
        seen: set[int] = set()
        tokens = n_unknown = 0
        with open_source(str(file)) as stream:
            text = TextReader(stream, str(file), errors=errors)
            for ids in tok.encode_chunks(totals.watch(text) if tok is tokenizers[0] else text,
                                         workers=workers, allowed_special="all"):
                seen.update(ids)
                tokens += len(ids)
                n_unknown += count_unknown(ids)
        results.append(EncodingStats(
            ref=str(tok.name), file=str(file), bytes=totals.bytes, words=totals.words, tokens=tokens,
            unknown=None if unknown is None else n_unknown, used_ids=len(seen), vocab_size=len(tok.vocab)))
    return results


def charts(refs: Sequence[str], file: str | Path | None, load: Callable[[str], tuple[Tokenizer, Sequence[int]]],
           *, text: str | None = None, points: int = 50, errors: str = "strict") -> list[VersionChart]:
    """``Store.charts``: each version (``load(ref)``: its tokenizer and merge counts)
    charted on ``file`` or ``text``: one encoding of the text per version where its
    merges allow (``tree_merges``), else the text's pre-tokens counted once for all
    versions that cut words alike."""
    check_errors(errors)
    if not refs:
        raise InvalidArgumentError("refs must name at least one version", params=("refs",))
    if (file is None) == (text is None):
        raise InvalidArgumentError("give a file or a text, not both and not neither", params=("file", "text"))
    if file is not None and str(file) == "-":
        raise InvalidArgumentError("chart reads a file: give a file, not -", params=("file",))
    curve_ranks(0, points)  # points checked before any work
    found = [load(ref) for ref in refs]  # every ref checked before any work
    counted: dict[tuple[Any, ...], TextCounts] = {}
    results = []
    name = "<text>" if file is None else str(file)
    for tok, merge_counts in found:
        ref = str(tok.name)
        tree = tree_merges(tok)
        if tree is not None:  # one encoding of the text
            n_bytes, id_counts = _count_ids(tok, file, text, errors)
            results.append(chart_of_ids(tok, tree, n_bytes, id_counts, ref=ref, file=name, points=points,
                                        merge_counts=merge_counts))
            continue
        spec = tok.spec
        key = (spec.normalizer, spec.pretokenizer, spec.pattern, frozenset(tok.special_tokens))
        counts = counted.get(key)
        if counts is None:
            counts = counted[key] = _count_text(tok, file, text, errors)
        results.append(version_chart(tok, counts, ref=ref, file=name, points=points, merge_counts=merge_counts))
    return results


def _count_text(tok: Tokenizer, file: str | Path | None, text: str | None, errors: str) -> TextCounts:
    """A file's (or a text's) bytes, pre-tokens and special tokens, as ``tok`` cuts them."""
    if text is not None:
        words, specials = tok.count_pretokens([text])
        return TextCounts(len(text.encode("utf-8", "surrogatepass")), words, specials)
    totals = TextTotals()
    with open_source(str(file)) as stream:
        words, specials = tok.count_pretokens(totals.watch(TextReader(stream, str(file), errors=errors)))
    return TextCounts(totals.bytes, words, specials)


def _count_ids(tok: Tokenizer, file: str | Path | None, text: str | None,
               errors: str) -> tuple[int, Counter[int]]:
    """A file's (or a text's) bytes, and how often each id occurs in its encoding
    (special tokens recognised)."""
    id_counts: Counter[int] = Counter()
    if text is not None:
        id_counts.update(tok.encode(text, allowed_special="all"))
        return len(text.encode("utf-8", "surrogatepass")), id_counts
    totals = TextTotals()
    with open_source(str(file)) as stream:
        for ids in tok.encode_chunks(totals.watch(TextReader(stream, str(file), errors=errors)),
                                     allowed_special="all"):
            id_counts.update(ids)
    return totals.bytes, id_counts


def _unknown_ids(tok: Tokenizer) -> set[int] | None:
    """The ids that stand for a character a ``chars`` version never saw: its
    unknown token, or with byte fallback the bytes that are no character by
    themselves (0x80 and up); None for byte-level versions, which have neither."""
    if tok.spec.byte_level:
        return None
    found = {tok.token_id(tok.spec.unk_token)} if tok.spec.unk_token is not None else set()
    if tok.spec.byte_fallback:
        found.update(tok.token_id(bytes([b])) for b in range(0x80, 0x100))
    return {i for i in found if i is not None}


def _counter(wanted: set[int]) -> Callable[[list[int]], int]:
    """How many of a list's ids are in ``wanted``, the fastest way for its size."""
    if len(wanted) <= 4:
        return lambda ids: sum(map(ids.count, wanted))
    return lambda ids: sum(map(wanted.__contains__, ids))
