"""The compiled core's word-at-a-time steps: the check of a wide text's characters for
ones without a class yet (4 or 2 characters a step past those within Latin-1), the pairs of
short-word slots (a word kept in the slot its hash picks or in the other of its pair) and
the 16-byte classes of an ASCII stretch (SSE2 where built for it, the byte loop elsewhere).
Ids checked against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_version

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_version(request.param)


def fresh(made) -> Tokenizer:
    vocab, merges, spec = made
    return Tokenizer(vocab, merges, spec=spec)


def fresh_upper(ranks, low: int, high: int) -> list[int]:
    """Upper-case letters in [low, high) that no token holds: not classed before a text
    brings one (o200k's case rule reads a character without a class as no letter of either
    case, which cuts " Xcd" into other words)."""
    import unicodedata

    held = {c for token in ranks for c in token.decode("utf-8", "ignore")}
    return [c for c in range(low, high) if unicodedata.category(chr(c)) == "Lu" and chr(c) not in held]


@pytest.mark.parametrize("kind", [2, 4])
def test_a_character_without_a_class_at_every_place_of_a_step(kind):
    """Each text brings an upper-case letter the encoder has not classed yet, at each place
    of the 4 (2-byte text) or 2 (4-byte text) characters of a step, after and before other
    characters above Latin-1 that are classed, near a block's edge of 4,096 characters too."""
    made, enc = rank_file_version("o200k")
    tok = fresh(made)
    fresh_chars = iter(fresh_upper(enc._mergeable_ranks, 0x100, 0x10000) if kind == 2
                       else fresh_upper(enc._mergeable_ranks, 0x10000, 0x20000))
    wide = "\u2019" if kind == 2 else "\U0001F600"
    tok.encode_ordinary(wide + "\u201c")  # classed: the text's other wide characters
    for before in [*range(0, 8), *range(4_088, 4_099)]:
        for k, filler in enumerate(["a ", "\xe9 ", wide + " "]):
            text = (filler * before)[:before] + " " + chr(next(fresh_chars)) + "cd end" + wide + "\u201cs"
            assert tok.encode_ordinary(text) == enc.encode_ordinary(text), (before, k)


def small_index(word: bytes, mask: int) -> int:
    """The short-word slot a word's hash picks (hash.h's hash_upto8, encode_work.h's cache_index)."""
    full = (1 << 64) - 1
    h = 0x9E3779B97F4A7C15 ^ ((len(word) * 0xC4CEB9FE1A85EC53) & full)
    h = ((h ^ int.from_bytes(word, "little")) * 0xC4CEB9FE1A85EC53) & full
    h ^= h >> 29
    return (h >> 17) & mask


def test_words_that_share_a_pair_of_short_word_slots(version):
    """Three or four words whose hashes pick one pair of slots of a fresh 64-slot cache, met
    in turns in one text and in a batch: each from its slot, the other of the pair or
    encoded again after its eviction, never another word's ids."""
    made, enc = version
    rng = random.Random(5)
    by_pair: dict[int, list[str]] = {}
    while not any(len(v) >= 4 for v in by_pair.values()):
        word = " " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 5)))
        if len(enc.encode_ordinary(word)) <= 2:
            by_pair.setdefault(small_index(word.encode(), 63) >> 1, []).append(word)
    for words in by_pair.values():
        if len(words) < 3:
            continue
        order = [rng.choice(words[:4]) for _ in range(24)]
        text = "".join(order)[:120]  # under 128 characters: the cache keeps its 64 slots
        tok = fresh(made)
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), words
        assert tok.encode_batch([text, text[::-1], text]) == [enc.encode_ordinary(t) for t in
                                                               (text, text[::-1], text)]
