"""The compiled core's one-byte words (",", "a", "\\n", "7"): the scan has no test of its own for
them, they are looked up in the short-word cache like any word of up to 8 bytes (the first time
each is its byte's id, then kept there), among short words that take their slots over. And
merge_short's choice of the lowest pair (the leftmost of equal ranks). Ids checked against
tiktoken (built offline from the shared files): token ranks (cl100k, o200k) and the merge rule
(GPT-2), on words new to the caches and on the same again."""

from __future__ import annotations

import random
import string

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")

ASCII = [chr(c) for c in range(128)]


@pytest.fixture(params=["cl100k", "o200k", "gpt2"])
def version(request, gpt2_files, tiktoken_gpt2):
    """A fresh tokenizer each test (its caches new), and tiktoken's Encoding."""
    if request.param == "gpt2":
        from bpestore.formats.gpt2 import read_gpt2

        vocab, merges, specials = read_gpt2(*gpt2_files)
        return Tokenizer(vocab, merges, specials, name="gpt2"), tiktoken_gpt2
    return rank_file_tokenizer(request.param)


def dense_text(rng: random.Random, n: int) -> str:
    """n pieces: mostly single ASCII characters (every one of the 128, each a word of one byte
    where the pattern cuts it alone), between short and longer words."""
    pieces = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.6:
            pieces.append(rng.choice(ASCII))
        elif roll < 0.9:
            pieces.append(" " * rng.randint(0, 1) + "".join(rng.choice(string.ascii_letters)
                                                              for _ in range(rng.randint(1, 8))))
        else:
            pieces.append(" " + "".join(rng.choice("etaoinshr") for _ in range(rng.randint(9, 20))))
    return "".join(pieces)


def test_one_byte_words_new_then_cached_give_tiktokens_ids(version):
    tok, enc = version
    rng = random.Random(35)
    for _ in range(20):
        doc = dense_text(rng, 2_000)
        expected = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_ordinary(doc) == expected  # the one-byte words from the cache
        assert tok.encode_array(doc).tolist() == expected


def test_each_ascii_character_alone_and_between_words(version):
    tok, enc = version
    texts = ASCII + [f"{c}x{c}" for c in ASCII] + [f"ab{c} {c}\n{c}" for c in ASCII]
    expected = [enc.encode_ordinary(t) for t in texts]
    assert [tok.encode_ordinary(t) for t in texts] == expected
    assert [tok.encode_ordinary(t) for t in texts] == expected


def test_one_byte_words_after_the_short_word_cache_filled(version):
    """Thousands of distinct short words push one-byte words out of their slots and back."""
    tok, enc = version
    rng = random.Random(36)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 8)))
             for _ in range(20_000)]
    doc = "".join(f" {w}{rng.choice(',.;:!?')}" + rng.choice(["", "\n", " 7", " a"]) for w in words)
    expected = enc.encode_ordinary(doc)
    assert tok.encode_ordinary(doc) == expected
    assert tok.encode_ordinary(doc) == expected


@pytest.mark.parametrize("length", range(2, 17))
def test_equal_pairs_anywhere_in_a_short_word_go_leftmost_first(version, length):
    """Runs of one pair repeated, at every offset of words up to 16 symbols: the lowest rank
    taken at its leftmost position."""
    tok, enc = version
    words = []
    for unit in ["a", "ab", "th", "ee", "abc", "ing", "xy"]:
        for start in range(length):
            body = ("q" * start + unit * length)[:length]
            words += [body, " " + body[:-1], body.upper()]
    expected = [enc.encode_ordinary(w) for w in words]
    assert [tok.encode_ordinary(w) for w in words] == expected
    assert [tok.encode_ordinary(w) for w in words] == expected
