"""The judged SentencePiece check: BPE models trained by ``sentencepiece`` with its
defaults, with ``nfkc_cf`` and byte fallback, and with ``split_digits``, user-defined
and control symbols, imported into bpestore: every line's ids equal sentencepiece's and
``decode`` gives sentencepiece's text; a bpestore-trained version exported as ``.model``
with ``nmt_nfkc`` encodes identically in sentencepiece.

The five shared corpora (20,000 lines each with BPESTORE_SCALE=full, 2,000 otherwise)
are ``slow`` and need ../shared; the same check runs on generated text at CI size."""

from __future__ import annotations

import io
import os
import random

import pytest

from tests.conftest import shared_corpus_path

spm = pytest.importorskip("sentencepiece")

USER = ["<sep>", "[MASK]", "self", "ing", "und", "не", "的", "🙂"]
CONTROL = ["<ctl>", "<cls>"]
CONFIGS = {
    "defaults": {},
    "nfkc_cf-bytes": {"normalization_rule_name": "nfkc_cf", "byte_fallback": True},
    "digits-symbols": {"split_digits": True, "user_defined_symbols": USER, "control_symbols": CONTROL},
}
# Lines that meet the symbols, digits, odd spaces and compatibility characters in every corpus.
PROBES = ["", " ", "a<sep>b", " <sep> [MASK]<sep>", "x <ctl> y", "1234567 89", "ＡＢＣ ｶﾞ ﬁ Ⅳ ㎡", "\u3000 two  spaces ",
          "self.selfing und не的🙂", "the king's 2nd son", "\u200b zero width", "tab\there"]
CORPORA = ["tinyshakespeare.txt", "german_1M.txt", "russian_1M.txt", "chinese_1M.txt", "code_python_5M.txt.xz"]


def spm_model(lines: list[str], vocab_size: int, **options) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([line for line in lines if line.strip()]),
                                   model_writer=model, model_type="bpe", vocab_size=vocab_size, minloglevel=2,
                                   character_coverage=0.9995, **options)
    return model.getvalue()


def assert_imports_like_sentencepiece(lines: list[str], vocab_size: int, tmp_path) -> None:
    import bpestore

    store = bpestore.open(str(tmp_path / "s.db"))
    texts = lines + PROBES
    for name, options in CONFIGS.items():
        path = tmp_path / f"{name}.model"
        path.write_bytes(spm_model(lines, vocab_size + 256 * bool(options.get("byte_fallback")), **options))
        sp = spm.SentencePieceProcessor(model_file=str(path))
        tok = store.tokenizer(store.import_sentencepiece(name, path).ref)
        unk = sp.unk_id()
        for text in texts:
            ids = sp.encode(text)
            assert tok.encode(text, disallowed_special=()) == ids, (name, text)
            if unk not in ids:
                assert tok.decode(ids) == sp.decode(ids), (name, text)


def assert_trained_exports_with_nmt_nfkc(lines: list[str], vocab_size: int, tmp_path) -> None:
    """bpestore trains (SentencePiece's options: chars, ▁, piece segmentation, byte fallback); the version,
    given sentencepiece's nmt_nfkc map, is exported as ``.model`` and sentencepiece encodes each line alike."""
    import bpestore
    from bpestore.charsmap import encode_charsmap
    from bpestore.formats.sentencepiece import parse_model

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    store = bpestore.open(str(tmp_path / "t.db"))
    store.ingest("c", [corpus], pretokenizer="metaspace", space_marker="▁", dummy_prefix="always",
                 normalizer="collapse-spaces", special_tokens=["<s>", "</s>"], workers=1)
    trained = store.train("t", corpus="c", vocab_size=vocab_size + 256, alphabet="chars", unk_token="<unk>",
                          byte_fallback=True, fuse_unk=True, layout="sentencepiece", segmentation="piece")
    tok = store.tokenizer(trained.ref)
    nmt_nfkc = parse_model(spm_model(lines[:2000], 300)).normalizer
    assert nmt_nfkc[1] == b"nmt_nfkc"
    spec = tok.spec.replace(charsmap=encode_charsmap("nmt_nfkc", nmt_nfkc[2]))  # type: ignore[arg-type]
    with_map = store.tokenizer(store.import_vocab("n", tok.vocab, tok.merges, list(tok.special_tokens),
                                                  spec=spec).ref)
    store.export("n", format="sentencepiece", out=tmp_path / "n.model")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "n.model"))
    assert sp.get_piece_size() == len(with_map.vocab)
    for text in lines + PROBES:
        assert sp.encode(text) == with_map.encode(text, disallowed_special=()), text


def generated_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = ("the king and queen of England shall go ich und der Straße не и что было 我们的中国人 "
             "def self return 42 2024 x_1 [MASK] <sep> café ﬁne ＡＢ ｶﾞ").split()
    glue = [" ", " ", " ", "  ", "", "\u3000", "(", "): ", ".", ", "]
    return ["".join(rng.choice(words) + rng.choice(glue) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def test_generated_text_encodes_as_sentencepiece_in_every_configuration(tmp_path):
    lines = generated_lines(1500, 1)
    assert_imports_like_sentencepiece(lines, 300, tmp_path)
    assert_trained_exports_with_nmt_nfkc(lines, 300, tmp_path)


def _lines(name: str) -> list[str]:
    import lzma

    path = shared_corpus_path(name)
    n_lines = 20_000 if os.environ.get("BPESTORE_SCALE") == "full" else 2_000
    with (lzma.open(path, "rt", encoding="utf-8") if name.endswith(".xz") else open(path, encoding="utf-8")) as f:
        return [line.rstrip("\n") for _, line in zip(range(n_lines), f)]


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPORA, ids=[c.split("_")[0].split(".")[0] for c in CORPORA])
def test_corpora_encode_as_sentencepiece_in_every_configuration(name, tmp_path):
    lines = _lines(name)
    vocab_size = 8000 if name.startswith("chinese") else 2000
    assert_imports_like_sentencepiece(lines, vocab_size, tmp_path)
    if name in ("tinyshakespeare.txt", "russian_1M.txt", "code_python_5M.txt.xz"):
        assert_trained_exports_with_nmt_nfkc(lines, vocab_size, tmp_path)
