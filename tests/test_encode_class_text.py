"""The compiled core's cl100k and o200k words of texts not all ASCII, cut by its ASCII
scans over the characters as bytes of their classes (cores/class_text.h: a letter above
0x7F as 'A' or 'a' by its case, a digit as '0', whitespace as '\\t', a symbol as '#'; 0x80
where no byte will do: letters that fold to a contraction's, o200k's letters of no case
and marks), each word containing such a character encoded from its UTF-8. Umlauts,
Cyrillic, both cases (o200k's case splits), non-ASCII digits, whitespace and symbols put
at every place of a 64-byte block and across its edge, in Latin-1 (1-byte), 2-byte and
4-byte texts. Ids checked against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from .conftest import corpus_path, rank_file_tokenizer

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_tokenizer(request.param)


# non-ASCII words and the rules they meet: case changes (Ä Ö Ü Ж Я upper), a prefix before
# letters, contractions after them, a letter that folds to 's' (ſ, left to the character
# steps), letters of no case (ª, 中) and marks (o200k: both cases), digits (², ٣), whitespace
# (NBSP, U+0085, U+2003) and symbols («», —, „“)
CONSTRUCTS = [
    "Äpfel", "ÄÖÜ", "äÖü", "grÜn", "Straße", "STRASSE", "ÜBERgrößen", "Жук", "жУК", "ЖЖЖжжж", "ЯблокоЯ",
    "Hallo'S", "Жук's", "жук'LL", "x'ſ", "ſt", "aſ's", "(Äb", " «Жук»", "\u00a0Жук", "a\u0085b", "\u2003\u2003ж",
    "ª", "aªb", "Äª", "ªÄb", "中文", "a中", "中Ab", "\u0301Ab",
    "é\u0301", "Ж\u0301ук", "e\u0301'S", "²³", "x²", "٣٤٥٦", "Ж1234", "— ж",
    "„Äpfel“", "ä\n\nü", "ü  \n ö", "Ö\r\n", "ü/\nx", ".\n/ж", "ß'", "ñ'Ve", "ÿ", "µm", "\u00d7\u00f7",
]


def texts_with(constructs: list[str], fillers: list[str]) -> list[str]:
    """Each construct put at each place from 0 to 70 of a text past 64 characters, after
    and before filler."""
    return [(filler * 40)[:at] + construct + (filler * 40)[:80]
            for construct in constructs for filler in fillers for at in range(71)]


def same_as_tiktoken(tok, enc, texts: list[str]) -> None:
    for text, ids in zip(texts, tok.encode_batch(texts)):
        assert ids == enc.encode_ordinary(text), repr(text)
    for text in texts[::5]:  # one at a time too (encode_array: the same scan)
        assert list(tok.encode_array(text)) == enc.encode_ordinary(text), repr(text)


@pytest.mark.parametrize("filler", ["ab cd ", "äb Öd ", "жук Жук ", "x, ü. ", "\n    ж = 1\n", "ÄÖ", "  "])
def test_each_construct_at_every_place_of_a_block(version, filler):
    tok, enc = version
    texts = texts_with(CONSTRUCTS, [filler])
    same_as_tiktoken(tok, enc, texts)
    # the same in a 2-byte and a 4-byte text
    same_as_tiktoken(tok, enc, [t + "\u2019" for t in texts[::3]] + [t + "\U0001f600" for t in texts[1::7]])


@pytest.mark.parametrize("run", ["ä", "Ä", "äÄ", "Äa", "ж", "Ж", "Жж", "\u00a0", "²", "«", "ª", "é\u0301"])
def test_runs_across_a_block_edge(version, run):
    """Runs of 1 to 140 characters of one kind after 0 to 9 of words, and before each kind."""
    tok, enc = version
    texts = [("äb " * 3)[:lead] + run * (n // len(run) + 1) + after + " end of the text"
             for lead in range(10) for n in range(1, 141, 3) for after in ("x", "Ü", "1", "!", "\n", "'s", "")]
    same_as_tiktoken(tok, enc, texts)


def test_random_texts(version):
    """Texts of the pieces the rules tell apart, ASCII and not, of 40 to 300 pieces."""
    tok, enc = version
    rng = random.Random(34)
    pieces = [*"aAsStTlLvVeErRdDmM0123456789äÄöÖüÜßжЖяЯёЁſªµ²٣", " ", " ", "\n", "\r\n", "\t", "\u00a0", "\u0085",
              "'", "'s", "'ll", "'Ve", "/", ".", "«", "—", "\u0301", "中", "Жук", " жук", "Äpfel", " über", "ÜBER"]
    texts = []
    for _ in range(2_000):
        alphabet = rng.sample(pieces, rng.randint(3, 20))
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(40, 300))))
    same_as_tiktoken(tok, enc, texts)


@pytest.mark.parametrize("name", ["german_1M.txt", "russian_1M.txt"])
def test_german_and_russian_documents(version, name):
    """20 kB documents of the shared German and Russian texts, as they are and as Latin-1."""
    tok, enc = version
    text = corpus_path(name).read_text(encoding="utf-8")[:200_000]
    docs = [text[k:k + 20_000] for k in range(0, len(text), 20_000)]
    docs += [doc.encode("latin-1", "ignore").decode("latin-1") for doc in docs[:4]]
    same_as_tiktoken(tok, enc, docs)
