"""``bpestore encode`` / ``decode`` with id files, workers and summaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from array import array
from pathlib import Path

import pytest

import bpestore

from .conftest import FAST_BACKENDS, CliRun, assert_error, corpus_path, read_corpus

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def run(tmp_path_factory, gpt2_files):
    """The command line against a SQLite store holding GPT-2 as ``gpt2`` (made
    once for the module)."""
    run = CliRun(str(tmp_path_factory.mktemp("cli") / "cli.db"))
    vocab, merges = gpt2_files
    assert run("import", "gpt2", "gpt2", "--vocab", str(vocab), "--merges", str(merges)).exit_code == 0
    return run


def read_ids(path, typecode: str) -> list[int]:
    ids = array(typecode)
    ids.frombytes(path.read_bytes())
    return ids.tolist()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_encode_file_to_uint16_ids(run, tmp_path, tiktoken_gpt2, workers):
    source = tmp_path / "in.txt"
    text = (read_corpus("taylorswift.txt")[:50_000] + EOT + read_corpus("german_1M.txt")[:50_000]
            + "<|bpestore: never allowed|>")
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "ids.bin"
    result = run("encode", "gpt2", "--file", str(source), "--out", str(out), "--dtype", "uint16",
                 "--workers", workers)
    assert result.exit_code == 0, result.output
    expected = tiktoken_gpt2.encode(text, allowed_special="all")
    assert read_ids(out, "H") == expected
    assert out.stat().st_size == 2 * len(expected)
    n_bytes = len(text.encode())
    assert f"{len(expected):,} tokens (uint16) from {n_bytes:,} bytes" in result.stdout
    assert f"{n_bytes / len(expected):.2f} bytes/token" in result.stdout
    assert not list(tmp_path.glob(".ids.bin.*")), "no temporary file is left behind"


def test_encode_summary_json_and_uint32(run, tmp_path, tiktoken_gpt2):
    source = corpus_path("tinystories_sample.txt")
    out = tmp_path / "ids32.bin"
    result = run("encode", "gpt2", "--file", str(source), "--out", str(out), "--dtype", "uint32",
                 "--no-special", "--json")
    summary = json.loads(result.stdout)
    expected = tiktoken_gpt2.encode_ordinary(source.read_text(encoding="utf-8"))
    assert read_ids(out, "I") == expected
    assert summary["tokens"] == len(expected) and summary["dtype"] == "uint32"
    assert summary["bytes"] == source.stat().st_size
    assert summary["backend"] in FAST_BACKENDS


def test_encode_file_prints_ids_without_out(run, tmp_path, tiktoken_gpt2):
    source = tmp_path / "in.txt"
    source.write_text(f"hello{EOT} world", encoding="utf-8")
    ids = json.loads(run("encode", "gpt2", "--file", str(source), "--json", "--workers", "2").stdout)
    assert ids == tiktoken_gpt2.encode(f"hello{EOT} world", allowed_special="all")


def test_decode_id_file_round_trip(run, tmp_path):
    source = corpus_path("japanese_1M.txt")
    out = tmp_path / "ids.bin"
    assert run("encode", "gpt2", "--file", str(source), "--out", str(out), "-q").exit_code == 0
    decoded = run("decode", "gpt2", "--file", str(out))
    assert decoded.exit_code == 0
    assert decoded.stdout == source.read_text(encoding="utf-8")
    assert json.loads(run("decode", "gpt2", "--file", str(out), "--json").stdout)["text"][:20] == \
        source.read_text(encoding="utf-8")[:20]


def test_uint16_is_refused_for_large_vocabularies(run, tmp_path):
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[70_000] = b"ab"
    bpestore.open(run.db).import_vocab("big", vocab, [(b"a", b"b")])
    source = tmp_path / "in.txt"
    source.write_text("abab c", encoding="utf-8")
    assert_error(run("encode", "big", "--file", str(source), "--out", str(tmp_path / "x.bin"),
                     "--dtype", "uint16"), "use --dtype uint32")
    assert not (tmp_path / "x.bin").exists()
    result = run("encode", "big", "--file", str(source), "--out", str(tmp_path / "x.bin"), "--json")
    assert json.loads(result.stdout)["dtype"] == "uint32"
    assert read_ids(tmp_path / "x.bin", "I") == [70_000, 70_000, 32, 99]


def test_encode_decode_mistakes(run, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi", encoding="utf-8")
    usage = run("encode", "gpt2", "hi", "--out", str(tmp_path / "o.bin"))
    assert usage.exit_code == 2 and "give --file" in usage.stderr
    assert_error(run("encode", "gpt2", "--file", str(tmp_path / "missing.txt"), "--out",
                     str(tmp_path / "o.bin")), "file not found")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x02\x03")
    assert_error(run("decode", "gpt2", "--file", str(odd)), "not a file of uint16 ids")
    broken = tmp_path / "broken.bin"
    array("H", [bpestore.open(run.db).tokenizer("gpt2").token_id(b"\xe6")]).tofile(open(broken, "wb"))
    assert run("decode", "gpt2", "--file", str(broken)).stdout == "\ufffd"
    assert_error(run("decode", "gpt2", "--file", str(broken), "--errors", "strict"), "valid UTF-8")
    assert run("decode", "gpt2").exit_code == 2


# -- encode --file --out --workers N: worker processes read and encode ranges of the file ----
def _mixed_text() -> str:
    """English, code, German, Russian, Japanese and Hindi with special tokens between
    them (and one inside a line), so ranges are cut beside and far from them."""
    parts = [read_corpus(name)[:n] for name, n in [("dracula.txt", 150_000), ("code_python_5M.txt.xz", 80_000),
                                                    ("german_1M.txt", 60_000), ("russian_1M.txt", 60_000),
                                                    ("japanese_1M.txt", 40_000), ("hindi_1M.txt", 40_000)]]
    return EOT.join(parts) + " tail" + EOT + "x"


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_encode_file_workers_give_the_same_bytes_as_one_and_tiktoken(run, tmp_path, tiktoken_gpt2, dtype,
                                                                     monkeypatch):
    import bpestore.encoder.streams

    monkeypatch.setattr(bpestore.encoder.streams, "RANGE_BYTES", 40_000)  # many ranges from a small file
    text = _mixed_text()
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    typecode = {"uint16": "H", "uint32": "I"}[dtype]
    expected = tiktoken_gpt2.encode(text, allowed_special="all")
    outputs = {}
    for workers in ["1", "3", "8"]:
        out = tmp_path / f"ids-{workers}.bin"
        result = run("encode", "gpt2", "--file", str(source), "--out", str(out), "--dtype", dtype,
                     "--workers", workers, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["tokens"] == len(expected)
        outputs[workers] = out.read_bytes()
    assert outputs["3"] == outputs["1"] and outputs["8"] == outputs["1"]
    assert read_ids(tmp_path / "ids-8.bin", typecode) == expected


def test_encode_file_workers_no_special_and_the_pure_path(gpt2_tokenizer, tmp_path, tiktoken_gpt2, monkeypatch):
    import bpestore.encoder.streams

    monkeypatch.setattr(bpestore.encoder.streams, "RANGE_BYTES", 15_000)
    text = _mixed_text()[:120_000]
    source = tmp_path / "in.txt"
    source.write_text(text, encoding="utf-8")
    pure = bpestore.Tokenizer(gpt2_tokenizer.vocab, gpt2_tokenizer.merges, gpt2_tokenizer.special_tokens,
                              spec=gpt2_tokenizer.spec, fast=False)
    expected = tiktoken_gpt2.encode_ordinary(text)
    for tok in (gpt2_tokenizer, pure):
        for workers in (1, 3):
            out = tmp_path / f"ids-{tok.backend[:6]}-{workers}.bin"
            tok.encode_file(source, out, workers=workers, allowed_special=set(), disallowed_special=())
            assert read_ids(out, "H") == expected, (tok.backend, workers)
    assert pure.backend.startswith("python")


def test_encode_file_workers_invalid_utf8(run, tmp_path, monkeypatch):
    import bpestore.encoder.streams

    monkeypatch.setattr(bpestore.encoder.streams, "RANGE_BYTES", 20_000)
    source = tmp_path / "bad.txt"
    source.write_bytes(b"fine words " * 10_000 + b"\xc3(" + b" more" * 2_000)
    out = tmp_path / "ids.bin"
    result = run("encode", "gpt2", "--file", str(source), "--out", str(out), "--workers", "3")
    assert_error(result, "not valid UTF-8 at byte 110000")
    assert not out.exists() and not list(tmp_path.glob(".ids.bin.*")), "nothing written, no temporary left"
    replaced = {}
    for workers in ["1", "3"]:
        target = tmp_path / f"ids-{workers}.bin"
        result = run("encode", "gpt2", "--file", str(source), "--out", str(target), "--workers", workers,
                     "--errors", "replace", "--quiet")
        assert result.exit_code == 0, result.output
        replaced[workers] = target.read_bytes()
    assert replaced["3"] == replaced["1"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files through /proc")
@pytest.mark.parametrize("options", [{"allowed_special": {"<|nope|>"}}, {"dropout": 2.0}, {"dtype": "int8"},
                                     {"errors": "ignore"}])
def test_encode_file_refuses_bad_options_before_opening_the_source(tmp_path, options):
    """A refused call leaves no handle on the source open (the traceback that
    pytest keeps holds the call's frames, and with them anything they opened)."""
    tok = bpestore.Tokenizer({i: bytes([i]) for i in range(256)}, [])
    source = tmp_path / "text.txt"
    source.write_text("some text\n", encoding="utf-8")
    with pytest.raises(bpestore.InvalidArgumentError) as refused:
        tok.encode_file(source, tmp_path / "ids.bin", **options)
    open_files = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.islink(f"/proc/self/fd/{fd}")]
    assert str(source) not in open_files, refused.value
    assert not (tmp_path / "ids.bin").exists()


def test_encoding_files_loads_nothing_of_ingest(tmp_path):
    """The encoder shares text-file and process helpers with ingest through modules below
    both: encoding a file (in ranges, by worker processes), decoding it and explaining a
    text import no module of bpestore.ingest."""
    source = tmp_path / "text.txt"
    source.write_text("some text to encode\n" * 5000, encoding="utf-8")
    script = (
        "import sys, bpestore\n"
        "import bpestore.encoder.streams as streams\n"
        "streams.RANGE_BYTES = 20_000\n"
        "tok = bpestore.Tokenizer({i: bytes([i]) for i in range(256)}, [], fast=False)\n"
        f"written = tok.encode_file({str(source)!r}, {str(tmp_path / 'ids.bin')!r}, workers=2)\n"
        f"assert ''.join(tok.decode_file(written.path)) == open({str(source)!r}).read()\n"
        "tok.explain('some text')\n"
        "print(sorted(m for m in sys.modules if m.startswith('bpestore.ingest')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
