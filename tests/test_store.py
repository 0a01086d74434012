"""The store end to end, on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import SQLAlchemyError

import bpestore
from bpestore import BpestoreError, ConflictError, DatabaseError, InvalidArgumentError, NotFoundError
from bpestore.trainer import train_word_counts

from .conftest import corpus_path, read_corpus, reference_merges, tiktoken_pattern

EOT = "<|endoftext|>"


class Stop(Exception):
    """Raised from a progress callback to simulate a killed training run."""


def stop_after(n: int):
    def progress(state):
        if state.done >= n:
            raise Stop
    return progress


def test_ingest_train_read_back_gives_reference_merges(store):
    [result] = store.ingest("ref", [corpus_path("corpus.en")], special_tokens=[EOT])
    assert not result.skipped and result.size_bytes == corpus_path("corpus.en").stat().st_size
    v = store.train("cs336", corpus="ref", vocab_size=500)
    assert (v.ref, v.status, v.vocab_size, v.n_merges) == ("cs336@1", "complete", 500, 243)
    assert store.tokenizer("cs336@1").merges == reference_merges()
    assert v.fingerprint and v.corpus_digest


def test_word_counts_equal_a_plain_counter(store):
    import regex

    store.ingest("shakes", [corpus_path("tinyshakespeare.txt")])
    pattern = regex.compile(tiktoken_pattern("gpt2"))
    expected = Counter(w.encode() for w in pattern.findall(read_corpus("tinyshakespeare.txt")))
    assert store.word_counts("shakes") == expected


def test_reingest_is_skipped_and_force_doubles(store, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("the cat the dog", encoding="utf-8")
    store.ingest("c", [path])
    again = store.ingest("c", [path])
    assert again[0].skipped
    assert store.word_counts("c") == {b"the": 1, b" cat": 1, b" the": 1, b" dog": 1}
    store.ingest("c", [path], force=True)
    assert store.word_counts("c") == {b"the": 2, b" cat": 2, b" the": 2, b" dog": 2}
    assert store.corpus("c").n_sources == 2


def test_invalid_utf8_names_offset_and_counts_nothing(store, tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("fine words", encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"x" * 5000 + b" ok \xff\xfe more")
    store.ingest("c", [good])
    with pytest.raises(BpestoreError, match=r"bad.txt is not valid UTF-8 at byte 5004"):
        store.ingest("c", [bad])
    assert store.word_counts("c") == {b"fine": 1, b" words": 1}
    assert store.corpus("c").n_sources == 1
    store.ingest("c", [bad], errors="replace")
    assert store.word_counts("c")[" \ufffd\ufffd".encode()] == 1


def test_corpus_refuses_a_different_spec(store, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x y", encoding="utf-8")
    store.ingest("c", [path], pretokenizer="gpt2")
    with pytest.raises(BpestoreError, match="pretokenizer"):
        store.ingest("c", [path], pretokenizer="whitespace", force=True)


@pytest.fixture
def shakespeare_store(store):
    store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
    return store


def uninterrupted(store, corpus: str, vocab_size: int, **options):
    """The reference run: the pure trainer on the store's counts, no database."""
    return train_word_counts(store.word_counts(corpus), vocab_size=vocab_size,
                             special_tokens=[EOT], **options)


@pytest.mark.parametrize("stop", [1, 7, 350, 699])
def test_stopped_and_resumed_equals_uninterrupted(shakespeare_store, stop):
    store = shakespeare_store
    vocab, merges = uninterrupted(store, "shakes", 957)
    with pytest.raises(Stop):
        store.train("cut", corpus="shakes", vocab_size=957, checkpoint_every=50,
                    progress=stop_after(stop))
    partial = store.version("cut@1")
    assert partial.status == "training" and partial.n_merges == stop
    with pytest.raises(BpestoreError, match="no complete version"):
        store.tokenizer("cut")
    resumed = store.resume("cut@1")
    assert resumed.status == "complete"
    assert store.tokenizer("cut@1").merges == merges
    assert store.tokenizer("cut@1").vocab == vocab
    # The same settings again reuse those merges, and the fingerprint agrees.
    assert store.train("full", corpus="shakes", vocab_size=957).fingerprint == resumed.fingerprint


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_new_vocab_size_reuses_an_equal_run(shakespeare_store, tie_break):
    store = shakespeare_store
    store.train("big", corpus="shakes", vocab_size=900, tie_break=tie_break)
    smaller = store.train("small", corpus="shakes", vocab_size=600, tie_break=tie_break)
    larger = store.train("large", corpus="shakes", vocab_size=1100, tie_break=tie_break)
    for info, size in [(smaller, 600), (larger, 1100)]:
        vocab, merges = uninterrupted(store, "shakes", size, tie_break=tie_break)
        assert info.status == "complete" and info.vocab_size == size
        assert store.tokenizer(info.ref).merges == merges
        assert store.tokenizer(info.ref).vocab == vocab
    by_merges = store.train("m", corpus="shakes", merges=100, tie_break=tie_break)
    assert store.tokenizer(by_merges.ref).merges == store.tokenizer("big@1").merges[:100]


def test_reuse_needs_the_same_counts_and_limits(shakespeare_store):
    store = shakespeare_store
    store.train("big", corpus="shakes", vocab_size=700)
    other = store.train("freq", corpus="shakes", vocab_size=500, min_frequency=50)
    vocab, merges = uninterrupted(store, "shakes", 500, min_frequency=50)
    assert store.tokenizer(other.ref).merges == merges


def test_resume_after_growth_continues_on_the_pinned_generation(shakespeare_store, tmp_path):
    store = shakespeare_store
    vocab, merges = uninterrupted(store, "shakes", 400)
    with pytest.raises(Stop):
        store.train("en", corpus="shakes", vocab_size=400, checkpoint_every=5, progress=stop_after(10))
    more = tmp_path / "more.txt"
    more.write_text("brand new words the the the" * 200, encoding="utf-8")
    store.ingest("shakes", [more])
    resumed = store.resume("en@1")
    assert (resumed.status, resumed.corpus_generation) == ("complete", 1)
    assert store.tokenizer("en@1").merges == merges and store.tokenizer("en@1").vocab == vocab
    assert store.corpus("shakes").generation == 2


def test_extension_keeps_parent_ids_and_sees_new_text(shakespeare_store, tmp_path):
    store = shakespeare_store
    store.train("en", corpus="shakes", vocab_size=600)
    extra = tmp_path / "extra.txt"
    extra.write_text(" zyzzyva" * 5000, encoding="utf-8")
    store.ingest("shakes", [extra])
    child = store.train("en", corpus="shakes", vocab_size=800, parent="en@1")
    assert (child.ref, child.parent, child.vocab_size) == ("en@2", "en@1", 800)
    p, c = store.tokenizer("en@1"), store.tokenizer("en@2")
    assert c.merges[:len(p.merges)] == p.merges
    assert all(c.vocab[i] == b for i, b in p.vocab.items())
    sample = read_corpus("tinyshakespeare.txt")[:5000]
    assert c.decode(p.encode(sample)) == sample
    assert c.token_id(" zyzzyva") is not None and p.token_id(" zyzzyva") is None
    assert store.version("en").ref == "en@2"


def test_version_references_and_aliases(shakespeare_store):
    store = shakespeare_store
    store.train("en", corpus="shakes", vocab_size=300)
    store.train("en", corpus="shakes", vocab_size=320, tie_break="hf")
    assert store.version("en").number == 2
    store.set_alias("en@1", "prod")
    assert store.version("en@prod").number == 1
    assert store.version("en@1").aliases == ("prod",)
    assert [v.ref for v in store.versions("en")] == ["en@1", "en@2"]
    assert store.version("en@2").spec.tie_break == "hf"
    for bad, message in [("nope", "no tokenizer named 'nope'"), ("en@9", "no version 9"),
                         ("en@staging", "no version or alias 'staging'")]:
        with pytest.raises(BpestoreError, match=message):
            store.version(bad)


def test_gpt2_import_encodes_like_tiktoken(store, gpt2_files, tiktoken_gpt2):
    v = store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    assert (v.vocab_size, v.n_merges, v.status) == (50257, 50000, "complete")
    tok = store.tokenizer("gpt2")
    assert store.tokenizer("gpt2@1") is tok  # cached per process
    text = read_corpus("taylorswift.txt")
    assert tok.encode(text) == tiktoken_gpt2.encode(text)
    assert tok.special_tokens == {EOT: 50256}


def test_newer_schema_revision_is_refused(db_url):
    store = bpestore.open(db_url)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff_from_the_future'"))
    store.close()
    with pytest.raises(BpestoreError, match="newer bpestore"):
        bpestore.open(db_url)


def test_sqlite_pragmas(tmp_path):
    store = bpestore.open(tmp_path / "p.db")
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() == 30000
    store.close()


def test_a_failed_checkpoint_is_written_again_whole(shakespeare_store, monkeypatch):
    from bpestore.store.training import CheckpointWriter

    store = shakespeare_store
    real_write = CheckpointWriter.write
    calls = {"write": 0}

    def flaky_write(writer, conn, *batch):
        real_write(writer, conn, *batch)  # the rows are written inside the transaction...
        calls["write"] += 1
        if calls["write"] == 2:  # ...then the second checkpoint fails before it commits
            raise OSError("disk full")
    monkeypatch.setattr(CheckpointWriter, "write", flaky_write)
    with pytest.raises(OSError, match="disk full"):
        store.train("en", corpus="shakes", vocab_size=700, checkpoint_every=50)
    monkeypatch.setattr(CheckpointWriter, "write", real_write)
    store.resume("en@1")
    vocab, merges = uninterrupted(store, "shakes", 700)
    assert store.tokenizer("en@1").merges == merges and store.tokenizer("en@1").vocab == vocab


def test_extending_an_imported_version_is_refused_cleanly(store, gpt2_files, tmp_path):
    store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    path = tmp_path / "a.txt"
    path.write_text("some text " * 10, encoding="utf-8")
    store.ingest("c", [path], special_tokens=[EOT])
    with pytest.raises(BpestoreError, match="imported"):
        store.train("gpt2", corpus="c", vocab_size=50300, parent="gpt2@1")
    assert [v.ref for v in store.versions()] == ["gpt2@1"]


def test_refs_and_names_are_checked(shakespeare_store):
    store = shakespeare_store
    store.train("en", corpus="shakes", vocab_size=300)
    for bad in ["en@", "en@²", "en@-1"]:
        with pytest.raises(BpestoreError):
            store.version(bad)
    for name in ["", "a@b", "tab\there"]:
        with pytest.raises(BpestoreError, match="name"):
            store.train(name, corpus="shakes", vocab_size=300)
    with pytest.raises(BpestoreError, match="cannot be a number"):
        store.set_alias("en@1", "7")
    assert store.version("en@01").number == 1


def test_in_memory_store():
    with bpestore.open(":memory:") as store:
        store.import_vocab("tiny", {**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
        assert store.tokenizer("tiny").encode("abc") == [256, 99]


def test_words_longer_than_an_index_entry(store, tmp_path):
    # PostgreSQL's btree entries hold 2704 bytes; a whole-document word is longer.
    long_word = "x" * 3000 + " tail"
    path = tmp_path / "doc.txt"
    path.write_text(long_word, encoding="utf-8")
    store.ingest("docs", [path], pretokenizer="none")
    store.ingest("docs", [path], force=True)
    assert store.word_counts("docs") == {long_word.encode(): 2}


def test_upgrade_from_revision_0001_keeps_the_counts(db_url, tmp_path):
    from alembic import command

    from bpestore.store.db import alembic_config, make_engine, resolve_url

    engine = make_engine(resolve_url(db_url))
    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.execute(text("INSERT INTO corpora (id, name, spec, created_at) VALUES "
                          "(1, 'old', '{}', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO word_counts (corpus_id, word, count) VALUES (1, :w, 5)"),
                     {"w": b" old"})
    engine.dispose()
    store = bpestore.open(db_url)  # upgrades to head
    assert store.word_counts("old") == {b" old": 5}
    path = tmp_path / "more.txt"
    path.write_text(" old new", encoding="utf-8")
    store.ingest("old", [path])
    assert store.word_counts("old") == {b" old": 6, b" new": 1}
    store.close()


def count_statements(store, call) -> int:
    """How many SQL statements ``call()`` sends to the database."""
    statements = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)
    event.listen(store.engine, "before_cursor_execute", count)
    try:
        call()
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    return len(statements)


def test_listings_run_a_constant_number_of_queries(store, tmp_path):
    tiny = {**{i: bytes([i]) for i in range(256)}, 256: b"ab"}
    path = tmp_path / "a.txt"
    path.write_text("some words", encoding="utf-8")

    def add(i: int) -> None:
        store.import_vocab("t", tiny, [(b"a", b"b")])
        store.set_alias(f"t@{i}", f"tag{i}")
        store.ingest(f"c{i}", [path])

    def listings() -> list[int]:
        return [count_statements(store, store.versions), count_statements(store, lambda: store.versions("t")),
                count_statements(store, store.corpora)]
    add(1)
    one = listings()
    for i in range(2, 11):
        add(i)
    assert listings() == one
    assert [(v.ref, v.aliases) for v in store.versions("t")][-1] == ("t@10", ("tag10",))
    assert [c.n_sources for c in store.corpora()] == [1] * 10


def test_train_takes_one_options_object_or_keywords(shakespeare_store):
    store = shakespeare_store
    options = bpestore.TrainOptions(vocab_size=300, tie_break="hf")
    by_object = store.train("a", corpus="shakes", options=options)
    by_keywords = store.train("b", corpus="shakes", vocab_size=300, tie_break="hf")
    assert by_object.spec.tie_break == "hf" and by_object.fingerprint == by_keywords.fingerprint
    assert store.train("c", corpus="shakes", options=options, vocab_size=310).vocab_size == 310  # keywords win
    with pytest.raises(InvalidArgumentError, match="unknown training option vocabulary_size; "
                                                   "the options are vocab_size, merges, ") as caught:
        store.train("d", corpus="shakes", vocabulary_size=300)
    assert caught.value.params == ("vocabulary_size",)
    for bad, params in [({}, ("vocab_size", "merges")), (dict(vocab_size=300, merges=5), ("vocab_size", "merges")),
                        (dict(merges=-1), ("merges",)), (dict(merges=5, checkpoint_every=0), ("checkpoint_every",))]:
        with pytest.raises(InvalidArgumentError) as caught:
            bpestore.TrainOptions(**bad)
        assert caught.value.params == params
    assert [v.ref for v in store.versions()] == ["a@1", "b@1", "c@1"]


def test_errors_say_their_kind_and_arguments(shakespeare_store):
    store = shakespeare_store
    store.train("en", corpus="shakes", vocab_size=300)
    for call, kind, params in [
            (lambda: store.train("x", corpus="nope", vocab_size=300), NotFoundError, ()),
            (lambda: store.train("x", corpus="shakes", vocab_size=100), InvalidArgumentError, ("vocab_size",)),
            (lambda: store.train("x", corpus="shakes", merges=1, parent="en@1", alphabet="chars"),
             InvalidArgumentError, ("alphabet",)),
            (lambda: store.resume("en@1"), ConflictError, ()),
            (lambda: store.version("en@9"), NotFoundError, ()),
            (lambda: store.set_alias("en@1", "7"), InvalidArgumentError, ("alias",)),
            (lambda: store.token("en@1", "no such token"), NotFoundError, ())]:
        with pytest.raises(kind) as caught:
            call()
        assert caught.value.params == params


def test_a_failing_database_raises_database_error(store):
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE aliases"))
    with pytest.raises(DatabaseError, match="^database error: ") as caught:
        store.versions()
    # The driver's error, chained: SQLAlchemy's, or sqlite3's or psycopg's where the store reads through them.
    cause = caught.value.__cause__
    assert isinstance(cause, (SQLAlchemyError, sqlite3.Error)) or type(cause).__module__.startswith("psycopg.")
