"""SentencePiece's user-defined and control symbols, and bytes that are not UTF-8,
checked against the ``sentencepiece`` package on models it trains."""

from __future__ import annotations

import io

import pytest

spm = pytest.importorskip("sentencepiece")

USER = ["<sep>", "ab", "abc", "▁x", "[MASK]"]
WORDS = "the king and queen of it ab abc xab x <sep> [MASK] <ctl> ＡＢ ﬁ".split()


def lines(n: int, seed: int) -> list[str]:
    import random

    rng = random.Random(seed)
    glue = [" ", "  ", "", " ", "\u3000"]
    return ["".join(rng.choice(WORDS) + rng.choice(glue) for _ in range(rng.randint(0, 10))) for _ in range(n)]


def trained(tmp_path, **options):
    """sentencepiece's model and the same model imported into bpestore."""
    import bpestore

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines(2000, 1)), model_writer=model, model_type="bpe",
                                   vocab_size=400 if options.get("byte_fallback") else 120, minloglevel=2, **options)
    (tmp_path / "m.model").write_bytes(model.getvalue())
    store = bpestore.open(str(tmp_path / "s.db"))
    return (spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model")), store,
            store.tokenizer(store.import_sentencepiece("m", tmp_path / "m.model").ref))


@pytest.mark.parametrize("options", [{}, {"byte_fallback": True, "normalization_rule_name": "identity"},
                                     {"remove_extra_whitespaces": False, "add_dummy_prefix": False}],
                         ids=["nmt_nfkc", "identity-bytes", "keep-spaces"])
def test_user_defined_and_control_symbols_encode_as_sentencepiece(options, tmp_path):
    sp, store, tok = trained(tmp_path, user_defined_symbols=USER, control_symbols=["<ctl>"], **options)
    assert tok.spec.user_symbols == tuple(USER)
    assert tok.special_tokens == {"<s>": 1, "</s>": 2, "<ctl>": 3}
    texts = lines(2000, 2) + ["<sep>", " <sep> ", "x▁x", "abcab", "a<sep>b", "ＡＢabc", "[MASK][MASK]", ""]
    for text in texts:
        ids = sp.encode(text)
        # Control symbols are text to sentencepiece: bpestore reads them so with disallowed_special=().
        assert tok.encode(text, disallowed_special=()) == ids, text
        if sp.unk_id() not in ids:
            assert tok.decode(ids) == sp.decode(ids), text
    assert "<sep>" in sp.encode("a<sep>b", out_type=str)  # the symbol is one piece, never merged
    # Exported, the symbols are user-defined pieces again and sentencepiece encodes the same.
    store.export("m", format="sentencepiece", out=tmp_path / "back.model")
    again = spm.SentencePieceProcessor(model_file=str(tmp_path / "back.model"))
    assert [again.is_unknown(i) or again.id_to_piece(i) for i in range(8)] == \
        [sp.is_unknown(i) or sp.id_to_piece(i) for i in range(8)]
    for text in texts:
        assert again.encode(text) == sp.encode(text), text


def test_spec_json_holds_user_symbols_only_where_set():
    from bpestore.spec import TokenizerSpec

    plain = TokenizerSpec(alphabet="chars", unk_token="<unk>")
    assert "user_symbols" not in plain.to_json()
    spec = plain.replace(user_symbols=("<sep>",))
    assert TokenizerSpec.from_json(spec.to_json()) == spec and '"user_symbols":["<sep>"]' in spec.to_json()
    assert spec.corpus_key()["user_symbols"] == ["<sep>"]


INVALID = [b"a\xffb", b"a\xe3\x81b", b"a\xe3\x81\xffb", b"\xed\xa0\x80x", b"a\xc0\xafb", b"\xf4\x90\x80\x80",
           b"a\xffb\xe3\x81", b"a \xff b", b"\xff", b" \xff  ", "a\ufffdb".encode(), b"x\x80\x80 \xc3"]


@pytest.mark.parametrize("options", [{}, {"byte_fallback": True}, {"normalization_rule_name": "identity"},
                                     {"byte_fallback": True, "normalization_rule_name": "nfkc_cf"}],
                         ids=["nmt_nfkc", "nmt_nfkc-bytes", "identity", "nfkc_cf-bytes"])
def test_bytes_that_are_not_utf8_become_u_fffd_as_in_sentencepiece(options, tmp_path):
    """sentencepiece makes each invalid byte one U+FFFD that its map does not touch (``nmt_nfkc``
    drops a U+FFFD the text holds); in Python such bytes come as ``surrogateescape`` decodes them."""
    sp, _, tok = trained(tmp_path, **options)
    for data in INVALID:
        assert tok.encode(data.decode("utf-8", "surrogateescape")) == sp.encode(data), data
