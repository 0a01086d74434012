"""The compiled core's cl100k and o200k words of ASCII text found 64 bytes at a time
(cores/ascii_words.h: the bytes a word starts at, from the classes' bitmasks): each rule
the masks encode (contractions, either case; a prefix byte before letters; digits in threes;
whitespace to its last newline, its tail and last byte; the newlines after symbols; o200k's
case changes, its contractions after a word's letters and its '/' after a newline) put at
every place of a block and across its edge, in texts long enough for blocks. Ids checked
against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from .conftest import rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_tokenizer(request.param)


# what each rule of the masks decides, and what they leave to the byte steps
CONSTRUCTS = [
    "don't", "DON'T", "we'll", "WE'LL", "I'Ve", "they'Re", "it'sx", "x's's", "x'll'd", "'s", " 's", "('s", "\n's",
    "'ll", "'lx", "'lL", "a'LLb", "''s", "x'sB", "fooBar", "HTTPServer", "aBCd", "ABCdef", "(foo", " (foo", "\t(x",
    "..b", ".\tb", "\tfoo", "\x0bfoo", "\x0cx", "1234567", "12 345", "a1b22c333d4444", " 1", "(1", "x.\n\ny",
    ".\n  b", ".\n/x", ").\n/.", "!!\n/\n/(", "a\n/b", "foo \n", "  \n  x", "\n\n    if", "\r\n\r\n\tx", ".\r\n \r\n",
    "a  b", "a   1", "a \t (", "x\n \n y", "}\n\n\n", "//\n", " //", "x /\n/y", "'\n", "a'\nb",
]


def texts_with(constructs: list[str], fillers: list[str]) -> list[str]:
    """Each construct put at each place from 0 to 70 of a text past 64 bytes, after and
    before filler (words and spaces, symbols, newlines and indents)."""
    found = []
    for construct in constructs:
        for filler in fillers:
            for at in range(71):
                found.append((filler * 40)[:at] + construct + (filler * 40)[:80])
    return found


def same_as_tiktoken(tok, enc, texts: list[str]) -> None:
    for text, ids in zip(texts, tok.encode_batch(texts)):
        assert ids == enc.encode_ordinary(text), repr(text)


@pytest.mark.parametrize("filler", ["ab cd ", "x, y. ", "\n    z = 1\n", "   ", "aB"])
def test_each_rule_at_every_place_of_a_block(version, filler):
    tok, enc = version
    texts = texts_with(CONSTRUCTS, [filler])
    same_as_tiktoken(tok, enc, texts)
    # the ASCII of a wider text, read from its narrowed copy
    same_as_tiktoken(tok, enc, [t + "\u2019" for t in texts[::7]])


@pytest.mark.parametrize("run", [" ", "\n", " \n", "\t", "\r\n ", "1", "a", "A", "aB", "!", "'s", "/"])
def test_runs_across_a_block_edge(version, run):
    """Runs of 1 to 140 bytes of one kind (whitespace a block cannot end, words longer than
    a block) after 0 to 9 bytes of words, and before each kind of byte."""
    tok, enc = version
    texts = [("ab " * 3)[:lead] + run * (n // len(run) + 1) + after + " end of the text"
             for lead in range(10) for n in range(1, 141, 3) for after in ("x", "1", "!", "\n", "'s", "")]
    same_as_tiktoken(tok, enc, texts)


def test_random_ascii_texts(version):
    """Texts of the pieces the rules tell apart, of 64 to 600 bytes, some with a wide character."""
    tok, enc = version
    rng = random.Random(33)
    pieces = [*"aAzZsStTlLvVeErRdDmM0123456789", " ", " ", "  ", "\n", "\r\n", "\t", "\x0b", "'", "'s", "'ll", "'Ve",
              "'RE", "'d", "'M", "'t", "/", ".", "(", ")", ":", "\n\n", "   ", "\n  ", "fooBar", "ABCdef", " the",
              " 123456"]
    texts = []
    for _ in range(2_000):
        alphabet = rng.sample(pieces, rng.randint(3, 20))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(40, 300)))
        texts.append(text + "\u00e9" + text if rng.random() < 0.2 else text)
    same_as_tiktoken(tok, enc, texts)
