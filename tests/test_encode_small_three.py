"""The compiled core's short-word cache holding words of three ids (a word of 3..8 bytes
whose last two ids are below 2^16, kept under its length plus SMALL_THREE): a small
vocabulary (cl100k's first 20,000 ranks, as a trained 64k one cuts code) splits many
short words of code in three. Words met again, evicted, and beside words of one, two and
four ids of the same bytes' lengths; cl100k itself, whose three ids are often 2^16 or more
(then kept in the other cache). Ids checked against tiktoken of the same ranks and the
pure-Python reference."""

from __future__ import annotations

import random

import pytest

from bpestore import Tokenizer

from .conftest import corpus_path, fresh_tokenizer, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")

SMALL = 20_000  # ranks kept: every id below 2^16


@pytest.fixture(scope="module", params=[SMALL, None])
def version(request):
    from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version

    ranks = read_ranks(corpus_path("cl100k_base.tiktoken"))
    if request.param is not None:
        ranks = {token: rank for token, rank in ranks.items() if rank < request.param}
    encoding = tiktoken.Encoding(name="small", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks,
                                 special_tokens={})
    return tiktoken_version(ranks, "cl100k", {}), encoding


def code_words(seed: int, n: int) -> list[str]:
    """n short words of code (identifiers, dotted names, operators), 1..8 bytes, after a
    space or not."""
    rng = random.Random(seed)
    parts = ["self", "_", "__", "init", "str", "len", "dict", "np", "x", "idx", "kw", "args", "cfg", "buf",
             ".", "(", ")", "[", "]", ":", "=", "==", "->", "0", "1", "42", "qz", "Xj", "vk", "'"]
    found: dict[str, None] = {}
    while len(found) < n:
        word = ""
        while len(word) < rng.randint(2, 8):
            word += rng.choice(parts)
        found[rng.choice(["", " "]) + word[:8]] = None
    return list(found)


def test_small_vocabulary_cuts_short_code_words_in_three():
    from bpestore.formats.tiktoken_ranks import read_ranks

    ranks = read_ranks(corpus_path("cl100k_base.tiktoken"))
    small = tiktoken.Encoding(name="small", pat_str=tiktoken_pattern("cl100k"),
                              mergeable_ranks={t: r for t, r in ranks.items() if r < SMALL}, special_tokens={})
    counts = [len(small.encode_ordinary(w)) for w in code_words(1, 3_000)]
    assert counts.count(3) > 300 and counts.count(4) > 0  # the slots' case, and the other cache's


def test_words_of_three_ids_met_again_give_tiktokens_ids(version):
    made, enc = version
    tok = fresh_tokenizer(made)
    words = code_words(2, 4_000)
    rng = random.Random(3)
    for size in (2_000, 20_000, 200_000):  # the caches grow between calls and keep their words
        doc = "".join(rng.choice(words) for _ in range(size // 5))
        expected = enc.encode_ordinary(doc)
        assert tok.encode_ordinary(doc) == expected
        assert tok.encode_ordinary(doc) == expected  # every word from a cache
        assert tok.encode_array(doc).tolist() == expected


def test_words_of_three_ids_evicted_by_others_of_the_same_slot(version):
    made, enc = version
    tok = fresh_tokenizer(made)  # a fresh scratch space: its short-word cache has 64 slots
    words = code_words(4, 600)
    doc = " ".join(words) + "\n" + " ".join(reversed(words))
    expected = enc.encode_ordinary(doc)
    for _ in range(3):
        assert tok.encode_ordinary(doc) == expected
    for word in words[:200]:  # one word a call: its ids from the slot kept by the call before
        assert tok.encode_ordinary(word) == enc.encode_ordinary(word)


def test_words_of_three_ids_agree_with_the_pure_reference():
    from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version

    ranks = read_ranks(corpus_path("cl100k_base.tiktoken"))
    vocab, merges, spec = tiktoken_version({t: r for t, r in ranks.items() if r < 3_000}, "cl100k", {})
    pure = Tokenizer(vocab, merges, spec=spec, fast=False)
    tok = Tokenizer(vocab, merges, spec=spec)
    doc = " ".join(code_words(5, 400)) * 2
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)
    assert tok.encode_ordinary(doc) == pure.encode_ordinary(doc)
