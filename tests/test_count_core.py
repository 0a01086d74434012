"""The compiled counting core (bpestore/_countcore.c) counts exactly the words of the built-in regexes.

The references are the `regex` module running each pattern as its authors spell it (GPT-2's
encoder.py, tiktoken's openai_public.py), not bpestore's own spelling: every word and every
count must agree, on the shared corpora and on random text made of the characters where
the alternatives meet."""

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
from bpestore.text import COUNT_CORE_PATTERNS, TextPipeline, char_class

from .conftest import read_corpus, tiktoken_pattern

# GPT-2's encoder.py, verbatim.
GPT2_ENCODER_PY = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PATTERNS = list(COUNT_CORE_PATTERNS)


@pytest.fixture(autouse=True)
def compiled_core():
    if text.COUNT_CORE is None:
        pytest.skip(f"the compiled counting core is not built here: {text.COUNT_CORE_STATUS}")


@pytest.fixture(scope="module")
def references() -> dict[str, regex.Pattern]:
    return {"gpt2": regex.compile(GPT2_ENCODER_PY), "cl100k": regex.compile(tiktoken_pattern("cl100k")),
            "o200k": regex.compile(tiktoken_pattern("o200k"))}


def core_counts(s: str, pattern: str = "gpt2") -> tuple[dict[bytes, int], int]:
    counts: dict[bytes, int] = {}
    n = text.COUNT_CORE.count(s, counts, char_class, COUNT_CORE_PATTERNS[pattern])
    return counts, n


def assert_same_words(s: str, reference: regex.Pattern, pattern: str) -> None:
    words = reference.findall(s)
    counts, n = core_counts(s, pattern)
    assert n == len(words)
    assert counts == Counter(w.encode("utf-8", "surrogatepass") for w in words)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("name", ["tinyshakespeare.txt", "taylorswift.txt", "german_1M.txt", "russian_1M.txt",
                                  "chinese_1M.txt", "japanese_1M.txt", "hindi_1M.txt", "english_medium.txt.xz",
                                  "code_python_5M.txt.xz"])
def test_the_words_of_the_shared_corpora(name, pattern, references):
    s = read_corpus(name)
    # all three string kinds: Latin-1, BMP, and beyond (emoji in the code)
    assert_same_words(s[:3_000_000 if pattern == "gpt2" else 600_000], references[pattern], pattern)


# Where the alternatives meet: contractions in both cases (and the long s, which folds to
# s), a space or another prefix before each class, whitespace runs before a non-space, at
# the end and around newlines, \s that is not str.isspace (and back), upper, lower, title
# case and other letters, marks, digits and letters beyond ASCII, slashes after symbols,
# a lone surrogate, a character beyond the BMP.
TRICKY = (" \n\r\t\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000'sdmtlverSDMTLVERſK_-./1é٣½Ⅻ\u0301\u200b"
          "ǅʰ中ÀßΣ\ud800😀")


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=400, deadline=None)
@given(s=st.text(alphabet=TRICKY, max_size=60))
def test_random_text_where_the_alternatives_meet(pattern, references, s):
    assert_same_words(s, references[pattern], pattern)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("s", ["", " ", "  ", " \n", "a  b", "a \n b", "'s", " 's", "''s", "it'LL", "x'll've",
                               "'", "end '", "1.5e3", "12345", "\u3000x", "a\u00a0b", "\x1c\x1c", "HELLOworld",
                               "helloWorld", "ABC'S", "\u0301a", "a\u0301b", "ǅemo", "ʰʰA", ".\n/x", "x \n\n  y",
                               "  \r\n", "\n\nfoo", "don't", "Σʰ'll"])
def test_edges(s, pattern, references):
    assert_same_words(s, references[pattern], pattern)


def test_counts_add_to_what_the_dict_holds():
    counts = {b"Hi": 2, b"other": 1}
    assert text.COUNT_CORE.count("Hi Hi", counts, char_class, 0) == 2
    assert counts == {b"Hi": 3, b" Hi": 1, b"other": 1}


def test_every_code_point_gets_regex_class():
    """char_class is asked once per code point; its answers are regex's classes (a
    sample of each class over all code points)."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    for k, cls in enumerate((r"[\p{Lu}\p{Lt}]", r"\p{Ll}", r"[\p{Lm}\p{Lo}]", r"\p{M}", r"\p{N}", r"\s",
                             r"[^\p{L}\p{M}\p{N}\s]"), start=1):
        sample = regex.findall(cls, every)[::97]
        assert {char_class(ord(c)) & 15 for c in sample} == {k}, cls
    folded = regex.findall(r"(?i)[sdmtlver]", every)
    assert folded == list("DELMRSTVdelmrstvſ")  # the long s folds to s
    assert ["sdmtlver"[(char_class(ord(c)) >> 4) - 1] for c in folded] == [c.lower() for c in "DELMRSTVdelmrstvs"]
    assert not any(char_class(ord(c)) >> 4 for c in regex.sub(r"(?i)[sdmtlver]", "", every)[::31])


def test_another_classify_starts_afresh_and_bad_answers_are_errors():
    def no_digits(cp):
        return 7 if chr(cp).isdigit() else char_class(cp)
    counts: dict[bytes, int] = {}
    text.COUNT_CORE.count("ab 1.", counts, no_digits, 0)
    assert counts == {b"ab": 1, b" 1.": 1}  # digits are "other" to this classify
    assert core_counts("ab 1.") == ({b"ab": 1, b" 1": 1, b".": 1}, 3)  # char_class's answers are used again

    with pytest.raises(ValueError, match="must give a category"):
        text.COUNT_CORE.count("x", {}, lambda cp: 8, 0)
    with pytest.raises(ZeroDivisionError):
        text.COUNT_CORE.count("x", {}, lambda cp: 1 // 0, 0)
    with pytest.raises(TypeError):
        text.COUNT_CORE.count("x", {}, None, 0)
    with pytest.raises(ValueError, match="pattern must be"):
        text.COUNT_CORE.count("x", {}, char_class, 3)
    assert core_counts("x y") == ({b"x": 1, b" y": 1}, 2)


@pytest.mark.parametrize("spec", [
    TokenizerSpec(),
    TokenizerSpec(pretokenizer="cl100k", special_tokens=("<|endoftext|>",)),
    TokenizerSpec(pretokenizer="o200k", normalizer="nfd"),
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
    for spec in (TokenizerSpec(pretokenizer="whitespace"), TokenizerSpec(pretokenizer="regex", pattern=r"\w+"),
                 TokenizerSpec(pretokenizer="none")):
        assert TextPipeline(spec).count_core is None


def test_version_says_which_counting_core():
    import os

    def third_line(env):
        out = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True,
                             check=True, env=env)
        return out.stdout.splitlines()[2]
    assert third_line(None) == "counting core: compiled (C)"
    assert third_line({**os.environ, "BPESTORE_PURE": "1"}) == "counting core: pure-Python (BPESTORE_PURE is set)"


def test_latin1_text_after_a_wider_one_is_classified_whole():
    """A wider text fills the class table only for its own characters, ÿ (U+00FF) among
    them: a Latin-1 text counted next must still have each of its characters asked
    (the table is per process and fills as texts come, so a worker's order of tasks
    once changed its counts)."""
    latin = ' "£5 ^{×} ½ ¿Qué?\xa0\xa0a'
    script = ("from bpestore.text import TextPipeline; from bpestore import TokenizerSpec\n"
              "p = TextPipeline(TokenizerSpec()); p.count_utf8('ÿ中', {}); d = {}\n"
              f"p.count_utf8({latin!r}, d); print(sorted(d.items()))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    want = Counter(w.encode() for w in regex.findall(GPT2_ENCODER_PY, latin))
    assert out.strip() == str(sorted(want.items()))


@pytest.mark.parametrize("spec", [TokenizerSpec(), TokenizerSpec(pretokenizer="o200k"),
                                  TokenizerSpec(special_tokens=("<|endoftext|>",)),
                                  TokenizerSpec(pretokenizer="cl100k", space_marker="▁")])
def test_many_pieces_counted_together_count_as_each_alone(spec, monkeypatch):
    """``count_each`` (the core's ``count_many``: one table for many small files) gives each
    piece's words and distinct words and the counts of counting each alone, the pure
    way; pieces of every string kind (ASCII, Latin-1, BMP, beyond) share words."""
    s = read_corpus("tinyshakespeare.txt")[:30_000]
    texts = ["", s[:5_000], s[3_000:9_000] + " ÿ£", "中文 the" + s[:2_000], "😀 the<|endoftext|>the 😀",
             " the cat<|endoftext|> the 中 cat £<|endoftext|> the £ 😀",
             "x", s[9_000:] + " Ünïcode"] + [s[i:i + 300] for i in range(0, 6_000, 300)]
    got: dict[bytes, int] = {b" the": 7}
    each = TextPipeline(spec).count_each(texts, got)
    pure = TextPipeline(spec)
    pure.count_core = None
    want: dict[bytes, int] = {b" the": 7}
    alone = []
    for t in texts:
        own: dict[bytes, int] = {}
        alone.append((pure.count_utf8(t, own), len(own)))
        for w, n in own.items():
            want[w] = want.get(w, 0) + n
    assert each == alone and got == want
    assert pure.count_each(texts, want := {b" the": 7}) == alone and want == got


def test_count_many_refuses_what_is_not_a_list_of_lists_of_str():
    core = text.COUNT_CORE
    for bad in (["text"], [[b"bytes"]], [None]):
        with pytest.raises(TypeError):
            core.count_many(bad, {}, char_class, 0)
    with pytest.raises(ValueError):
        core.count_many([["a"]], {}, char_class, 9)
    assert core.count_many([], {}, char_class, 0) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.binary(max_size=12), st.integers(0, 2**62), max_size=60), st.integers(1, 7))
def test_interleave_gives_the_parameters_of_multi_row_statements(counts, per):
    words = sorted(counts)
    expected = [tuple(x for w in words[i:i + per] for x in (bytearray(w), counts[w]))
                for i in range(0, len(words), per)]
    assert_same_rows(text.COUNT_CORE.interleave(words, counts, per), expected)
    # The upsert's parameters of an ingest's Counter come from the core too, the same.
    from collections import Counter
    from unittest import mock

    from bpestore.store import count_tables

    with mock.patch.object(count_tables, "COUNT_CORE", mock.Mock(wraps=text.COUNT_CORE)) as core:
        assert_same_rows(count_tables.interleave(words, Counter(counts), per), expected)
    assert core.interleave.called
    with mock.patch.object(count_tables, "COUNT_CORE", None):  # the pure-Python reference: the same
        assert_same_rows(count_tables.interleave(words, Counter(counts), per), expected)


def assert_same_rows(got, expected):
    """Equal parameters of the same types (a bytearray equals its bytes: the type is asserted too)."""
    assert got == expected
    assert [list(map(type, group)) for group in got] == [list(map(type, group)) for group in expected]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.binary(max_size=12), st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=60),
       st.integers(1, 7), st.integers(-2**62, 2**62))
def test_interleave_with_ordinals_puts_each_words_ordinal_plus_shift_after_its_count(rows, per, shift):
    counts = {w: c for w, (c, _) in rows.items()}
    firsts = {w: f for w, (_, f) in rows.items()}
    words = sorted(counts)
    expected = [tuple(x for w in words[i:i + per] for x in (bytearray(w), counts[w], firsts[w] + shift))
                for i in range(0, len(words), per)]
    assert_same_rows(text.COUNT_CORE.interleave(words, counts, per, firsts, shift), expected)
    from collections import Counter
    from unittest import mock

    from bpestore.store import count_tables

    with mock.patch.object(count_tables, "COUNT_CORE", mock.Mock(wraps=text.COUNT_CORE)) as core:
        assert_same_rows(count_tables.interleave_firsts(words, Counter(counts), firsts, per, shift), expected)
    assert core.interleave.called
    with mock.patch.object(count_tables, "COUNT_CORE", None):  # the pure-Python reference: the same
        assert_same_rows(count_tables.interleave_firsts(words, Counter(counts), firsts, per, shift), expected)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.binary(max_size=12), st.tuples(st.integers(0, 2**62), st.integers(-2**70, 2**70)),
                       max_size=60),
       st.integers(1, 7), st.integers(-2**70, 2**70), st.randoms(use_true_random=False))
def test_interleave_walks_dicts_in_word_order_and_looks_up_the_words_out_of_it(rows, per, shift, rng):
    from bpestore.store import count_tables

    # counts and firsts in word order with the same word objects (as merge_shard makes them): the
    # core takes each dict's next entry; words in another order, or equal copies, are looked up.
    words = sorted(rows)
    counts = {w: rows[w][0] for w in words}
    firsts = {w: rows[w][1] for w in words}
    shuffled = rng.sample(words, len(words))
    copies = [bytes(bytearray(w)) for w in words]
    for order in (words, shuffled, copies, words[::2] + words[1::2]):
        expected = [tuple(x for w in order[i:i + per] for x in (bytearray(w), counts[w], firsts[w] + shift))
                    for i in range(0, len(order), per)]
        assert_same_rows(text.COUNT_CORE.interleave(order, counts, per, firsts, shift), expected)
        assert_same_rows(text.COUNT_CORE.interleave(order, counts, per, firsts), [
            tuple(x for w in order[i:i + per] for x in (bytearray(w), counts[w], firsts[w]))
            for i in range(0, len(order), per)])
    for start in range(len(words)):  # a chunk of the words, the walk begun at its place (or a wrong one)
        chunk = words[start:]
        expected = [tuple(x for w in chunk[i:i + per] for x in (bytearray(w), counts[w], firsts[w] + shift))
                    for i in range(0, len(chunk), per)]
        for at in (start, 0, start + 1, len(words) + 5):
            assert_same_rows(text.COUNT_CORE.interleave(chunk, counts, per, firsts, shift, at), expected)
        assert_same_rows(count_tables.interleave_firsts(chunk, counts, firsts, per, shift, start), expected)
        assert_same_rows(count_tables.interleave(chunk, counts, per, start), [
            tuple(x for w in chunk[i:i + per] for x in (bytearray(w), counts[w])) for i in range(0, len(chunk), per)])
    with pytest.raises(ValueError):
        text.COUNT_CORE.interleave(words, counts, per, firsts, shift, -1)
    if words:  # a word the dicts lack, found where the walk would have gone on
        with pytest.raises(KeyError):
            text.COUNT_CORE.interleave([words[0], b"\xff" * 13], counts, per, firsts, shift)


def test_interleave_with_ordinals_refuses_a_word_without_one():
    with pytest.raises(KeyError):
        text.COUNT_CORE.interleave([b"a", b"b"], {b"a": 1, b"b": 2}, 2, {b"a": 1})
    with pytest.raises(TypeError):
        text.COUNT_CORE.interleave([b"a"], {b"a": 1}, 1, [1])


def test_interleave_refuses_a_word_without_a_count_and_an_empty_group():
    with pytest.raises(TypeError, match="bytes"):
        text.COUNT_CORE.interleave(["a"], {"a": 1}, 1)
    with pytest.raises(KeyError):
        text.COUNT_CORE.interleave([b"a", b"b"], {b"a": 1}, 2)
    with pytest.raises(ValueError, match="at least 1"):
        text.COUNT_CORE.interleave([b"a"], {b"a": 1}, 0)
