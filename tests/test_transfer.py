"""Versions that travel: ``Store.copy`` / ``bpestore copy`` between stores (SQLite and
PostgreSQL) with their parents, aliases and the counts they pin, and a version as one
file (``Store.pack`` / ``bpestore pack``). The reference is the source store itself:
its rows, fingerprints and tokenizers before the move; ``verify`` (a retraining)
checks the counts that moved."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import bpestore
from bpestore import ConflictError, DamagedDataError, Store
from bpestore.store.db import HEAD
from bpestore.store.version_tables import VersionReads

from .conftest import CliRun, assert_error, pg_schema, stop_at

PROBE = "Count Dracula's castle, 1897: the travellers wrote letters home."


@pytest.fixture
def source(tmp_path, sample_text) -> Store:
    """A SQLite store: books@1 and books@2, en@1 trained on books@1, en@2 extending it on
    books@2 (alias en@prod), and other@1 trained on books@2."""
    (tmp_path / "a.txt").write_text(sample_text[:120_000], encoding="utf-8")
    (tmp_path / "b.txt").write_text(sample_text[120_000:240_000], encoding="utf-8")
    store = bpestore.open(tmp_path / "source.db")
    store.ingest("books", [tmp_path / "a.txt"], workers=1)
    store.train("en", corpus="books", vocab_size=400)
    store.ingest("books", [tmp_path / "b.txt"], workers=1)
    store.train("en", corpus="books", vocab_size=550, parent="en@1")
    store.set_alias("en@2", "prod")
    store.train("other", corpus="books", vocab_size=300)
    yield store
    store.close()


def moved(store: Store, ref: str) -> tuple:
    """What must be the same wherever a version goes: name, number, status, spec,
    corpus generation and digest, fingerprint, every token id with its bytes and
    kind, every merge; and how its tokenizer encodes a text."""
    v = store.version(ref)
    with store.reading() as tx:
        reads = VersionReads(tx)
        vocab = reads.rows_vocabulary(reads.resolve(ref))
    return (v.ref, v.status, v.spec, v.parent, v.corpus_ref, v.corpus_digest, v.fingerprint, vocab.tokens,
            vocab.kinds, vocab.merges, store.tokenizer(ref).encode(PROBE) if v.status == "complete" else None)


def test_sqlite_to_postgresql_to_file_to_sqlite_keeps_ids_and_fingerprints(source, tmp_path):
    before = {ref: moved(source, ref) for ref in ("en@1", "en@2")}
    with pg_schema() as pg:
        result = source.copy("en@2", pg, with_counts=True)
        assert result.copied == ("en@1", "en@2") and result.corpora == ("books@1", "books@2")
        with bpestore.open(pg) as shared:
            assert {ref: moved(shared, ref) for ref in before} == before
            assert shared.verify("en@2").ok and shared.verify("en@1").ok
            assert shared.word_counts("books@1") == source.word_counts("books@1")
            shared.pack("en@2", tmp_path / "en.bpestore", with_counts=True)
    with bpestore.open(tmp_path / "en.bpestore", read_only=True) as packed:
        assert {ref: moved(packed, ref) for ref in before} == before
    result = bpestore.open(tmp_path / "en.bpestore").copy(None, tmp_path / "back.db", with_counts=True)
    assert result.ref == "en@2" and result.copied == ("en@1", "en@2")
    with bpestore.open(tmp_path / "back.db") as back:
        assert {ref: moved(back, ref) for ref in before} == before
        assert back.verify("en@2").ok and back.verify("en@1").ok
        assert [c.digest for c in back.corpus_log("books")] == [c.digest for c in source.corpus_log("books")]


def test_copy_with_counts_verifies_and_keeps_both_generations(source, db_url):
    result = source.copy("en@2", db_url, with_counts=True)
    assert result.without_counts == () and result.corpora == ("books@1", "books@2")
    with bpestore.open(db_url) as target:
        assert target.verify("en@1").ok and target.verify("en@2").ok
        for ref in ("books@1", "books@2"):
            assert target.word_counts(ref) == source.word_counts(ref)
            assert target.corpus(ref).digest == source.corpus(ref).digest
        assert [v.ref for v in target.versions()] == ["en@1", "en@2"]  # not other@1
        # The corpus grows on the target as on the source: the pinned generations stay readable.
        target.ingest("books", [Path(source.url.removeprefix("sqlite:///")).parent / "a.txt"], force=True, workers=1)
        assert target.word_counts("books@1") == source.word_counts("books@1")
        assert target.verify("en@2").ok


def test_with_counts_into_a_corpus_that_grew_past_the_generation(source, db_url):
    """other@1 brings books@1 and books@2 with the counts of books@2 alone; en@1 then
    needs books@1 back, from its own counts, where books@2 and later must stay as they are."""
    assert source.copy("other@1", db_url, with_counts=True).corpora == ("books@2",)
    with bpestore.open(db_url) as target:
        assert [c.kept for c in target.corpus_log("books")] == [False, True]
        result = source.copy("en@2", db_url, with_counts=True)
        assert result.copied == ("en@1", "en@2") and result.corpora == ("books@1",) and not result.without_counts
        assert [c.kept for c in target.corpus_log("books")] == [True, True]
        for ref in ("books@1", "books@2"):
            assert target.word_counts(ref) == source.word_counts(ref)
        assert target.verify("en@1").ok and target.verify("en@2").ok and target.verify("other@1").ok


def test_a_copy_without_counts_can_be_extended_on_a_corpus_of_the_target(source, db_url, tmp_path):
    """An extension needs its parent's merges, not its parent's counts."""
    source.copy("en@2", db_url)
    (tmp_path / "c.txt").write_text(PROBE * 50, encoding="utf-8")
    with bpestore.open(db_url) as target:
        target.ingest("local", [tmp_path / "c.txt"], workers=1)
        child = target.train("en", corpus="local", vocab_size=600, parent="en@2")
        assert child.ref == "en@3" and child.parent == "en@2"
        parent = target.tokenizer("en@2").vocab
        assert {i: target.tokenizer("en@3").vocab[i] for i in parent} == parent
        assert target.verify("en@3").ok


def test_without_counts_the_copy_is_marked_and_verify_says_why(source, db_url):
    result = source.copy("en@2", db_url)
    assert result.copied == ("en@1", "en@2") and result.without_counts == ("en@1", "en@2")
    with bpestore.open(db_url) as target:
        v = target.version("en@2")
        assert v.without_counts and v.corpus_ref == "books@2" and v.fingerprint == source.version("en@2").fingerprint
        assert target.tokenizer("en@2").encode(PROBE) == source.tokenizer("en@2").encode(PROBE)
        with pytest.raises(ConflictError, match="without the word counts of books@2"):
            target.verify("en@2")
        assert target.corpora() == []
    # Copied again with its counts: the versions there get them.
    again = source.copy("en@2", db_url, with_counts=True)
    assert again.copied == () and again.present == ("en@1", "en@2") and again.corpora == ("books@1", "books@2")
    with bpestore.open(db_url) as target:
        assert not target.version("en@2").without_counts and target.verify("en@2").ok and target.verify("en@1").ok
    assert source.copy("en@2", db_url, with_counts=True).unchanged


def test_a_version_still_training_travels_and_resumes_with_its_counts(source, db_url, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        source.train("half", corpus="books@1", vocab_size=700, checkpoint_every=20, progress=stop_at(60))
    half = source.version("half@1")
    assert half.status == "training" and half.n_merges > 0
    source.copy("half@1", db_url, with_counts=True)
    source.copy("half@1", tmp_path / "bare.db")
    with bpestore.open(tmp_path / "bare.db") as bare, pytest.raises(ConflictError, match="without the word counts"):
        bare.resume("half@1")
    source.resume("half@1")
    with bpestore.open(db_url) as target:
        assert target.version("half@1").status == "training"
        target.resume("half@1")
        assert moved(target, "half@1") == moved(source, "half@1")


def test_copying_what_is_there_is_a_no_op(source, db_url):
    first = source.copy("en@2", db_url, aliases=True)
    assert not first.unchanged and first.aliases == ("en@prod",)
    again = source.copy("en@2", db_url, aliases=True)
    assert again.unchanged and again.present == ("en@1", "en@2") and again.copied == ()
    parent_first = source.copy("other@1", db_url)
    assert parent_first.copied == ("other@1",)


def test_a_parent_already_there_is_used(source, db_url):
    assert source.copy("en@1", db_url).copied == ("en@1",)
    result = source.copy("en@2", db_url)
    assert result.present == ("en@1",) and result.copied == ("en@2",)
    with bpestore.open(db_url) as target:
        assert target.version("en@2").parent == "en@1"


def test_a_name_clash_is_refused_and_nothing_is_written(source, db_url):
    with bpestore.open(db_url) as target:
        target.ingest("books", [Path(source.url.removeprefix("sqlite:///")).parent / "b.txt"], workers=1)
        target.train("en", corpus="books", vocab_size=350)
        with pytest.raises(ConflictError, match="en@1 in .* is another version") as raised:
            source.copy("en@2", db_url, with_counts=True)
        assert raised.value.params == ("as_name",)
        assert [v.ref for v in target.versions()] == ["en@1"] and len(target.corpus_log("books")) == 1
        result = source.copy("en@2", db_url, as_name="en-src")
        assert result.copied == ("en-src@1", "en-src@2")
        assert target.version("en-src@2").fingerprint == source.version("en@2").fingerprint
        assert target.version("en-src@2").parent == "en-src@1"
        # The corpus of the same name holds other sources: its counts cannot join it.
        with pytest.raises(ConflictError, match="another history"):
            source.copy("en@2", db_url, as_name="en-two", with_counts=True)
        assert "en-two" not in {v.name for v in target.versions()}


def test_a_copy_within_one_store_under_another_name(source):
    assert source.copy("en@2", source.url).unchanged  # itself: everything is there
    result = source.copy("en@2", source, as_name="en-b", aliases=True)
    assert result.copied == ("en-b@1", "en-b@2") and result.aliases == ("en-b@prod",)
    assert moved(source, "en-b@2")[1:] == moved(source, "en@2")[1:3] + ("en-b@1",) + moved(source, "en@2")[4:]
    assert source.version("en-b@2").corpus_ref == "books@2" and source.verify("en-b@2").ok


def test_an_alias_pointing_elsewhere_is_refused(source, db_url):
    source.copy("en@1", db_url)
    with bpestore.open(db_url) as target:
        target.set_alias("en@1", "prod")
        with pytest.raises(ConflictError, match="alias en@prod .* points at en@1"):
            source.copy("en@2", db_url, aliases=True)
        assert [v.ref for v in target.versions()] == ["en@1"]


@pytest.mark.parametrize("damage", ["merge", "fingerprint", "snapshot", "counts"])
def test_damage_is_found_on_arrival_and_nothing_is_written(source, tmp_path, damage):
    path = source.url.removeprefix("sqlite:///")
    en2 = source.version("en@2").id
    statement = {
        "merge": f"UPDATE merges SET right_id = 32 WHERE version_id = {en2} AND rank = 200",
        "fingerprint": f"UPDATE versions SET fingerprint = '{'0' * 64}' WHERE id = {en2}",
        "snapshot": f"UPDATE version_facts SET packed = :packed WHERE version_id = {en2}",
        "counts": "UPDATE word_counts SET count = count + 1 WHERE (corpus_id, word) = "
                  "(SELECT corpus_id, word FROM word_counts ORDER BY corpus_id, word LIMIT 1)",
    }[damage]
    with sqlite3.connect(path) as conn:
        packed = conn.execute(f"SELECT packed FROM version_facts WHERE version_id = {en2}").fetchone()[0]
        # the last token's last byte flipped: a blob of the same length, other bytes
        conn.execute(statement, {"packed": packed[:-1] + bytes([packed[-1] ^ 1])})
    Store.tokenizer_cache.clear()
    target = tmp_path / "target.db"
    with pytest.raises(DamagedDataError):
        source.copy("en@2", target, with_counts=True)
    assert not target.exists()  # the source is read and checked before the target is opened
    with pytest.raises(DamagedDataError):
        source.pack("en@2", tmp_path / "en.bpestore", with_counts=True)
    assert sorted(p.name for p in tmp_path.iterdir() if "bpestore" in p.name) == []


def test_copy_from_an_older_store_upgrades_it_and_into_a_newer_one_is_refused(tmp_path):
    from .test_upgrade_to_generations import DATA

    old = tmp_path / "old.db"
    old.write_bytes((DATA / "store_0002.db").read_bytes())
    older = tmp_path / "older.db"  # a target at an older revision too
    older.write_bytes((DATA / "store_0002.db").read_bytes())
    result = bpestore.open(old).copy("en@3", tmp_path / "new.db")
    assert result.copied[-1] == "en@3"
    with bpestore.open(tmp_path / "new.db") as new:
        renamed = bpestore.open(new.url).copy("en@3", older, as_name="en-new", with_counts=False)
    assert renamed.copied[-1] == "en-new@3"
    with bpestore.open(older) as target:
        assert target.schema_revision() == HEAD
        assert target.version("en-new@3").fingerprint == target.version("en@3").fingerprint
    newer = tmp_path / "newer.db"
    bpestore.open(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(ConflictError, match="newer bpestore"):
        bpestore.open(old).copy("en@3", newer)


# -- the command line --------------------------------------------------------------------
def test_cli_copy_and_pack(source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = CliRun(source.url.removeprefix("sqlite:///"))
    target = str(tmp_path / "cli.db")
    out = cli("copy", "en@2", "--to", target, "--aliases")
    assert out.exit_code == 0 and "copied en@1, en@2" in out.output and "without counts" in out.output
    out = cli("copy", "en@2", "--to", target)
    assert out.exit_code == 0 and "already in" in out.output and "nothing copied" in out.output
    out = cli("copy", "en@2", "--to", target, "--json")
    assert json.loads(out.output) == {"ref": "en@2", "target": f"sqlite:///{target}", "copied": [],
                                      "present": ["en@1", "en@2"], "aliases": [], "corpora": [],
                                      "without_counts": [], "unchanged": True}
    assert_error(CliRun(target)("verify", "en@2"), "without the word counts of books@2")
    out = cli("copy", "other@1", "--to", target, "--as", "en")
    assert_error(out, "copy it under another name with --as")

    pack = tmp_path / "en.bpestore"
    out = cli("pack", "en@2", "--out", str(pack), "--with-counts")
    assert out.exit_code == 0 and pack.exists(), out.output
    assert_error(cli("pack", "en@2", "--out", str(pack)), "pass --force")
    assert cli("pack", "en@2", "--out", str(pack), "--force", "--with-counts").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("en.", ".en."))) == ["en.bpestore"]
    encoded = CliRun(str(pack))("encode", "en@2", PROBE)
    assert encoded.exit_code == 0
    assert [int(i) for i in encoded.output.split()] == source.tokenizer("en@2").encode(PROBE)
    with bpestore.open(pack, read_only=True) as packed:
        assert [v.ref for v in packed.versions()] == ["en@1", "en@2"] and packed.schema_revision() == HEAD
    # The pack as a source: no --db needed (and none made).
    copied = CliRun(str(tmp_path / "unused.db"))("copy", str(pack), "--to", str(tmp_path / "from_pack.db"),
                                                  "--with-counts")
    assert copied.exit_code == 0 and "with the counts of books@1, books@2" in copied.output, copied.output
    assert not (tmp_path / "unused.db").exists()
    with bpestore.open(tmp_path / "from_pack.db") as from_pack:
        assert from_pack.verify("en@2").ok
    # Mistakes: one Error: line each, nothing made.
    assert_error(cli("copy", "nope@1", "--to", str(tmp_path / "n.db")), "no tokenizer named 'nope'")
    assert_error(cli("copy", "en@2", "--to", str(tmp_path / "no" / "n.db")), "does not exist")
    assert_error(cli("copy", "en@2", "--to", str(tmp_path / "n.db"), "--as", "a@b"), "without '@'")
    assert_error(cli("pack", "en@2", "--out", str(tmp_path)), "is a directory")
    assert not (tmp_path / "n.db").exists()
    # A store holding several versions is no pack: name the version.
    assert_error(CliRun(str(tmp_path / "x.db"))("copy", source.url.removeprefix("sqlite:///"), "--to", target),
                 "not one version (a pack)")


# -- a killed copy -----------------------------------------------------------------------
def _writing(url: str) -> Callable[[], bool]:
    """Whether a transaction is writing into the store at ``url`` now: on SQLite, frames
    in its write-ahead log; on PostgreSQL, a row lock taken on its word_counts table."""
    if "://" not in url:
        wal = Path(f"{url}-wal")
        return lambda: wal.exists() and wal.stat().st_size > 0
    from sqlalchemy import create_engine, text

    schema = url.rsplit("%3D", 1)[1]
    engine = create_engine(url)
    query = text("SELECT count(*) FROM pg_locks JOIN pg_class ON pg_class.oid = pg_locks.relation "
                 "JOIN pg_namespace ON pg_namespace.oid = pg_class.relnamespace "
                 "WHERE nspname = :schema AND relname = 'word_counts' AND mode = 'RowExclusiveLock'")

    def writing() -> bool:
        with engine.connect() as conn:
            return bool(conn.execute(query, {"schema": schema}).scalar())
    return writing


@contextmanager
def _fresh_target(kind: str, tmp_path: Path, moment: int) -> Iterator[str]:
    if kind == "sqlite":
        yield str(tmp_path / f"target{moment}.db")
        return
    with pg_schema() as url:
        yield url


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_sigkill_copy_at_random_moments_leaves_the_target_as_before(kind, tmp_path):
    """``bpestore copy --with-counts`` SIGKILLed at seeded moments, each into a fresh
    target holding one version of its own: after each, the target holds what it held
    before, or the whole copy; never part of it. Even moments come once the copy's write
    transaction is writing into the target (plus up to 40 ms more of the copy's CPU time, seeded),
    odd ones after a seeded amount of its CPU time from the start. The reference is the source's own version."""
    import random
    import signal
    import subprocess
    import sys
    import time

    from .conftest import corpus_path
    from .test_kills import MOMENTS, _env, _integrity, cpu_seconds, kill_after_cpu

    source_db = str(tmp_path / "source.db")
    with bpestore.open(source_db) as source:
        source.ingest("de", [corpus_path("german_1M.txt")], workers=1)
        source.train("de", corpus="de", vocab_size=2000)
        reference = moved(source, "de@1")
        counts = source.word_counts("de@1")
    rng = random.Random(26)
    inside = killed = 0
    for moment in range(MOMENTS):
        with _fresh_target(kind, tmp_path, moment) as target_url:
            with bpestore.open(target_url) as target:
                target.import_vocab("mine", {i: bytes([i]) for i in range(256)}, [])
                before = [(v.ref, v.fingerprint) for v in target.versions()]
            copy = [sys.executable, "-m", "bpestore", "--db", source_db, "copy", "de@1", "--to", target_url,
                    "--with-counts"]
            process = subprocess.Popen(copy, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
            writing, began = _writing(target_url), False
            if moment % 2 == 0:
                while process.poll() is None and not (began := writing()):
                    time.sleep(0.002)
                kill_after_cpu(process, cpu_seconds(process.pid) + rng.uniform(0, 0.04))
            else:
                kill_after_cpu(process, rng.uniform(0.3, 2.5))
            killed += process.returncode == -signal.SIGKILL
            _integrity(target_url)
            with bpestore.open(target_url) as target:
                now = [(v.ref, v.fingerprint) for v in target.versions()]
                if now == before:
                    assert target.corpora() == []
                    inside += began and process.returncode == -signal.SIGKILL
                else:
                    assert now == sorted([*before, ("de@1", reference[6])])
                    assert moved(target, "de@1") == reference and target.word_counts("de@1") == counts
            again = subprocess.run(copy, capture_output=True, text=True, env=_env(), timeout=300)
            assert again.returncode == 0, again.stderr
            with bpestore.open(target_url) as target:
                assert moved(target, "de@1") == reference and target.word_counts("de@1") == counts
                assert target.verify("de@1").ok
    assert killed > 0  # the moments did fall inside copies
    if kind == "postgresql":  # a row lock held is a transaction open: some kills fell inside it
        assert inside > 0


def test_two_copies_at_once_write_the_version_once(source, db_url):
    """Both finish: one copies, the other waits for it and finds the version there."""
    from concurrent.futures import ThreadPoolExecutor

    bpestore.open(db_url).close()  # the schema, made once
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: source.copy("en@2", db_url, with_counts=True), range(2)))
    assert sorted(len(r.copied) for r in results) == [0, 2]
    with bpestore.open(db_url) as target:
        assert [v.ref for v in target.versions()] == ["en@1", "en@2"] and target.verify("en@2").ok
