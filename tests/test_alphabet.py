"""Alphabets and word markers: training symbolization, encoding, and Hugging Face as a reference."""

from __future__ import annotations

import json

import pytest

import bpestore
from bpestore import BpestoreError, Tokenizer, TokenizerSpec
from bpestore.alphabet import initial_vocab, initial_words, merge_filter

from .conftest import corpus_path


@pytest.fixture
def store(tmp_path):
    s = bpestore.open(tmp_path / "alphabet.db")
    yield s
    s.close()


def spelled(tok: Tokenizer, text: str) -> list[str]:
    return [tok.decode_single_token_bytes(i).decode("utf-8", "backslashreplace") for i in tok.encode(text)]


def test_chars_alphabet_with_hf_tie_break_reproduces_hugging_face(store, tmp_path):
    """Hugging Face's BpeTrainer on characters (WhitespaceSplit, no byte level) is the reference."""
    tokenizers = pytest.importorskip("tokenizers")
    path = corpus_path("tinyshakespeare.txt")
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    hf.train([str(path)], tokenizers.trainers.BpeTrainer(vocab_size=600, show_progress=False))
    model = json.loads(hf.to_str())["model"]
    expected = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]

    store.ingest("shakes", [path], pretokenizer="whitespace")
    version = store.train("chars", corpus="shakes", vocab_size=600, alphabet="chars", tie_break="hf")
    tok = store.tokenizer(version.ref)
    assert [(a.decode(), b.decode()) for a, b in tok.merges] == expected
    assert {t.decode() for t in tok.vocab.values()} == set(model["vocab"])


def test_initial_vocab_layouts():
    words = {"héllo".encode(): 2, b"hi": 1}
    assert initial_vocab(TokenizerSpec(alphabet="chars", special_tokens=("<s>",), unk_token="<unk>",
                                       start_of_word="_"), words) == [
        b"<s>", b"<unk>", b"_", b"h", b"i", b"l", b"o", "é".encode()]
    with_fallback = initial_vocab(TokenizerSpec(alphabet="chars", byte_fallback=True), words)
    assert with_fallback[:256] == [bytes([b]) for b in range(256)]
    assert with_fallback[256:] == ["é".encode()]  # ASCII characters are bytes already
    bytes_with_marker = initial_vocab(TokenizerSpec(end_of_word="</w>", special_tokens=("<s>",)))
    assert bytes_with_marker[256:] == [b"<s>", b"</w>"]
    # A marker that is also a byte is that byte's token: one id per byte string.
    assert len(initial_vocab(TokenizerSpec(start_of_word="_"))) == 256


def test_initial_words_symbols():
    spec = TokenizerSpec(alphabet="chars", end_of_word="</w>")
    vocab = initial_vocab(spec, {b"ab": 1})
    assert vocab == [b"</w>", b"a", b"b"]
    assert list(initial_words(spec, {b"ab": 3, b"ba": 1}, vocab)) == [([1, 2, 0], 3), ([2, 1, 0], 1)]
    # An unknown character splits the word: the unknown token never takes part in a merge.
    spec = TokenizerSpec(alphabet="chars", unk_token="?")
    vocab = initial_vocab(spec, {b"ab": 1})
    assert list(initial_words(spec, {b"axb": 5}, vocab)) == [([1], 5), ([2], 5)]
    spec = TokenizerSpec(start_of_word="\u2581")
    words = list(initial_words(spec, {b"hi": 2}, initial_vocab(spec)))
    assert words == [([256, ord("h"), ord("i")], 2)]


def test_no_inner_space_rule():
    allow = merge_filter(TokenizerSpec(no_inner_space=True))
    assert allow(b"e", b" ") and allow(b" ", b"t") and allow(b" a", b" ") and allow(b" ", b" ")
    assert not allow(b"e ", b"c") and not allow(b"a", b"  ")
    assert merge_filter(TokenizerSpec()) is None


def test_encoding_unseen_characters(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abc abc ab", encoding="utf-8")
    store.ingest("t", [path], pretokenizer="whitespace")
    unk = store.tokenizer(store.train("unk", corpus="t", merges=2, alphabet="chars",
                                      unk_token="<unk>").ref)
    assert spelled(unk, "abcd") == ["abc", "<unk>"]
    fallback = store.tokenizer(store.train("fb", corpus="t", merges=2, alphabet="chars",
                                           byte_fallback=True).ref)
    assert spelled(fallback, "abé") == ["ab", "\\xc3", "\\xa9"]
    assert fallback.decode(fallback.encode("abé")) == "abé"
    strict = store.tokenizer(store.train("strict", corpus="t", merges=2, alphabet="chars").ref)
    with pytest.raises(BpestoreError, match="'é' was not seen in training.*unk_token"):
        strict.encode("é")


def test_markers_with_byte_alphabet(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("low lower lowest " * 20, encoding="utf-8")
    store.ingest("t", [path], pretokenizer="whitespace")
    tok = store.tokenizer(store.train("m", corpus="t", merges=4, end_of_word="</w>").ref)
    assert spelled(tok, "low")[-1].endswith("</w>")
    assert "".join(spelled(tok, "low lowest")) == "low</w>lowest</w>"


def test_spec_options_are_recorded_and_kept_by_extensions(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abc abd " * 10, encoding="utf-8")
    store.ingest("t", [path], pretokenizer="whitespace")
    v1 = store.train("x", corpus="t", merges=2, alphabet="chars", end_of_word="</w>", unk_token="?",
                     no_inner_space=True)
    spec = v1.spec
    assert (spec.alphabet, spec.end_of_word, spec.unk_token, spec.no_inner_space) == (
        "chars", "</w>", "?", True)
    with pytest.raises(BpestoreError, match="an extension keeps the alphabet"):
        store.train("x", corpus="t", merges=3, parent=v1.ref, alphabet="bytes")
    v2 = store.train("x", corpus="t", merges=3, parent=v1.ref)
    assert v2.spec.end_of_word == "</w>"
    assert store.tokenizer(v2.ref).merges[:2] == store.tokenizer(v1.ref).merges


def test_scheme_option_mistakes_are_user_errors():
    for bad, message in [(dict(unk_token="?"), "go with alphabet='chars'"),
                         (dict(alphabet="chars", unk_token="?", byte_fallback=True), "not both"),
                         (dict(end_of_word=""), "^end_of_word cannot be empty"),
                         (dict(alphabet="letters"), "choose bytes or chars")]:
        with pytest.raises(BpestoreError, match=message):
            TokenizerSpec(**bad)


def test_ordinary_ids_keep_the_lowest_id_and_leave_out_special_tokens():
    """Against a plain loop over the ids in order (random vocabularies with repeated bytes)."""
    import random

    from bpestore.alphabet import ordinary_ids

    def reference(vocab, specials):
        items = sorted(vocab.items()) if isinstance(vocab, dict) else enumerate(vocab)
        out = {}
        for token_id, data in items:
            if token_id not in specials:
                out.setdefault(data, token_id)
        return out

    rng = random.Random(0)
    for _ in range(2000):
        ids = rng.sample(range(30), rng.randint(0, 12))
        vocab = {i: bytes([rng.randint(97, 100)]) * rng.randint(1, 2) for i in ids}
        specials = rng.sample([*ids, 40], min(len(ids) + 1, rng.randint(0, 3)))
        assert ordinary_ids(vocab, specials) == reference(vocab, set(specials))
        listed = list(vocab.values())
        in_list = [s for s in specials if s < len(listed)]
        assert ordinary_ids(listed, in_list) == reference(listed, set(in_list))
