"""What a newcomer met on the everyday tasks, each now said or refused plainly:
special tokens given only at training, raw JSON Lines, identical re-training,
--db after the command, read commands on a missing database, files replaced
without --force, an unreached target, a closed pipe, and small texts."""

from __future__ import annotations

import fnmatch
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_error, corpus_path

TEXT = "the cat sat on the mat <s> and the dog sat on the log\n" * 20


@pytest.fixture
def corpus(cli_run, tmp_path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(TEXT, encoding="utf-8")
    assert cli_run("ingest", "c", str(path)).exit_code == 0
    return path


def test_special_token_only_at_training_is_warned_and_extensions_still_work(cli_run, corpus):
    first = cli_run("train", "a", "--corpus", "c", "--merges", "5", "--special-token", "<s>")
    assert first.exit_code == 0
    assert "Warning: special token '<s>' was not given when the corpus was ingested" in first.stderr
    assert "--special-token" in first.stderr
    # The extension continues on the same corpus: the words are made the same way.
    child = cli_run("train", "b", "--corpus", "c", "--merges", "8", "--from", "a@1")
    assert child.exit_code == 0, child.stderr
    assert child.stderr == ""
    # Another corpus with other words: the error names the field, both values and the fix.
    (corpus.parent / "u.txt").write_text(TEXT, encoding="utf-8")
    cli_run("ingest", "lower", str(corpus.parent / "u.txt"), "--normalizer", "lowercase")
    result = cli_run("train", "d", "--corpus", "lower", "--merges", "8", "--from", "a@1")
    assert_error(result, "this corpus was ingested with normalizer='lowercase', the words of a@1 with "
                         "normalizer='none'")
    assert "ingest the text into a corpus with a@1's normalizer" in result.stderr


def test_json_lines_counted_raw_are_warned(cli_run, tmp_path):
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(json.dumps({"text": f"record {i}"}) for i in range(5)))
    raw = cli_run("ingest", "raw", str(path))
    assert raw.exit_code == 0
    assert raw.stderr.startswith(f"Warning: {path} looks like JSON Lines") and "--jsonl-field" in raw.stderr
    assert "jsonl_field" not in raw.stderr
    field = cli_run("ingest", "field", str(path), "--jsonl-field", "text")
    assert field.exit_code == 0 and field.stderr == ""


def test_identical_training_says_which_version_it_equals_and_progress_fires(cli_run, corpus):
    import bpestore

    assert "equal to" not in cli_run("train", "a", "--corpus", "c", "--merges", "6").output
    again = cli_run("train", "a", "--corpus", "c", "--merges", "6")
    assert "a@2: complete" in again.output
    assert "equal to a@1 (the same spec, corpus and merges" in again.output
    store = bpestore.open(cli_run.db)
    heard = []
    info = store.train("a", corpus="c", merges=6, progress=heard.append)
    assert info.ref == "a@3" and info.fingerprint == store.version("a@1").fingerprint
    assert heard and heard[-1].done == info.n_merges == 6 and heard[-1].unit == "merges"


def test_db_after_the_command_and_missing_database(cli_run, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bpestore.cli import cli

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    missing = tmp_path / "typo.db"
    for args in (["versions", "--db", str(missing)], ["--db", str(missing), "encode", "en", "hi"],
                 ["vocab", "en", f"--db={missing}"]):
        result = runner.invoke(cli, args)
        assert_error(result, f"no database at {missing}")
        assert not missing.exists()
    assert runner.invoke(cli, ["init", "--db", str(missing)]).exit_code == 0
    assert missing.exists()
    listed = runner.invoke(cli, ["versions", "--db", str(missing)])
    assert listed.exit_code == 0 and "no versions yet" in listed.output
    assert not (tmp_path / "bpestore.db").exists()


def test_files_are_replaced_only_with_force(cli_run, corpus, tmp_path):
    cli_run("train", "a", "--corpus", "c", "--merges", "5")
    ids = tmp_path / "ids.bin"
    ids.write_bytes(b"keep")
    assert_error(cli_run("encode", "a", "--file", str(corpus), "--out", str(ids)), "exists")
    assert ids.read_bytes() == b"keep"
    assert cli_run("encode", "a", "--file", str(corpus), "--out", str(ids), "--force", "-q").exit_code == 0
    assert ids.read_bytes() != b"keep"
    pytest.importorskip("matplotlib")
    chart = tmp_path / "c.png"
    chart.write_bytes(b"keep")
    assert_error(cli_run("plot", "a", "--file", str(corpus), "--out", str(chart)), "exists")
    assert chart.read_bytes() == b"keep"
    assert cli_run("plot", "a", "--file", str(corpus), "--out", str(chart), "--force").exit_code == 0
    assert chart.read_bytes()[:4] == b"\x89PNG"


def test_an_unreached_target_says_why(cli_run, corpus):
    result = cli_run("train", "a", "--corpus", "c", "--vocab-size", "100000")
    assert result.exit_code == 0
    assert "target of 100,000 tokens not reached: no pair of adjacent tokens occurs in the corpus' words" \
        in result.output
    result = cli_run("train", "b", "--corpus", "c", "--merges", "5000", "--min-frequency", "30")
    assert "target of 5,000 merges not reached: no pair of adjacent tokens occurs at least 30 times" in result.output
    reached = cli_run("train", "e", "--corpus", "c", "--merges", "3")
    assert "not reached" not in reached.output


def test_a_closed_pipe_ends_quietly(cli_run, tmp_path):
    text = corpus_path("tinyshakespeare.txt")
    cli_run("ingest", "t", str(text))
    cli_run("train", "t", "--corpus", "t", "--merges", "20")
    # --tokens: a line per token, so the writes go on after the reader has gone.
    proc = subprocess.Popen([sys.executable, "-m", "bpestore", "--db", cli_run.db, "encode", "t", "--file",
                             str(text), "--tokens"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)
    proc.stdout.close()  # as `| head -c 100` does
    proc.wait(timeout=120)
    assert proc.stderr.read() == b""
    assert proc.returncode == 141


def test_small_texts(cli_run, corpus):
    assert_error(cli_run("train", "a", "--corpus", "c", "--vocab-size", "200", "--special-token", "<x>"),
                 "(the initial alphabet and 1 special token)")
    help_text = cli_run("--help").output
    token_line = next(line for line in help_text.splitlines() if line.strip().startswith("token "))
    assert "e.g. \" the\"" in token_line
    cli_run("train", "e", "--corpus", "c", "--merges", "3")
    cli_run("train", "e", "--corpus", "c", "--merges", "5", "--from", "e@1")
    cli_run("alias", "e@2", "prod")
    assert_error(cli_run("rm", "e@1"), "extended by e@2; e@prod points at e@2")


def test_the_training_lock_file_is_beside_the_database_and_ignored(cli_run, corpus):
    cli_run("train", "a", "--corpus", "c", "--merges", "3")
    assert Path(f"{cli_run.db}-train.lock").exists()
    patterns = [line.strip() for line in (Path(__file__).parents[1] / ".gitignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    assert any(fnmatch.fnmatch("bpestore.db-train.lock", p) for p in patterns)


def test_encode_file_replaces_an_existing_file_only_with_force(tmp_path):
    import bpestore

    tok = bpestore.Tokenizer({i: bytes([i]) for i in range(256)}, [])
    source, out = tmp_path / "t.txt", tmp_path / "ids.bin"
    source.write_text("some text\n", encoding="utf-8")
    out.write_bytes(b"keep")
    with pytest.raises(bpestore.ConflictError, match="force=True"):
        tok.encode_file(source, out)
    assert out.read_bytes() == b"keep"
    assert tok.encode_file(source, out, force=True).tokens == 10 and out.read_bytes() != b"keep"


def test_tokens_print_alike_in_every_command(cli_run, tmp_path):
    """UTF-8 tokens as their text, a backslash once, a byte outside UTF-8 as \\xNN: the same
    in merges, vocab, token and encode --tokens."""
    path = tmp_path / "de.txt"
    path.write_text("für über schön á á á a\\b a\\b\n" * 30, encoding="utf-8")
    assert cli_run("ingest", "de", str(path)).exit_code == 0
    assert cli_run("train", "de", "--corpus", "de", "--merges", "12").exit_code == 0
    merges = cli_run("merges", "de").stdout
    made = next(line for line in merges.splitlines() if "+ '\\xa1' ->" in line)  # the end of á, escaped once
    assert made.split("\t")[1].startswith("' \\xc3' + '\\xa1' -> ") and made.split("\t")[1].endswith(" ' á'")
    assert "\\\\" not in merges
    ids = dict(line.split("\t") for line in cli_run("encode", "de", "a\\b", "--tokens").stdout.splitlines())
    assert list(ids.values()) == ["'a'", "'\\'", "'b'"]
    assert cli_run("vocab", "de", "--prefix", "\\").stdout.split("\t")[1] == "'\\'"


def test_a_fuse_unk_model_names_fuse_unk_as_the_reason_for_the_python_path():
    import bpestore
    from bpestore.encoder import core_backend
    from bpestore.spec import TokenizerSpec

    if core_backend.CORE is None:
        pytest.skip("the encode core is not built")
    spec = TokenizerSpec(alphabet="chars", unk_token="<unk>", fuse_unk=True, pretokenizer="whitespace")
    tok = bpestore.Tokenizer({0: b"<unk>", 1: b"a", 2: b"b", 3: b"ab"}, [(b"a", b"b")], spec=spec)
    assert tok.encode("ab zz ab") == [3, 0, 3]
    assert "fuses unknown characters" in tok.backend and "alphabet" not in tok.backend


def test_diff_lists_new_tokens_in_merge_order(cli_run, corpus):
    cli_run("train", "a", "--corpus", "c", "--merges", "5")
    cli_run("train", "a", "--corpus", "c", "--merges", "12", "--from", "a@1")
    d = json.loads(cli_run("diff", "a@1", "a@2", "--json").stdout)
    made = [m["token"] for m in json.loads(cli_run("merges", "a@2", "--start", "5", "--json").stdout)]
    assert d["only_b"] == [json.loads(cli_run("token", "a@2", str(i), "--id", "--json").stdout)["token"]
                           for i in made]


def test_versions_prints_a_training_runs_numbers_alike():
    import dataclasses
    from datetime import datetime

    from bpestore.cli.versions import version_line
    from bpestore.records import VersionInfo
    from bpestore.spec import TokenizerSpec

    fields = {f.name: None for f in dataclasses.fields(VersionInfo) if f.default is dataclasses.MISSING}
    v = VersionInfo(**{**fields, "name": "en", "number": 1, "status": "training", "vocab_size": 11_757,
                       "n_merges": 11_501, "target_vocab_size": 32_000, "target_merges": None, "spec": TokenizerSpec(),
                       "created_at": datetime(2026, 1, 1), "aliases": ()})
    assert "11,757/32,000 tokens" in version_line(v)
    by_merges = dataclasses.replace(v, target_vocab_size=None, target_merges=20_000)
    assert "11,757 tokens, 11,501/20,000 merges" in version_line(by_merges)


def test_encode_workers_help_says_threads_for_the_compiled_core(cli_run):
    text = " ".join(cli_run("encode", "--help").stdout.split())
    assert "threads (the compiled core) or processes (the Python encoder)" in text


def test_the_json_lines_warning_speaks_the_callers_terms(tmp_path):
    import warnings

    import bpestore
    from bpestore.errors import BpestoreWarning

    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"text": "a record"}) + "\n", encoding="utf-8")
    store = bpestore.open(str(tmp_path / "s.db"))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        store.ingest("raw", [str(path)])
    message = str(next(w.message for w in seen if isinstance(w.message, BpestoreWarning)))
    assert "jsonl_field" in message and "--jsonl-field" not in message
