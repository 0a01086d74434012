"""The peers' formats in (issue 11 section 3): Hugging Face tokenizer.json and tiktoken
rank files imported, checked against the peers' own encoders; export -> import round trips;
what cannot be represented is refused with one Error: line naming the part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import read_corpus

try:
    import tokenizers
except ImportError:  # the matrix in test_bad_input imports this module's files without it
    tokenizers = None

needs_hf = pytest.mark.skipif(tokenizers is None, reason="Hugging Face tokenizers is not installed")

TEXTS = ["tinyshakespeare.txt", "german_1M.txt", "russian_1M.txt", "chinese_1M.txt"]
SLICE = 60_000  # characters of each corpus compared


def _texts() -> list[str]:
    return [read_corpus(name)[:SLICE] for name in TEXTS]


def hf_byte_level(path: Path, corpus: Path, *, normalizer: bool = True):  # noqa: ANN201
    """A byte-level BPE trained by Hugging Face tokenizers (the reference), saved at ``path``."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    if normalizer:
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([str(corpus)], trainers.BpeTrainer(vocab_size=1200, special_tokens=["<|endoftext|>"],
                                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                 show_progress=False))
    tok.save(str(path))
    return tok


def hf_chars(path: Path, corpus: Path):  # noqa: ANN201
    """A character-level BPE with an unknown token and HF's Whitespace pre-tokenizer."""
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train([str(corpus)], trainers.BpeTrainer(vocab_size=800, special_tokens=["[UNK]", "[SEP]"],
                                                 show_progress=False))
    tok.save(str(path))
    return tok


@needs_hf
def test_hf_trained_byte_level_imported_gives_hf_ids(store, tmp_path, corpora_dir):
    ref = hf_byte_level(tmp_path / "t.json", corpora_dir / "tinyshakespeare.txt")
    info = store.import_hf("hfb", tmp_path / "t.json")
    assert info.spec.normalizer == "nfkc,lowercase" and info.spec.pretokenizer == "gpt2"
    assert info.spec.special_tokens == ("<|endoftext|>",)
    tok = store.tokenizer("hfb")
    for text in _texts():
        assert tok.encode(text) == ref.encode(text).ids
    assert tok.encode("a <|endoftext|> b", allowed_special="all") == ref.encode("a <|endoftext|> b").ids


@needs_hf
def test_hf_trained_chars_with_unknown_token_imported_gives_hf_ids(store, tmp_path, corpora_dir):
    ref = hf_chars(tmp_path / "c.json", corpora_dir / "tinyshakespeare.txt")
    info = store.import_hf("hfc", tmp_path / "c.json")
    assert info.spec.alphabet == "chars" and info.spec.unk_token == "[UNK]"
    assert info.spec.special_tokens == ("[SEP]",)
    tok = store.tokenizer("hfc")
    unk = ref.token_to_id("[UNK]")
    for text in _texts():
        ids = ref.encode(text).ids
        assert tok.encode(text) == ids
    assert unk in tok.encode(read_corpus("chinese_1M.txt")[:2000])  # unseen characters became [UNK]
    kinds = {row.kind for row in store.vocab("hfc")}
    assert {"unk", "char", "merge", "special"} <= kinds


@needs_hf
def test_gpt2_export_hf_import_round_trip(store, tmp_path, gpt2_files, tiktoken_gpt2):
    gpt2 = store.import_gpt2("g", vocab=gpt2_files[0], merges=gpt2_files[1])
    store.export("g", format="hf", out=tmp_path / "g.json")
    back = store.import_hf("gh", tmp_path / "g.json")
    assert back.fingerprint == gpt2.fingerprint and back.spec == gpt2.spec
    text = read_corpus("tinyshakespeare.txt")[:SLICE] + read_corpus("russian_1M.txt")[:SLICE]
    assert store.tokenizer("gh").encode(text) == tiktoken_gpt2.encode_ordinary(text)
    # HF reads what bpestore wrote the same way.
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "g.json")).encode(text).ids == \
        tiktoken_gpt2.encode_ordinary(text)


@needs_hf
def test_trained_version_export_hf_import_round_trip(store, tmp_path, corpora_dir):
    store.ingest("c", [corpora_dir / "tinyshakespeare.txt"], normalizer="nfc", pretokenizer="cl100k",
                 special_tokens=["<|endoftext|>"], workers=1)
    trained = store.train("t", corpus="c", vocab_size=700)
    store.export("t", format="hf", out=tmp_path / "t.json")
    first = store.import_hf("t1", tmp_path / "t.json")
    store.export("t1", format="hf", out=tmp_path / "t1.json")
    second = store.import_hf("t2", tmp_path / "t1.json")
    assert first.fingerprint == second.fingerprint
    assert first.spec == trained.spec.replace(tie_break="lexicographic")
    ref = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    for text in _texts():
        ids = store.tokenizer(trained.ref).encode(text)
        assert store.tokenizer("t1").encode(text) == ids == store.tokenizer("t2").encode(text)
        assert ref.encode(text).ids == ids


def test_export_refuses_what_the_formats_cannot_express(store, tmp_path):
    from bpestore.errors import InvalidArgumentError

    (tmp_path / "w.txt").write_text("low lower lowest newer wider new " * 20, encoding="utf-8")
    store.ingest("w", [tmp_path / "w.txt"], pretokenizer="whitespace", workers=1)
    store.train("eow", corpus="w", merges=5, end_of_word="</w>")
    store.train("chars", corpus="w", merges=5, alphabet="chars")
    for ref, what in (("eow", "end-of-word marker"), ("chars", "alphabet='chars'")):
        for fmt in ("hf", "gpt2", "tiktoken"):
            with pytest.raises(InvalidArgumentError, match=what):
                store.export(ref, format=fmt, out=tmp_path / f"{ref}.{fmt}")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("eow", "chars"))]


# -- refusals: one Error: line naming the part, nothing stored -------------------------------------
def _minimal(**changes) -> dict:
    from bpestore.alphabet import bytes_to_unicode

    chars = bytes_to_unicode()
    vocab = {chars[b]: b for b in range(256)}
    vocab.update({"Ġt": 256, "Ġth": 257})
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                              "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "vocab": vocab, "merges": ["Ġ t", ["Ġt", "h"]]}}
    for key, value in changes.items():
        if key.startswith("model_"):
            data["model"][key[len("model_"):]] = value
        else:
            data[key] = value
    return data


HF_REFUSED = {
    "unknown model type": ({"model_type": "WordPiece"}, "model.type"),
    "word suffix": ({"model_end_of_word_suffix": "</w>"}, "model.end_of_word_suffix"),
    "subword prefix": ({"model_continuing_subword_prefix": "##"}, "model.continuing_subword_prefix"),
    "byte fallback": ({"model_byte_fallback": True}, "model.byte_fallback"),
    "dropout": ({"model_dropout": 0.1}, "model.dropout"),
    "fuse unk": ({"model_fuse_unk": True}, "model.fuse_unk"),
    "prefix space": ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}}, "add_prefix_space"),
    "unknown pre-tokenizer": ({"pre_tokenizer": {"type": "Metaspace"}}, "pre_tokenizer"),
    "unknown normalizer": ({"normalizer": {"type": "Strip"}}, "normalizer"),
    "post-processor": ({"post_processor": {"type": "TemplateProcessing"}}, "post_processor"),
    "truncation": ({"truncation": {"max_length": 512}}, "truncation"),
    "padding": ({"padding": {"pad_id": 0}}, "padding"),
    "merge naming an unknown token": ({"model_merges": ["Ġ t", "Ġt zz"]}, "model.merges"),
    "merge of three": ({"model_merges": ["Ġ t h"]}, "model.merges"),
    "bad special token": ({"added_tokens": [{"id": 3, "content": "<s>", "special": True}]}, "added_tokens"),
    "vocab not a map": ({"model_vocab": [1, 2]}, "model.vocab"),
}


def write_hf_cases(folder: Path) -> dict[str, Path]:
    """Each refused tokenizer.json of HF_REFUSED, and a truncated one, as files."""
    files = {}
    for case, (changes, _) in HF_REFUSED.items():
        path = folder / f"hf-{case.replace(' ', '_')}.json"
        path.write_text(json.dumps(_minimal(**changes)), encoding="utf-8")
        files[case] = path
    text = json.dumps(_minimal())
    (folder / "hf-truncated.json").write_text(text[:len(text) // 2], encoding="utf-8")
    files["truncated JSON"] = folder / "hf-truncated.json"
    return files


def test_the_minimal_file_imports(store, tmp_path):
    (tmp_path / "ok.json").write_text(json.dumps(_minimal()), encoding="utf-8")
    info = store.import_hf("ok", tmp_path / "ok.json")
    assert store.tokenizer(info.ref).encode(" the") == [257, ord("e")]


@pytest.mark.parametrize("case", [*HF_REFUSED, "truncated JSON"])
def test_hf_refusals_name_the_part_and_store_nothing(case, cli_run, tmp_path):
    path = write_hf_cases(tmp_path)[case]
    result = cli_run("import", "hf", "x", str(path))
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    if case in HF_REFUSED:
        assert HF_REFUSED[case][1] in lines[0]
    assert "x@" not in cli_run("versions").output
