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
