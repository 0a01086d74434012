"""Facts of complete versions (revision 0004): computed once when a version
completes, stored, equal to a fresh computation, checked on every load, and
what a fresh process starts from (without Alembic, the encoder or the trainer
for a query)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bpestore
from bpestore import DamagedDataError, Store, Tokenizer
from bpestore.store import snapshot
from bpestore.store.db import HEAD
from bpestore.store.version_tables import VersionReads
from bpestore.store.vocabulary import Vocabulary

from .conftest import byte_vocab, corpus_path, read_corpus, stop_at
from .test_upgrade_to_generations import DATA, copy_to_postgresql

EOT = "<|endoftext|>"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="module")
def _tiktoken_gate(tiktoken_gate):
    """These tests are about the gate to tiktoken's core (the compiled core is off)."""


def stored(store: Store, ref: str):
    """The version's row of version_facts, read and checked: (Vocabulary, EncoderFacts)."""
    with store.reading() as tx:
        reads = VersionReads(tx)
        found = reads.snapshot(reads.resolve(ref))
    assert found is not None, f"{ref} has no stored facts"
    return found


def rows(store: Store, ref: str) -> Vocabulary:
    with store.reading() as tx:
        reads = VersionReads(tx)
        return reads.rows_vocabulary(reads.resolve(ref))


def fresh_facts(vocab: Vocabulary, spec) -> str | None:
    """The check computed again, by a tokenizer built from the version's rows."""
    return Tokenizer(vocab.tokens, vocab.pairs, vocab.special_ids(), spec=spec).facts.rank_rule_problem


def assert_facts_match_rows(store: Store, ref: str) -> str | None:
    vocab, known = stored(store, ref)
    from_rows = rows(store, ref)
    assert vocab.tokens == from_rows.tokens and vocab.kinds == from_rows.kinds
    assert vocab.merges == from_rows.merges
    assert known.rank_rule_problem == fresh_facts(from_rows, store.version(ref).spec)
    return known.rank_rule_problem


def reload(store: Store, ref: str) -> Tokenizer:
    Store.tokenizer_cache.clear()
    return store.tokenizer(ref)


# -- computed once, stored, equal to a fresh computation --------------------------
def test_gpt2_import_stores_its_facts_and_loads_from_them(store, gpt2_files, tiktoken_gpt2):
    store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    assert assert_facts_match_rows(store, "gpt2") is None
    tok = reload(store, "gpt2")
    # nothing computed on load
    assert tok.engine.known_facts is not None and "table" not in tok.engine.reference.__dict__
    assert tok.backend == "tiktoken"
    for name in ("taylorswift.txt", "german_1M.txt", "japanese_1M.txt", "hindi_1M.txt"):
        sample = read_corpus(name)[:200_000]
        assert tok.encode_ordinary(sample) == tiktoken_gpt2.encode_ordinary(sample), name
    code = read_corpus("code_python_5M.txt.xz")[:300_000]
    assert tok.encode_ordinary(code) == tiktoken_gpt2.encode_ordinary(code)
    assert tok.encode("hi" + EOT, allowed_special="all") == tiktoken_gpt2.encode("hi" + EOT, allowed_special="all")
    assert tok.encode("Hello world") == tiktoken_gpt2.encode("Hello world")  # short: the pure path, built lazily
    assert tok.decode(tiktoken_gpt2.encode("décodé ✓")) == "décodé ✓"


def test_a_version_that_fails_the_check_stores_why(store):
    """bc, ab, abc = ab + c: "abc" does not encode to itself (tests/test_tiktoken_path.py)."""
    store.import_vocab("odd", byte_vocab(b"bc", b"ab", b"abc"), [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    problem = assert_facts_match_rows(store, "odd")
    assert problem is not None and "does not encode to itself" in problem
    tok = reload(store, "odd")
    assert tok.backend == f"python ({problem})"
    assert tok.encode("abc" * 5000) == [97, 256] * 5000


def test_trained_extended_and_copied_versions_store_their_facts(store):
    store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
    store.train("en", corpus="shakes", vocab_size=600)
    store.train("en", corpus="shakes", vocab_size=450)  # copied from en@1, an equal run
    store.train("en", corpus="shakes", vocab_size=700, parent="en@1")  # checks only its own merges
    store.train("chars", corpus="shakes", vocab_size=400, alphabet="chars")
    for ref in ("en@1", "en@2", "en@3"):
        assert assert_facts_match_rows(store, ref) is None, ref
        assert reload(store, ref).backend == "tiktoken"
    assert "alphabet is not bytes" in assert_facts_match_rows(store, "chars")
    text_ = read_corpus("tinyshakespeare.txt")[:50_000]
    for ref in ("en@1", "en@2", "en@3", "chars"):
        tok = reload(store, ref)
        pure = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, spec=tok.spec, fast=False)
        assert tok.encode(text_, allowed_special="all") == pure.encode(text_, allowed_special="all"), ref


def test_a_version_still_training_has_no_facts_until_it_completes(store):
    store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
    with pytest.raises(KeyboardInterrupt):
        store.train("en", corpus="shakes", vocab_size=500, checkpoint_every=10, progress=stop_at(100))
    with store.reading() as tx:
        reads = VersionReads(tx)
        assert reads.snapshot(reads.resolve("en@1")) is None
    assert reload(store, "en@1").backend == "tiktoken"  # loaded from its rows, checked on use
    store.resume("en@1")
    assert assert_facts_match_rows(store, "en@1") is None


# -- a damaged row is found, never used ------------------------------------------------
@pytest.mark.parametrize("change", [
    "UPDATE version_facts SET packed = :other",
    "UPDATE version_facts SET digest = :digest",
    "UPDATE version_facts SET fast_problem = NULL",
    "UPDATE versions SET fingerprint = :digest",
])
def test_a_tampered_row_is_damaged_data(store, change):
    store.import_vocab("odd", byte_vocab(b"bc", b"ab", b"abc"), [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")])
    vocab, _ = stored(store, "odd")
    vocab.tokens[258] = b"abd"
    with store.writing() as tx:
        tx.run(change, {"other": snapshot.pack(vocab), "digest": "0" * 64})
    Store.tokenizer_cache.clear()
    with pytest.raises(DamagedDataError, match="damaged"):
        store.tokenizer("odd")
    with pytest.raises(DamagedDataError):
        store.token("odd", "abc")


# -- revision 0004 fills in the facts of existing versions ----------------------------
def test_0004_fills_in_every_complete_version(db_url, tmp_path):
    copy = tmp_path / "store_0002.db"
    shutil.copy(DATA / "store_0002.db", copy)
    url = str(copy)
    if db_url.startswith("postgresql"):
        copy_to_postgresql(copy, db_url)
        url = db_url
    with bpestore.open(url) as store:
        assert store.schema_revision() == HEAD
        complete = [v.ref for v in store.versions() if v.status == "complete"]
        assert complete == ["de@1", "en@1", "en@2", "en@3"]
        for ref in complete:
            assert_facts_match_rows(store, ref)
        with store.reading() as tx:
            reads = VersionReads(tx)
            assert reads.snapshot(reads.resolve("half@1")) is None
        store.resume("half@1")
        assert_facts_match_rows(store, "half@1")


# -- a fresh process imports what it needs ---------------------------------------------
def modules_after(code: str, db: Path) -> set[str]:
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_queries_on_an_up_to_date_store_import_neither_alembic_nor_the_encoder(tmp_path):
    db = tmp_path / "q.db"
    with bpestore.open(db) as store:
        store.import_vocab("tiny", byte_vocab(b"ab"), [(b"a", b"b")])
    cli = ("from bpestore.cli import main\nsys.argv[1:] = ['--db', sys.argv[1], {}]\n"
           "try: main()\nexcept SystemExit: pass")
    for command in ("'versions'", "'show', 'tiny'", "'token', 'tiny', 'ab'"):
        loaded = modules_after(cli.format(command), db)
        # all three read through sqlite3 (store/reader.py; tests/test_load_without_sqlalchemy.py)
        assert "sqlalchemy" not in loaded, command
        heavy = {m for m in loaded if m.split(".")[0] == "alembic" or m in (
            "bpestore.encoder", "bpestore.trainer", "bpestore.ingest", "tiktoken",
            "sqlalchemy.dialects.postgresql")}
        assert not heavy, (command, heavy)
    opened = modules_after("import bpestore\nbpestore.open(sys.argv[1]).tokenizer('tiny').encode('ab')", db)
    assert not any(m.split(".")[0] == "alembic" for m in opened)
    # a new store gets store/schema.py's tables stamped HEAD (tests/test_schema.py): no Alembic either
    created = modules_after("import bpestore\nbpestore.open(sys.argv[1] + '.new')", db)
    assert not any(m.split(".")[0] == "alembic" for m in created)
    old = db.with_name("old.db")  # only a store at an older revision needs Alembic
    shutil.copyfile(Path(__file__).parent / "data" / "store_0002.db", old)
    assert "alembic" in modules_after("import bpestore\nbpestore.open(sys.argv[1])", old)
