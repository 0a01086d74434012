"""The compiled core's scan cuts a text's words a block at a time (scan_text.h's BLOCK, 256
words), hashes and fetches their cache slots, then encodes them: texts whose word counts sit
around multiples of the block, with words that are copied to UTF-8 (non-ASCII, in a 2- or
4-byte text) and long words (no short-word slot, several ids) on either side of a block's
end. Ids checked against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

WORDS = [" the", " a", "Hello", " world", "x", ",", " 42", "\n", "  ", " naïve", " 日本語", "🙂", " Straße",
         " supercalifragilistic", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", " don't", "'s",
         " ++--==//", "\t\t", " " * 12, "12345678901"]


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_tokenizer(request.param)


@pytest.mark.parametrize("count", [255, 256, 257, 511, 512, 513, 1_000])
@pytest.mark.parametrize("last", ["x", " naïve", " supercalifragilistic", "🙂", "\n"])
def test_word_counts_around_the_block(version, count, last):
    tok, enc = version
    # " a" then " b": two words each, so the words' count is near `count` whatever tiktoken cuts
    doc = " a" * (count - 1) + last
    for text in (doc, doc + "é", "é" + doc, doc + "🙂"):  # 1-, 2- and 4-byte texts
        expected = enc.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        assert tok.encode_array(text).tolist() == expected


@pytest.mark.parametrize("seed", range(6))
def test_mixed_words_over_many_blocks(version, seed):
    tok, enc = version
    rng = random.Random(seed)
    doc = "".join(rng.choice(WORDS) for _ in range(rng.randint(300, 3_000)))
    for text in (doc, doc.encode("ascii", "ignore").decode()):
        expected = enc.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        assert tok.encode_ordinary(text) == expected  # again: the words from the caches


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=200, max_size=700))
def test_random_word_lists_give_tiktokens_ids(version, words):
    tok, enc = version
    doc = "".join(words)
    assert tok.encode_ordinary(doc) == enc.encode_ordinary(doc)
