"""The command line, through click's CliRunner (and once as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

import bpestore
from bpestore.cli import cli

from .conftest import corpus_path, reference_merges

EOT = "<|endoftext|>"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run(tmp_path, monkeypatch):
    """Run a bpestore command line against a fresh SQLite file; returns the Result."""
    monkeypatch.delenv("BPESTORE_DB", raising=False)
    db = str(tmp_path / "cli.db")
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(cli, ["--db", db, *args], input=input, catch_exceptions=False)
    invoke.db = db
    return invoke


def assert_error(result, message: str) -> None:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.output


@pytest.fixture
def trained(run):
    assert run("ingest", "ref", str(corpus_path("corpus.en")), "--special-token", EOT).exit_code == 0
    result = run("train", "en", "--corpus", "ref", "--vocab-size", "500")
    assert result.exit_code == 0, result.output
    return run


def test_init_creates_the_schema(run):
    result = run("init")
    assert result.exit_code == 0 and "schema revision 0002" in result.output


def test_ingest_and_train_give_reference_merges(trained):
    out = trained("versions", "--json")
    [v] = json.loads(out.stdout)
    assert (v["ref"], v["status"], v["vocab_size"], v["n_merges"]) == ("en@1", "complete", 500, 243)
    assert v["corpus"] == "ref" and v["spec"]["special_tokens"] == [EOT]
    assert bpestore.open(trained.db).tokenizer("en@1").merges == reference_merges()


def test_ingest_reports_skip_and_json(run, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("hello hello world", encoding="utf-8")
    first = run("ingest", "c", str(path), "--json")
    assert json.loads(first.stdout)[0]["n_words"] == 3
    again = run("ingest", "c", str(path))
    assert "skipped" in again.stdout and again.exit_code == 0
    assert "Error" not in again.output
    listing = run("corpora", "--json")
    assert json.loads(listing.stdout)[0]["n_sources"] == 1


def test_ingest_from_stdin(run):
    result = run("ingest", "c", "-", input="from standard input")
    assert result.exit_code == 0
    assert json.loads(run("corpora", "--json").stdout)[0]["n_words"] == 3


def test_encode_decode_round_trip(trained):
    ids = json.loads(trained("encode", "en", f"Hello world{EOT}", "--json").stdout)
    assert ids[-1] == 256
    out = trained("decode", "en", *map(str, ids))
    assert out.stdout == f"Hello world{EOT}\n"
    tokens = json.loads(trained("encode", "en", "the cat", "--tokens", "--json").stdout)
    assert "".join(t["token"] for t in tokens) == "the cat"
    plain = trained("encode", "en", "the cat")
    assert plain.stdout.strip() == " ".join(str(t["id"]) for t in tokens)


def test_encode_file_and_no_special(trained, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text(f"one{EOT}two\n" * 50, encoding="utf-8")
    ids = json.loads(trained("encode", "en", "--file", str(path), "--json").stdout)
    assert ids.count(256) == 50
    plain = json.loads(trained("encode", "en", f"a{EOT}", "--no-special", "--json").stdout)
    assert 256 not in plain


def test_train_resume_and_extend(run, tmp_path):
    run("ingest", "shakes", str(corpus_path("tinyshakespeare.txt")))
    store = bpestore.open(run.db)

    class Stop(Exception):
        pass

    def stop(state):
        if state.done == 40:
            raise Stop
    with pytest.raises(Stop):
        store.train("en", corpus="shakes", vocab_size=400, progress=stop)
    store.close()
    assert "training" in run("versions", "en").stdout
    assert run("train", "--resume", "en@1").exit_code == 0
    assert json.loads(run("show", "en@1", "--json").stdout)["status"] == "complete"
    result = run("train", "en", "--from", "en@1", "--corpus", "shakes", "--vocab-size", "450")
    assert result.exit_code == 0, result.output
    child = json.loads(run("show", "en@2", "--json").stdout)
    assert child["parent"] == "en@1" and child["vocab_size"] == 450


def test_alias_and_versions_listing(trained):
    assert trained("alias", "en@1", "prod").stdout.strip() == "en@prod -> en@1"
    assert "aliases=prod" in trained("versions").stdout
    assert trained("encode", "en@prod", "hi").exit_code == 0


def test_import_gpt2_and_export_round_trip(run, gpt2_files, tmp_path, tiktoken_gpt2):
    result = run("import", "gpt2", "gpt2", "--vocab", str(gpt2_files[0]), "--merges", str(gpt2_files[1]))
    assert result.exit_code == 0 and "50,257 tokens" in result.stdout
    sample = "Hello world, it's GPT-2 🦄"
    ids = json.loads(run("encode", "gpt2", sample, "--json").stdout)
    assert ids == tiktoken_gpt2.encode(sample)
    out = tmp_path / "gpt2-out"
    assert run("export", "gpt2", "--format", "gpt2", "--out", str(out)).exit_code == 0
    assert run("import", "gpt2", "again", "--vocab", str(out / "vocab.json"),
               "--merges", str(out / "merges.txt")).exit_code == 0
    assert json.loads(run("encode", "again", sample, "--json").stdout) == ids


def test_export_hf_and_tiktoken_encode_identically(trained, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from bpestore.text import PATTERNS

    sample = corpus_path("corpus.en").read_text(encoding="utf-8")[:20000]
    ours = bpestore.open(trained.db).tokenizer("en@1").encode_ordinary(sample)
    assert trained("export", "en@1", "--format", "hf", "--out", str(tmp_path / "t.json")).exit_code == 0
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    assert hf.encode(sample).ids == ours
    assert trained("export", "en@1", "--format", "tiktoken", "--out", str(tmp_path / "t.tiktoken")).exit_code == 0
    enc = tiktoken.Encoding("en", pat_str=PATTERNS["gpt2"],
                            mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "t.tiktoken")),
                            special_tokens={EOT: 256})
    assert enc.encode_ordinary(sample) == ours


# -- error paths: one Error: line, non-zero exit, nothing written -------------
def test_error_missing_file(run):
    assert_error(run("ingest", "c", "/no/such/file.txt"), "file not found: /no/such/file.txt")
    assert json.loads(run("corpora", "--json").stdout) == []


def test_error_unknown_version(trained):
    assert_error(trained("encode", "nope", "x"), "no tokenizer named 'nope'")
    assert_error(trained("encode", "en@7", "x"), "en has no version 7")
    assert_error(trained("decode", "en@latest", "1"), "no version or alias 'latest'")
    assert_error(trained("versions", "nope"), "no tokenizer named 'nope'")


def test_error_non_utf8_input(run, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait".encode("latin-1"))
    assert_error(run("ingest", "c", str(bad)), "not valid UTF-8 at byte 3")
    assert json.loads(run("corpora", "--json").stdout) == []
    assert run("ingest", "c", str(bad), "--errors", "replace").exit_code == 0


def test_error_database_from_newer_bpestore(run):
    store = bpestore.open(run.db)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    assert_error(run("versions"), "written by a newer bpestore")


def test_error_bad_options(trained):
    assert_error(trained("train", "x", "--corpus", "ref"), "give either vocab_size")
    assert_error(trained("train", "x", "--corpus", "nope", "--vocab-size", "300"), "no corpus named 'nope'")
    assert_error(trained("train", "x", "--corpus", "ref", "--vocab-size", "100"), "at least 257")
    assert_error(trained("train", "--resume", "en@1"), "complete; nothing to resume")
    assert_error(trained("encode", "en", "--file", "/nope/in.txt"), "/nope/in.txt")
    assert_error(trained("decode", "en", "999999"), "unknown token id 999999")
    assert_error(trained("export", "en", "--format", "hf", "--out", "/no/dir/t.json"), "does not exist")
    # Usage mistakes caught by click itself: a usage hint, then the Error: line.
    usage = trained("encode", "en", "x", "--file", "/nope")
    assert usage.exit_code == 2 and usage.stderr.strip().splitlines()[-1] == \
        "Error: give TEXT or --file PATH (not both)"


def test_debug_shows_the_exception(run):
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", run.db, "--debug", "encode", "nope", "x"])
    assert isinstance(result.exception, bpestore.BpestoreError)


def test_python_cli_py_is_the_same_program(tmp_path):
    env = {**os.environ, "BPESTORE_DB": str(tmp_path / "p.db")}
    out = subprocess.run([sys.executable, str(ROOT / "cli.py"), "versions", "--json"],
                         capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout) == []
    err = subprocess.run([sys.executable, str(ROOT / "cli.py"), "encode", "nope", "x"],
                         capture_output=True, text=True, env=env)
    assert err.returncode == 1 and err.stderr.startswith("Error: no tokenizer named 'nope'")


def test_token_lookup_and_merge_tree(trained):
    info = json.loads(trained("token", "en", " the", "--json").stdout)
    tok = bpestore.open(trained.db).tokenizer("en")
    assert info["id"] == tok.token_id(" the") and info["kind"] == "merge"
    # The tree's leaves spell the token; each inner node is its two parts joined.
    def leaves(node):
        return [node["token"]] if "parts" not in node else [t for p in node["parts"] for t in leaves(p)]
    assert "".join(leaves(info)) == " the" and all(len(t) == 1 for t in leaves(info))
    assert json.loads(trained("token", "en", str(info["id"]), "--id", "--json").stdout)["token"] == " the"
    assert json.loads(trained("token", "en", "5", "--json").stdout)["id"] == ord("5")
    assert json.loads(trained("token", "en", "5", "--id", "--json").stdout)["token"] == "\x05"
    assert json.loads(trained("token", "en", "e", "--json").stdout)["kind"] == "byte"
    assert_error(trained("token", "en", "ization"), "'ization' is not a token of en")


def test_diff_between_parent_and_extension(run):
    run("ingest", "s", str(corpus_path("tinyshakespeare.txt")))
    run("train", "en", "--corpus", "s", "--vocab-size", "400")
    run("train", "en", "--corpus", "s", "--vocab-size", "450", "--from", "en@1")
    run("train", "en", "--corpus", "s", "--vocab-size", "400", "--tie-break", "hf")
    d = json.loads(run("diff", "en@1", "en@2", "--json").stdout)
    assert d["shared_merges"] == 400 - 256 and d["changed_ids"] == [] and d["only_a"] == []
    assert len(d["only_b"]) == 50
    other = json.loads(run("diff", "en@1", "en@3", "--json").stdout)
    assert other["spec_changes"] == {"tie_break": ["lexicographic", "hf"]}
    text = run("diff", "en@1", "en@2").stdout
    assert "shared merge prefix: 144" in text and "only in en@2 (50)" in text


def test_database_option_precedence(tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BPESTORE_DB", raising=False)
    assert runner.invoke(cli, ["init"]).exit_code == 0
    assert (tmp_path / "bpestore.db").exists()  # the default
    monkeypatch.setenv("BPESTORE_DB", str(tmp_path / "env.db"))
    assert runner.invoke(cli, ["init"]).exit_code == 0
    assert (tmp_path / "env.db").exists()
    assert runner.invoke(cli, ["--db", str(tmp_path / "flag.db"), "init"]).exit_code == 0
    assert (tmp_path / "flag.db").exists()  # --db wins over $BPESTORE_DB


def test_init_hides_the_password():
    result = CliRunner().invoke(cli, ["--db", "postgresql+psycopg://u:s3cret@127.0.0.1:1/x", "init"])
    assert result.exit_code == 1 and "s3cret" not in result.output


def test_resume_refuses_new_settings(trained):
    result = trained("train", "--resume", "en@1", "--tie-break", "hf")
    assert result.exit_code == 2 and "drop --tie-break" in result.stderr


def test_error_bad_pattern_and_corrupt_archive(run, tmp_path):
    text = tmp_path / "h.txt"
    text.write_text("hello", encoding="utf-8")
    assert_error(run("ingest", "c", str(text), "--pattern", "("), "is not a valid regex")
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"not gzip at all")
    assert_error(run("ingest", "c", str(bad)), "bad.gz")
    assert json.loads(run("corpora", "--json").stdout) == []
