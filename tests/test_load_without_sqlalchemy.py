"""Loading a version through sqlite3 (store/drivers.py), without SQLAlchemy:
the same tokenizer as the SQLAlchemy path, the same errors, a fall-back wherever
the path does not apply, damaged rows refused, and a fresh process that encodes
on SQLite imports neither SQLAlchemy nor Alembic."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

import bpestore
from bpestore import DamagedDataError, NotFoundError, Store, Tokenizer
from bpestore.store.db import HEAD
from bpestore.store.drivers import SqliteDriver, sqlite_uri
from bpestore.store.loading import load

from .conftest import corpus_path, read_corpus, stop_at
from .test_upgrade_to_generations import DATA
from .test_version_snapshot import byte_vocab

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="module")
def _tiktoken_gate(tiktoken_gate):
    """These tests are about the gate to tiktoken's core (the compiled core is off)."""


@pytest.fixture(scope="module")
def gpt2_db(tmp_path_factory, gpt2_files) -> Path:
    """A SQLite store holding GPT-2 (gpt2@1) and a tiny version (tiny@1, tiny@2, alias tiny@prod)."""
    db = tmp_path_factory.mktemp("fast") / "gpt2.db"
    with bpestore.open(db) as store:
        store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
        store.import_vocab("tiny", byte_vocab(b"ab"), [(b"a", b"b")])
        store.import_vocab("tiny", byte_vocab(b"ab", b"abc"), [(b"a", b"b"), (b"ab", b"c")])
        store.set_alias("tiny@1", "prod")
    return db


@pytest.fixture
def copy(gpt2_db, tmp_path) -> Path:
    """A copy of gpt2_db of the test's own."""
    path = tmp_path / "copy.db"
    shutil.copy(gpt2_db, path)
    return path


def sqlalchemy_only(store: Store) -> None:
    """Switch the store's sqlite3 driver off: SQLAlchemy reads."""
    store.driver = None


def through_sqlalchemy(store: Store, ref: str) -> Tokenizer:
    """The tokenizer read the SQLAlchemy way (sqlite3's path switched off)."""
    Store.tokenizer_cache.clear()
    fast = store.driver
    sqlalchemy_only(store)
    try:
        return store.tokenizer(ref)
    finally:
        store.driver = fast
        Store.tokenizer_cache.clear()


def at_head(uri: str) -> bool:
    return SqliteDriver(uri).at_head()


def through_sqlite3(store: Store, ref: str) -> Tokenizer | None:
    """The tokenizer read by sqlite3 alone; None where that path does not apply."""
    Store.tokenizer_cache.clear()
    driver = store.driver
    if not isinstance(driver, SqliteDriver) or not at_head(driver.uri):
        return None

    @contextmanager
    def reading():
        with driver.transaction() as tx:
            assert tx is not None, "sqlite3's driver fell back"
            yield tx
    return load(reading, store.url, ref, Store.tokenizer_cache)


def reads_through_sqlite3(store: Store) -> bool:
    return isinstance(store.driver, SqliteDriver)


def assert_same(a: Tokenizer, b: Tokenizer) -> None:
    assert a.name == b.name and a.spec == b.spec
    assert a.vocab == b.vocab and a.merges == b.merges and a.special_tokens == b.special_tokens
    assert a.facts == b.facts and a.backend == b.backend


# -- the same tokenizer ---------------------------------------------------------------
def test_gpt2_through_sqlite3_is_the_sqlalchemy_tokenizer_and_tiktoken(gpt2_db, tiktoken_gpt2):
    with bpestore.open(gpt2_db) as store:
        assert reads_through_sqlite3(store) and store._engine is None  # no engine made to open it
        fast = through_sqlite3(store, "gpt2")
        assert fast is not None
        assert store._engine is None  # ... nor to load it
        slow = through_sqlalchemy(store, "gpt2")
        assert_same(fast, slow)
        assert fast.backend == "tiktoken"
        assert store.version("gpt2").fingerprint == store.version("gpt2@1").fingerprint
        for name in ("english_medium.txt.xz", "code_python_5M.txt.xz", "german_1M.txt", "russian_1M.txt",
                     "japanese_1M.txt", "chinese_1M.txt", "hindi_1M.txt"):
            sample = read_corpus(name)[:150_000]
            expected = tiktoken_gpt2.encode_ordinary(sample)
            assert fast.encode_ordinary(sample) == expected, name
            assert slow.encode_ordinary(sample) == expected, name
            assert fast.decode(expected) == sample, name
        short = "Hello world, short text"  # the pure path, its tables built when first needed
        assert fast.encode(short) == slow.encode(short) == tiktoken_gpt2.encode(short)
        assert fast.encode("hi" + EOT, allowed_special="all") == tiktoken_gpt2.encode("hi" + EOT,
                                                                                      allowed_special="all")


def test_refs_resolve_alike_on_both_paths(gpt2_db):
    """NAME (newest complete), NAME@N and NAME@ALIAS: the same version either way."""
    with bpestore.open(gpt2_db) as store:
        for ref, expected in (("tiny", "tiny@2"), ("tiny@1", "tiny@1"), ("tiny@2", "tiny@2"),
                              ("tiny@prod", "tiny@1"), ("gpt2", "gpt2@1")):
            fast = through_sqlite3(store, ref)
            assert fast is not None and fast.name == expected, ref
            assert_same(fast, through_sqlalchemy(store, ref))
        assert store.tokenizer("tiny@prod").encode("abc") == [256, 99]
        assert store.tokenizer("tiny").encode("abc") == [257]


@pytest.mark.parametrize("ref, message", [
    ("nope", "no tokenizer named 'nope' (known: gpt2, tiny)"),
    ("tiny@3", "tiny has no version 3 (versions: tiny@1, tiny@2)"),
    ("tiny@dev", "tiny has no version or alias 'dev' (versions: tiny@1, tiny@2)"),
    ("tiny@", "after '@' comes a version number or an alias"),
])
def test_a_bad_ref_is_the_same_error_on_both_paths(gpt2_db, ref, message):
    with bpestore.open(gpt2_db) as store:
        with pytest.raises(bpestore.BpestoreError, match=message.replace("(", r"\(").replace(")", r"\)")):
            through_sqlite3(store, ref)
        with pytest.raises(bpestore.BpestoreError, match=message.replace("(", r"\(").replace(")", r"\)")):
            through_sqlalchemy(store, ref)
        assert store._engine is not None  # (the second made one)


def test_token_lookup_through_sqlite3(gpt2_db):
    with bpestore.open(gpt2_db) as store:
        fast = store.token("gpt2", " the")
        assert store._engine is None
        sqlalchemy_only(store)
        assert store.token("gpt2", " the") == fast
    assert fast["id"] == 262


def test_versions_list_alike_on_both_paths(tmp_path):
    """versions and version read through sqlite3 give what SQLAlchemy's path gives:
    a trained version with its corpus generation, an extension with its parent,
    aliases, an import, and a version still training."""
    db = tmp_path / "v.db"
    with bpestore.open(db) as store:
        store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
        store.train("en", corpus="shakes", vocab_size=300)
        store.train("en", corpus="shakes", vocab_size=320, parent="en@1")
        store.set_alias("en@1", "prod")
        store.set_alias("en@2", "dev")
        store.import_vocab("tiny", byte_vocab(b"ab"), [(b"a", b"b")])
        with pytest.raises(KeyboardInterrupt):
            store.train("en", corpus="shakes", vocab_size=500, checkpoint_every=10, progress=stop_at(30))
    refs = ("en", "en@prod", "en@3", "tiny")
    with bpestore.open(db) as store:
        fast = (store.versions(), store.versions("en"), [store.version(ref) for ref in refs])
        assert store._engine is None  # sqlite3 read them all
        sqlalchemy_only(store)
        slow = (store.versions(), store.versions("en"), [store.version(ref) for ref in refs])
        with pytest.raises(NotFoundError, match="no tokenizer named 'nope'"):
            store.versions("nope")
    assert fast == slow
    everything = {v.ref: v for v in fast[0]}
    assert list(everything) == ["en@1", "en@2", "en@3", "tiny@1"]
    assert everything["en@2"].parent == "en@1" and everything["en@1"].aliases == ("prod",)
    assert everything["en@2"].aliases == ("dev",) and everything["en@1"].corpus_ref == "shakes@1"
    assert everything["en@3"].status == "training" and 0 < everything["en@3"].n_merges < 500 - 257
    assert everything["tiny@1"].vocab_size == 257 and everything["tiny@1"].corpus is None
    assert all(v.created_at.tzinfo is not None and v.created_at <= v.updated_at for v in fast[0])
    with bpestore.open(db) as store, pytest.raises(NotFoundError, match="no tokenizer named 'nope'"):
        store.versions("nope")


# -- where the path does not apply, SQLAlchemy's does; a version still training is read from its rows --
def test_an_older_schema_goes_the_sqlalchemy_way_and_is_upgraded(tmp_path):
    old = tmp_path / "old.db"
    shutil.copy(DATA / "store_0002.db", old)
    uri = sqlite_uri(f"sqlite:///{old}")
    assert uri is not None and not at_head(uri)
    with pytest.raises(bpestore.ConflictError, match="read-only and at schema revision"):
        bpestore.open(old, read_only=True)
    with bpestore.open(old) as store:  # upgraded on open, as before
        assert store._engine is not None and store.schema_revision() == HEAD
        tok = through_sqlalchemy(store, "en@1")
    assert at_head(uri)
    with bpestore.open(old) as store:
        assert reads_through_sqlite3(store)
        fast = through_sqlite3(store, "en@1")
        assert fast is not None
        assert_same(fast, tok)


def test_the_revision_is_checked_on_every_read(copy):
    with bpestore.open(copy) as store:
        assert through_sqlite3(store, "tiny") is not None
        with sqlite3.connect(copy) as conn:
            conn.execute("UPDATE alembic_version SET version_num = '0003'")
        assert through_sqlite3(store, "tiny") is None  # not HEAD: not this path
        assert store.tokenizer("tiny").encode("abc") == [257]


def test_a_version_still_training_is_read_from_its_rows_on_both_paths(tmp_path):
    db = tmp_path / "t.db"
    with bpestore.open(db) as store:
        store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
        with pytest.raises(KeyboardInterrupt):
            store.train("en", corpus="shakes", vocab_size=500, checkpoint_every=10, progress=stop_at(60))
    with bpestore.open(db) as store:
        assert reads_through_sqlite3(store)
        tok = through_sqlite3(store, "en@1")  # from its rows
        assert tok is not None and store._engine is None
        assert len(tok.merges) == 60 and tok.engine.known_facts is None
        assert_same(tok, through_sqlalchemy(store, "en@1"))
        with pytest.raises(NotFoundError, match="no complete version yet"):
            through_sqlite3(store, "en")


def test_a_missing_facts_row_is_read_from_its_rows(copy):
    with bpestore.open(copy) as store:
        expected = through_sqlalchemy(store, "tiny@2")
        with sqlite3.connect(copy) as conn:
            conn.execute("DELETE FROM version_facts WHERE version_id = (SELECT versions.id FROM versions "
                         "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
                         "WHERE tokenizers.name = 'tiny' AND number = 2)")
        fast = through_sqlite3(store, "tiny@2")  # from its rows
        assert fast is not None and fast.vocab == expected.vocab and fast.merges == expected.merges
        Store.tokenizer_cache.clear()
        tok = store.tokenizer("tiny@2")  # from its rows
        assert tok.vocab == expected.vocab and tok.merges == expected.merges
        assert tok.encode("abc") == [257]
        assert store.token("tiny@2", "abc")["id"] == 257


def test_a_damaged_facts_row_is_refused(copy):
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE version_facts SET fast_problem = 'tampered'")
    with bpestore.open(copy) as store:
        Store.tokenizer_cache.clear()
        with pytest.raises(DamagedDataError, match="damaged"):
            store.tokenizer("gpt2")
        with pytest.raises(DamagedDataError, match="damaged"):
            store.token("gpt2", " the")
        assert store._engine is None  # refused by the sqlite3 path itself


def test_other_databases_go_the_sqlalchemy_way(db_url, gpt2_db):
    assert sqlite_uri("sqlite://") is None
    assert sqlite_uri("postgresql+psycopg://u@h/db") is None
    assert sqlite_uri("sqlite:///x.db?mode=ro") is None
    with bpestore.open(db_url) as store:
        store.import_vocab("tiny", byte_vocab(b"ab"), [(b"a", b"b")])
        assert (not reads_through_sqlite3(store)) == db_url.startswith("postgresql")
        Store.tokenizer_cache.clear()
        assert store.tokenizer("tiny").encode("ab") == [256]
        assert store.token("tiny", "ab")["id"] == 256


def test_a_read_only_store_reads_through_sqlite3(gpt2_db):
    with bpestore.open(gpt2_db, read_only=True) as store:
        assert isinstance(store.driver, SqliteDriver) and "mode=ro" in store.driver.uri
        assert through_sqlite3(store, "tiny") is not None
        with pytest.raises(bpestore.ReadOnlyError):
            store.set_alias("tiny@2", "dev")


def test_writes_after_a_fast_load_go_through_the_engine(copy):
    with bpestore.open(copy) as store:
        store.tokenizer("tiny")
        assert store._engine is None
        store.set_alias("tiny@2", "dev")  # the engine, made now
        assert store.tokenizer("tiny@dev").name == "tiny@2"
        assert [v.ref for v in store.versions("tiny")] == ["tiny@1", "tiny@2"]


# -- a fresh process ----------------------------------------------------------------------
def modules_after(code: str, *args: str) -> tuple[set[str], str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout
    lines = out.splitlines()
    return set(json.loads(lines[-1])), "\n".join(lines[:-1])


HEAVY = ("sqlalchemy", "alembic")


def heavy(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m.split(".")[0] in HEAVY}


def test_import_and_encode_on_sqlite_import_no_sqlalchemy(gpt2_db):
    loaded, _ = modules_after("import bpestore")
    assert not heavy(loaded)
    loaded, out = modules_after("import bpestore\nprint(bpestore.open(sys.argv[1]).tokenizer('gpt2')"
                                ".encode_ordinary('Hello world' * 3000)[:3])", str(gpt2_db))
    assert not heavy(loaded) and out == "[15496, 995, 15496]"
    cli = ("from bpestore.cli import main\nsys.argv[1:] = ['--db', sys.argv[1], *sys.argv[2:]]\n"
           "try: main()\nexcept SystemExit: pass")
    for args, expected in ((["encode", "gpt2", "short text"], "19509 2420"),
                           (["decode", "gpt2", "19509", "2420"], "short text"),
                           (["token", "gpt2", " the"], "262\t' the'  rank 6, pair count 0\n  256\t' t'  rank 0"),
                           (["encode", "tiny@prod", "abc", "--tokens"], "256\t'ab'\n99\t'c'"),
                           (["versions"], "gpt2@1  complete  50,257 tokens"),
                           (["show", "tiny@prod"], "tiny@1  complete")):
        loaded, out = modules_after(cli, str(gpt2_db), *args)
        assert not heavy(loaded), (args, heavy(loaded))
        assert out.startswith(expected), (args, out)
