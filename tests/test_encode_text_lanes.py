"""The compiled core's steps over a text's characters several at a time: the surrogate and
wide-character tests (text_state.h, 8 characters a step), the UTF-8 of four 2-byte
characters at once (scan_text.h's utf8_of), and the 8-byte reads of short words at a
text's end (the narrowed copy of a 2- or 4-byte text has 8 bytes more). Each lane and each
end checked: ids against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_tokenizer(request.param)


def expect(tok: Tokenizer, enc, text: str) -> None:
    """encode and encode_array give tiktoken's ids, the text seen once and again."""
    expected = enc.encode_ordinary(text)
    assert tok.encode_ordinary(text) == expected, repr(text)
    assert tok.encode_ordinary(text) == expected, repr(text)
    assert tok.encode_array(text).tolist() == expected, repr(text)


@pytest.mark.parametrize("wide", ["\u0416", "\U0001F600"])
def test_short_words_at_the_end_of_a_wide_text(version, wide):
    """Words of 1..17 bytes last in a 2- or 4-byte text (read 8 bytes at a time where the
    narrowed copy has them), after 0..9 characters more."""
    tok, enc = version
    for n in [1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17]:
        for before in range(10):
            for word in ["abcdefghijklmnopq"[:n], " " + "xyzzyplughfoobar!"[:n], "1234567890123456789"[:n],
                         "!?#%&*+-/:;<=>@^"[:n]]:
                expect(tok, enc, wide + "a" * before + " " + word)


def test_two_byte_characters_four_at_a_time(version):
    """Words of characters around the 2-byte range's bounds (0x7F, 0x80, 0x7FF, 0x800) and
    from it, mixed with ASCII, at every offset of a run of four."""
    tok, enc = version
    rng = random.Random(7)
    bounds = [0x41, 0x7F, 0x80, 0xC0, 0xFF, 0x100, 0x3FF, 0x400, 0x430, 0x5D0, 0x7FF, 0x800, 0xFFF, 0x3042]
    pool = [chr(c) for c in bounds] + [chr(rng.randrange(0x80, 0x800)) for _ in range(40)]
    texts = []
    for _ in range(1_500):
        word = "".join(rng.choice(pool) for _ in range(rng.randint(1, 13)))
        texts.append(rng.choice(["", " ", "a", "ab ", "\n"]) + word + rng.choice(["", " ", ".", "x"]))
    for k in range(0, len(texts), 100):
        expect(tok, enc, " ".join(texts[k:k + 100]))
    for text in texts[:300]:
        expect(tok, enc, text)


@pytest.mark.parametrize("wide", ["\u0416", "\U0001F600"])
def test_a_surrogate_in_any_lane(version, wide):
    """A lone surrogate at each position of the first lanes and past a block of 4,096
    characters, the text ending 0..8 characters after it (a block's last lanes one at a
    time): tiktoken's ids (it becomes U+FFFD)."""
    tok, enc = version
    for at in list(range(0, 20)) + [4_094, 4_095, 4_096, 4_097, 4_103]:
        for surrogate in ["\ud800", "\udfff"]:
            for end in range(9):
                text = (wide + "ab cd " * 700)[:at] + surrogate + " ending!!"[:end]
                clean = text.replace(surrogate, "\ufffd")
                assert tok.encode_ordinary(text) == enc.encode_ordinary(clean)


def test_a_new_wide_character_in_any_lane(version):
    """A character the version has not classified yet, at each position of the first lanes
    and past a block: asked for (its class known), so the words around it are tiktoken's."""
    tok, enc = version
    fresh = iter(range(0x4E00, 0x9FFF))
    for at in list(range(0, 20)) + [4_094, 4_095, 4_096, 4_097, 4_103]:
        for prefix in ["\u0416", "\U0001F600"]:
            c = chr(next(fresh))
            expect(tok, enc, (prefix + "ab cd " * 700)[:at] + c + "x" + c + " end")
