"""The compiled core's scan of ASCII stretches under cl100k and o200k (bytes classed by one
look-up, letter runs 8 bytes a step; a wide text's ASCII read from one narrowed copy, the
general scan taking over near each other character). Ids checked against tiktoken (built
offline from the shared rank files) on the pattern's boundaries, with every kind of other
character put at every position, and on random ASCII."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer
from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version

from .conftest import corpus_path, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


VERSIONS: dict[str, tuple] = {}


def version(name: str):
    if name not in VERSIONS:
        ranks = read_ranks(corpus_path(f"{name}_base.tiktoken"))
        vocab, merges, spec = tiktoken_version(ranks, name, {})
        enc = tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks,
                                special_tokens={})
        VERSIONS[name] = (Tokenizer(vocab, merges, spec=spec), enc)
    return VERSIONS[name]


CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
BOUNDARIES = (
    [f"{w}{c}" for w in ["it", "IT", "It", "x", ""] for c in CONTRACTIONS + [c.upper() for c in CONTRACTIONS]]
    + [f"we{c}{tail}" for c in ["'l", "'r", "'v", "'R", "'V", "'L", "'", "''", "'x", "'e"]
       for tail in ["", " ", "x", "1"]]
    + ["don't stop", "DON'T", "I'M", "she'Ll", "they'rE", "'", "' s", "'s'", "''s", "a's's", "Hello'sWorld"]
    + ["1" * k for k in range(1, 8)] + [f"x{'7' * k}y" for k in range(1, 7)] + [f" {'4' * k} " for k in range(1, 6)]
    + ["a1", "1a", "a 1", "1.5", "12,345,678", "v2.0", "x=12345;", "$100", "3rd", "A1B2C3"]
    + [" a", "  a", "   a", " .", "  .", " \n", "  \n", "\n ", "\n\n", " \n\n ", "\t\n", "\r\n", "\r\n\r\n  x"]
    + ["a ", "a  ", "a   ", ".  ", "\n  ", "x \t ", " ", "  ", "\t", "\x0b\x0c", "\x1c\x1d\x1e\x1f", "a\x1fb"]
    + ["  x", "\t x", " \tx", "x  y", "x \t y", "x\n\ny", "x \n y", "x\n \ny", "  \n  x", " !", "  !!", "!!\n\n",
       "?!\r\n/", "a/b//c\n", "//\n/", ".\n.", "(x)", " (x) ", "[]{}<>", "a-b_c", "_x", "-x", "#1", "@ab", "x.y.z"]
    + ["HelloWorld", "helloWORLD", "HELLOworld", "ABCdef GHi", "aBcDeF", "XMLHttpRequest", "iPhone", "McDonald's",
       "CamelCase'S", "ALLCAPS'LL", "lowercase're"]
    + ["The quick brown fox jumps over the lazy dog.", "def f(x):\n    return x  # done\n\n",
       "if (a != b) {\n\tprintf(\"%d\\n\", a);\n}\n", "  indented   lines   \n   here  ", "end. \n"]
)
# other characters: letters that fold to s and k, Latin-1 letter / space / symbol, wide letters and
# spaces, a mark, numbers, a 4-byte one
OTHERS = ["\u017f", "\u212a",
          "\xe9", "\xa0", "\x85", "\xb2", "\xd7", "\u0436", "\u65e5", "\u3000", "\u2028", "\u0301", "\u0663",
          "\u2019", "\U0001F600", "\U00010400"]


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_boundaries_alone_and_joined(name):
    tok, enc = version(name)
    texts = BOUNDARIES + ["".join(BOUNDARIES), " ".join(BOUNDARIES), "\n".join(BOUNDARIES)]
    for text in texts:
        expected = enc.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected, repr(text)
        assert tok.encode_array(text).tolist() == expected, repr(text)


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_other_characters_at_every_position(name):
    """Each boundary string with another character put at each position (the text then
    Latin-1, 2 or 4 bytes a character), alone and inside ASCII on both sides."""
    tok, enc = version(name)
    texts = []
    for base in BOUNDARIES:
        for other in OTHERS:
            for at in range(len(base) + 1):
                texts.append(base[:at] + other + base[at:])
    assert len(texts) > 10_000
    for k in range(0, len(texts), 40):
        group = texts[k:k + 40]
        for text in group:
            assert tok.encode_ordinary(text) == enc.encode_ordinary(text), repr(text)
        joined = "x ".join(group)
        assert tok.encode_array(joined).tolist() == enc.encode_ordinary(joined)


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_long_ascii_runs_beside_other_characters(name):
    """Runs longer than one 8-byte step (letters, upper/lower, digits, spaces, symbols) that
    end just before, at, or after another character."""
    tok, enc = version(name)
    rng = random.Random(7)
    for _ in range(400):
        run = rng.choice(["a", "Z", "aB", "Ab", "7", " ", "\n", ".", "!?", " x", "'s"]) * rng.randint(1, 20)
        other = rng.choice(OTHERS)
        text = rng.choice(["", " ", "x", "\n"]) + run + rng.choice(["", other, other * 2]) + rng.choice(
            ["", " ", "a", "  b", "\n", "'ll", "9"]) + rng.choice(["", run])
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), repr(text)


@pytest.mark.parametrize("name", ["cl100k", "o200k"])
def test_what_follows_the_ascii_decides(name):
    """Where a word found in the ASCII alone would end otherwise: a contraction whose letter
    is no ASCII ('\u017f' is a long s), whitespace that goes on past the ASCII to a newline."""
    tok, enc = version(name)
    texts = []
    for space in ["\u3000", "\xa0", "\x85", "\u2028"]:
        for k in range(0, 9):
            texts += [f"\n{' ' * k}{space}\n x", f"x\n{' ' * k}{space}\n", f"\r\n{' ' * k}{space}  \nab",
                      f"a{' ' * k}{space}b", f"a{' ' * k}{space}"]
    for word in ["ab", "AB", "aB", "Ab", "x", ""]:
        for tail in ["'\u017f", "'\u017fx", "'\u212a", "'l\u212a", "'\u017f\u017f", "'r\xe9", "'\xe9"]:
            texts += [word + tail, " " + word + tail + " ", word + tail + "'s"]
    for text in texts:
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), repr(text)


ASCII = "".join(map(chr, range(128)))
NEAR_BOUNDARIES = "aAzZsStTdDmMlLvVeErR'0123456789 \t\n\r\x0b\x0c\x1c/.,!?-_(){}#\"" + "  \n"


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(NEAR_BOUNDARIES), max_size=60),
       st.text(alphabet=st.sampled_from(ASCII), max_size=30),
       st.sampled_from(["", *OTHERS]), st.integers(0, 90))
def test_random_ascii_gives_tiktokens_ids(text, noise, other, at):
    for name in ("cl100k", "o200k"):
        tok, enc = version(name)
        for s in (text, text + noise, noise + text, text[:at] + other + text[at:]):
            assert tok.encode_ordinary(s) == enc.encode_ordinary(s), (name, repr(s))
