"""The compiled core's cache of short words (1 to 8 bytes, one or two ids; 16-byte slots
that a word's hash picks, the last word there stays, grown with what a scratch space
encoded): words evicted and met again, the cache grown between calls, words that differ
only in their length (a NUL byte at the end), words at the text's end, words of three ids
(kept in the other cache) and words read from UTF-8. Ids checked against tiktoken (built
offline from the shared rank files) and the pure-Python reference (``fast=False``)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer

from .conftest import fresh_tokenizer, rank_file_version

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_version(request.param)



_TOKENIZERS: dict[int, Tokenizer] = {}


def version_tokenizer(made) -> Tokenizer:
    if id(made) not in _TOKENIZERS:
        _TOKENIZERS[id(made)] = fresh_tokenizer(made)
    return _TOKENIZERS[id(made)]


def distinct_words(seed: int, n: int) -> list[str]:
    """n different words of 1 to 8 bytes (ASCII letters in both cases, digits, punctuation,
    Latin-1 and Cyrillic), each after a space or not: more than a small cache has slots."""
    rng = random.Random(seed)
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPabcdefgh", "!#$%&()*+,-./:;<=>?@[]^_{|}~",
                 "\xe9\xe8\xfc\xdf\xe0", "абвгдежзий"]
    found: dict[str, None] = {}
    while len(found) < n:
        letters = rng.choice(alphabets)
        most = 4 if letters[0] in "\xe9а" else 7
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, most)))
        found[rng.choice(["", " "]) + word] = None
    return list(found)


def test_words_evicted_and_met_again_while_the_cache_grows(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    words = distinct_words(1, 12_000)
    rng = random.Random(2)
    for size in (200, 2_000, 20_000, 60_000):  # each call grows the caches (a text's characters count)
        doc = "".join(rng.choice(words) for _ in range(size // 5))
        expected = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_array(doc).tolist() == expected  # every word met before: from the cache


def test_words_that_differ_only_in_a_nul_byte_or_their_place_at_the_end(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    pieces = ["a", "a\x00", "ab", "ab\x00\x00", "abcdefgh", "ABCDEFGH", " Zebra's", "\x00", "\x00\x00\x00",
              "я", "яя", "ёжик", "éé", "x" * 8, " " + "x" * 7]
    for doc in [*pieces, "".join(pieces), "".join(reversed(pieces)), " ".join(pieces) * 3]:
        for text in (doc, doc + "abcdefgh", "abcdefgh" + doc):  # an 8-byte word at the end: no 8-byte load
            expected = enc.encode_ordinary(text)
            assert tok.encode_ordinary(text) == expected
            assert tok.encode_ordinary(text) == expected


def test_short_words_of_three_ids_and_words_of_two(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    # short words that are no token: each 1..8 bytes and often 2 or 3 ids
    rng = random.Random(3)
    words = ["".join(rng.choice("qxzjvkwQXZJ$%^~") for _ in range(rng.randint(2, 8))) for _ in range(3_000)]
    doc = " ".join(words)
    expected = enc.encode_ordinary(doc)
    assert max(len(enc.encode_ordinary(" " + w)) for w in words) >= 3
    for _ in range(3):
        assert tok.encode_ordinary(doc) == expected


def test_the_caches_of_each_thread_agree_with_tiktoken(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    words = distinct_words(4, 6_000)
    rng = random.Random(5)
    docs = ["".join(rng.choice(words) for _ in range(4_000)) for _ in range(8)]
    expected = [enc.encode_ordinary(doc) for doc in docs]
    assert tok.encode_batch(docs, workers=2) == expected
    assert [a.tolist() for a in tok.encode_batch_array(docs, workers=2)] == expected


def test_short_words_agree_with_the_pure_reference(version):
    made, _ = version
    vocab, merges, spec = made
    pure = Tokenizer(vocab, merges, spec=spec, fast=False)
    tok = fresh_tokenizer(made)
    doc = "".join(distinct_words(6, 1_500)) + "\x00a\x00ab\x00"
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="aAbZ \x00'\né\u044f1.", min_size=1, max_size=9), min_size=1, max_size=80))
def test_random_short_words_twice_give_tiktokens_ids(version, words):
    made, enc = version
    tok = version_tokenizer(made)  # one for every example: its cache holds the earlier ones' words
    doc = "".join(words)
    expected = enc.encode_ordinary(doc)
    assert tok.encode_ordinary(doc) == expected
    assert tok.encode_ordinary(doc) == expected
