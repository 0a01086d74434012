"""The compiled core's merge of short words (merge_short: up to 16 symbols, merged in place
with a bit for each symbol still standing) on words new to its cache and on the same words
again, at the lengths where its paths and caches change: 8/9 bytes (the short-word cache),
16/17 (the last word merged in place, the first backtracked or merged by blocks), 30/31 (the
longest word the cache keeps). Ids checked against tiktoken (built offline from the shared
files): token ranks (cl100k, o200k) and the merge rule (GPT-2)."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")

LENGTHS = [2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 18, 29, 30, 31, 33]


@pytest.fixture(scope="module", params=["cl100k", "o200k", "gpt2"])
def version(request, gpt2_files, tiktoken_gpt2):
    if request.param == "gpt2":
        from bpestore.formats.gpt2 import read_gpt2

        vocab, merges, specials = read_gpt2(*gpt2_files)
        return Tokenizer(vocab, merges, specials, name="gpt2"), tiktoken_gpt2
    return rank_file_tokenizer(request.param)


def words_of(rng: random.Random, n: int) -> list[str]:
    """Letter words of the lengths in LENGTHS (in UTF-8 bytes, the leading space counted where
    there is one) that stress the order of merges: one letter repeated (equal pairs side by
    side: the leftmost goes first), two alternating, a syllable repeated, random letters of a
    few alphabets; a word's first and last symbols merge as often as the middle ones."""
    makers = [
        lambda k: rng.choice("aeilmnorstxz") * k,
        lambda k: "".join(rng.choice(["ab", "an", "er", "th", "ll", "ee"]) for _ in range(k))[:k],
        lambda k: (rng.choice(["ing", "tion", "ment", "abc", "ous"]) * k)[:k],
        lambda k: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(k)),
        lambda k: "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij") for _ in range(k)),
        lambda k: "".join(rng.choice("\xe9\xe8\xfc\xdf\xe0\xf1abcde") for _ in range(k)),
    ]
    words = []
    for _ in range(n):
        length, space = rng.choice(LENGTHS), rng.random() < 0.6
        word = rng.choice(makers)(length)
        while len((" " * space + word).encode("utf-8")) > length and len(word) > 1:  # 2-byte letters
            word = word[:-1]
        words.append(" " * space + word)
    return words


def test_new_words_then_the_same_again_give_tiktokens_ids(version):
    tok, enc = version
    rng = random.Random(33)
    words = list(dict.fromkeys(words_of(rng, 4_000)))
    for k in range(0, len(words), 400):
        doc = "".join(words[k:k + 400])
        expected = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == expected  # (text cut anew: its own words as the scan finds them)
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_array(doc).tolist() == expected


def test_each_word_alone_new_then_cached_gives_tiktokens_ids(version):
    tok, enc = version
    rng = random.Random(34)
    words = list(dict.fromkeys(words_of(rng, 2_000)))
    expected = [enc.encode_ordinary(w) for w in words]
    assert [tok.encode_ordinary(w) for w in words] == expected
    assert [tok.encode_ordinary(w) for w in words] == expected
    assert [len(ids) for ids in expected].count(1) < len(words)  # most words are merged, not one token


@pytest.mark.parametrize("length", [16, 17])
def test_words_at_the_in_place_limit_give_tiktokens_ids(version, length):
    tok, enc = version
    rng = random.Random(length)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [" " + "".join(rng.choice(letters[:rng.choice([2, 3, 5, 26])]) for _ in range(length - 1))
             for _ in range(1_000)]
    words += [letter * length for letter in letters]
    assert [tok.encode_ordinary(w) for w in words] == [enc.encode_ordinary(w) for w in words]
