"""Every export and import format on the edges a plain round trip misses: special
tokens (one and several, at bpestore's ids) in the text, the highest id, non-ASCII
tokens and an empty corpus. References are the peers' own libraries."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

import bpestore
from tests.conftest import tiktoken_pattern

try:
    import tokenizers
except ImportError:  # the bad-input matrix imports test modules without it
    tokenizers = None

needs_hf = pytest.mark.skipif(tokenizers is None, reason="Hugging Face tokenizers is not installed")

# (HF's ByteLevel decoder re-reads special tokens too: one holding a character of its
# alphabet, like "é", decodes differently there; the README says so.)
SPECIALS = {
    "one": ["<|endoftext|>"],
    "several": ["<|endoftext|>", "<pad>", "[SEP]", "<|fim middle|>", "<|日本|>"],
}
TEXT = "héllo wörld, the quick brown fox — 日本語 "


def _train(store, tmp_path: Path, specials: list[str], *, vocab_size: int = 600) -> str:
    corpus = tmp_path / "c.txt"
    corpus.write_text((TEXT + "jumps over the lazy dog. ") * 300, encoding="utf-8")
    store.ingest("c", [corpus], pretokenizer="gpt2", special_tokens=specials, workers=1)
    return store.train("t", corpus="c", vocab_size=vocab_size).ref


def _text_with(specials: list[str]) -> str:
    return "".join(f"{TEXT}{s}{TEXT[::-1]}" for s in specials) + specials[0]


@needs_hf
@pytest.mark.parametrize("kind", sorted(SPECIALS))
def test_hf_export_gives_bpestore_ids_for_special_tokens(store, tmp_path, kind):
    specials = SPECIALS[kind]
    ref = _train(store, tmp_path, specials)
    tok = store.tokenizer(ref)
    store.export(ref, format="hf", out=tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    assert hf.get_vocab_size() == tok.n_vocab
    for special in specials:
        assert hf.token_to_id(special) == tok.special_tokens[special]
        assert hf.id_to_token(tok.special_tokens[special]) == special
    top = max(tok.vocab)
    assert hf.decode([top], skip_special_tokens=False) == tok.decode([top])
    text = _text_with(specials)
    ids = tok.encode(text, allowed_special="all")
    assert hf.encode(text).ids == ids
    assert hf.decode(ids, skip_special_tokens=False) == tok.decode(ids) == text
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # optional: not a test dependency
        PreTrainedTokenizerFast = None
    if PreTrainedTokenizerFast is not None:
        fast = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "t.json"))
        assert fast.encode(text) == ids
        assert [fast.convert_tokens_to_ids(s) for s in specials] == [tok.special_tokens[s] for s in specials]
        assert fast.decode(ids) == text
    # ... and what was exported comes back with the same ids.
    back = store.import_hf("back", tmp_path / "t.json")
    assert back.spec.special_tokens == tuple(specials)
    assert store.tokenizer("back").encode(text, allowed_special="all") == ids


@needs_hf
def test_hf_trained_with_several_specials_imports_with_hf_ids(store, tmp_path):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    corpus = tmp_path / "c.txt"
    corpus.write_text((TEXT + "jumps over the lazy dog. ") * 300, encoding="utf-8")
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    specials = SPECIALS["several"]
    hf.train([str(corpus)], trainers.BpeTrainer(vocab_size=500, special_tokens=specials, show_progress=False,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.save(str(tmp_path / "hf.json"))
    info = store.import_hf("h", tmp_path / "hf.json")
    assert info.spec.special_tokens == tuple(specials)
    tok = store.tokenizer("h")
    text = _text_with(specials)
    ids = hf.encode(text).ids
    assert tok.encode(text, allowed_special="all") == ids
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False) == text
    for special in specials:
        assert tok.special_tokens[special] == hf.token_to_id(special)


def _run_cli(*args: str, timeout: float = 60):  # noqa: ANN202
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    try:
        return subprocess.run([sys.executable, "-m", "bpestore", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout}s")


def test_rank_files_no_real_one_is_like_are_refused_quickly(tmp_path):
    """One 20,000-byte token that no merges make (its derivation was quadratic), and a
    2 MB line: one Error: line each, in seconds."""
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines.append(f"{base64.b64encode(b'aa').decode()} 256")
    long_token = tmp_path / "long.tiktoken"
    long_token.write_text("\n".join([*lines, f"{base64.b64encode(b'a' * 20_000).decode()} 257"]) + "\n")
    long_line = tmp_path / "line.tiktoken"
    long_line.write_text("\n".join(lines) + "\n" + "QUFB" * 600_000 + " 257\n")
    for path, message in ((long_token, "is not the join of two tokens"), (long_line, "a line longer than")):
        result = _run_cli("--db", str(tmp_path / "r.db"), "import", "tiktoken", "r", str(path), "--pattern", "gpt2")
        assert result.returncode == 1
        errors = result.stderr.strip().splitlines()
        assert len(errors) == 1 and errors[0].startswith("Error:") and message in errors[0], result.stderr
        assert len(errors[0]) < 400


def test_a_long_token_made_by_merges_is_derived(store, tmp_path):
    """A 4,096-byte run of 'a' made by doubling merges: its derivation is n log n, and tiktoken agrees."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([b]): b for b in range(256)}
    for k in range(1, 13):
        ranks[b"a" * (1 << k)] = 255 + k
    path = tmp_path / "doubling.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    store.import_tiktoken("d", path, pattern="gpt2")
    ref = tiktoken.Encoding("d", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks, special_tokens={})
    for text in ("a" * 4096, "a" * 5000 + " " + "a" * 3, "ba" * 100):
        assert store.tokenizer("d").encode(text) == ref.encode(text)


def _tiktoken_reference(path: Path, pattern: str, specials: dict[str, int]):  # noqa: ANN202
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in path.read_text().splitlines())}
    return tiktoken.Encoding("ref", pat_str=tiktoken_pattern(pattern), mergeable_ranks=ranks,
                             special_tokens=specials)


@pytest.mark.parametrize("kind", sorted(SPECIALS))
def test_gpt2_and_tiktoken_exports_keep_special_ids(store, tmp_path, kind):
    specials = SPECIALS[kind]
    ref = _train(store, tmp_path, specials)
    tok = store.tokenizer(ref)
    text = _text_with(specials)
    ids = tok.encode(text, allowed_special="all")
    at = dict(tok.special_tokens)
    store.export(ref, format="gpt2", out=tmp_path / "g")
    back = store.import_gpt2("g", vocab=tmp_path / "g" / "vocab.json", merges=tmp_path / "g" / "merges.txt")
    assert sorted(back.spec.special_tokens) == sorted(specials)
    assert store.tokenizer("g").special_tokens == at
    assert store.tokenizer("g").encode(text, allowed_special="all") == ids
    store.export(ref, format="tiktoken", out=tmp_path / "t.tiktoken")
    store.import_tiktoken("tt", tmp_path / "t.tiktoken", pattern="gpt2", special_tokens=at)
    assert store.tokenizer("tt").encode(text, allowed_special="all") == ids
    reference = _tiktoken_reference(tmp_path / "t.tiktoken", "gpt2", at)
    assert reference.encode(text, allowed_special="all") == ids
    assert reference.decode(ids) == tok.decode(ids) == text


def test_gpt2_export_refuses_a_special_token_it_would_read_back_as_ordinary(store, tmp_path):
    ref = _train(store, tmp_path, ["«é»"])
    with pytest.raises(bpestore.InvalidArgumentError, match="«é»"):
        store.export(ref, format="gpt2", out=tmp_path / "g")
    assert not (tmp_path / "g").exists()


@needs_hf
def test_a_version_without_merges_in_every_format(store, tmp_path):
    """The least a version holds: the 256 bytes and a special token at the top."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([b]): b for b in range(256)}
    path = tmp_path / "bytes.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    store.import_tiktoken("b", path, pattern="gpt2", special_tokens={"<|end|>": 256})
    text = "héllo <|end|> 日本"
    ids = store.tokenizer("b").encode(text, allowed_special="all")
    assert ids == tiktoken.Encoding("b", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks,
                                    special_tokens={"<|end|>": 256}).encode(text, allowed_special="all")
    store.export("b", format="hf", out=tmp_path / "b.json")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "b.json")).encode(text).ids == ids
    store.export("b", format="gpt2", out=tmp_path / "g")
    store.import_gpt2("g", vocab=tmp_path / "g" / "vocab.json", merges=tmp_path / "g" / "merges.txt")
    store.import_hf("h", tmp_path / "b.json")
    for name in ("g", "h"):
        assert store.tokenizer(name).encode(text, allowed_special="all") == ids


@pytest.mark.parametrize("top,dtype", [(65_535, "uint16"), (65_536, "uint32")])
def test_the_flat_id_file_holds_the_highest_id(store, tmp_path, top, dtype):
    ranks = {bytes([b]): b for b in range(256)}
    path = tmp_path / "bytes.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    store.import_tiktoken("b", path, pattern="gpt2", special_tokens={"<|top|>": top})
    tok = store.tokenizer("b")
    text = "ab<|top|>é" * 10
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    written = tok.encode_file(tmp_path / "t.txt", tmp_path / "ids.bin", allowed_special="all")
    assert written.dtype == dtype
    from array import array

    ids = array("H" if dtype == "uint16" else "I", (tmp_path / "ids.bin").read_bytes())
    assert ids.tolist() == tok.encode(text, allowed_special="all") and top in ids.tolist()
    assert "".join(tok.decode_file(tmp_path / "ids.bin")) == text
