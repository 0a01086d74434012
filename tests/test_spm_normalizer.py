"""bpestore's SentencePiece normalizer (``Charsmap.normalize``) against ``sentencepiece``'s
own ``normalize`` on text that meets every path: keys of several characters (combining
marks after a letter, ``ｶﾞ``), characters the map drops or widens, odd spaces, long lines."""

from __future__ import annotations

import io
import random

import pytest

from tests.test_hf_precompiled import CLUSTERS
from tests.test_sentencepiece import ODD

spm = pytest.importorskip("sentencepiece")


def odd_text(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = ["the", "King", "x", "e", "A", "ｶ", "\u0301", "\u3099", "\u030a", "\u200b", "\ufffd", "\t", " ", "  ",
              "\u3000", "\u00a0", "Straße", "нет", "東京", *ODD, *CLUSTERS]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("options", [{}, {"remove_extra_whitespaces": False},
                                     {"normalization_rule_name": "nfkc_cf", "add_dummy_prefix": False}],
                         ids=["nmt_nfkc", "keep-spaces", "nfkc_cf"])
def test_normalize_is_sentencepieces(options):
    from bpestore.charsmap import Charsmap
    from bpestore.formats.sentencepiece import parse_model

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(odd_text(300, 1)), model_writer=model, model_type="bpe",
                                   vocab_size=150, minloglevel=2, **options)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    charsmap = Charsmap(parse_model(model.getvalue()).normalizer[2])  # type: ignore[arg-type]
    # (a combining mark after a space: a key goes on past the space, the words are not normalized alone)
    texts = odd_text(4000, 2) + ["e" + "\u0301" * 100, "x" * 200, "ｶ\u3099" * 70, "", "a \u0301b", " \u3099 ",
                                 "ｶ \u3099", "the the  the \u0301the", "\u00a8 \u0301", " " * 5 + "x" + " " * 5]
    for text in texts:
        ours = charsmap.normalize(text, dummy_prefix=options.get("add_dummy_prefix", True),
                                  remove_extra_whitespaces=options.get("remove_extra_whitespaces", True))
        assert ours == sp.normalize(text), text


def test_a_rule_spanning_a_space_is_applied_as_sentencepiece_applies_it(tmp_path):
    """A compiled rule TSV whose key holds a space (``a b`` -> ``X``): words are not normalized alone."""
    from bpestore.charsmap import Charsmap
    from bpestore.formats.sentencepiece import parse_model

    (tmp_path / "rule.tsv").write_text("61 20 62\t58\n41\t61\n", encoding="utf-8")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c A b"] * 50), model_writer=model, model_type="bpe",
                                   vocab_size=12, normalization_rule_tsv=str(tmp_path / "rule.tsv"), minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    charsmap = Charsmap(parse_model(model.getvalue()).normalizer[2])  # type: ignore[arg-type]
    for text in ["a b", "xa bx", "A b", "a  b", "ca b a b", "a b a", " a b "]:
        assert charsmap.normalize(text, dummy_prefix=True, remove_extra_whitespaces=True) == sp.normalize(text), text
    assert sp.normalize("ca b") == "▁cX"
