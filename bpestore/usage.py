"""What a version makes of a corpus generation's word counts, without its text: the
corpus' statistics (``corpus_stats``), each token's count (``token_counts``), the
tokens never emitted, unreachable or rare (``token_usage``), tokens by script
(``script_of``) and two versions compared (``compare_stats``). No SQL: the store
hands in tokenizers and counts.

A corpus' words are its pre-tokens as the spec's pipeline cut them (normalized,
spaces marked), special tokens left out. Encoding a text encodes each of its
pre-tokens alone, so each distinct word is encoded once (``Engine.encode_pretokens``:
one call of the compiled core) and weighted by its count: the totals equal encoding
the text, special tokens aside.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from operator import methodcaller, mul
from typing import TYPE_CHECKING, Any

import regex

from .analysis import _unknown_ids
from .errors import InvalidArgumentError
from .records import CorpusStats, TokenUsage
from .spec import TokenizerSpec
from .text import unmark_spaces

if TYPE_CHECKING:
    from .encoder import Tokenizer

# The spec fields that decide what a corpus' words are, special tokens aside (a corpus'
# words never hold its own special tokens; a version's are encoded as ordinary text).
WORD_FIELDS = ("normalizer", "pretokenizer", "pattern", "space_marker", "dummy_prefix")

THREADS, THREAD_WORDS = 8, 20_000  # the core's threads at most, for this many words or more

# Token classes by script (``script_of``), in the order they are tried.
SCRIPTS = ("partial", "whitespace", "digits", "latin", "cyrillic", "cjk", "code", "other")
_CLASSES = (
    ("whitespace", regex.compile(r"\s+")),
    ("digits", regex.compile(r"\s?\p{N}+")),
    ("latin", regex.compile(r"\s?[\p{Script=Latin}\p{M}]+")),
    ("cyrillic", regex.compile(r"\s?[\p{Script=Cyrillic}\p{M}]+")),
    ("cjk", regex.compile(r"\s?[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}"
                          r"\p{Script=Bopomofo}\u3000-\u303f\uff00-\uffef\p{M}]+")),
    ("code", regex.compile(r"[\x20-\x7e\t\r\n]*[!-/:-@\[-`{-~][\x20-\x7e\t\r\n]*")),
)


def check_words(version: TokenizerSpec, corpus: TokenizerSpec, *, ref: str, corpus_ref: str) -> None:
    """InvalidArgumentError where the corpus' words were cut otherwise than ``version`` cuts
    them (a pre-tokenizer, pattern, normalizer or space marker of its own), naming both."""
    mine, theirs = version.to_dict(), corpus.to_dict()
    differ = [f for f in WORD_FIELDS if mine.get(f) != theirs.get(f)]
    if differ:
        shown = ", ".join(f"{f} {theirs.get(f)!r} (version: {mine.get(f)!r})" for f in differ)
        raise InvalidArgumentError(f"{corpus_ref} was counted under {shown}: its words are not {ref}'s, so "
                                   "its counts cannot say how that version encodes it; ingest the text into a "
                                   "corpus with the version's pre-tokenizer", params=("corpus",))


def word_ids(tok: Tokenizer, words: Sequence[bytes]) -> list[bytes]:
    """Each word's ids (a corpus' words: UTF-8 pre-tokens) as ``array('I')`` bytes, as
    encoding a text gives them."""
    texts = list(map(methodcaller("decode", "utf-8", "surrogatepass"), words))
    return tok.engine.encode_pretokens(texts, min(os.cpu_count() or 1, THREADS) if len(texts) > THREAD_WORDS else 1)


def corpus_stats(tok: Tokenizer, counts: Mapping[bytes, int], *, ref: str, corpus: str,
                 ids: Sequence[bytes] | None = None) -> CorpusStats:
    """How ``tok`` encodes a corpus generation given by its word ``counts``
    (``ids``: ``word_ids`` of its words, in their order, where known already)."""
    words = list(counts)
    if ids is None:
        ids = word_ids(tok, words)
    weights = list(counts.values())
    lengths = [n >> 2 for n in map(len, ids)]
    joined = _joined(ids)
    unknown = _unknown_ids(tok)
    n_unknown = None
    if unknown is not None:
        n_unknown = sum(c for i, c in zip(joined, _repeated(weights, lengths)) if i in unknown)
    return CorpusStats(
        ref=ref, corpus=corpus, bytes=sum(map(mul, map(len, words), weights)), words=sum(weights),
        distinct_words=len(words), tokens=sum(map(mul, lengths, weights)),
        one_token_words=sum(c for n, c in zip(lengths, weights) if n == 1), unknown=n_unknown,
        used_ids=len(set(joined)), vocab_size=len(tok.engine.vocab))


def token_counts(ids: Sequence[bytes], weights: Iterable[int]) -> list[int]:
    """How often each id occurs (a list by id, up to the largest id found) when every word
    (its ``ids``, ``word_ids``) occurs its weight times."""
    joined = _joined(ids)
    found = [0] * (max(joined) + 1 if joined else 0)
    for i, c in zip(joined, _repeated(weights, [n >> 2 for n in map(len, ids)])):
        found[i] += c
    return found


def _joined(ids: Sequence[bytes]) -> array[int]:
    joined = array("I")
    joined.frombytes(b"".join(ids))
    return joined


def _repeated(weights: Iterable[int], lengths: Iterable[int]) -> Iterator[int]:
    """Each weight as often as its word has ids: the weight of each id of ``_joined``."""
    return chain.from_iterable(map(repeat, weights, lengths))


def unreachable(tok: Tokenizer) -> list[int]:
    """The ordinary tokens the encoder never outputs for their own text:
    ``encode(decode([t])) != [t]`` (merged further, cut otherwise, or partial UTF-8,
    whose text decodes to U+FFFD)."""
    specials = set(tok.special_tokens.values())
    vocab = tok.engine.vocab
    ids = [i for i in sorted(vocab) if i not in specials]
    texts = [unmark_spaces(vocab[i].decode("utf-8", "replace"), tok.spec) for i in ids]  # decode([i])
    encoded = tok.encode_batch(texts, disallowed_special=())
    return [i for i, got in zip(ids, encoded) if got != [i]]


def script_of(data: bytes, spec: TokenizerSpec | None = None) -> str:
    """A token's class by script (its markers removed, one leading space allowed):

    * ``partial``: not whole UTF-8 characters (a piece of one);
    * ``whitespace``: whitespace only (or a marker alone);
    * ``digits``: digits (``\\p{N}``) only;
    * ``latin``, ``cyrillic``: letters (and combining marks) of that script only;
    * ``cjk``: Han, Hiragana, Katakana, Hangul or Bopomofo, CJK punctuation, full-width forms;
    * ``code``: printable ASCII holding a punctuation mark or symbol (``{``, ``();``, ``->``, `` =``);
    * ``other``: anything else (other scripts, scripts mixed, emoji, special tokens).

    >>> [script_of(t.encode()) for t in (" the", "При", "的", " 42", "();", "\\n\\n", "é.")]
    ['latin', 'cyrillic', 'cjk', 'digits', 'code', 'whitespace', 'other']
    >>> script_of(b"\\xe7\\x9a")
    'partial'
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "partial"
    if spec is not None:
        for marker in (spec.end_of_word, spec.start_of_word, spec.end_of_word_suffix):
            if marker:
                text = text.replace(marker, "")
        if spec.space_marker:
            text = text.replace(spec.space_marker, " ")
    if not text:
        return "whitespace"
    if text.isascii() and not text[0].isspace():  # the classes below, quicker
        return "digits" if text.isdigit() else "latin" if text.isalpha() else (
            "code" if _CLASSES[-1][1].fullmatch(text) else "other")
    for name, pattern in _CLASSES:
        if pattern.fullmatch(text):
            return name
    return "other"


def token_usage(tok: Tokenizer, counts: Mapping[bytes, int], *, ref: str, corpus: str, rare: int = 10
                ) -> TokenUsage:
    """Each ordinary token's count on a corpus generation, the tokens never emitted,
    unreachable (``unreachable``) and rare (emitted, fewer than ``rare`` times), and
    the vocabulary and the corpus' tokens by script (``script_of``)."""
    if rare < 1:
        raise InvalidArgumentError(f"rare is a count of at least 1, not {rare}", params=("rare",))
    ids = word_ids(tok, list(counts))
    found = token_counts(ids, counts.values())
    found += [0] * (tok.engine.n_vocab - len(found))
    specials = set(tok.special_tokens.values())
    vocab = tok.engine.vocab
    ordinary = [i for i in sorted(vocab) if i not in specials]
    scripts = {name: {"vocab": 0, "tokens": 0} for name in SCRIPTS}
    for i in ordinary:
        row = scripts[script_of(vocab[i], tok.spec)]
        row["vocab"] += 1
        row["tokens"] += found[i]
    return TokenUsage(
        ref=ref, corpus=corpus, tokens=sum(found), counts=tuple(zip(ordinary, map(found.__getitem__, ordinary))),
        never=tuple(i for i in ordinary if not found[i]), unreachable=tuple(unreachable(tok)),
        rare=tuple(i for i in ordinary if 0 < found[i] < rare), rare_below=rare,
        scripts={k: v for k, v in scripts.items() if v["vocab"] or v["tokens"]},
        stats=corpus_stats(tok, counts, ref=ref, corpus=corpus, ids=ids))


def compare_stats(a: Tokenizer, b: Tokenizer, counts: Mapping[bytes, int], *, ref_a: str, ref_b: str,
                  corpus: str, limit: int = 20) -> dict[str, Any]:
    """Two versions on one corpus generation: each one's statistics, the change in bytes
    per token, and the tokens (by bytes) whose counts moved most, largest change first."""
    if limit < 0:
        raise InvalidArgumentError(f"limit cannot be negative, not {limit}", params=("limit",))
    sides = []
    for tok, ref in ((a, ref_a), (b, ref_b)):
        ids = word_ids(tok, list(counts))
        vocab = tok.engine.vocab
        by_bytes = {vocab[i]: n for i, n in enumerate(token_counts(ids, counts.values())) if n}
        sides.append((corpus_stats(tok, counts, ref=ref, corpus=corpus, ids=ids), by_bytes))
    (stats_a, count_a), (stats_b, count_b) = sides
    moved = sorted(((data, count_a.get(data, 0), count_b.get(data, 0)) for data in count_a.keys() | count_b.keys()),
                   key=lambda m: (-abs(m[2] - m[1]), m[0]))
    return {"corpus": corpus, "a": stats_a.to_dict(), "b": stats_b.to_dict(),
            "bytes_per_token_change": stats_b.bytes_per_token - stats_a.bytes_per_token,
            "moved": [{"token": data.decode("utf-8", "backslashreplace"), "hex": data.hex(), "a": x, "b": y,
                       "change": y - x} for data, x, y in moved[:limit] if x != y]}
