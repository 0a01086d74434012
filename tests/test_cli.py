"""The command line, through click's CliRunner (and once as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import text

import bpestore
from bpestore.cli import cli

from .conftest import assert_error, corpus_path, reference_merges

EOT = "<|endoftext|>"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def trained(cli_run):
    assert cli_run("ingest", "ref", str(corpus_path("corpus.en")), "--special-token", EOT).exit_code == 0
    result = cli_run("train", "en", "--corpus", "ref", "--vocab-size", "500")
    assert result.exit_code == 0, result.output
    return cli_run


def test_init_creates_the_schema(cli_run):
    result = cli_run("init")
    from bpestore.store.db import HEAD

    assert result.exit_code == 0 and f"schema revision {HEAD}" in result.output


def test_ingest_and_train_give_reference_merges(trained):
    out = trained("versions", "--json")
    [v] = json.loads(out.stdout)
    assert (v["ref"], v["status"], v["vocab_size"], v["n_merges"]) == ("en@1", "complete", 500, 243)
    assert v["corpus"] == "ref" and v["spec"]["special_tokens"] == [EOT]
    assert bpestore.open(trained.db).tokenizer("en@1").merges == reference_merges()


def test_ingest_reports_skip_and_json(cli_run, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("hello hello world", encoding="utf-8")
    first = cli_run("ingest", "c", str(path), "--json")
    assert json.loads(first.stdout)[0]["n_words"] == 3
    again = cli_run("ingest", "c", str(path))
    assert "skipped" in again.stdout and again.exit_code == 0
    assert "Error" not in again.output
    listing = cli_run("corpora", "--json")
    assert json.loads(listing.stdout)[0]["n_sources"] == 1


def test_ingest_from_stdin(cli_run):
    result = cli_run("ingest", "c", "-", input="from standard input")
    assert result.exit_code == 0
    assert json.loads(cli_run("corpora", "--json").stdout)[0]["n_words"] == 3


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


def test_train_resume_and_extend(cli_run, tmp_path):
    cli_run("ingest", "shakes", str(corpus_path("tinyshakespeare.txt")))
    store = bpestore.open(cli_run.db)

    class Stop(Exception):
        pass

    def stop(state):
        if state.done == 40:
            raise Stop
    with pytest.raises(Stop):
        store.train("en", corpus="shakes", vocab_size=400, progress=stop)
    store.close()
    assert "training" in cli_run("versions", "en").stdout
    assert cli_run("train", "--resume", "en@1").exit_code == 0
    assert json.loads(cli_run("show", "en@1", "--json").stdout)["status"] == "complete"
    result = cli_run("train", "en", "--from", "en@1", "--corpus", "shakes", "--vocab-size", "450")
    assert result.exit_code == 0, result.output
    child = json.loads(cli_run("show", "en@2", "--json").stdout)
    assert child["parent"] == "en@1" and child["vocab_size"] == 450


def test_alias_and_versions_listing(trained):
    assert trained("alias", "en@1", "prod").stdout.strip() == "en@prod -> en@1"
    assert "aliases=prod" in trained("versions").stdout
    assert trained("encode", "en@prod", "hi").exit_code == 0


def test_import_gpt2_and_export_round_trip(cli_run, gpt2_files, tmp_path, tiktoken_gpt2):
    result = cli_run("import", "gpt2", "gpt2", "--vocab", str(gpt2_files[0]), "--merges", str(gpt2_files[1]))
    assert result.exit_code == 0 and "50,257 tokens" in result.stdout
    sample = "Hello world, it's GPT-2 🦄"
    ids = json.loads(cli_run("encode", "gpt2", sample, "--json").stdout)
    assert ids == tiktoken_gpt2.encode(sample)
    out = tmp_path / "gpt2-out"
    assert cli_run("export", "gpt2", "--format", "gpt2", "--out", str(out)).exit_code == 0
    assert cli_run("import", "gpt2", "again", "--vocab", str(out / "vocab.json"),
               "--merges", str(out / "merges.txt")).exit_code == 0
    assert json.loads(cli_run("encode", "again", sample, "--json").stdout) == ids


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
def test_error_missing_file(cli_run):
    assert_error(cli_run("ingest", "c", "/no/such/file.txt"), "file not found: /no/such/file.txt")
    assert json.loads(cli_run("corpora", "--json").stdout) == []


def test_error_unknown_version(trained):
    assert_error(trained("encode", "nope", "x"), "no tokenizer named 'nope'")
    assert_error(trained("encode", "en@7", "x"), "en has no version 7")
    assert_error(trained("decode", "en@latest", "1"), "no version or alias 'latest'")
    assert_error(trained("versions", "nope"), "no tokenizer named 'nope'")


def test_error_non_utf8_input(cli_run, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\u00e9 au lait".encode("latin-1"))
    assert_error(cli_run("ingest", "c", str(bad)), "not valid UTF-8 at byte 3")
    assert json.loads(cli_run("corpora", "--json").stdout) == []
    assert cli_run("ingest", "c", str(bad), "--errors", "replace").exit_code == 0


def test_error_database_from_newer_bpestore(cli_run):
    store = bpestore.open(cli_run.db)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    assert_error(cli_run("versions"), "written by a newer bpestore")


def test_error_bad_options(trained):
    assert_error(trained("train", "x", "--corpus", "ref"), "give either --vocab-size or --merges")
    assert_error(trained("train", "x", "--corpus", "nope", "--vocab-size", "300"), "no corpus named 'nope'")
    assert_error(trained("train", "x", "--corpus", "ref", "--vocab-size", "100"), "at least 257")
    assert_error(trained("train", "--resume", "en@1"), "complete; nothing to resume")
    assert_error(trained("encode", "en", "--file", "/nope/in.txt"), "/nope/in.txt")
    assert_error(trained("decode", "en", "999999"), "unknown token id 999999")
    assert_error(trained("export", "en", "--format", "hf", "--out", "/no/dir/t.json"), "does not exist")
    # Usage mistakes: one Error: line naming the help to read, exit status 2.
    usage = trained("encode", "en", "x", "--file", "/nope")
    assert usage.exit_code == 2 and usage.stderr.strip().splitlines() == \
        ["Error: give TEXT or --file PATH (not both) (see cli encode --help)"]


def test_debug_shows_the_exception(cli_run):
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", cli_run.db, "--debug", "encode", "nope", "x"])
    assert isinstance(result.exception, bpestore.BpestoreError)


def test_python_cli_py_is_the_same_program(tmp_path):
    env = {**os.environ, "BPESTORE_DB": str(tmp_path / "p.db")}
    # A read command does not create the database: init does.
    subprocess.run([sys.executable, str(ROOT / "cli.py"), "init"], capture_output=True, env=env, check=True)
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


def test_diff_between_parent_and_extension(cli_run):
    cli_run("ingest", "s", str(corpus_path("tinyshakespeare.txt")))
    cli_run("train", "en", "--corpus", "s", "--vocab-size", "400")
    cli_run("train", "en", "--corpus", "s", "--vocab-size", "450", "--from", "en@1")
    cli_run("train", "en", "--corpus", "s", "--vocab-size", "400", "--tie-break", "hf")
    d = json.loads(cli_run("diff", "en@1", "en@2", "--json").stdout)
    assert d["shared_merges"] == 400 - 256 and d["changed_ids"] == [] and d["only_a"] == []
    assert len(d["only_b"]) == 50
    other = json.loads(cli_run("diff", "en@1", "en@3", "--json").stdout)
    assert other["spec_changes"] == {"tie_break": ["lexicographic", "hf"]}
    text = cli_run("diff", "en@1", "en@2").stdout
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


def test_error_bad_pattern_and_corrupt_archive(cli_run, tmp_path):
    text = tmp_path / "h.txt"
    text.write_text("hello", encoding="utf-8")
    assert_error(cli_run("ingest", "c", str(text), "--pattern", "("), "is not a valid regex")
    bad = tmp_path / "bad.gz"
    bad.write_bytes(b"not gzip at all")
    assert_error(cli_run("ingest", "c", str(bad)), "bad.gz")
    assert json.loads(cli_run("corpora", "--json").stdout) == []


# -- errors: Python-API terms in the library, flags on the command line ----------
def test_a_python_caller_sees_argument_names_and_the_cli_user_sees_flags(cli_run, tmp_path):
    with pytest.raises(bpestore.InvalidArgumentError) as raised:
        bpestore.TokenizerSpec(unk_token="")
    assert str(raised.value) == "unk_token cannot be empty; leave it out instead"
    assert raised.value.params == ("unk_token",)
    with pytest.raises(bpestore.InvalidArgumentError, match="^unk_token and byte_fallback go with alphabet='chars'"):
        bpestore.TokenizerSpec(byte_fallback=True)
    path = tmp_path / "t.txt"
    path.write_text("low lower lowest", encoding="utf-8")
    assert cli_run("ingest", "t", str(path), "--pretokenizer", "whitespace").exit_code == 0
    assert_error(cli_run("train", "u", "--corpus", "t", "--merges", "2", "--alphabet", "chars", "--unk-token", ""),
                 "Error: --unk-token cannot be empty; leave it out instead")
    assert_error(cli_run("train", "u", "--corpus", "t", "--merges", "2", "--byte-fallback"),
                 "Error: --unk-token and --byte-fallback go with --alphabet chars:")
    # An argument the command has no option for keeps its Python name.
    assert cli_run("train", "c", "--corpus", "t", "--merges", "2", "--alphabet", "chars").exit_code == 0
    assert_error(cli_run("encode", "c", "lowz"), "train with an unk_token or byte_fallback=True")


def test_values_become_flag_arguments(trained):
    tok = bpestore.open(trained.db).tokenizer("en")
    with pytest.raises(bpestore.InvalidArgumentError, match="use errors='replace'") as raised:
        tok.decode([195], errors="strict")
    assert raised.value.params == ("errors",)
    assert_error(trained("decode", "en", "195", "--errors", "strict"), "use --errors replace to substitute")


def test_errors_of_subcommands_name_their_flags(cli_run, tmp_path, gpt2_files):
    with pytest.raises(bpestore.NotFoundError, match="^merges file not found"):
        bpestore.open(cli_run.db).import_gpt2("g", vocab=gpt2_files[0], merges=tmp_path / "nope.txt")
    assert_error(cli_run("import", "gpt2", "g", "--vocab", str(gpt2_files[0]), "--merges", str(tmp_path / "nope.txt")),
                 "Error: --merges file not found:")


def test_with_flags_rewrites_only_the_commands_own_options():
    from bpestore.cli import decode, train, with_flags

    assert with_flags("vocab_size must be at least 257", ("vocab_size",), train) == "--vocab-size must be at least 257"
    assert with_flags("byte_fallback=True needs alphabet='chars'", ("byte_fallback", "alphabet"), train) == \
        "--byte-fallback needs --alphabet chars"
    assert with_flags("unk_token='<unk> x' is not in the vocabulary", ("unk_token",), train) == \
        "--unk-token '<unk> x' is not in the vocabulary"
    assert with_flags("parent must be complete", ("parent",), train) == "--from must be complete"
    # Not an option of this command, not the parameter's own word, or part of a path: unchanged.
    assert with_flags("pass errors='replace'", ("errors", "dropout"), train) == "pass errors='replace'"
    assert with_flags("unk_tokens and vocab_size_max", ("unk_token", "vocab_size"), train) == \
        "unk_tokens and vocab_size_max"
    assert with_flags("file not found: /data/path/ids.bin", ("path",), decode) == \
        "file not found: /data/path/ids.bin"
    assert with_flags("give ids or a path", ("ids", "path"), decode) == "give ids or a --file"


def test_error_kinds():
    tok = bpestore.Tokenizer({i: bytes([i]) for i in range(256)}, [])
    with pytest.raises(bpestore.NotFoundError):
        list(tok.decode_file("/no/such/ids.bin"))
    with pytest.raises(bpestore.InvalidArgumentError) as raised:
        bpestore.train_bpe([], vocab_size=10)
    assert raised.value.params == ("vocab_size",)
    assert isinstance(raised.value, ValueError)


def test_disallowed_special_error_is_tiktokens(tiktoken_gpt2, gpt2_tokenizer):
    with pytest.raises(ValueError) as theirs:
        tiktoken_gpt2.encode(f"hi{EOT}")
    with pytest.raises(bpestore.DisallowedSpecialError) as ours:
        gpt2_tokenizer.encode(f"hi{EOT}")
    assert isinstance(ours.value, bpestore.InvalidArgumentError) and isinstance(ours.value, ValueError)
    assert str(ours.value).splitlines()[:2] == str(theirs.value).splitlines()[:2]


def test_python_m_bpestore_is_the_same_program(tmp_path):
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert out.stdout.splitlines()[0] == f"bpestore, version {bpestore.__version__}"
    assert out.stdout.splitlines()[1].startswith("merge core: ")
    assert version("bpestore") == bpestore.__version__


def test_help_lists_every_command_with_its_own_first_line():
    """`bpestore --help` reads COMMANDS without importing the commands: each entry
    must name a real command whose docstring starts with the line listed."""
    from bpestore.cli import COMMANDS, LazyGroup

    group = cli
    assert isinstance(group, LazyGroup)
    ctx = click.Context(group)
    for name, (_, _, short_help) in COMMANDS.items():
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
        assert (command.help or "").split("\n\n")[0].replace("\n", " ").strip() == short_help, name


def test_help_imports_neither_the_store_nor_the_encoder():
    code = ("import sys; from bpestore.cli import main; sys.argv = ['bpestore', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('sqlalchemy', 'alembic', 'bpestore.encoder', 'bpestore.store', 'bpestore.trainer',"
            " 'regex') if m in sys.modules]\nprint('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out, out
    assert "ingest" in out and "Count the words" in out
