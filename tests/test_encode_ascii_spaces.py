"""The compiled core's whitespace words in ASCII stretches under cl100k and o200k (one pass
over the run, 8 spaces a step, noting its last newline): runs of spaces, tabs and newlines
of every length to 20 with a newline at every place, at the end of the text, before a
letter, a symbol or a character that is no ASCII. The shared rank files with tokens of
newlines and spaces added; ids checked against tiktoken (built offline from those ranks)
and the pure-Python reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer
from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version

from .conftest import corpus_path, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


# tokens of a newline and the whitespace after it, which neither file has: with them a
# whitespace word's end shows in its ids (else "\n" + "  " and "\n  " give the same ones)
SPACED = [b"\n" + b" " * k for k in range(1, 12)] + [b"\n\t", b"\n\t\t", b"  \n ", b" \n", b" \n "]


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    name = request.param
    ranks = read_ranks(corpus_path(f"{name}_base.tiktoken"))
    top = max(ranks.values()) + 1
    ranks.update({token: top + k for k, token in enumerate(t for t in SPACED if t not in ranks)})
    vocab, merges, spec = tiktoken_version(ranks, name, {})
    enc = tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks, special_tokens={})
    return Tokenizer(vocab, merges, spec=spec), enc, Tokenizer(vocab, merges, spec=spec, fast=False)


def runs() -> list[str]:
    found = [" " * k for k in range(1, 21)] + ["\t" * k for k in (1, 2, 9)]
    for k in range(1, 21):
        for at in range(k):
            found.append(" " * at + "\n" + " " * (k - at - 1))
        found.append(" " * (k // 2) + "\r\n" + "\t" + " " * (k // 2))
    return found


@pytest.mark.parametrize("after", ["", "x", "X", "(", "1", "\u00e9", "\u044f", "\u3000", "\u00a0", "\n"])
def test_whitespace_runs_before_every_kind_of_character(version, after):
    tok, enc, _ = version
    texts = [f"{before}{run}{after}" for run in runs() for before in ("", "a", ";")]
    for text in texts:
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), repr(text)
    doc = "x".join(texts)
    assert tok.encode_ordinary(doc) == enc.encode_ordinary(doc)


def test_whitespace_runs_agree_with_the_pure_reference(version):
    tok, _, pure = version
    doc = "def f(x):".join(runs()) + "    \n  "
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="    \t\n\rab(.\u00e9\u044f", min_size=1, max_size=60))
def test_random_whitespace_gives_tiktokens_ids(version, text):
    tok, enc, _ = version
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
