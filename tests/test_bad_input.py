"""The bad-input matrix: every case, through the command line, on SQLite and on
PostgreSQL where a database is involved, must exit non-zero with exactly one ``Error:`` line
on stderr, no traceback, and leave the database as it was (a dump before and after).

Also hostile names (quotes, SQL metacharacters, emoji:
stored and found as given; '@' and blank names refused) and a check that the package
never unpickles or evaluates what it reads.
"""

from __future__ import annotations

import ast
import gzip
import json
import lzma
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import pg_schema

TEXT = "".join(f"the cat {i % 7} sat on the mat{i % 13}, and a dog ran far away {i % 5}.\n" for i in range(200))


def _gpt2_files(folder: Path) -> dict[str, Path]:
    """Small GPT-2 style files, valid, and broken in each way an import must refuse."""
    from bpestore.alphabet import bytes_to_unicode

    chars = bytes_to_unicode()
    vocab = {chars[b]: b for b in range(256)}
    vocab.update({"Ġt": 256, "Ġth": 257, "<|endoftext|>": 258})
    merges = "#version: 0.2\nĠ t\nĠt h\n"
    variants = {
        "truncated": (vocab, "#version: 0.2\nĠ t\n"),
        "id_negative": ({**vocab, "Ġth": -1}, merges),
        "id_out_of_range": ({**vocab, "Ġth": 10**12}, merges),
        "id_twice": ({**vocab, "Ġth": 256}, merges),
        "id_text": ({**vocab, "Ġth": "257"}, merges),
        "unknown_token": (vocab, merges + "Ġq zz\n"),
        "three_parts": (vocab, merges + "a b c\n"),
        "not_json": ("{not json", merges),
        "not_a_map": ([1, 2, 3], merges),
    }
    files = {}
    for name, (v, m) in variants.items():
        (folder / f"{name}.json").write_text(v if isinstance(v, str) else json.dumps(v), encoding="utf-8")
        (folder / f"{name}.txt").write_text(m, encoding="utf-8")
        files[name] = folder / name
    (folder / "key_twice.json").write_text(json.dumps(vocab)[:-1] + ', "Ġt": 256}', encoding="utf-8")
    (folder / "key_twice.txt").write_text(merges, encoding="utf-8")
    files["key_twice"] = folder / "key_twice"
    return files


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "good.txt").write_text(TEXT)
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.bin").write_bytes(bytes(range(256)) * 64)
    (folder / "bad_mid.txt").write_bytes(TEXT.encode() + b"\xff\xfe" + TEXT.encode())
    (folder / "nul.txt").write_bytes(TEXT.encode() + b"\x00" + TEXT.encode())
    (folder / "corrupt.gz").write_bytes(gzip.compress(TEXT.encode())[:-40] + b"garbage" * 10)
    (folder / "corrupt.xz").write_bytes(lzma.compress(TEXT.encode())[:60] + b"garbage" * 10)
    (folder / "exists.json").write_text("mine")
    (folder / "deep.json").write_text("[" * 200_000 + "]" * 200_000)  # json's recursion limit
    (folder / "deep_hf.json").write_text('{"model": ' + "[" * 200_000 + "]" * 200_000 + "}")
    _gpt2_files(folder)
    from tests.test_formats import write_hf_cases, write_tiktoken_cases

    write_hf_cases(folder)
    write_tiktoken_cases(folder)
    return folder


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def matrix_db(request, tmp_path_factory, inputs):
    """A store with corpus c (one generation), en@1 and alias en@prod."""
    import bpestore

    with ExitStack() as stack:
        if request.param == "sqlite":
            url = str(tmp_path_factory.mktemp("db") / "m.db")
        else:
            url = stack.enter_context(pg_schema())
        with bpestore.open(url) as store:
            store.ingest("c", [inputs / "good.txt"], workers=1)
            store.train("en", corpus="c", vocab_size=300)
            store.set_alias("en@1", "prod")
        yield url
        bpestore.Store.tokenizer_cache.clear()


def dump(url: str) -> dict[str, list[tuple]]:
    """Every row of every table, sorted: equal dumps, equal databases."""
    from sqlalchemy import MetaData, create_engine, select

    from bpestore.store.db import resolve_url

    engine = create_engine(resolve_url(url))
    try:
        metadata = MetaData()
        metadata.reflect(engine)
        with engine.connect() as conn:
            return {name: sorted(tuple(map(repr, row)) for row in conn.execute(select(table)))
                    for name, table in sorted(metadata.tables.items())}
    finally:
        engine.dispose()


def run_cli(db: str, *argv: str):
    from bpestore.cli import cli

    return CliRunner().invoke(cli, ["--db", db, *argv], catch_exceptions=False)


def check_refused(result) -> None:
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output and "Usage:" not in result.output


# (case, argv with {in} for the inputs folder)
CASES = [
    ("missing file", ["ingest", "c", "{in}/missing.txt"]),
    ("empty file", ["ingest", "c", "{in}/empty.txt"]),
    ("binary file", ["ingest", "c", "{in}/binary.bin"]),
    ("invalid UTF-8 mid-file", ["ingest", "c", "{in}/bad_mid.txt"]),
    ("NUL bytes", ["ingest", "c", "{in}/nul.txt"]),
    ("corrupt .gz", ["ingest", "new", "{in}/corrupt.gz"]),
    ("corrupt .xz", ["ingest", "new", "{in}/corrupt.xz"]),
    ("empty special token", ["ingest", "new", "{in}/good.txt", "--special-token", ""]),
    ("repeated special token", ["ingest", "new", "{in}/good.txt", "--special-token", "<a>",
                                "--special-token", "<a>"]),
    ("overlapping special tokens (a prefix)", ["ingest", "new", "{in}/good.txt", "--special-token", "<|end|>",
                                               "--special-token", "<|end|><|pad|>"]),
    ("overlapping special tokens (inside)", ["ingest", "new", "{in}/good.txt", "--special-token", "<s>",
                                             "--special-token", "x<s>y"]),
    ("overlapping special tokens in training", ["train", "t", "--corpus", "c", "--vocab-size", "300",
                                               "--special-token", "ab", "--special-token", "b"]),
    ("empty special token in training", ["train", "t", "--corpus", "c", "--vocab-size", "300",
                                         "--special-token", ""]),
    ("special tokens unlike the corpus'", ["ingest", "c", "{in}/good.txt", "--special-token", "<z>"]),
    ("unknown pre-tokenizer", ["ingest", "new", "{in}/good.txt", "--pretokenizer", "nope"]),
    ("unknown normalizer", ["ingest", "new", "{in}/good.txt", "--normalizer", "nope"]),
    ("bad pattern", ["ingest", "new", "{in}/good.txt", "--pattern", "(unclosed"]),
    ("vocab size 0", ["train", "x", "--corpus", "c", "--vocab-size", "0"]),
    ("vocab size negative", ["train", "x", "--corpus", "c", "--vocab-size", "-5"]),
    ("vocab size below the alphabet", ["train", "x", "--corpus", "c", "--vocab-size", "100"]),
    ("vocab size absurd", ["train", "x", "--corpus", "c", "--vocab-size", str(2**63)]),
    ("merges absurd", ["train", "x", "--corpus", "c", "--merges", str(10**30)]),
    ("unknown corpus", ["train", "x", "--corpus", "nope", "--vocab-size", "300"]),
    ("unknown generation", ["train", "x", "--corpus", "c@99", "--vocab-size", "300"]),
    ("generation not a number", ["train", "x", "--corpus", "c@x", "--vocab-size", "300"]),
    ("unknown parent", ["train", "x", "--corpus", "c", "--vocab-size", "400", "--from", "en@9"]),
    ("resume unknown version", ["train", "--resume", "en@9"]),
    ("resume a complete version", ["train", "--resume", "en@1"]),
    ("unknown tokenizer", ["encode", "nope", "hi"]),
    ("unknown version", ["encode", "en@9", "hi"]),
    ("unknown alias", ["encode", "en@nope", "hi"]),
    ("unknown corpus shown", ["corpus", "show", "nope"]),
    ("unknown generation shown", ["corpus", "show", "c@99"]),
    ("id out of range", ["decode", "en", "999999"]),
    ("id negative", ["decode", "en", "--", "-1"]),
    ("id absurd", ["decode", "en", str(2**70)]),
    ("id not a number", ["decode", "en", "abc"]),
    ("encode a missing file", ["encode", "en", "--file", "{in}/missing.txt"]),
    ("name with '@'", ["ingest", "a@b", "{in}/good.txt"]),
    ("blank name", ["train", " ", "--corpus", "c", "--vocab-size", "300"]),
    ("alias with '@'", ["alias", "en@1", "x@y"]),
    *[(f"import gpt2: {name}", ["import", "gpt2", "g", "--vocab", f"{{in}}/{name}.json", "--merges",
                                f"{{in}}/{name}.txt"])
      for name in ("truncated", "id_negative", "id_out_of_range", "id_twice", "id_text", "unknown_token",
                   "three_parts", "not_json", "not_a_map", "key_twice")],
    ("import gpt2: nested too deeply", ["import", "gpt2", "g", "--vocab", "{in}/deep.json", "--merges",
                                        "{in}/truncated.txt"]),
    ("import hf: nested too deeply", ["import", "hf", "h", "{in}/deep.json"]),
    ("import hf: a model nested too deeply", ["import", "hf", "h", "{in}/deep_hf.json"]),
    ("name over 200 characters", ["ingest", "n" * 201, "{in}/good.txt"]),
    ("tokenizer name over 200 characters", ["train", "t" * 201, "--corpus", "c", "--vocab-size", "300"]),
    ("alias over 200 characters", ["alias", "en@1", "a" * 201]),
    ("a NUL in a version name", ["encode", "e\0n", "hi"]),
    ("a NUL in an alias", ["encode", "en@p\0rod", "hi"]),
    ("a NUL in a corpus name", ["corpus", "show", "c\0"]),
    ("import gpt2: missing file", ["import", "gpt2", "g", "--vocab", "{in}/missing.json", "--merges",
                                   "{in}/truncated.txt"]),
    *[(f"import hf: {case}", ["import", "hf", "h", f"{{in}}/hf-{case.replace(' ', '_')}.json"])
      for case in ("truncated", "unknown model type", "merge naming an unknown token", "bad special token",
                   "post-processor", "prefix space")],
    ("import hf: missing file", ["import", "hf", "h", "{in}/missing.json"]),
    *[(f"import tiktoken: {name}", ["import", "tiktoken", "t", f"{{in}}/tt-{name}.tiktoken", "--pattern", "gpt2"])
      for name in ("duplicate_ranks", "duplicate_token", "not_base64", "missing_byte", "unmade")],
    ("import tiktoken: special token on a rank", ["import", "tiktoken", "t", "{in}/tt-ok.tiktoken", "--pattern",
                                                  "gpt2", "--special-token", "<s>=256"]),
    ("import tiktoken: special token without id", ["import", "tiktoken", "t", "{in}/tt-ok.tiktoken", "--pattern",
                                                   "gpt2", "--special-token", "<s>"]),
    ("import tiktoken: bad pattern", ["import", "tiktoken", "t", "{in}/tt-ok.tiktoken", "--pattern", "(x"]),
    ("export into a missing folder", ["export", "en", "--format", "hf", "--out", "{in}/no/such/t.json"]),
    ("export over an existing file", ["export", "en", "--format", "hf", "--out", "{in}/exists.json"]),
    ("export gpt2 into a missing folder", ["export", "en", "--format", "gpt2", "--out", "{in}/no/such"]),
]


@pytest.mark.parametrize("case,argv", CASES, ids=[c for c, _ in CASES])
def test_bad_input_is_one_error_line_and_changes_nothing(case, argv, matrix_db, inputs):
    before = dump(matrix_db)
    files_before = sorted(p.name for p in inputs.rglob("*"))
    result = run_cli(matrix_db, *(a.replace("{in}", str(inputs)) for a in argv))
    check_refused(result)
    assert dump(matrix_db) == before
    assert sorted(p.name for p in inputs.rglob("*")) == files_before  # no file or folder made
    assert (inputs / "exists.json").read_text() == "mine"


# -- databases that are not (usable) bpestore databases: SQLite files left as they were --------
def _newer(path: Path) -> None:
    import sqlite3

    import bpestore

    bpestore.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'ffff_from_the_future'")


def _truncated(path: Path) -> None:
    import bpestore

    with bpestore.open(path) as store:
        store.ingest("c", [path.parent / "t.txt"], workers=1)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 3])


DATABASES = {
    "text file named x.db": lambda p: p.write_text("just some notes\n" * 100),
    "truncated database": _truncated,
    "database from a newer bpestore": _newer,
    "foreign SQLite database": lambda p: __import__("sqlite3").connect(p).execute("CREATE TABLE t (x)").connection
    .commit(),
}


@pytest.mark.parametrize("case", list(DATABASES))
@pytest.mark.parametrize("argv", [["versions"], ["ingest", "c", "{tmp}/t.txt"], ["encode", "en", "hi"]],
                         ids=["versions", "ingest", "encode"])
def test_unusable_database_files_are_refused_and_left_alone(case, argv, tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    db = tmp_path / "x.db"
    DATABASES[case](db)
    before = _snapshot(tmp_path)
    result = run_cli(str(db), *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    check_refused(result)
    assert _snapshot(tmp_path) == before


def _snapshot(folder: Path) -> dict[str, object]:
    """Each file's content: a SQLite database's as SQL text (its WAL files folded in), others' bytes."""
    import sqlite3

    content: dict[str, object] = {}
    for path in sorted(folder.iterdir()):
        if path.name.endswith(("-wal", "-shm")):
            continue
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                content[path.name] = list(conn.iterdump())
        except sqlite3.DatabaseError:
            content[path.name] = path.read_bytes()
    return content


def test_a_database_in_a_missing_folder_is_refused(tmp_path):
    check_refused(run_cli(str(tmp_path / "no" / "such" / "x.db"), "versions"))
    assert not (tmp_path / "no").exists()


# -- a 50 MB line without a space: counted and encoded in bounded memory ----------------------
LONG_LINE_SCRIPT = """
import resource, sys, bpestore
path, db, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "w") as f:
    f.write("ab" * (size // 2) + "\\n")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
store = bpestore.open(db)
store.ingest("long", [path], workers=1)
(word, count), = [(w, n) for w, n in store.word_counts("long").items() if len(w) > 1]
assert len(word) == size and count == 1, (len(word), count)
after_ingest = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tok = store.tokenizer("gpt2")
tok.encode("warm up")
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = sum(1 for _ in tok.encode_iterable(open(path, encoding="utf-8")))
assert n > 0
print(base, after_ingest, loaded, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_a_long_line_without_spaces_is_counted_and_encoded_in_bounded_memory(tmp_path, gpt2_files):
    """One word of 50 MB (BPESTORE_SCALE=full; 2 MB otherwise): memory grows by a bounded
    multiple of the line, not with the square of it."""
    size = 50_000_000 if os.environ.get("BPESTORE_SCALE") == "full" else 2_000_000
    db = tmp_path / "long.db"
    import bpestore

    with bpestore.open(db) as store:
        store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    result = subprocess.run([sys.executable, "-c", LONG_LINE_SCRIPT, str(tmp_path / "long.txt"), str(db), str(size)],
                            capture_output=True, text=True, timeout=3600,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr[-2000:]
    base, after_ingest, loaded, after_encode = (int(x) * 1024 for x in result.stdout.split())
    # Counting holds the line as str and bytes a few times over: 40x is a ceiling a
    # quadratic blow-up crosses. The encoder's BPE of one word holds a Python object
    # per byte (about 50 bytes each): 80x.
    assert after_ingest - base < 40 * size, (after_ingest - base) / size
    assert after_encode - loaded < 80 * size, (after_encode - loaded) / size


# -- security: hostile names are data, never SQL ------------------------------------------------
HOSTILE = ["it's", 'say "hi"', "Robert'); DROP TABLE versions;--", "a b", "🦄 unicorn", "%s %(x)s ?",
           "back\\slash", "semi;colon", "-- comment", "Ω≈ç√", "*", "x' OR '1'='1"]


def test_hostile_names_are_stored_and_found_as_given(db_url, tmp_path):
    import bpestore

    (tmp_path / "t.txt").write_text(TEXT)
    with bpestore.open(db_url) as store:
        tables = set(dump(db_url))
        for i, name in enumerate(HOSTILE):
            store.ingest(name, [tmp_path / "t.txt"], workers=1, force=True)
            version = store.train(name, corpus=name, vocab_size=260 + i)
            store.set_alias(version.ref, name.replace("@", ""))
        assert set(dump(db_url)) == tables
        assert sorted(c.name for c in store.corpora()) == sorted(HOSTILE)
        assert sorted({v.name for v in store.versions()}) == sorted(HOSTILE)
        for i, name in enumerate(HOSTILE):
            assert store.version(f"{name}@1").vocab_size == 260 + i
            assert store.version(f"{name}@{name}").ref == f"{name}@1"
            assert store.tokenizer(name).decode(store.tokenizer(name).encode("the cat")) == "the cat"
    listed = run_cli(db_url, "versions", "--json")
    assert listed.exit_code == 0
    assert sorted({v["name"] for v in json.loads(listed.stdout)}) == sorted(HOSTILE)


def test_a_name_with_at_is_refused_everywhere(tmp_path):
    import bpestore
    from bpestore.errors import InvalidArgumentError

    (tmp_path / "t.txt").write_text(TEXT)
    with bpestore.open(":memory:") as store:
        store.ingest("c", [tmp_path / "t.txt"], workers=1)
        store.train("en", corpus="c", vocab_size=260)
        for call in (lambda: store.ingest("a@b", [tmp_path / "t.txt"]),
                     lambda: store.train("a@b", corpus="c", vocab_size=260),
                     lambda: store.set_alias("en@1", "x@y")):
            with pytest.raises(InvalidArgumentError, match="'@'"):
                call()


FORBIDDEN = {("pickle", "load"), ("pickle", "loads"), ("marshal", "load"), ("marshal", "loads"),
             ("yaml", "load"), ("shelve", "open"), ("dill", "load"), ("dill", "loads")}


def test_nothing_read_is_unpickled_or_evaluated():
    """No eval/exec, and no deserializer that runs code, anywhere in the package."""
    package = Path(__file__).resolve().parents[1] / "bpestore"
    found = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in ("eval", "exec", "compile", "__import__"):
                found.append(f"{path.name}:{node.lineno} {f.id}")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in FORBIDDEN:
                found.append(f"{path.name}:{node.lineno} {f.value.id}.{f.attr}")
    assert found == []



def test_a_rank_past_the_database_integers_is_an_empty_page(matrix_db):
    for start in (2**31 - 1, 2**31, 2**63, 2**70):
        result = run_cli(matrix_db, "merges", "en", "--start", str(start), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == []
    result = run_cli(matrix_db, "merges", "en", "--limit", str(2**70), "--json")
    assert result.exit_code == 0 and result.stdout == run_cli(matrix_db, "merges", "en", "--json").stdout


def test_counts_past_the_database_integers_are_refused(matrix_db, inputs, tmp_path):
    """Two counts files whose words add up past 2**63 - 1: one Error: line, nothing written."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    from bpestore import counts as counts_module

    path = tmp_path / "big.parquet"
    counts_module.count_files([inputs / "good.txt"], path)
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"bpestore.counts"])
    words = table.column("word").to_pylist()
    big = [2**62 // len(words) + 1] * len(words)  # over 2**62 in all: twice is past 2**63 - 1
    meta.pop("check")
    meta.update(n_words=sum(big), digest=counts_module.rows_digest(dict(zip(words, big))))
    meta["sources"][0]["n_words"] = sum(big)
    meta["check"] = counts_module._metadata_check(meta)
    table = pa.table({"word": pa.array(words, pa.binary()), "count": pa.array(big, pa.int64())})
    pq.write_table(table.replace_schema_metadata({b"bpestore.counts": json.dumps(meta)}), path)
    assert run_cli(matrix_db, "ingest", "huge", "--counts", str(path)).exit_code == 0
    before = dump(matrix_db)
    for argv in (["ingest", "huge", "--counts", str(path), "--force"],
                 ["ingest", "huger", "--counts", str(path), str(path), "--force"]):
        result = run_cli(matrix_db, *argv)
        check_refused(result)
        assert "more than the database's integers hold" in result.stderr
        assert dump(matrix_db) == before


def test_usage_mistakes_exit_2_and_failures_exit_1(matrix_db, inputs):
    """The rule the README states: 2 for a command line that is wrong before anything
    runs (an option's value, a missing argument), 1 for what fails while running."""
    usage = [["train", "x", "--corpus", "c", "--vocab-size", "0"], ["encode", "en", "--workers", "0", "hi"],
             ["decode", "en", "abc"], ["encode", "en", "--file", str(inputs)], ["train", "x"]]
    failures = [["train", "x", "--corpus", "nope", "--vocab-size", "300"], ["encode", "nope", "hi"],
                ["train", "x", "--corpus", "c", "--vocab-size", "100"], ["ingest", "c", str(inputs / "nul.txt")]]
    for argv, status in [*((a, 2) for a in usage), *((a, 1) for a in failures)]:
        result = run_cli(matrix_db, *argv)
        check_refused(result)
        assert result.exit_code == status, (argv, result.exit_code, result.stderr)
