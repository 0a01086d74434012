"""The compiled core's word-at-a-time steps: the check of a wide text's characters for
ones without a class yet (4 or 2 characters a step past those within Latin-1), the pairs of
short-word slots (a word kept in the slot its hash picks or in the other of its pair) and
the 16-byte classes of an ASCII stretch (SSE2 where built for it, the byte loop elsewhere).
Ids checked against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from .conftest import fresh_tokenizer, rank_file_version

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_version(request.param)



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
    tok = fresh_tokenizer(made)
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
        tok = fresh_tokenizer(made)
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), words
        assert tok.encode_batch([text, text[::-1], text]) == [enc.encode_ordinary(t) for t in
                                                               (text, text[::-1], text)]


# one byte of each class the 16-byte masks tell apart, the edges of each range, and
# characters from 0x80 on of each width (Latin-1, 2 and 4 bytes a character)
CLASS_BYTES = ["A", "Z", "a", "z", "M", "q", "0", "9", "5", " ", "\t", "\n", "\r", "\x0b", "\x0c", "'", "/", "!",
               "_", "@", "[", "`", "{", ":", "\x08", "\x0e", "\x1f", "\x7f", "\x00", "\xe9", "\xa0", "\u2019",
               "\u3000", "\U0001F600"]
RUNS = ["a" * 40, "A" * 40, "aB" * 20, "Ab" * 20, " " * 40, "1" * 40, "!" * 40, "\n" * 40, " \n" * 20, "'s" * 20,
        "// " * 14, "x y " * 10, "He's " * 8, "  a" * 14, "\n  b" * 10, " \t\n  b" * 7, "a  \n  b" * 6,
        "x" + " " * 17 + "y" * 22, "!!\n/x" * 8, "12345 " * 7,
        "\n    if" * 6, "\n\t\t}" * 8]


def same_as_tiktoken(tok, enc, texts: list[str]) -> None:
    """Each text's ids (one batch: the same scan per text) equal tiktoken's."""
    got = tok.encode_batch(texts)
    for text, ids in zip(texts, got):
        assert ids == enc.encode_ordinary(text), text


@pytest.mark.parametrize("base", RUNS)
def test_every_class_at_every_place_of_a_block(version, base):
    """A byte of each class put at each place from 0 to 33 of a run (the 16 bytes a word's
    classes are read from start at each word, so every offset of a block is met), in a
    text of one byte a character, and of two and four where the other end holds a wider
    character (the ASCII read from the narrowed copy)."""
    made, enc = version
    texts = [base[:at] + x + base[at + 1:] for x in CLASS_BYTES for at in range(34)]
    texts += [t + "\u2019" for t in texts] + ["\U0001F600" + t for t in texts]
    same_as_tiktoken(fresh_tokenizer(made), enc, texts)


def test_texts_that_end_near_a_block(version):
    """Texts of 1 to 40 characters (a word's 16 bytes are read only where the text has
    them), each run and class at their end."""
    made, enc = version
    same_as_tiktoken(fresh_tokenizer(made), enc, [(base[:n - 1] + x)[-n:] for base in RUNS for x in CLASS_BYTES
                                        for n in range(1, 41)])


def test_random_texts_of_every_class(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    rng = random.Random(11)
    pieces = CLASS_BYTES + ["hello", "World", "HTTPServer", "it's", "DON'T", "123456", "    ", "\r\n", "=>", "//"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(3_000)]
    assert tok.encode_batch(texts) == [enc.encode_ordinary(t) for t in texts]
    for t in texts[:500]:
        assert tok.encode_ordinary(t) == enc.encode_ordinary(t), t
