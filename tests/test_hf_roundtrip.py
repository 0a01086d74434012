"""Hugging Face ``tokenizer.json`` as ``tokenizers`` reads it, both ways, with
``tokenizers`` itself side by side: Llama-style files as they ship (byte tokens
in ``added_tokens``, special tokens anywhere, Llama's and Mistral's decoders,
``prepend_scheme: "first"``), character models without an unknown token,
``Split`` with isolated pieces, the collapse-spaces normalizer and the space
marker's decoder as exported, and files ``tokenizers`` refuses (strings where a
boolean belongs) or that are no file to read whole. Ordinary tests run on small
generated text; the five corpora are a scale test (``slow``)."""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_error, read_corpus

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

import bpestore  # noqa: E402
from bpestore.errors import InvalidArgumentError  # noqa: E402

BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
LLAMA_DECODER = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
# Texts where the ways of reading differ: after and between special tokens, leading, repeated
# and trailing spaces, lines, characters never seen (byte fallback), the marker itself.
PROBES = ["<s>First", "First<s>Second", "<s> lead", " lead", "a  b ", "  two  spaces ", "a \nb", "x\n\n y ",
          "</s><s>", "unseen 🙂🙂 東京 ẞ", "<s>", "▁marked▁", "end</s>", "Hello world ok"]


def generated_lines(n: int, seed: int = 7) -> list[str]:
    """Lines of made-up words (Latin with accents, Cyrillic, digits, punctuation), odd spacing included."""
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "mé", "lo", "sch", "ä", "qu", "ен", "ра", "ст", "zi", "ne", "ø", "th", "er"]
    lines = []
    for _ in range(n):
        words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(rng.randint(1, 9))]
        words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
        words += [rng.choice([",", ".", "!", "42", "1999", "-", "?"])] if rng.random() < 0.5 else []
        line = rng.choice([" ", " ", " ", "  "]).join(words)
        lines.append(rng.choice(["", "", "", " "]) + line + rng.choice(["", "", " "]))
    return lines


def hf_ids(hf, texts: list[str]) -> list[list[int]]:
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def imported(path: Path, tmp_path: Path, name: str = "hf"):  # noqa: ANN201
    store = bpestore.open(str(tmp_path / f"{name}.db"))
    return store, store.tokenizer(store.import_hf(name, path).ref)


def assert_like_tokenizers(hf, tok, texts: list[str]) -> None:
    """The ids of every text (special tokens matched, as tokenizers matches added tokens)
    and the decoded text of those ids."""
    for text, ids in zip(texts, hf_ids(hf, texts)):
        assert tok.encode(text, allowed_special="all") == ids, text
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), text


def assert_export_like_tokenizers(store, name: str, tok, hf, texts: list[str], out: Path) -> dict:
    """What bpestore writes, tokenizers reads with the same ids and decodes as bpestore does."""
    store.export(name, format="hf", out=out)
    back = tokenizers.Tokenizer.from_file(str(out))
    assert hf_ids(back, texts) == hf_ids(hf, texts)
    for ids in hf_ids(back, texts):
        assert back.decode(ids, skip_special_tokens=False) == tok.decode(ids)
    return json.loads(out.read_text(encoding="utf-8"))


def llama_style(kind: str, lines: list[str], vocab_size: int = 700):  # noqa: ANN201
    """A Llama-style tokenizer.json trained by tokenizers: byte fallback, its 256 byte
    tokens among the trainer's special tokens (so listed in added_tokens, as Llama's
    files list them), Llama's decoder sequence; ``kind`` says where the special tokens
    go and how spaces become ▁."""
    fuse = kind != "specials-at-end"
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=fuse))
    if kind == "prepend-normalizer":  # Llama 2's and Mistral's files
        hf.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                    split=kind == "first-split")
    hf.decoder = LLAMA_DECODER
    specials = {"specials-in-middle": BYTE_TOKENS[:100] + ["<unk>", "<s>", "</s>"] + BYTE_TOKENS[100:],
                "specials-at-end": ["<unk>", *BYTE_TOKENS]}.get(kind, ["<unk>", "<s>", "</s>", *BYTE_TOKENS])
    hf.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                                      show_progress=False))
    if kind == "specials-at-end":
        hf.add_special_tokens(["<s>", "</s>", "[INST]"])
    return hf


LLAMA_KINDS = ["first-unsplit", "first-split", "prepend-normalizer", "specials-at-end", "specials-in-middle"]


@pytest.mark.parametrize("kind", LLAMA_KINDS)
def test_llama_style_file_imports_unedited_and_encodes_like_tokenizers(kind, store, tmp_path):
    """On SQLite and PostgreSQL (the ``store`` fixture)."""
    lines = generated_lines(1500)
    hf = llama_style(kind, lines)
    hf.save(str(tmp_path / "tokenizer.json"))
    listed = [t["content"] for t in json.loads(hf.to_str())["added_tokens"]]
    assert set(BYTE_TOKENS) <= set(listed)  # as Llama lists them
    tok = store.tokenizer(store.import_hf("hf", tmp_path / "tokenizer.json").ref)
    assert tok.spec.byte_fallback and tok.spec.space_marker == "▁"
    assert set(tok.special_tokens) == set(listed) - set(BYTE_TOKENS) - {"<unk>"}
    assert tok.spec.dummy_prefix == ("always" if kind == "prepend-normalizer" else "first")
    texts = lines[:400] + PROBES
    assert_like_tokenizers(hf, tok, texts)
    written = assert_export_like_tokenizers(store, "hf", tok, hf, texts, tmp_path / "back.json")
    if kind != "prepend-normalizer":
        assert written["pre_tokenizer"]["prepend_scheme"] == "first"


def test_prepend_scheme_first_is_applied_only_where_the_text_starts(tmp_path):
    """Metaspace(prepend_scheme="first"): no ▁ after a special token (tokenizers: '<s>First'
    is [<s>, F, ...], not [<s>, ▁First]); exported as "first", not "always"."""
    lines = generated_lines(800) + ["First Second"] * 20
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    hf.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
                                                      show_progress=False))
    hf.save(str(tmp_path / "t.json"))
    store, tok = imported(tmp_path / "t.json", tmp_path)
    texts = ["<s>First", "First<s>First", "<s> First", "First</s><s>Second Second"]
    for text, ids in zip(texts, hf_ids(hf, texts)):
        assert tok.encode(text, allowed_special="all") == ids, text
        assert list(tok.encode_iterable([text[:3], text[3:]], allowed_special="all")) == ids, text
        assert [i for w in tok.explain(text, allowed_special="all").words for i in w.ids] == ids, text
    store.export("hf", format="hf", out=tmp_path / "back.json")
    written = json.loads((tmp_path / "back.json").read_text(encoding="utf-8"))
    assert written["pre_tokenizer"]["prepend_scheme"] == "first"
    assert hf_ids(tokenizers.Tokenizer.from_file(str(tmp_path / "back.json")), texts) == hf_ids(hf, texts)


def test_character_model_without_unknown_token_drops_unseen_characters_as_tokenizers(tmp_path):
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(["hello there", "yes indeed hello"], trainers.BpeTrainer(vocab_size=30,
                                                                                    show_progress=False))
    hf.save(str(tmp_path / "t.json"))
    store, tok = imported(tmp_path / "t.json", tmp_path)
    assert tok.spec.drop_unseen
    texts = ["hello zebra", "zzz", "hello 🙂 there", "yes"]
    assert [tok.encode_ordinary(t) for t in texts] == hf_ids(hf, texts)
    assert_export_like_tokenizers(store, "hf", tok, hf, texts, tmp_path / "back.json")
    # bpestore's own character versions keep refusing what they never saw (drop_unseen=False).
    strict = bpestore.Tokenizer({0: b"h", 1: b"e", 2: b"he"}, [(b"h", b"e")],
                                spec=bpestore.TokenizerSpec(alphabet="chars", pretokenizer="whitespace"))
    with pytest.raises(InvalidArgumentError, match="not seen in training"):
        strict.encode("hez")


def spm_model(tmp_path: Path) -> Path:
    """A SentencePiece BPE model (remove_extra_whitespaces and add_dummy_prefix, its defaults)."""
    spm = pytest.importorskip("sentencepiece")
    from tests.test_sentencepiece import spm_train

    path = tmp_path / "m.model"
    path.write_bytes(spm_train(generated_lines(1500), 400, byte_fallback=True))
    assert spm.SentencePieceProcessor(model_file=str(path)).encode("a  b") is not None
    return path


def test_collapse_spaces_exported_trims_only_the_text_ends(tmp_path):
    """sentencepiece's remove_extra_whitespaces as tokenizers normalizers: the spaces at the
    ends of the text go, not at the end of each line ('a \\nb' keeps its space)."""
    import sentencepiece as spm

    path = spm_model(tmp_path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    store = bpestore.open(str(tmp_path / "s.db"))
    store.import_sentencepiece("sp", path)
    tok = store.tokenizer("sp")
    assert "collapse-spaces" in tok.spec.normalizer_steps
    store.export("sp", format="hf", out=tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    texts = [*generated_lines(200, seed=3), "a \nb", "  a  \n  b  ", "x ▁", "▁▁", "   ", "a▁ \n"]
    assert hf_ids(hf, texts) == [sp.encode(t) for t in texts] == [tok.encode_ordinary(t) for t in texts]
    for ids in hf_ids(hf, texts):
        assert hf.decode(ids) == tok.decode(ids)
    # Read back: the same spec; the spelling that trims every line's end in tokenizers is refused.
    back = store.tokenizer(store.import_hf("back", tmp_path / "t.json").ref)
    assert back.spec.normalizer == tok.spec.normalizer
    data = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    data["normalizer"]["normalizers"][0]["pattern"] = {"Regex": "^ +| +$"}
    (tmp_path / "old.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match="normalizer"):
        store.import_hf("old", tmp_path / "old.json")


@pytest.mark.parametrize(("split", "dummy"), [(False, "unless-space"), (True, "unless-space"), (False, "first")])
def test_space_marker_versions_export_a_decoder_that_keeps_inner_spaces(split, dummy, tmp_path):
    """A version whose tokens hold several ▁ ('▁First▁Citizen:') decodes in tokenizers as in
    bpestore (tokenizers' Metaspace decoder drops every ▁ of the first token); a version
    trained with dummy_prefix='first' encodes in tokenizers as in bpestore, special tokens too."""
    (tmp_path / "c.txt").write_text("First Citizen:\n" * 50 + "<s>Second\n" * 20 + "\n".join(generated_lines(300)),
                                    encoding="utf-8")
    store = bpestore.open(str(tmp_path / "s.db"))
    store.ingest("c", [tmp_path / "c.txt"], pretokenizer="metaspace" if split else "none", space_marker="▁",
                 dummy_prefix=dummy, special_tokens=["<s>"])
    store.train("v", corpus="c", vocab_size=400, alphabet="chars", unk_token="<unk>")
    tok = store.tokenizer("v")
    store.export("v", format="hf", out=tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    texts = ["First Citizen:", "  two  spaces ", *PROBES, *generated_lines(100, seed=5)]
    for text, ids in zip(texts, hf_ids(hf, texts)):
        assert tok.encode(text, allowed_special="all") == ids, text
        assert hf.decode(ids, skip_special_tokens=False) == tok.decode(ids), text
    assert hf.decode(tok.encode_ordinary("First Citizen:")) == "First Citizen:"


def test_split_isolated_keeps_the_text_between_matches(tmp_path):
    """Split(behavior=Isolated) whose regex does not cover the text: the text between
    two matches is a piece too (tokenizers), not dropped as regex findall drops it."""
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{L}+"), "isolated"),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    hf.train_from_iterator(generated_lines(1000), trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    hf.save(str(tmp_path / "t.json"))
    store, tok = imported(tmp_path / "t.json", tmp_path)
    texts = ["Hello world ok", "  42, 1999!  ", *generated_lines(100, seed=9)]
    assert [tok.encode_ordinary(t) for t in texts] == hf_ids(hf, texts)
    assert [tok.decode(ids) for ids in hf_ids(hf, texts)] == texts
    assert_export_like_tokenizers(store, "hf", tok, hf, texts, tmp_path / "back.json")


def _set(path: tuple, value: object):  # noqa: ANN202
    def change(data: dict) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _pre_tokenizer(node: dict):  # noqa: ANN202
    return lambda data: data.__setitem__("pre_tokenizer", node)


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
# Strings where tokenizers wants a boolean: each file is refused by tokenizers itself.
NOT_BOOLEANS = {
    "model.fuse_unk": _set(("model", "fuse_unk"), "false"),
    "model.byte_fallback": _set(("model", "byte_fallback"), "no"),
    "model.ignore_merges": _set(("model", "ignore_merges"), "false"),
    "pre_tokenizer.split": _pre_tokenizer({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                                           "split": "false"}),
    "pre_tokenizer.add_prefix_space": _pre_tokenizer(dict(BYTE_LEVEL, add_prefix_space="no")),
    "pre_tokenizer.use_regex": _pre_tokenizer(dict(BYTE_LEVEL, use_regex="false")),
    "pre_tokenizer.invert": _pre_tokenizer({"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Isolated",
                                            "invert": "false"}),
    "added_tokens.special": _set(("added_tokens", 1, "special"), "false"),
}


@pytest.mark.parametrize("field", NOT_BOOLEANS)
def test_strings_where_booleans_belong_are_refused_as_tokenizers_refuses(field, cli_run, tmp_path):
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    hf.train_from_iterator(generated_lines(200), trainers.BpeTrainer(vocab_size=120, show_progress=False,
                                                                     special_tokens=["<unk>", "<s>"]))
    data = json.loads(hf.to_str())
    NOT_BOOLEANS[field](data)
    text = json.dumps(data)
    with pytest.raises(Exception, match="expected a boolean"):
        tokenizers.Tokenizer.from_str(text)
    (tmp_path / "t.json").write_text(text, encoding="utf-8")
    assert_error(cli_run("import", "hf", "x", str(tmp_path / "t.json")), f"{field}: ")
    assert "x@" not in cli_run("versions").output


def _import_in_process_of_its_own(db: Path, path: Path) -> subprocess.CompletedProcess:
    """``bpestore import hf`` in a process bounded to 30 s and 1.5 GB (a reader that
    waits on a FIFO, or reads /dev/zero whole, fails here instead of holding the suite)."""
    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
    return subprocess.run([sys.executable, "-m", "bpestore", "--db", str(db), "import", "hf", "x", str(path)],
                          capture_output=True, text=True, timeout=30, preexec_fn=bounded, check=False)


def test_reads_only_regular_files_of_bounded_size(tmp_path):
    """A FIFO (no writer: a plain open waits), a device, a file past the limit: one
    Error line each, at once, nothing read past the limit, nothing stored."""
    os.mkfifo(tmp_path / "fifo")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse: nothing written
    for path, message in ((tmp_path / "fifo", "is not a regular file"), (Path("/dev/zero"), "is not a regular file"),
                          (big, "MiB, the most a tokenizer.json may hold")):
        result = _import_in_process_of_its_own(tmp_path / "s.db", path)
        lines = result.stderr.strip().splitlines()
        assert result.returncode in (1, 2) and len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
        assert message in lines[0]
    assert bpestore.open(str(tmp_path / "s.db")).versions() == []


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path, monkeypatch):
    from bpestore.formats import hf as hf_format

    (tmp_path / "t.json").write_text('{"model": {"type": "BPE"}}', encoding="utf-8")
    monkeypatch.setattr(hf_format, "MAX_FILE_BYTES", 10)
    with pytest.raises(InvalidArgumentError, match="is over"):
        hf_format.read_hf(tmp_path / "t.json")


CORPORA = ["tinyshakespeare.txt", "german_1M.txt", "russian_1M.txt", "chinese_1M.txt", "code_python_5M.txt.xz"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPORA, ids=[c.split("_")[0].split(".")[0] for c in CORPORA])
def test_llama_style_round_trip_on_the_corpora(name, tmp_path):
    """Every line of a corpus (20,000 with BPESTORE_SCALE=full, 2,000 otherwise): a
    Llama-style file trained by tokenizers, imported (ids and decoded text as tokenizers),
    exported (tokenizers on the export: the same ids, bpestore's decoded text)."""
    n_lines = 20_000 if os.environ.get("BPESTORE_SCALE") == "full" else 2_000
    lines = read_corpus(name).split("\n")[:n_lines]
    hf = llama_style("first-unsplit", lines, vocab_size=4000 if name.startswith("chinese") else 2000)
    hf.save(str(tmp_path / "t.json"))
    store, tok = imported(tmp_path / "t.json", tmp_path)
    texts = lines + PROBES
    assert_like_tokenizers(hf, tok, texts)
    assert_export_like_tokenizers(store, "hf", tok, hf, texts, tmp_path / "back.json")
