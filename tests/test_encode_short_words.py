"""The compiled core's paths for short words under token ranks: a word of one byte is its
byte's id and a word the cache holds is copied from it inside the scan (others merged, or
backtracked from 17 bytes on). Ids checked against tiktoken (built offline
from the shared rank files) and the pure-Python reference (``fast=False``)."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_version

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    (vocab, merges, spec), enc = made = rank_file_version(request.param)
    return Tokenizer(vocab, merges, spec=spec), enc, made[0]


def short_words(seed: int, n: int) -> list[str]:
    """Words of 1 to 20 characters that are mostly no token: random letters (ASCII, Latin-1,
    Cyrillic, CJK), digits and punctuation, each after a space or not."""
    rng = random.Random(seed)
    alphabets = ["abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklm", "0123456789",
                 "!\"#$%&()*+,-./:;<=>?@[]^_`{|}~'", "\xe9\xe8\xfc\xdf\xe0\xf1",
                 "абвгдежзийклмноп", "日本語の文字列漢字"]
    words = []
    for _ in range(n):
        letters = rng.choice(alphabets)
        word = "".join(rng.choice(letters) for _ in range(rng.choice([1, 1, 2, 3, 4, 5, 6, 8, 11, 16, 20])))
        words.append(rng.choice(["", " ", "  ", "\n"]) + word)
    return words


def test_short_words_seen_once_and_again_give_tiktokens_ids(version):
    tok, enc, _ = version
    words = short_words(1, 6_000)
    for k in range(0, len(words), 500):  # documents seen once, then the same ones again (cache hits)
        doc = "".join(words[k:k + 500])
        expected = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_array(doc).tolist() == expected


def test_each_short_word_alone_and_in_a_batch_gives_tiktokens_ids(version):
    tok, enc, _ = version
    words = short_words(2, 1_500)
    expected = [enc.encode_ordinary(w) for w in words]
    assert [tok.encode_ordinary(w) for w in words] == expected
    assert tok.encode_batch(words) == expected
    assert tok.encode_batch(words * 2, workers=2) == expected * 2


def test_short_words_agree_with_the_pure_reference(version):
    tok, _, (vocab, merges, spec) = version
    pure = Tokenizer(vocab, merges, spec=spec, fast=False)
    doc = "".join(short_words(3, 400))
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)
