"""Segmentation as a training option: ``--segmentation merge|longest-match``,
recorded in the spec and the fingerprint; greedy longest match with every alphabet and word
marker, checked against a plain greedy match over the tokens' strings written here."""

from __future__ import annotations

import pytest

import bpestore
from bpestore.errors import InvalidArgumentError

from .conftest import read_corpus

HELD_OUT = 30_000  # characters of dracula.txt encoded


def reference_longest_match(symbols: list[bytes], tokens: set[bytes]) -> list[bytes]:
    """From the left, the longest run of symbols whose joined bytes are a token, else one symbol."""
    out, i = [], 0
    while i < len(symbols):
        best = i + 1
        for j in range(i + 1, len(symbols) + 1):
            if b"".join(symbols[i:j]) in tokens:
                best = j
        out.append(b"".join(symbols[i:best]))
        i = best
    return out


def word_symbols(word: str, spec: bpestore.TokenizerSpec, chars: set[str]) -> list[bytes]:
    """A word's initial symbols as bytes, by the spec's description (not bpestore's code)."""
    units: list[bytes] = []
    for char in word:
        if spec.byte_level:
            units += [bytes([b]) for b in char.encode("utf-8")]
        elif char in chars:
            units.append(char.encode("utf-8"))
        elif spec.byte_fallback:
            units += [bytes([b]) for b in char.encode("utf-8")]
        else:
            assert spec.unk_token is not None
            units.append(spec.unk_token.encode("utf-8"))
    start = [spec.start_of_word.encode("utf-8")] if spec.start_of_word else []
    end = [spec.end_of_word.encode("utf-8")] if spec.end_of_word else []
    return start + units + end


SCHEMES = {
    "bytes, gpt2 words": ("gpt2", {}),
    "bytes, end-of-word marker": ("whitespace", {"end_of_word": "</w>"}),
    "bytes, start-of-word marker": ("whitespace", {"start_of_word": "\u2581"}),
    "chars, end-of-word U+E000 (Jurafsky & Martin)": ("whitespace", {"alphabet": "chars", "end_of_word": "\ue000"}),
    "chars, start-of-word and unknown token": ("whitespace", {"alphabet": "chars", "start_of_word": "_",
                                                              "unk_token": "<unk>"}),
    "chars, byte fallback, end-of-word": ("punctuation", {"alphabet": "chars", "byte_fallback": True,
                                                          "end_of_word": "</w>"}),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from .conftest import corpus_path

    path = corpus_path("tinyshakespeare.txt")
    store = bpestore.open(tmp_path_factory.mktemp("seg") / "seg.db")
    for pretokenizer in {p for p, _ in SCHEMES.values()}:
        store.ingest(pretokenizer, [path], pretokenizer=pretokenizer, workers=1)
    yield store
    store.close()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_longest_match_with_every_alphabet_and_marker(trained, scheme):
    pretokenizer, options = SCHEMES[scheme]
    name = f"lm{list(SCHEMES).index(scheme)}"
    info = trained.train(name, corpus=pretokenizer, merges=300, segmentation="longest-match", **options)
    tok = trained.tokenizer(info.ref)
    spec = tok.spec
    assert spec.segmentation == "longest-match"
    tokens = {data for i, data in tok.vocab.items() if i not in tok.special_tokens.values()}
    chars = {data.decode("utf-8", "replace") for data in tokens}
    chars = {c for c in chars if len(c) == 1 and c != "\ufffd"}
    text = read_corpus("dracula.txt")[:HELD_OUT]
    if not spec.byte_level and spec.unk_token is None and not spec.byte_fallback:
        text = "".join(c if c in chars or c.isspace() else " " for c in text)  # no way to encode the unseen
    from bpestore.text import TextPipeline

    words = list(TextPipeline(spec).words(text))
    expected = [piece for word in words for piece in reference_longest_match(word_symbols(word, spec, chars), tokens)]
    ids = tok.encode(text)
    assert [tok.decode_single_token_bytes(i) for i in ids] == expected
    assert tok.backend.startswith("python")
    # explain agrees with encode
    assert list(trained.explain(info.ref, text[:2000]).ids) == tok.encode(text[:2000])


def test_segmentation_is_a_training_option_in_spec_and_fingerprint(store, tmp_path, cli_run):
    (tmp_path / "w.txt").write_text("low lower lowest newer wider new " * 30, encoding="utf-8")
    store.ingest("w", [tmp_path / "w.txt"], pretokenizer="whitespace", workers=1)
    merge = store.train("m", corpus="w", merges=10, alphabet="chars", end_of_word="</w>")
    longest = store.train("l", corpus="w", merges=10, alphabet="chars", end_of_word="</w>",
                          segmentation="longest-match")
    assert merge.spec.segmentation == "merge" and longest.spec.segmentation == "longest-match"
    assert merge.fingerprint != longest.fingerprint
    assert "segmentation" not in merge.spec.to_json()  # older specs' JSON and fingerprints unchanged
    assert store.verify(longest.ref).ok
    extension = store.train("l", corpus="w", merges=12, parent=longest.ref)
    assert extension.spec.segmentation == "longest-match"
    with pytest.raises(InvalidArgumentError, match="segmentation"):
        store.train("x", corpus="w", merges=3, segmentation="shortest")
    bytes_longest = store.train("b", corpus="w", merges=10, segmentation="longest-match")
    for fmt in ("hf", "gpt2", "tiktoken"):
        with pytest.raises(InvalidArgumentError, match="longest-match"):
            store.export(bytes_longest.ref, format=fmt, out=tmp_path / f"b.{fmt}")


def test_segmentation_on_the_command_line(cli_run, tmp_path):
    (tmp_path / "w.txt").write_text("low lower lowest newer wider new " * 30, encoding="utf-8")
    assert cli_run("ingest", "w", str(tmp_path / "w.txt"), "--pretokenizer", "whitespace").exit_code == 0
    result = cli_run("train", "t", "--corpus", "w", "--merges", "10", "--alphabet", "chars",
                     "--end-of-word", "\ue000", "--segmentation", "longest-match")
    assert result.exit_code == 0, result.output
    assert "longest-match" in cli_run("show", "t").output
    result = cli_run("train", "u", "--corpus", "w", "--merges", "3", "--segmentation", "shortest")
    assert result.exit_code != 0 and result.stderr.startswith("Error:")
