"""Every export and import format on the edges a plain round trip misses: special
tokens (one and several, at bpestore's ids) in the text, the highest id, non-ASCII
tokens and an empty corpus. References are the peers' own libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tokenizers
except ImportError:  # the bad-input matrix imports test modules without it
    tokenizers = None

needs_hf = pytest.mark.skipif(tokenizers is None, reason="Hugging Face tokenizers is not installed")

# (HF's ByteLevel decoder re-reads special tokens too: one holding a character of its
# alphabet, like "é", decodes differently there; the README says so.)
SPECIALS = {
    "one": ["<|endoftext|>"],
    "several": ["<|endoftext|>", "<pad>", "[SEP]", "<|fim middle|>", "<|日本|>"],
}
TEXT = "héllo wörld, the quick brown fox — 日本語 "


def _train(store, tmp_path: Path, specials: list[str], *, vocab_size: int = 600) -> str:
    corpus = tmp_path / "c.txt"
    corpus.write_text((TEXT + "jumps over the lazy dog. ") * 300, encoding="utf-8")
    store.ingest("c", [corpus], pretokenizer="gpt2", special_tokens=specials, workers=1)
    return store.train("t", corpus="c", vocab_size=vocab_size).ref


def _text_with(specials: list[str]) -> str:
    return "".join(f"{TEXT}{s}{TEXT[::-1]}" for s in specials) + specials[0]


@needs_hf
@pytest.mark.parametrize("kind", sorted(SPECIALS))
def test_hf_export_gives_bpestore_ids_for_special_tokens(store, tmp_path, kind):
    specials = SPECIALS[kind]
    ref = _train(store, tmp_path, specials)
    tok = store.tokenizer(ref)
    store.export(ref, format="hf", out=tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    assert hf.get_vocab_size() == tok.n_vocab
    for special in specials:
        assert hf.token_to_id(special) == tok.special_tokens[special]
        assert hf.id_to_token(tok.special_tokens[special]) == special
    top = max(tok.vocab)
    assert hf.decode([top], skip_special_tokens=False) == tok.decode([top])
    text = _text_with(specials)
    ids = tok.encode(text, allowed_special="all")
    assert hf.encode(text).ids == ids
    assert hf.decode(ids, skip_special_tokens=False) == tok.decode(ids) == text
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # optional: not a test dependency
        PreTrainedTokenizerFast = None
    if PreTrainedTokenizerFast is not None:
        fast = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "t.json"))
        assert fast.encode(text) == ids
        assert [fast.convert_tokens_to_ids(s) for s in specials] == [tok.special_tokens[s] for s in specials]
        assert fast.decode(ids) == text
    # ... and what was exported comes back with the same ids.
    back = store.import_hf("back", tmp_path / "t.json")
    assert back.spec.special_tokens == tuple(specials)
    assert store.tokenizer("back").encode(text, allowed_special="all") == ids


@needs_hf
def test_hf_trained_with_several_specials_imports_with_hf_ids(store, tmp_path):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    corpus = tmp_path / "c.txt"
    corpus.write_text((TEXT + "jumps over the lazy dog. ") * 300, encoding="utf-8")
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    specials = SPECIALS["several"]
    hf.train([str(corpus)], trainers.BpeTrainer(vocab_size=500, special_tokens=specials, show_progress=False,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "hf.json"))
    info = store.import_hf("h", tmp_path / "hf.json")
    assert info.spec.special_tokens == tuple(specials)
    tok = store.tokenizer("h")
    text = _text_with(specials)
    ids = hf.encode(text).ids
    assert tok.encode(text, allowed_special="all") == ids
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False) == text
    for special in specials:
        assert tok.special_tokens[special] == hf.token_to_id(special)
