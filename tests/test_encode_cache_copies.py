"""The compiled core's word cache keeps a word's bytes and ids by overlapping moves of a
constant size (encode_work.h: copy_key, copy_ids): every key length the cache keeps (1 to
30 bytes) and every number of ids it keeps (1 to 8) met first (merged, then kept) and again
(read from the cache), in one call and in the next, as lists and as arrays. Ids checked
against tiktoken (built offline from the shared rank files)."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import rank_file_version

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_version(request.param)


def words_of_every_length(seed: int) -> list[str]:
    """Words of 1 to 30 UTF-8 bytes (ASCII letters, Cyrillic: two bytes a letter, digits),
    after a space or not, several of each length: from one id to many."""
    rng = random.Random(seed)
    found = []
    for length in range(1, 31):
        for letters in ("abcdefghijklmnopqrstuvwxyz", "qxzjkvw", "абвгдежзийклмнопрстуфхцчшщыэюя"):
            for space in ("", " "):
                width = 2 if letters[0] == "а" else 1
                n = (length - len(space)) // width
                if n < 1:
                    continue
                found.append(space + "".join(rng.choice(letters) for _ in range(n)))
    found += [str(rng.randrange(10 ** k)) for k in range(1, 4)]
    return found


def test_every_key_length_and_id_count_kept_and_read_again(version):
    made, enc = version
    vocab, merges, spec = made
    tok = Tokenizer(vocab, merges, spec=spec)  # its own caches: every word new to them
    words = words_of_every_length(7)
    counts = {len(enc.encode_ordinary(w)) for w in words}
    assert {1, 2, 3, 4, 5, 8} <= counts  # ids of each size class the copies take
    doc = "\n".join(w + "." + w for w in words)  # each word twice in a text: the second from the cache
    expected = enc.encode_ordinary(doc)
    assert tok.encode_array(doc).tolist() == expected
    assert tok.encode_ordinary(doc) == expected  # the next call: every word from the cache
    for w in words:
        assert tok.encode_ordinary(w) == enc.encode_ordinary(w), w
