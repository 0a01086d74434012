"""The compiled counting core (bpestore/_countcore.c) counts exactly the words of GPT-2's regex.

The reference is the `regex` module running GPT-2's pattern as GPT-2's encoder.py spells
it, not bpestore's own spelling: every word and every count must agree, on the shared
corpora and on random text made of the characters where the alternatives meet."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import text
from bpestore.spec import TokenizerSpec
from bpestore.text import TextPipeline, gpt2_class

from .conftest import read_corpus

# GPT-2's encoder.py, verbatim.
GPT2_ENCODER_PY = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@pytest.fixture(autouse=True)
def compiled_core():
    if text.COUNT_CORE is None:
        pytest.skip(f"the compiled counting core is not built here: {text.COUNT_CORE_STATUS}")


def core_counts(s: str) -> tuple[dict[bytes, int], int]:
    counts: dict[bytes, int] = {}
    n = text.COUNT_CORE.count_gpt2(s, counts, gpt2_class)
    return counts, n


def assert_same_words(s: str) -> None:
    words = GPT2_ENCODER_PY.findall(s)
    counts, n = core_counts(s)
    assert n == len(words)
    assert counts == Counter(w.encode("utf-8", "surrogatepass") for w in words)


@pytest.mark.parametrize("name", ["tinyshakespeare.txt", "taylorswift.txt", "german_1M.txt", "russian_1M.txt",
                                  "chinese_1M.txt", "japanese_1M.txt", "hindi_1M.txt", "english_medium.txt.xz",
                                  "code_python_5M.txt.xz"])
def test_the_words_of_the_shared_corpora(name):
    s = read_corpus(name)
    assert_same_words(s[:3_000_000])  # all three string kinds: Latin-1, BMP, and beyond (emoji in the code)


# Where the alternatives meet: contractions, a space before each class, whitespace runs
# before a non-space and at the end, \s that is not str.isspace (and back), digits and
# letters beyond ASCII, marks, a lone surrogate, a character beyond the BMP.
TRICKY = " \n\t\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000'sdmtlverSTA_-.1é٣½Ⅻ\u0301\u200b\ud800😀"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=TRICKY, max_size=60))
def test_random_text_where_the_alternatives_meet(s):
    assert_same_words(s)


@pytest.mark.parametrize("s", ["", " ", "  ", " \n", "a  b", "a \n b", "'s", " 's", "''s", "it'LL", "x'll've",
                               "'", "end '", "1.5e3", "\u3000x", "a\u00a0b", "\x1c\x1c"])
def test_edges(s):
    assert_same_words(s)


def test_counts_add_to_what_the_dict_holds():
    counts = {b"Hi": 2, b"other": 1}
    assert text.COUNT_CORE.count_gpt2("Hi Hi", counts, gpt2_class) == 2
    assert counts == {b"Hi": 3, b" Hi": 1, b"other": 1}


def test_every_code_point_gets_regex_class():
    """gpt2_class is asked once per code point; its answers are regex's classes."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    for k, cls in enumerate((r"\p{L}", r"\p{N}", r"\s")):
        sample = [m.group() for m in regex.finditer(cls, every)][::97]
        assert {gpt2_class(ord(c)) for c in sample} == {k}, cls
    others = regex.findall(r"[^\s\p{L}\p{N}]", every)[::97]
    assert {gpt2_class(ord(c)) for c in others} == {3}


def test_another_classify_starts_afresh_and_bad_answers_are_errors():
    def letters_only(cp):
        return 0 if chr(cp).isalpha() else 3
    counts: dict[bytes, int] = {}
    text.COUNT_CORE.count_gpt2("ab 1.", counts, letters_only)
    assert counts == {b"ab": 1, b" 1.": 1}  # digits are "other" to this classify
    assert core_counts("ab 1.") == ({b"ab": 1, b" 1": 1, b".": 1}, 3)  # gpt2_class's answers are used again

    with pytest.raises(ValueError, match="must give 0, 1, 2 or 3"):
        text.COUNT_CORE.count_gpt2("x", {}, lambda cp: 7)
    with pytest.raises(ZeroDivisionError):
        text.COUNT_CORE.count_gpt2("x", {}, lambda cp: 1 // 0)
    with pytest.raises(TypeError):
        text.COUNT_CORE.count_gpt2("x", {}, None)
    assert core_counts("x y") == ({b"x": 1, b" y": 1}, 2)


@pytest.mark.parametrize("spec", [
    TokenizerSpec(),
    TokenizerSpec(special_tokens=("<|endoftext|>", "<pad>")),
    TokenizerSpec(normalizer="nfkc,lowercase", special_tokens=("<|endoftext|>",)),
])
def test_the_pipeline_counts_the_same_with_and_without_the_core(spec, monkeypatch):
    s = read_corpus("tinyshakespeare.txt")[:200_000].replace("\n\n", "<|endoftext|>") + " ＡＢ ﬁ 'S"
    with_core: dict[bytes, int] = {b" Ay": 5}
    n_core = TextPipeline(spec).count_utf8(s, with_core)
    pure = TextPipeline(spec)
    assert pure.count_core is text.COUNT_CORE
    pure.count_core = None
    without: dict[bytes, int] = {b" Ay": 5}
    n_pure = pure.count_utf8(s, without)
    assert (n_core, with_core) == (n_pure, without)
    strings: Counter = Counter()
    assert pure.count_strings(s, strings, part_chars=10_000) == n_pure
    without[b" Ay"] -= 5  # what was there before
    assert {w.encode(): n for w, n in strings.items()} == {w: n for w, n in without.items() if n}


def test_other_pretokenizers_do_not_use_it():
    assert TextPipeline(TokenizerSpec(pretokenizer="cl100k")).count_core is None
    assert TextPipeline(TokenizerSpec(pretokenizer="regex", pattern=r"\w+")).count_core is None


def test_version_says_which_counting_core():
    import os

    def third_line(env):
        out = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True,
                             check=True, env=env)
        return out.stdout.splitlines()[2]
    assert third_line(None) == "counting core: compiled (C)"
    assert third_line({**os.environ, "BPESTORE_PURE": "1"}) == "counting core: pure-Python (BPESTORE_PURE is set)"
