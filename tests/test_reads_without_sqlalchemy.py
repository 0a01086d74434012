"""The read commands and an ingest through sqlite3 (store/drivers.py),
and the reads and writes through psycopg alone on PostgreSQL (store/drivers.py):
the same answers and command output as through SQLAlchemy, exactly the rows expected;
and a fresh process that runs them imports neither SQLAlchemy nor Alembic."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

import bpestore
from bpestore import TokenizerSpec
from bpestore.cli import cli
from bpestore.store import count_tables, drivers

from .conftest import pg_schema
from .test_load_without_sqlalchemy import heavy, modules_after

TEXT = "the cat sat on the mat. the dog sat on the log; a cat, a dog and the fox.\n" * 40
MORE = ["a new line with the cat\n", "zebra quagga the the\n", "the fox again, and the cat\n"]


def build(db: str, folder: Path) -> None:
    """Three generations of corpus ``web``, en@1 pinning the first and en@2 the second (so
    history rows are kept), alias en@prod, and a second corpus ``other``."""
    folder.mkdir(exist_ok=True)
    paths = []
    for i, text in enumerate([TEXT, *MORE]):
        path = folder / f"s{i}.txt"
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    with bpestore.open(db) as store:
        store.ingest("web", [paths[0]], workers=1)
        store.train("en", corpus="web", vocab_size=270)
        store.ingest("web", [paths[1]], workers=1)
        store.train("en", corpus="web", vocab_size=280)
        store.ingest("web", paths[2:], workers=1)
        store.set_alias("en@1", "prod")
        store.ingest("other", [paths[3]], workers=1, special_tokens=["<|x|>"])


def answers(store: bpestore.Store) -> list:
    return [store.corpora(), store.corpus("web"), store.corpus("web@1"), store.corpus("web@2"),
            store.corpus_log("web"), store.corpus_sources("web@2"), store.corpus_sources("other"),
            store.top_words("web", 7), store.top_words("web@1", 5), store.word_counts("web@2"),
            store.corpus_diff("web@1", "web@3", limit=4), store.vocab("en", limit=9),
            store.vocab("en@1", grep="^ ?[cd]", prefix=" "), store.vocab("en", longest=3),
            store.merges("en@prod", start=3, limit=5), store.merges("en"), store.diff("en@1", "en@2")]


def test_reads_through_sqlite3_answer_as_through_sqlalchemy(tmp_path):
    db = str(tmp_path / "r.db")
    build(db, tmp_path / "src")
    with bpestore.open(db) as store:
        assert isinstance(store.driver, drivers.SqliteDriver)
        fast = answers(store)
        assert store._engine is None  # sqlite3 answered every one
        store.driver = None
        assert answers(store) == fast
    assert [c.name for c in fast[0]] == ["other", "web"] and fast[1].generation == 3
    assert fast[2].pinned_by == ("en@1",) and fast[4][1].pinned_by == ("en@2",) and not fast[4][2].pinned_by
    assert b" line" in fast[9] and b"zebra" not in fast[9] and b"zebra" in store_counts(db)


def store_counts(db: str) -> dict[bytes, int]:
    with bpestore.open(db) as store:
        return store.word_counts("web")


def masked(out: str) -> str:
    """Command output with its timestamps taken out (two stores made at other moments)."""
    return re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?(\+00:00)?", "<time>", out)


COMMANDS = [["corpora"], ["corpora", "--json"], ["corpus", "show", "web"], ["corpus", "show", "web@1", "--json"],
            ["corpus", "log", "web"], ["corpus", "diff", "web@1", "web@3"], ["corpus", "show", "nope"],
            ["corpus", "show", "web@9"], ["vocab", "en", "--limit", "12"], ["vocab", "en", "--grep", "(", "--json"],
            ["vocab", "en@prod", "--prefix", " c", "--json"], ["merges", "en", "--limit", "6"],
            ["merges", "en", "--start", "9", "--json"], ["diff", "en@1", "en@2"], ["vocab", "nope"]]


def outputs(db: str) -> list[str]:
    runner = CliRunner()
    results = [runner.invoke(cli, ["--db", db, *args]) for args in COMMANDS]
    return [f"{r.exit_code}\n{r.output}" for r in results]


def test_read_commands_print_the_same_on_postgresql(tmp_path):
    db = str(tmp_path / "r.db")
    build(db, tmp_path / "src")
    on_sqlite = outputs(db)
    assert on_sqlite[6].startswith("1\nError: no corpus named 'nope' (corpora: other, web)")
    with pg_schema() as url:
        build(url, tmp_path / "src")
        on_pg = outputs(url)
    assert [masked(out) for out in on_pg] == [masked(out) for out in on_sqlite]


def test_reads_through_psycopg_answer_as_through_sqlalchemy(tmp_path):
    with pg_schema() as url:
        build(url, tmp_path / "src")
        with bpestore.open(url) as store:
            assert isinstance(store.driver, drivers.PsycopgDriver)
            fast = answers(store) + [store.versions(), store.tokenizer("en@prod").encode("the cat")]
            assert store._engine is None  # psycopg answered every one
            bpestore.Store.tokenizer_cache.clear()
            store.driver.close()
            store.driver = None
            assert answers(store) + [store.versions(), store.tokenizer("en@prod").encode("the cat")] == fast
        script = ("from bpestore.cli import main\nsys.argv[1:] = ['--db', sys.argv[1], *sys.argv[2:]]\n"
                  "try: main()\nexcept SystemExit: pass")
        for args in (["vocab", "en", "--limit", "2"], ["corpus", "show", "web"], ["versions"], ["encode", "en", "hi"]):
            loaded, out = modules_after(script, url, *args)
            assert not heavy(loaded) and out and not out.startswith("Error"), (args, heavy(loaded), out)


def test_psycopg_takes_named_parameters_as_its_own():
    assert drivers.pyformat("SELECT x::text, '5%' FROM t WHERE a = :a AND b = :b_2") == \
        "SELECT x::text, '5%%' FROM t WHERE a = %(a)s AND b = %(b_2)s"
    assert drivers.conninfo("postgresql+psycopg://u:p@h:5/db?options=-csearch_path%3Ds") == \
        "postgresql://u:p@h:5/db?options=-csearch_path%3Ds"
    assert drivers.conninfo("postgresql://u@h/db") is None  # another driver's URL: the engine reads


def test_named_parameters_leave_string_literals_and_quoted_names_alone():
    sql = """SELECT ':word', "a:b", 'it''s :x' FROM t WHERE w = :word AND n::int = :n"""
    assert drivers.pyformat(sql) == \
        """SELECT ':word', "a:b", 'it''s :x' FROM t WHERE w = %(word)s AND n::int = %(n)s"""


def test_the_read_commands_and_a_small_ingest_import_no_sqlalchemy(tmp_path):
    db = str(tmp_path / "r.db")
    build(db, tmp_path / "src")
    small = tmp_path / "small.txt"
    small.write_text("a small new file\n", encoding="utf-8")
    short = tmp_path / "short.txt"
    short.write_text("the cat sat\n", encoding="utf-8")
    script = ("from bpestore.cli import main\nsys.argv[1:] = ['--db', sys.argv[1], *sys.argv[2:]]\n"
           "try: main()\nexcept SystemExit: pass")
    for args, expected in ((["vocab", "en", "--limit", "2"], "0\t'\\x00'"), (["merges", "en", "--limit", "1"], "0\t"),
                           (["corpora"], "other\t1 sources"), (["corpus", "show", "web"], "web: 4 sources"),
                           (["corpus", "diff", "web@1", "web@2"], "web@1 -> web@2"),
                           (["diff", "en@1", "en@2"], "tokens: 270 -> 280"),
                           (["stats", "en", "--file", str(short)], f"{short}: 12 bytes"),
                           (["ingest", "web", str(small)], f"{small}: 17 bytes, 5 words")):
        loaded, out = modules_after(script, db, *args)
        assert not heavy(loaded), (args, heavy(loaded))
        assert out.startswith(expected), (args, out)
    with bpestore.open(db) as store:
        assert store.corpus("web").n_sources == 5 and store.word_counts("web")[b" small"] == 1


TABLES = {"corpora": "name, spec, id", "ingests": "corpus_id, source, sha256, size_bytes, n_words, n_distinct, "
          "generation", "generations": "corpus_id, number, n_sources, size_bytes, n_words, n_distinct, digest",
          "word_counts": "corpus_id, word, count, changed_in",
          "word_count_history": "corpus_id, word, count, valid_from, valid_to"}


def rows(db: str) -> dict[str, list]:
    """Every row a corpus writes, timestamps left out, in a fixed order."""
    if "://" in db:
        from sqlalchemy import create_engine, text

        engine = create_engine(db)
        with engine.connect() as conn:
            found = {table: sorted(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                                   for row in conn.execute(text(f"SELECT {columns} FROM {table}")))
                     for table, columns in TABLES.items()}
        engine.dispose()
        return found
    with sqlite3.connect(db) as conn:
        return {table: sorted(conn.execute(f"SELECT {columns} FROM {table}").fetchall())
                for table, columns in TABLES.items()}


def expected_rows(folder: Path, found_ids: list[tuple]) -> dict[str, list]:
    """The rows ``build`` should write, from the regex pre-tokenizer's counts and the rules
    of generations (a row a pinned generation reads is copied before it changes), made
    without the store's code; the corpora's ids (any two) as ``found_ids`` holds them."""
    from .test_ingest import GPT2, reference_counts

    specs = {"web": TokenizerSpec().to_json(), "other": TokenizerSpec(special_tokens=("<|x|>",)).to_json()}
    steps = [("web", [0], []), ("web", [1], [1]), ("web", [2, 3], [1, 2]), ("other", [3], [])]
    ids = {name: corpus_id for name, _, corpus_id in found_ids}
    found: dict[str, list] = {table: [] for table in TABLES}
    state: dict[str, dict] = {}
    for name, files, pins in steps:
        cid = ids[name]
        corpus = state.setdefault(name, {"words": {}, "gen": 0, "shas": [], "sources": 0, "size": 0, "n": 0})
        corpus["gen"] += 1
        number, batch = corpus["gen"], Counter()
        for i in files:
            data = (folder / f"s{i}.txt").read_bytes()
            counts = reference_counts(data.decode(), GPT2)
            batch += counts
            sha = hashlib.sha256(data).hexdigest()
            found["ingests"].append((cid, str(folder / f"s{i}.txt"), sha, len(data), counts.total(), len(counts),
                                     number))
            corpus["shas"].append(sha)
            corpus["sources"], corpus["size"], corpus["n"] = corpus["sources"] + 1, corpus["size"] + len(data), \
                corpus["n"] + counts.total()
        for word, count in batch.items():
            old, changed_in = corpus["words"].get(word, (0, None))
            if changed_in is not None and any(pin >= changed_in for pin in pins):
                found["word_count_history"].append((cid, word, old, changed_in, number))
            corpus["words"][word] = (old + count, number)
        digest = hashlib.sha256(specs[name].encode() + "".join(sorted(corpus["shas"])).encode()).hexdigest()
        found["generations"].append((cid, number, corpus["sources"], corpus["size"], corpus["n"],
                                     len(corpus["words"]), digest))
    found["corpora"] = [(name, spec, ids[name]) for name, spec in specs.items()]
    found["word_counts"] = [(ids[name], word, count, changed_in)
                            for name, corpus in state.items() for word, (count, changed_in) in corpus["words"].items()]
    return {table: sorted(rows) for table, rows in found.items()}


@pytest.fixture(params=["driver", "engine"])
def opener(request, monkeypatch):
    """Every ingest's transaction through the driver alone, or through the engine."""
    if request.param == "driver":
        monkeypatch.setattr(drivers.Transaction, "over", None)  # the engine's transactions never write a batch
    else:
        real = drivers.Driver.transaction

        @contextmanager
        def reads_only(self, *, write=False):  # the driver's writes do not apply: the engine's do
            if write:
                yield None
                return
            with real(self, write=write) as tx:
                yield tx
        monkeypatch.setattr(drivers.Driver, "transaction", reads_only)
    return request.param


# The history of the pinned rows: the changed words' rows looked up (0), or the corpus' rows scanned.
LOOKUPS = pytest.mark.parametrize("lookups", [0, 10**9])


@LOOKUPS
def test_an_ingest_writes_exactly_its_rows(tmp_path, opener, lookups, monkeypatch):
    monkeypatch.setattr(count_tables, "LOOKUPS", lookups)
    db = str(tmp_path / "r.db")
    build(db, tmp_path / "src")
    assert rows(db) == expected_rows(tmp_path / "src", rows(db)["corpora"])
    assert rows(db)["word_count_history"]  # the pinned generations' rows were kept
    with bpestore.open(db) as store:  # a source in the corpus already: skipped, nothing written
        before = rows(db)
        again = store.ingest("web", [str(tmp_path / "src" / "s1.txt")], workers=1)
        assert again[0].skipped and rows(db) == before
        with pytest.raises(bpestore.InvalidArgumentError, match="ingested with another special_tokens"):
            store.ingest("other", [str(tmp_path / "src" / "s0.txt")], workers=1, special_tokens=["<|y|>"])
    with bpestore.open(db, read_only=True) as store, pytest.raises(bpestore.ReadOnlyError):
        store.ingest("web", [str(tmp_path / "src" / "s0.txt")], workers=1, force=True)


@LOOKUPS
def test_an_ingest_on_postgresql_writes_exactly_its_rows(tmp_path, opener, lookups, monkeypatch):
    monkeypatch.setattr(count_tables, "LOOKUPS", lookups)
    with pg_schema() as url:
        build(url, tmp_path / "src")
        assert rows(url) == expected_rows(tmp_path / "src", rows(url)["corpora"]) and rows(url)["word_count_history"]
        with bpestore.open(url, read_only=True) as store, pytest.raises(bpestore.ReadOnlyError):
            store.ingest("web", [str(tmp_path / "src" / "s0.txt")], workers=1, force=True)
        if opener == "engine" or lookups:
            return
        new = tmp_path / "new.txt"
        new.write_text("through psycopg alone\n", encoding="utf-8")
        loaded, out = modules_after("import bpestore\nprint(bpestore.open(sys.argv[1]).ingest('web', [sys.argv[2]], "
                                    "workers=1)[0].n_words)", url, str(new))
        assert not heavy(loaded) and out == "4"


def test_a_small_ingest_waits_for_the_write_lock_and_says_so(tmp_path, monkeypatch):
    db = str(tmp_path / "r.db")
    build(db, tmp_path / "src")
    new = tmp_path / "new.txt"
    new.write_text("locked out\n", encoding="utf-8")
    monkeypatch.setenv("BPESTORE_LOCK_WAIT_SECONDS", "0.2")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        before = rows(db)
        with bpestore.open(db) as store, pytest.raises(bpestore.DatabaseError, match="write lock"):
            store.ingest("web", [str(new)], workers=1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert rows(db) == before
    result = subprocess.run([sys.executable, "-m", "bpestore", "--db", db, "ingest", "web", str(new), "--quiet"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_a_small_ingest_that_fails_half_way_writes_nothing(tmp_path, monkeypatch):
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(f"source {i}", encoding="utf-8")
    db = str(tmp_path / "f.db")
    with bpestore.open(db) as store:
        store.ingest("c", [paths[0]], workers=1)
        before = rows(db)
        # The sources' rows are in, the upsert fails: the transaction goes whole.
        monkeypatch.setattr(count_tables, "UPSERT", "INSERT INTO no_such_table (a, b, c, d) VALUES {rows}")
        with pytest.raises(bpestore.DatabaseError, match="no such table"):
            store.ingest("c", paths[1:], workers=1)
        with pytest.raises(bpestore.DatabaseError, match="no such table"):
            store.ingest("new", paths[1:], workers=1)
        assert rows(db) == before
        monkeypatch.undo()
        assert [s.skipped for s in store.ingest("c", paths, workers=1)] == [True, False, False]
        assert store.word_counts("c") == {b"source": 3, b" 0": 1, b" 1": 1, b" 2": 1}


def test_an_error_after_which_sqlite_rolled_back_by_itself_is_the_error_raised(tmp_path):
    """A full disk makes SQLite roll the transaction back itself: the error said is the
    disk's, not a ROLLBACK's "no transaction is active"."""
    path = tmp_path / "s.db"
    bpestore.open(path).close()
    driver = drivers.SqliteDriver(drivers.sqlite_uri(f"sqlite:///{path}"))
    with pytest.raises(bpestore.DatabaseError, match="disk is full") as raised:
        with driver.transaction(write=True) as tx:
            assert tx is not None
            tx.raw.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL
            raise sqlite3.OperationalError("database or disk is full")
    assert "no transaction is active" not in str(raised.value)
