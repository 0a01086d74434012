"""The counting core's scan of ASCII text 64 bytes at a time (bpestore/cores/ascii_blocks.h) finds
GPT-2's words exactly: texts long enough for its blocks, where words cross the blocks' edges,
contractions sit at them, whitespace runs end at them, and Latin-1 bytes or a long word send the
scan back to the character-by-character one. The reference is the `regex` module running
GPT-2's pattern as its encoder.py spells it; the words' first occurrences must come in order."""

from __future__ import annotations

from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import text
from bpestore.text import char_class

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The same with '_' a letter (a classify function other than the regex module's ASCII classes).
GPT2_UNDERSCORE_LETTER = GPT2.replace(r"\p{L}+", r"[\p{L}_]+").replace(r"[^\s\p{L}\p{N}]", r"[^\s\p{L}\p{N}_]")

# Pieces where the masks' rules meet: contractions (and near misses), spaces before each class,
# whitespace runs ending in ' ' or not, control characters, Latin-1 letters, spaces and digits.
PIECES = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'x", "''s", "'r", "'l", " '", "n't", "'S", "they're",
          " ", "  ", "\n", "\n\n", " \n", "\t ", "\r\n", "\x0b", "\x1c", "\x00", "a", "Z", "the", " of", "9",
          "12", " 3", ".", "!?", " ...", "/", "_", "-", "é", "\xa0", "\x85", "²", "ÿ", "x" * 70, " " * 66,
          "7" * 65, "." * 64]
LONG_TEXTS = st.lists(st.sampled_from(PIECES), min_size=20, max_size=200).map("".join)


@pytest.fixture(autouse=True)
def compiled_core():
    if text.COUNT_CORE is None:
        pytest.skip(f"the compiled counting core is not built here: {text.COUNT_CORE_STATUS}")


def assert_gpt2_words(s: str, pattern: str = GPT2, classify=char_class) -> None:
    words = [w.encode("utf-8") for w in regex.findall(pattern, s)]
    counts: dict[bytes, int] = {}
    assert text.COUNT_CORE.count(s, counts, classify, 0) == len(words)
    assert counts == Counter(words)
    assert list(counts) == list(dict.fromkeys(words))


@settings(max_examples=300, deadline=None)
@given(s=LONG_TEXTS)
def test_long_texts_of_one_byte_characters(s):
    assert_gpt2_words(s)


@settings(max_examples=150, deadline=None)
@given(s=LONG_TEXTS)
def test_utf8_read_where_it_lies(s):
    """count_utf8 scans the ASCII stretches of UTF-8 bytes with the same scan (a NUL byte it
    leaves to the caller's decoder)."""
    s = s.replace("\x00", "")
    data = s.encode("utf-8")
    table = text.COUNT_CORE.CountTable()
    [(n, distinct)] = table.count_utf8([[data]], char_class, 0)
    words = [w.encode("utf-8") for w in regex.findall(GPT2, s)]
    counts = table.take()
    assert (n, distinct) == (len(words), len(set(words)))
    assert counts == Counter(words) and list(counts) == list(dict.fromkeys(words))


@pytest.mark.parametrize("s", [
    "a" * 63 + "'s" + " b" * 40,                       # a contraction across a block's edge
    ("x" * 61 + "'ll" + "y" * 5 + " ") * 5,            # a three-byte one
    " " * 63 + "\n" + " a" * 40,                       # a whitespace run ending past a block
    ("word " * 12 + "'s ") * 10,
    "Hello, world! It's 2024 and they're here.\n" * 20,
    ("a" * 64 + " ") * 5 + "é" + " b" * 50,           # long words, then Latin-1 in a block
    "é" + " the cat's" * 40,
])
def test_edges_of_blocks(s):
    assert_gpt2_words(s)


def test_another_classify_takes_the_table_not_the_masks():
    """Where classify's ASCII classes are not the regex module's, the scan reads the table."""
    def underscore_letter(c: int) -> int:
        return 2 if c == ord("_") else char_class(c)

    s = "snake_case and more_words_here, it's " * 10
    try:
        assert_gpt2_words(s, GPT2_UNDERSCORE_LETTER, underscore_letter)
    finally:
        text.COUNT_CORE.count("", {}, char_class, 0)  # the table of char_class again for the next tests
    assert_gpt2_words(s)
