"""What a tokenizer does to a text, step by step: ``explain`` (each pre-token's
merges), where each token stands in the text (offsets), and what the
compression curve (``bpestore.analysis``) needs: the pre-tokens of a text with
their counts, and the ranks each one's merges use."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Literal

from ..bpe import merge_ranks as bpe_merge_ranks
from ..bpe import merge_steps
from ..errors import InvalidArgumentError
from ..text import rechunk
from .engine import Engine
from .streams import PIECE_CHARS, sliced

# The records are imported where an explanation is made: start-up time, which encoding does without.
if TYPE_CHECKING:
    from ..records import Explanation, UnknownChar, WordExplanation

EXPLAIN_MAX_CHARS = 100_000  # characters of text explain takes
EXPLAIN_MAX_IDS = 2_000_000  # ids its merge steps may list in all (each step lists its word's ids)


def explain(engine: Engine, text: str, allowed_special: Literal["all"] | AbstractSet[str]) -> Explanation:
    """How ``text`` is encoded, pre-token by pre-token: the initial symbols,
    each merge applied (pair, rank, position), where characters unseen in
    training went, and the ids; ``.ids`` equals ``Tokenizer.encode(text,
    allowed_special=allowed_special, disallowed_special=())``.

    >>> from bpestore import Tokenizer
    >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
    >>> [(w.text, w.ids, [(s.rank, s.position) for s in w.steps]) for w in tok.explain("abc ab").words]
    [('abc', (256, 99), [(0, 0)]), (' ab', (32, 256), [(0, 1)])]
    """
    from ..records import Explanation, WordExplanation

    if len(text) > EXPLAIN_MAX_CHARS:
        raise InvalidArgumentError(f"explain takes at most {EXPLAIN_MAX_CHARS:,} characters, not "
                                   f"{len(text):,}; encode shows the ids of a longer text", params=("text",))
    rules = engine.rules(allowed_special=allowed_special, disallowed_special=())
    words: list[WordExplanation] = []
    start = 0
    budget = [EXPLAIN_MAX_IDS]
    for m in engine.specials_regex(rules.allowed).finditer(text) if rules.allowed else ():
        words += _explain_segment(engine, text[start:m.start()], budget, start == 0)
        token_id = engine.special_tokens[m.group()]
        words.append(WordExplanation(m.group(), (token_id,), (token_id,), segmentation="special"))
        start = m.end()
    words += _explain_segment(engine, text[start:], budget, start == 0)
    mentioned = {i for w in words for i in (*w.symbols, *w.ids, *(s.token for s in w.steps))}
    return Explanation(engine.name or "", text, tuple(words), {i: engine.vocab[i] for i in sorted(mentioned)})


def _explain_segment(engine: Engine, text: str, budget: list[int], first: bool) -> Iterator[WordExplanation]:
    from ..records import MergeStep, WordExplanation

    table = engine.reference.table
    for word in engine.reference.pipeline.pretokenize(text, first) if text else ():
        symbols = engine.reference.index.initial_ids(word)
        most = len(symbols) * (len(symbols) + 1) // 2  # the ids its steps can list
        budget[0] -= most
        if budget[0] < 0:
            raise InvalidArgumentError(f"explaining this text lists more than {EXPLAIN_MAX_IDS:,} ids (a pre-token "
                                       f"of {len(symbols):,} symbols lists up to {most:,}); explain a shorter text",
                                       params=("text",))
        if table.longest_match is not None:
            yield WordExplanation(word, tuple(symbols), tuple(table.longest_match.segment(symbols)),
                                  segmentation="longest-match")
            continue
        steps = tuple(MergeStep(rank, i, *pair_of(engine, rank), tuple(ids))
                      for rank, i, ids in merge_steps(symbols, table.ranks, table.merged_ids))
        yield WordExplanation(word, tuple(symbols), steps[-1].ids if steps else tuple(symbols),
                              steps=steps, unknown=tuple(_unknown_chars(engine, word)))


def _unknown_chars(engine: Engine, word: str) -> Iterator[UnknownChar]:
    """The characters of a pre-token that a ``chars`` alphabet lacks, and their ids."""
    spec = engine.spec
    if spec.byte_level:
        return
    from ..records import UnknownChar

    id_of = engine.reference.index.id_of
    for position, char in enumerate(word):
        data = char.encode("utf-8", "surrogatepass")
        if data in id_of:
            continue
        if spec.byte_fallback:
            yield UnknownChar(char, position, "bytes", tuple(id_of[bytes([b])] for b in data))
        elif spec.unk_token is not None:
            yield UnknownChar(char, position, "unk", (id_of[spec.unk_token.encode("utf-8")],))


def pair_of(engine: Engine, rank: int) -> tuple[int, int, int]:
    """The ids a merge joins and makes."""
    left, right = engine.reference.merges[rank]
    id_of = engine.reference.index.id_of
    return id_of[left], id_of[right], engine.reference.table.merged_ids[rank]


def count_pretokens(engine: Engine, chunks: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
    """The pre-tokens of a stream of text with their counts, and the special
    tokens in it with theirs (every special token recognised, as
    ``encode(..., allowed_special="all")`` does); encoding each pre-token
    (``merge_ranks``) gives the ids of the whole text."""
    words: Counter[str] = Counter()
    specials: Counter[str] = Counter()
    allowed = frozenset(engine.special_tokens)
    regex = engine.specials_regex(allowed)
    pretokenize = engine.reference.pipeline.pretokenize
    for index, piece in enumerate(rechunk(sliced(chunks, PIECE_CHARS), engine.stream_cutter(allowed))):
        start = 0
        for m in regex.finditer(piece) if regex is not None else ():
            if m.start() > start:
                words.update(pretokenize(piece[start:m.start()], index == start == 0))
            specials[m.group()] += 1
            start = m.end()
        if start < len(piece):
            words.update(pretokenize(piece[start:], index == start == 0))
    return words, specials


def merge_ranks(engine: Engine, word: str) -> tuple[list[int], list[int], list[int]]:
    """One pre-token's ids (as ``encode``), the rank of each merge applied on
    the way, in order, and for each the highest rank applied so far in the
    word: the merge is applied by a tokenizer keeping the
    first K merges exactly where K exceeds that number (merging applies the
    lowest rank present; with fewer merges it stops at the first one missing).

    >>> from bpestore import Tokenizer
    >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"bc", 257: b"abc"},
    ...                 [(b"b", b"c"), (b"a", b"bc")])
    >>> tok.merge_ranks("abc")
    ([257], [0, 1], [0, 1])
    """
    if engine.spec.segmentation != "merge":
        raise InvalidArgumentError(f"a curve along the merge ranks needs merge segmentation; this version "
                                   f"segments by {engine.spec.segmentation}", params=("ref",))
    # The word whole (merging its pieces apart gives the same ids and, the
    # pieces being independent, the same merges under every prefix).
    table = engine.reference.table
    ids, ranks = bpe_merge_ranks(engine.reference.index.initial_ids(word), table.ranks, table.merged_ids)
    needed = []
    highest = -1
    for rank in ranks:
        if rank > highest:
            highest = rank
        needed.append(highest)
    return ids, ranks, needed


def char_spans(engine: Engine, text: str, ids: list[int]) -> list[tuple[int, int]]:
    """The (start, end) characters of ``text`` each token of ``ids`` covers (a
    token that holds part of a character covers that character); an error where
    the tokens do not spell the text byte for byte."""
    token_bytes = [engine.vocab[i] for i in ids]
    if b"".join(token_bytes) != text.encode("utf-8"):
        raise InvalidArgumentError(
            f"the tokens of {engine.name or 'this tokenizer'} do not spell the text byte for byte (a normalizer, "
            "word markers, an unknown token or a pre-tokenizer that drops characters change it), so they have "
            "no places in it; use encode", params=("text",))
    # The character each byte of the UTF-8 text belongs to.
    char_of_byte = []
    for i, ch in enumerate(text):
        cp = ord(ch)
        char_of_byte.extend([i] * (1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4))
    spans = []
    start = 0
    for data in token_bytes:
        end = start + len(data)
        spans.append((char_of_byte[start], char_of_byte[end - 1] + 1))
        start = end
    return spans


def char_starts(token_bytes: Iterable[bytes]) -> list[int]:
    """The character where each token starts, as tiktoken gives them (a token
    that starts inside a character starts at it)."""
    offsets = []
    n_chars = 0
    for data in token_bytes:
        offsets.append(max(0, n_chars - (0x80 <= data[0] < 0xC0)))
        n_chars += sum(1 for b in data if not 0x80 <= b < 0xC0)
    return offsets
