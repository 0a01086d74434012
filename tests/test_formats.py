"""The peers' formats in: Hugging Face tokenizer.json and tiktoken
rank files imported, checked against the peers' own encoders; export -> import round trips;
what cannot be represented is refused with one Error: line naming the part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAST_BACKENDS, read_corpus

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


# -- tiktoken rank files -----------------------------------------------------------------------------
def _both_paths(store, ref: str):
    """The version's tokenizer (tiktoken's core where its facts allow) and its pure-Python path."""
    from bpestore import Tokenizer

    tok = store.tokenizer(ref)
    pure = Tokenizer(tok.vocab, tok.merges, dict(tok.special_tokens), spec=tok.spec, fast=False)
    return tok, pure


def test_gpt2_rank_file_gives_gpt2_merges_and_tiktoken_ids(store, tmp_path, gpt2_files, tiktoken_gpt2):
    import base64

    # The rank file as tiktoken writes one (dump_tiktoken_bpe, which needs blobfile), from tiktoken's ranks.
    (tmp_path / "r50k.tiktoken").write_bytes(b"".join(
        base64.b64encode(token) + b" " + str(rank).encode() + b"\n"
        for token, rank in sorted(tiktoken_gpt2._mergeable_ranks.items(), key=lambda kv: kv[1])))
    info = store.import_tiktoken("r50k", tmp_path / "r50k.tiktoken", pattern="gpt2",
                                 special_tokens={"<|endoftext|>": 50256})
    # The derived merges are GPT-2's merges.txt, line for line (an independent reference).
    lines = [line for line in gpt2_files[1].read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#version")]
    assert len(lines) == 50_000
    from bpestore.formats.gpt2 import token_to_str

    assert [f"{token_to_str(a)} {token_to_str(b)}" for a, b in store.tokenizer("r50k").merges] == lines
    gpt2 = store.import_gpt2("g", vocab=gpt2_files[0], merges=gpt2_files[1])
    assert info.fingerprint == gpt2.fingerprint
    tok, pure = _both_paths(store, "r50k")
    text = "".join(_texts()) + read_corpus("japanese_1M.txt")[:SLICE]
    expected = tiktoken_gpt2.encode(text + "<|endoftext|>", allowed_special="all")
    assert tok.encode(text + "<|endoftext|>", allowed_special="all") == expected
    assert tok.backend in FAST_BACKENDS
    assert pure.encode(text + "<|endoftext|>", allowed_special="all") == expected


def test_trained_version_tiktoken_round_trip(store, tmp_path, corpora_dir):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    from tests.conftest import tiktoken_pattern

    store.ingest("c", [corpora_dir / "tinyshakespeare.txt", corpora_dir / "german_1M.txt"], pretokenizer="cl100k",
                 special_tokens=["<|endoftext|>"], workers=1)
    trained = store.train("t", corpus="c", vocab_size=1500)
    special = {"<|endoftext|>": store.tokenizer("t").special_tokens["<|endoftext|>"]}
    store.export("t", format="tiktoken", out=tmp_path / "t.tiktoken")
    first = store.import_tiktoken("t1", tmp_path / "t.tiktoken", pattern="cl100k", special_tokens=special)
    store.export("t1", format="tiktoken", out=tmp_path / "t1.tiktoken")
    second = store.import_tiktoken("t2", tmp_path / "t1.tiktoken", pattern="cl100k", special_tokens=special)
    assert first.fingerprint == second.fingerprint
    assert store.tokenizer("t1").merges == store.tokenizer(trained.ref).merges
    ranks = load_tiktoken_bpe(str(tmp_path / "t.tiktoken"))
    ref = tiktoken.Encoding("t", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks, special_tokens=special)
    tok, pure = _both_paths(store, "t1")
    for text in _texts():
        expected = ref.encode_ordinary(text)
        assert tok.encode(text) == expected == pure.encode(text)
        assert store.tokenizer(trained.ref).encode(text) == expected


def test_rank_file_with_a_custom_pattern_and_an_unordered_vocabulary(store, tmp_path):
    """Ranks where a token's parts are not its merge by bpestore's order of training: the
    derived merges still encode like tiktoken (here ' ab' joins ' a'+'b', not ' '+'ab')."""
    import tiktoken

    ranks = {bytes([b]): b for b in range(256)}
    for token in (b" a", b"ab", b" ab", b"abc", b"bc", b" abc", b"cc", b"ccc"):
        ranks[token] = len(ranks)
    path = tmp_path / "r.tiktoken"
    path.write_text("".join(f"{__import__('base64').b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    pattern = r" ?[a-z]+|[^a-z ]+| +"
    store.import_tiktoken("r", path, pattern=pattern, special_tokens={"<s>": 1000})
    ref = tiktoken.Encoding("r", pat_str=pattern, mergeable_ranks=ranks, special_tokens={"<s>": 1000})
    tok, pure = _both_paths(store, "r")
    texts = ["abc abc ab cccc bcab", " abcc <s> x", "a b c " * 3000]
    for text in texts:
        expected = ref.encode(text, allowed_special="all")
        assert tok.encode(text, allowed_special="all") == expected == pure.encode(text, allowed_special="all")


def _rank_file(folder: Path, name: str, extra: str = "", *, drop: int | None = None) -> Path:
    import base64

    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256) if b != drop]
    lines += [f"{base64.b64encode(b'ab').decode()} 256", f"{base64.b64encode(b'abc').decode()} 257"]
    path = folder / f"tt-{name}.tiktoken"
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def write_tiktoken_cases(folder: Path) -> dict[str, list[str]]:
    """Refused rank files and special tokens: case -> the import's argument list (after NAME)."""
    import base64

    ok = str(_rank_file(folder, "ok"))
    return {
        "duplicate ranks": [str(_rank_file(folder, "duplicate_ranks", f"{base64.b64encode(b'cd').decode()} 257\n")),
                            "--pattern", "gpt2"],
        "duplicate token": [str(_rank_file(folder, "duplicate_token", f"{base64.b64encode(b'ab').decode()} 300\n")),
                            "--pattern", "gpt2"],
        "not base64": [str(_rank_file(folder, "not_base64", "!!!! 300\n")), "--pattern", "gpt2"],
        "rank not a number": [str(_rank_file(folder, "rank_text", "Y2Q= x\n")), "--pattern", "gpt2"],
        "missing byte": [str(_rank_file(folder, "missing_byte", drop=7)), "--pattern", "gpt2"],
        "not made by merging": [str(_rank_file(folder, "unmade", f"{base64.b64encode(b'xyz').decode()} 300\n")),
                                "--pattern", "gpt2"],
        "special token without id": [ok, "--pattern", "gpt2", "--special-token", "<s>"],
        "special token id not a number": [ok, "--pattern", "gpt2", "--special-token", "<s>=x"],
        "special token on a rank": [ok, "--pattern", "gpt2", "--special-token", "<s>=256"],
        "special token twice": [ok, "--pattern", "gpt2", "--special-token", "<s>=300", "--special-token",
                                "<t>=300"],
        "bad pattern": [ok, "--pattern", "(unclosed"],
        "missing file": [str(folder / "missing.tiktoken"), "--pattern", "gpt2"],
    }


def test_a_valid_small_rank_file_imports(store, tmp_path):
    store.import_tiktoken("ok", _rank_file(tmp_path, "ok"), pattern="gpt2", special_tokens={"<s>": 300})
    assert store.tokenizer("ok").encode("abcab") == [257, 256]


TIKTOKEN_REFUSED = [
    "duplicate ranks", "duplicate token", "not base64", "rank not a number", "missing byte", "not made by merging",
    "special token without id", "special token id not a number", "special token on a rank", "special token twice",
    "bad pattern", "missing file"]


@pytest.mark.parametrize("case", TIKTOKEN_REFUSED)
def test_tiktoken_refusals_are_one_error_line_and_store_nothing(case, cli_run, tmp_path):
    args = write_tiktoken_cases(tmp_path)[case]
    result = cli_run("import", "tiktoken", "x", *args)
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "x@" not in cli_run("versions").output
