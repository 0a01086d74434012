"""Hugging Face ``tokenizer.json`` beyond GPT-2's byte level: Metaspace (with
each prepend scheme and split), ByteLevel with add_prefix_space, byte fallback,
fuse_unk and character models, both ways. Trained by ``tokenizers`` itself and
checked against its ids on the shared corpora; exported by bpestore and loaded
back by ``tokenizers``."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_error, read_corpus

tokenizers = pytest.importorskip("tokenizers")

CORPORA = ["tinyshakespeare.txt", "german_1M.txt", "russian_1M.txt", "hindi_1M.txt", "chinese_1M.txt",
           "japanese_1M.txt", "code_python_5M.txt.xz"]
LINES = 2000


def lines_of(name: str) -> list[str]:
    return read_corpus(name).split("\n")[:LINES]


def hf_train(kind: str, lines: list[str], vocab_size: int):  # noqa: ANN201
    """A BPE trained by tokenizers with one of the pre-tokenizations bpestore now reads."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    specials = ["<unk>", "<s>", "</s>"]
    alphabet: list[str] = []
    if kind.startswith("metaspace"):
        scheme, split = {"metaspace": ("always", True), "metaspace-first-nosplit": ("first", False),
                         "metaspace-never": ("never", True)}[kind]
        tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=kind == "metaspace"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=split)
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme, split=split)
    elif kind == "end-of-word-suffix":
        tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.decoder = decoders.BPEDecoder(suffix="</w>")
    elif kind == "byte-level-prefix":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        specials, alphabet = ["<s>", "</s>"], pre_tokenizers.ByteLevel.alphabet()
    else:
        raise AssertionError(kind)
    suffix = {"end_of_word_suffix": "</w>"} if kind == "end-of-word-suffix" else {}
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                        initial_alphabet=alphabet, show_progress=False, **suffix))
    return tok


def hf_ids(hf, lines: list[str]) -> list[list[int]]:
    return [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]


def assert_hf_equal(hf, tok, lines: list[str], *, decode: bool = True) -> None:
    unk = hf.token_to_id("<unk>")
    for line, ids in zip(lines, hf_ids(hf, lines)):
        assert tok.encode_ordinary(line) == ids, line
        if decode and unk not in ids:
            assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), line


KINDS = ["metaspace", "metaspace-first-nosplit", "metaspace-never", "byte-level-prefix", "end-of-word-suffix"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", CORPORA, ids=[c.split("_")[0].split(".")[0] for c in CORPORA])
def test_hf_trained_imported_and_exported_give_hf_ids(kind, name, tmp_path):
    import bpestore

    lines = lines_of(name)
    vocab_size = 6000 if name.startswith(("chinese", "japanese")) and kind != "byte-level-prefix" else 1200
    vocab_size *= 2 if kind == "end-of-word-suffix" else 1  # each character twice: alone and with </w>
    hf = hf_train(kind, lines, vocab_size)
    hf.save(str(tmp_path / "t.json"))
    store = bpestore.open(str(tmp_path / "s.db"))
    tok = store.tokenizer(store.import_hf("hf", tmp_path / "t.json").ref)
    # tokenizers' Metaspace decoder drops every ▁ of a first token that holds several
    # ('▁First▁Citizen:' -> 'FirstCitizen:'), which unsplit words do: ids only there.
    # (bpestore decodes a glued suffix as its text, as other word markers.)
    assert_hf_equal(hf, tok, lines + ["  two  spaces ", " lead", "unseen 🙂🙂 x"],
                    decode=kind not in ("metaspace-first-nosplit", "end-of-word-suffix"))
    # And back: what bpestore writes, tokenizers reads and encodes the same.
    store.export("hf", format="hf", out=tmp_path / "back.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "back.json"))
    assert hf_ids(back, lines) == hf_ids(hf, lines)


def test_prepend_schemes_and_prefix_spaces_read_as_spec_options(tmp_path):
    import bpestore

    lines = lines_of("tinyshakespeare.txt")
    store = bpestore.open(str(tmp_path / "s.db"))
    specs = {}
    for kind in KINDS:
        hf_train(kind, lines, 500).save(str(tmp_path / f"{kind}.json"))
        specs[kind] = store.tokenizer(store.import_hf(kind, tmp_path / f"{kind}.json").ref).spec
    assert [(s.space_marker, s.dummy_prefix, s.pretokenizer, s.fuse_unk) for s in specs.values()] == [
        ("▁", "unless-space", "metaspace", True), ("▁", "first", "none", False),
        ("▁", "never", "metaspace", False), (None, "unless-space", "gpt2", False),
        (None, "never", "whitespace", False)]
    assert specs["end-of-word-suffix"].end_of_word_suffix == "</w>"


def test_sentencepiece_model_as_tokenizer_json_encodes_as_sentencepiece(tmp_path):
    """Byte fallback, fuse_unk and piece segmentation written for tokenizers: the
    reference is sentencepiece itself (the model it trained)."""
    spm = pytest.importorskip("sentencepiece")
    import bpestore
    from tests.test_sentencepiece import spm_train

    for name in ("tinyshakespeare.txt", "chinese_1M.txt"):
        lines = lines_of(name)
        model = tmp_path / "m.model"
        size = 5000 if name.startswith("chinese") else 1000
        model.write_bytes(spm_train(lines, size, byte_fallback=True, character_coverage=0.995))
        sp = spm.SentencePieceProcessor(model_file=str(model))
        store = bpestore.open(str(tmp_path / f"{name}.db"))
        store.import_sentencepiece("sp", model)
        out = tmp_path / f"{name}.json"
        store.export("sp", format="hf", out=out)
        hf = tokenizers.Tokenizer.from_file(str(out))
        texts = [line for line in lines if line] + ["unseen 🙂 東京"]
        assert hf_ids(hf, texts) == [sp.encode(t) for t in texts]
        # Imported back from tokenizer.json (pairs, byte fallback tokens as <0xNN>): the same ids.
        tok = store.tokenizer(store.import_hf("back", out).ref)
        assert tok.spec.byte_fallback and tok.spec.segmentation == "merge"
        assert [tok.encode_ordinary(t) for t in texts] == [sp.encode(t) for t in texts]


def test_bpestore_character_versions_export_to_tokenizers(cli_run, tmp_path):
    """Character models trained by bpestore (unknown token; space marker) load in tokenizers
    and encode identically."""
    import bpestore

    lines = lines_of("russian_1M.txt")
    (tmp_path / "c.txt").write_text("\n".join(lines), encoding="utf-8")
    cli_run("ingest", "ws", str(tmp_path / "c.txt"), "--pretokenizer", "whitespace")
    cli_run("ingest", "ms", str(tmp_path / "c.txt"), "--pretokenizer", "metaspace", "--space-marker", "▁",
            "--dummy-prefix", "unless-space")
    runs = {"ws": ["--alphabet", "chars", "--unk-token", "[UNK]"],
            "ms": ["--alphabet", "chars", "--unk-token", "<unk>", "--fuse-unk"],
            "msfb": ["--alphabet", "chars", "--unk-token", "<unk>", "--byte-fallback", "--layout", "sentencepiece"],
            "eow": ["--alphabet", "chars", "--unk-token", "<unk>", "--end-of-word-suffix", "</w>"]}
    store = bpestore.open(cli_run.db)
    for name, options in runs.items():
        corpus = "ws" if name in ("ws", "eow") else "ms"
        result = cli_run("train", name, "--corpus", corpus, "--vocab-size", "1500", *options)
        assert result.exit_code == 0, result.output
        assert cli_run("export", name, "--format", "hf", "--out", str(tmp_path / f"{name}.json")).exit_code == 0
        hf = tokenizers.Tokenizer.from_file(str(tmp_path / f"{name}.json"))
        assert_hf_equal(hf, store.tokenizer(name), lines + ["unseen 🙂🙂 東京"], decode=name not in ("ws", "eow"))


def test_what_stays_refused_is_one_error_line(cli_run, tmp_path):
    hf = hf_train("metaspace", lines_of("tinyshakespeare.txt"), 400)
    data = json.loads(hf.to_str())
    for part, changes in (("model.continuing_subword_prefix", {"continuing_subword_prefix": "##"}),
                          ("model.end_of_word_suffix", {"end_of_word_suffix": "</w>", "byte_fallback": True}),
                          ("decoder", None)):
        broken = json.loads(json.dumps(data))
        if changes is None:
            broken["decoder"] = {"type": "WordPiece"}
        else:
            broken["model"].update(changes)
        (tmp_path / "x.json").write_text(json.dumps(broken), encoding="utf-8")
        assert_error(cli_run("import", "hf", "x", str(tmp_path / "x.json")), part)
