"""The fast path of calls without options (``encode_ordinary``, ``encode``, ``encode_array``,
``encode_batch``): the backend's own call bound once. Ids equal tiktoken's on the same ranks
and the reference encoder's; disallowed special tokens are still refused, whatever they start
with; texts the core declines (lone surrogates) take the full path."""

from __future__ import annotations

import pickle

import pytest

import bpestore
from bpestore import Tokenizer
from bpestore.encoder import core_backend
from bpestore.encoder.engine import DisallowedSpecialError

from .conftest import corpus_path, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")
TEXTS = ["Hello, world! don't 12345 \n\n x日本語 Ж 😀", "a <| b |> c <|endoftext", "", " ", "x" * 400,
         "<|endoftext|>"[:-1] + " |>", "pre <|endoftext|> post", "lone \ud800 surrogate"]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Tokenizer:
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")
    store = bpestore.open(str(tmp_path_factory.mktemp("fast") / "s.db"))
    store.import_gpt2("g", vocab=corpus_path("gpt2_vocab.json"), merges=corpus_path("gpt2_merges.txt"))
    tok = store.tokenizer("g")
    assert tok.backend == "compiled (C)"
    return tok


@pytest.fixture(scope="module")
def reference(gpt2):
    specials = gpt2.special_tokens
    ranks = {t: i for i, t in gpt2.vocab.items() if i not in specials.values()}
    return tiktoken.Encoding(name="g", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks,
                             special_tokens=specials)


def test_calls_without_options_equal_tiktoken(gpt2, reference):
    for text in TEXTS:
        if "<|endoftext|>" in text:
            continue
        expected = reference.encode(text)
        assert gpt2.encode_ordinary(text) == expected == reference.encode_ordinary(text)
        assert gpt2.encode(text) == expected
        assert gpt2.encode_array(text).tolist() == expected
    clean = [t for t in TEXTS if "<|endoftext|>" not in t]
    assert gpt2.encode_batch(clean) == [reference.encode(t) for t in clean]
    assert [a.tolist() for a in gpt2.encode_batch_array(clean)] == [reference.encode(t) for t in clean]


def test_disallowed_special_tokens_are_refused(gpt2, reference):
    text = "pre <|endoftext|> post"
    with pytest.raises(ValueError):
        reference.encode(text)
    for call in (gpt2.encode, gpt2.encode_array, lambda t: gpt2.encode_batch(["ok", t]),
                 lambda t: gpt2.encode_batch_array([t])):
        with pytest.raises(DisallowedSpecialError):
            call(text)
    assert gpt2.encode_ordinary(text) == reference.encode_ordinary(text)
    assert gpt2.encode(text, allowed_special="all") == reference.encode(text, allowed_special="all")
    assert gpt2.encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())


def test_pickled_tokenizer_binds_its_call_again(gpt2):
    gpt2.encode("bind the core's call first")
    copy = pickle.loads(pickle.dumps(gpt2))
    assert copy.encode(TEXTS[0]) == gpt2.encode(TEXTS[0])


def test_special_tokens_without_a_common_start():
    """Special tokens "<a>" and "[b]" start with nothing in common: every text is searched."""
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"<a>", 257: b"[b]", 258: b"ab"}
    fast = Tokenizer(vocab, [(b"a", b"b")], ["<a>", "[b]"])
    pure = Tokenizer(vocab, [(b"a", b"b")], ["<a>", "[b]"], fast=False)
    for text in ("x [b] y", "x <a>"):
        with pytest.raises(DisallowedSpecialError):
            fast.encode(text)
        with pytest.raises(DisallowedSpecialError):
            fast.encode_array(text)
        assert fast.encode_ordinary(text) == pure.encode_ordinary(text)
    assert fast.encode("[b ab") == pure.encode("[b ab") == [ord("["), ord("b"), 32, 258]
