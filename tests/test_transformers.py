"""`export --format hf` into a folder loads in transformers' AutoTokenizer (no
network: from the folder) with the special tokens in their roles, and encodes,
pads and decodes as bpestore does."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error, read_corpus

pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def trained(cli_run, tmp_path, kind: str) -> str:
    lines = read_corpus("tinyshakespeare.txt").split("\n")[:5000]
    (tmp_path / "c.txt").write_text("\n".join(lines), encoding="utf-8")
    if kind == "bytes":
        ingest = ["--special-token", "<|endoftext|>"]
        train = ["--vocab-size", "600"]
    else:
        ingest = ["--pretokenizer", "metaspace", "--space-marker", "▁", "--dummy-prefix", "always",
                  "--special-token", "<s>", "--special-token", "</s>", "--special-token", "<pad>"]
        train = ["--vocab-size", "600", "--alphabet", "chars", "--unk-token", "<unk>", "--byte-fallback", "--fuse-unk",
                 "--layout", "sentencepiece", "--segmentation", "piece"]
    assert cli_run("ingest", kind, str(tmp_path / "c.txt"), *ingest).exit_code == 0
    result = cli_run("train", kind, "--corpus", kind, *train)
    assert result.exit_code == 0, result.output
    return kind


@pytest.mark.parametrize("kind", ["bytes", "sentencepiece"])
def test_auto_tokenizer_loads_the_folder_and_encodes_alike(kind, cli_run, tmp_path):
    from transformers import AutoTokenizer

    import bpestore

    ref = trained(cli_run, tmp_path, kind)
    folder = tmp_path / "tok"
    folder.mkdir()
    result = cli_run("export", ref, "--format", "hf", "--out", str(folder))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["special_tokens_map.json", "tokenizer.json",
                                                        "tokenizer_config.json"]
    hf = AutoTokenizer.from_pretrained(str(folder))
    tok = bpestore.open(cli_run.db).tokenizer(ref)
    specials = tok.special_tokens
    if kind == "bytes":
        roles = {"eos": "<|endoftext|>", "pad": "<|endoftext|>"}
        texts = ["Hello world<|endoftext|>And more.", "First Citizen:\nBefore we proceed"]
    else:
        roles = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}
        texts = ["<s>Hello world</s>", "First Citizen: before we proceed 🙂", "  spaces  <pad>"]
    for role, text in roles.items():
        assert getattr(hf, f"{role}_token") == text
        assert getattr(hf, f"{role}_token_id") == (specials[text] if text in specials else tok.token_id(text))
    for text in texts:
        ids = tok.encode(text, allowed_special="all")
        assert hf(text)["input_ids"] == ids, text
        assert hf.decode(ids) == tok.decode(ids), text
    batch = hf(texts, padding=True)["input_ids"]
    pad = specials[roles["pad"]]
    for text, row in zip(texts, batch):
        ids = tok.encode(text, allowed_special="all")
        assert row == ids + [pad] * (len(row) - len(ids))


def test_folder_files_are_not_replaced_without_force(cli_run, tmp_path):
    ref = trained(cli_run, tmp_path, "bytes")
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}")
    assert_error(cli_run("export", ref, "--format", "hf", "--out", str(folder)), "exists")
    assert (folder / "tokenizer_config.json").read_text() == "{}"
    assert not (folder / "tokenizer.json").exists()
    assert cli_run("export", ref, "--format", "hf", "--out", str(folder), "--force").exit_code == 0
    assert (folder / "tokenizer_config.json").read_text() != "{}"


def test_a_folder_export_lands_whole_and_a_missing_folder_is_made(cli_run, tmp_path, monkeypatch):
    """The three files are replaced together: stopped while writing the second, the folder
    holds the old three (no new tokenizer.json beside an old config); ``--out DIR/`` makes DIR."""
    import json

    import bpestore

    ref = trained(cli_run, tmp_path, "bytes")
    folder = tmp_path / "made"
    result = cli_run("export", ref, "--format", "hf", "--out", f"{folder}/")
    assert result.exit_code == 0, result.output
    assert folder.is_dir() and sorted(p.name for p in folder.iterdir()) == [
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
    old = {p.name: p.read_bytes() for p in folder.iterdir()}
    (folder / "weights.bin").write_bytes(b"kept")

    dump, calls = json.dump, []

    def killed_at_the_second_file(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return dump(*args, **kwargs)

    monkeypatch.setattr(json, "dump", killed_at_the_second_file)
    with pytest.raises(KeyboardInterrupt):
        bpestore.open(cli_run.db).export(ref, format="hf", out=folder, force=True)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "weights.bin"} == old
    assert (folder / "weights.bin").read_bytes() == b"kept"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".made.")] == []
    assert json.loads((folder / "tokenizer.json").read_bytes())["model"]["type"] == "BPE"
