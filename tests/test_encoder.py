"""The encoder against tiktoken (GPT-2 built offline from the shared files)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
from bpestore import DisallowedSpecialError, Tokenizer
from bpestore.bpe import _merge_long_word, merge_word

from .conftest import corpus_path, read_corpus

EOT = "<|endoftext|>"
SHARED_TEXTS = ["tinyshakespeare.txt", "german_1M.txt", "japanese_1M.txt", "taylorswift.txt"]


@pytest.mark.parametrize("name", SHARED_TEXTS)
def test_gpt2_ids_equal_tiktoken(name, gpt2_tokenizer, tiktoken_gpt2):
    text = read_corpus(name)
    ids = gpt2_tokenizer.encode_ordinary(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert gpt2_tokenizer.decode(ids) == text


@pytest.mark.parametrize("text", [
    "", "🦄", "a", " ", "\n\n\n", "Hello <|endoftext|> world<|endoftext|>",
    "don't I'LL we've 12345 3.14 $$$ ...",
    "👨‍👩‍👧‍👦 family ZWJ, e\u0301 combining, \u202e rtl, \x00\x01 ctrl, tab\there",
    "     many     spaces   \n\t\n  ", "日本語のテキスト、中文文本。Русский текст", "x" * 3000,
])
def test_gpt2_adversarial_equal_tiktoken_and_round_trip(text, gpt2_tokenizer, tiktoken_gpt2):
    ids = gpt2_tokenizer.encode(text, allowed_special="all")
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2_tokenizer.decode(ids) == text


def test_lone_surrogates_are_replaced_like_tiktoken(gpt2_tokenizer, tiktoken_gpt2):
    text = "a\ud800b \udfff"
    assert gpt2_tokenizer.encode(text) == tiktoken_gpt2.encode(text)


def test_special_token_rules_follow_tiktoken(gpt2_tokenizer, tiktoken_gpt2):
    text = f"hi{EOT}there"
    with pytest.raises(DisallowedSpecialError, match="allowed_special"):
        gpt2_tokenizer.encode(text)
    with pytest.raises(ValueError):
        tiktoken_gpt2.encode(text)
    for options in ({"allowed_special": "all"}, {"allowed_special": {EOT}}, {"disallowed_special": ()}):
        assert gpt2_tokenizer.encode(text, **options) == tiktoken_gpt2.encode(text, **options)
    assert 50256 in gpt2_tokenizer.encode(text, allowed_special="all")
    assert 50256 not in gpt2_tokenizer.encode_ordinary(text)


def overlapping_tokenizer() -> Tokenizer:
    specials = ["<|a|>", "<|a|><|b|>", "<|b|>"]
    vocab = {i: bytes([i]) for i in range(256)}
    for i, s in enumerate(specials):
        vocab[256 + i] = s.encode()
    return Tokenizer(vocab, [], specials)


def test_overlapping_special_tokens_match_longest_first():
    tok = overlapping_tokenizer()
    assert tok.encode("x<|a|><|b|>y<|a|><|b|>", allowed_special="all") == [120, 257, 121, 257]
    assert tok.encode("<|a|><|a|><|b|>", allowed_special="all") == [256, 257]
    assert tok.encode("<|b|><|a|>", allowed_special={"<|a|>", "<|b|>"}) == [258, 256]


def test_encode_iterable_equals_encode_for_any_chunking(gpt2_tokenizer):
    text = read_corpus("taylorswift.txt")[:60000] + f"{EOT}tail  \n\n {EOT}{EOT} end"
    expected = gpt2_tokenizer.encode(text, allowed_special="all")
    rng = random.Random(7)
    for _ in range(5):
        chunks, i = [], 0
        while i < len(text):
            n = rng.choice([1, 2, 3, 5, 13, 100, 4096])
            chunks.append(text[i:i + n])
            i += n
        assert list(gpt2_tokenizer.encode_iterable(chunks, allowed_special="all")) == expected


def test_encode_iterable_never_splits_a_special_token():
    tok = overlapping_tokenizer()
    text = "ab<|a|><|b|>cd<|a|>e"
    expected = tok.encode(text, allowed_special="all")
    for cut in range(len(text) + 1):
        assert list(tok.encode_iterable([text[:cut], text[cut:]], allowed_special="all")) == expected


def test_long_word_heap_merge_equals_simple_merge(gpt2_tokenizer):
    tok = gpt2_tokenizer
    rng = random.Random(1)
    for word in ["a" * 500, "ab" * 300, "".join(rng.choice("abcdeéü ") for _ in range(800))]:
        ids = [tok._byte_ids[b] for b in word.encode()]
        assert _merge_long_word(ids, tok._ranks, tok._merged_ids) == _simple(ids, tok._ranks, tok._merged_ids)


def _simple(ids, ranks, merged_ids):
    import bpestore.bpe as bpe

    saved, bpe._LONG_WORD = bpe._LONG_WORD, 10 ** 9
    try:
        return merge_word(ids, ranks, merged_ids)
    finally:
        bpe._LONG_WORD = saved


def test_decode_errors_and_unknown_ids(gpt2_tokenizer):
    tok = gpt2_tokenizer
    broken = [tok.token_id(b"\xe6")]  # first byte of a 3-byte character
    assert tok.decode(broken) == "\ufffd"
    with pytest.raises(bpestore.BpestoreError, match="UTF-8"):
        tok.decode(broken, errors="strict")
    with pytest.raises(bpestore.BpestoreError, match="unknown token id"):
        tok.decode([10 ** 9])
    assert tok.decode_single_token_bytes(tok.token_id(" the")) == b" the"


@pytest.fixture(scope="module")
def small_tokenizer():
    vocab, merges = bpestore.train_bpe(corpus_path("taylorswift.txt"), vocab_size=600, special_tokens=[EOT])
    return Tokenizer(vocab, merges, [EOT])


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_round_trip_any_unicode(small_tokenizer, text):
    assert small_tokenizer.decode(small_tokenizer.encode(text, allowed_special="all")) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "ab", "\n", EOT, "é", "🦄", "<|", "|>"]), max_size=30))
def test_round_trip_with_specials(small_tokenizer, parts):
    text = "".join(parts)
    ids = small_tokenizer.encode(text, allowed_special="all")
    assert small_tokenizer.decode(ids) == text
    assert list(small_tokenizer.encode_iterable(parts, allowed_special="all")) == ids


def test_tokenizer_rejects_incomplete_vocab():
    with pytest.raises(bpestore.BpestoreError, match="single-byte"):
        Tokenizer({0: b"a"}, [])
    with pytest.raises(bpestore.BpestoreError, match="missing from the vocabulary"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [(b"a", b"b")])
