"""Hugging Face's ``Precompiled`` normalizer (what tokenizers' converters write for a
SentencePiece model's ``precompiled_charsmap``): read into the spec's ``charsmap`` with
the normalizer step ``precompiled``, applied per grapheme as tokenizers applies it (the
shortest key a grapheme starts with; SentencePiece itself takes the longest), written back;
checked against ``tokenizers`` on files it builds."""

from __future__ import annotations

import io
import json
import random

import pytest

from tests.test_sentencepiece import ODD

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

import bpestore  # noqa: E402

# Combining marks, Hangul jamo, flags, ZWJ emoji, CR LF: graphemes of several characters.
CLUSTERS = ["e\u0301", "A\u030a\u0323", "\u1100\u1161\u11a8", "🇩🇪", "👩\u200d💻", "\r\n", "ｶ\u3099", "a\u20dd",
            "\u0915\u094d\u0937", "Å", "ﬁ\u0301", "\u00a0", "\u3000", "™"]


def odd_text(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ["the", "king", "Straße", "нет", "東京", "x1", "ok", *ODD, *CLUSTERS]
    return ["".join(rng.choice(words) + rng.choice([" ", "  ", "", " "]) for _ in range(rng.randint(0, 12)))
            for _ in range(n)]


def charsmap(rule: str) -> bytes:
    """sentencepiece's own precompiled map for a rule (nmt_nfkc, nfkc_cf, ...)."""
    from bpestore.formats.sentencepiece import parse_model

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(odd_text(500, 1)), model_writer=model, model_type="bpe",
                                   vocab_size=200, normalization_rule_name=rule, minloglevel=2)
    return parse_model(model.getvalue()).normalizer[2]  # type: ignore[return-value]


@pytest.mark.parametrize("rule", ["nmt_nfkc", "nfkc_cf"])
def test_graphemes_map_as_tokenizers_precompiled(rule):
    from bpestore.charsmap import Charsmap

    blob = charsmap(rule)
    ours, theirs = Charsmap(blob), normalizers.Precompiled(blob)
    texts = odd_text(3000, 2) + CLUSTERS + ["".join(CLUSTERS)]
    for text in texts:
        assert ours.normalize_graphemes(text) == theirs.normalize_str(text), text
    # Not SentencePiece's longest match: some text maps differently.
    assert any(ours.normalize_graphemes(t) != ours.normalize(t, dummy_prefix=False, remove_extra_whitespaces=False)
               .replace("▁", " ") for t in texts)


def converted_style(kind: str, lines: list[str], blob: bytes):  # noqa: ANN201
    """A tokenizer.json with a Precompiled normalizer, trained by tokenizers."""
    if kind == "spm-converter":  # transformers' SpmConverter: Precompiled, Strip right, runs of spaces as ▁
        hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        hf.normalizer = normalizers.Sequence([normalizers.Precompiled(blob), normalizers.Strip(left=False, right=True),
                                              normalizers.Replace(Regex(" {2,}"), "▁")])
        hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        specials = ["<unk>", "<s>", "</s>", *[f"<0x{b:02X}>" for b in range(256)]]
    elif kind == "metaspace":  # Precompiled, spaces stripped at the ends and runs made one, Metaspace, byte fallback
        hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        hf.normalizer = normalizers.Sequence([normalizers.Precompiled(blob),
                                              normalizers.Replace(Regex(r"\A +|[ ▁]+\z"), ""),
                                              normalizers.Replace(Regex(" {2,}"), " ")])
        hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        hf.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        specials = ["<unk>", "<s>", "</s>", *[f"<0x{b:02X}>" for b in range(256)]]
    else:  # Precompiled alone before a byte-level model
        hf = tokenizers.Tokenizer(models.BPE())
        hf.normalizer = normalizers.Precompiled(blob)
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        specials = ["<|endoftext|>"]
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if kind == "byte-level" else [])
    hf.train_from_iterator(lines, trainer)
    return hf


@pytest.mark.parametrize("kind", ["spm-converter", "metaspace", "byte-level"])
def test_precompiled_tokenizer_json_imports_and_encodes_like_tokenizers(kind, tmp_path):
    lines = odd_text(1500, 3)
    hf = converted_style(kind, lines, charsmap("nmt_nfkc"))
    hf.save(str(tmp_path / "t.json"))
    store = bpestore.open(str(tmp_path / "s.db"))
    tok = store.tokenizer(store.import_hf("t", tmp_path / "t.json").ref)
    assert "precompiled" in tok.spec.normalizer_steps
    texts = odd_text(1500, 4) + CLUSTERS + ["", " ", "a  b", "".join(CLUSTERS), "  lead", "trail \t\u3000 ", "x\x1f",
                                            "a\n\n b  \n"]
    for text in texts:
        assert tok.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, text
    store.export("t", format="hf", out=tmp_path / "back.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "back.json"))
    assert json.loads(back.to_str())["normalizer"] is not None
    for text in texts:
        assert back.encode(text).ids == hf.encode(text).ids, text
