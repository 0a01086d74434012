"""The compiled core's o200k letter runs in ASCII stretches ([A-Z]*[a-z]+|[A-Z]+[a-z]*, a
word within 8 bytes found from one load of 8): runs of upper and lower case letters of
every length from 0 to 12 in either order, at every distance from the end of the text or
of its ASCII (a wide letter, a Latin-1 letter or a mark after them). Ids checked against
tiktoken (built offline from the shared rank file) and the pure-Python reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer

from .conftest import rank_file_version

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module")
def o200k():
    (vocab, merges, spec), enc = rank_file_version("o200k")
    return Tokenizer(vocab, merges, spec=spec), enc, Tokenizer(vocab, merges, spec=spec, fast=False)


def case_runs() -> list[str]:
    upper, lower = "QWERTYUIOPASD", "qwertyuiopasd"
    return [upper[:u] + lower[:lo] for u in range(13) for lo in range(13) if u + lo] + [
        lower[:lo] + upper[:u] for u in range(1, 13) for lo in range(1, 13)]


@pytest.mark.parametrize("after", ["", " ", "'s", "'LL", "1", "\u00e9", "\u044f", "\u0301", "\u4e2d", ".\n"])
def test_case_runs_at_every_distance_from_the_end(o200k, after):
    tok, enc, _ = o200k
    texts = [f"{pad}{word}{after}" for word in case_runs() for pad in ("", " ", "x ", ". ")]
    for text in texts:
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), text
    doc = " ".join(texts)
    assert tok.encode_ordinary(doc) == enc.encode_ordinary(doc)


def test_case_runs_agree_with_the_pure_reference(o200k):
    tok, _, pure = o200k
    doc = "".join(f"{w}{sep}" for w, sep in zip(case_runs(), [" ", "", "'s ", "\u00e9", ",", "\n"] * 100))
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="AaBbZz'sS \u00e9\u00c9\u044f\u0301.1", min_size=1, max_size=40))
def test_random_case_mixes_give_tiktokens_ids(o200k, text):
    tok, enc, _ = o200k
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
