"""Training from the counts a Store just ingested (store/fresh.py): the same merges as
training from the stored rows, used only where they are the version's counts, and never
kept from an ingest that did not commit."""

from __future__ import annotations

import pytest

import bpestore
from bpestore.errors import NotFoundError
from bpestore.store import corpus_tables, count_tables

SPECIAL = ["<|endoftext|>"]


@pytest.fixture
def reads(monkeypatch) -> list[int]:
    """How many times the training read a generation's rows back (``count_rows`` iterated)."""
    calls: list[int] = []
    real = count_tables.count_rows

    def counted(*args, **kwargs):
        rows = real(*args, **kwargs)

        def taken():
            calls.append(1)
            yield from rows
        return taken()
    monkeypatch.setattr(count_tables, "count_rows", counted)
    return calls


def _stored_fingerprint(url: str, text, **options) -> str:
    """The fingerprint of a train of ``text`` from its stored rows alone (a second Store)."""
    with bpestore.open(url) as first:
        first.ingest("c", [text])
    with bpestore.open(url) as second:
        assert second.fresh_counts._kept is None
        return second.train("x", corpus="c", vocab_size=600, special_tokens=SPECIAL, **options).fingerprint


@pytest.mark.parametrize("tie_break", [None, "hf"])
def test_fresh_counts_train_equals_stored(db_url, tmp_path, sample_file, reads, tie_break):
    options = {"tie_break": tie_break} if tie_break else {}
    with bpestore.open(db_url) as store:
        store.ingest("c", [sample_file])
        assert store.fresh_counts._kept is not None
        fresh = store.train("en", corpus="c", vocab_size=600, special_tokens=SPECIAL, **options)
        assert reads == [] and store.fresh_counts._kept is None  # taken, not read back
        assert store.verify(fresh.ref).ok  # verify retrains from the stored rows
    stored = _stored_fingerprint(str(tmp_path / "other.db"), sample_file, **options)
    assert reads and fresh.fingerprint == stored


def test_fresh_counts_kept_only_for_the_first_generation(store, tmp_path, sample_text, reads):
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text(sample_text[:30_000], encoding="utf-8")
    two.write_text(sample_text[30_000:60_000], encoding="utf-8")
    store.ingest("c", [one])
    store.ingest("c", [two])  # generation 2: its counts are not the batch's
    assert store.fresh_counts._kept is None
    grown = store.train("en", corpus="c", vocab_size=500, special_tokens=SPECIAL)
    assert reads and store.verify(grown.ref).ok


def test_fresh_counts_not_used_for_another_generation_or_order(store, tmp_path, sample_text, reads):
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text(sample_text[:30_000], encoding="utf-8")
    two.write_text(sample_text[30_000:60_000], encoding="utf-8")
    store.ingest("c", [one])
    store.ingest("d", [two])  # kept: d@1, dropping c@1
    first_seen = store.train("fs", corpus="d", vocab_size=500, tie_break="first-seen")
    assert reads == [1] and store.fresh_counts._kept is None  # its order is the rows' ordinals
    store.ingest("e", [two])
    other = store.train("c1", corpus="c", vocab_size=500)  # c@1 is not the kept e@1
    assert len(reads) == 2 and store.fresh_counts._kept is None
    assert store.verify(first_seen.ref).ok and store.verify(other.ref).ok
    store.ingest("f", [one])
    mixed = store.train("mix", corpus=["f", "c"], weights=[2, 1], vocab_size=500)
    assert store.fresh_counts._kept is None and store.verify(mixed.ref).ok


def test_failed_ingest_keeps_nothing(store, sample_file, monkeypatch):
    """A failure after the count rows are written rolls the whole batch back: no counts
    kept in memory, none in the store, and the training after it finds no words."""
    def failing(*args, **kwargs):
        raise RuntimeError("disk full")
    monkeypatch.setattr(corpus_tables, "set_ordinal_end", failing)  # after the upsert, before the commit
    with pytest.raises(RuntimeError, match="disk full"):
        store.ingest("c", [sample_file])
    assert store.fresh_counts._kept is None
    assert store.corpora() == []  # the corpus' row went with its counts
    with pytest.raises(NotFoundError):
        store.train("en", corpus="c", vocab_size=500)
    monkeypatch.undo()
    store.ingest("c", [sample_file])
    assert store.fresh_counts._kept is not None
    trained = store.train("en", corpus="c", vocab_size=500)
    assert store.verify(trained.ref).ok


def test_failed_training_reads_the_rows_next_time(store, sample_file, monkeypatch, reads):
    """The kept counts are taken once: a training that fails after taking them leaves a
    version the next run resumes from the stored rows, to the same merges."""
    from bpestore.store import training

    store.ingest("c", [sample_file])
    real = training.CheckpointWriter.room
    steps = []

    def stop_later(self):
        steps.append(1)
        if len(steps) == 3:
            raise KeyboardInterrupt
        return real(self)
    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(training.CheckpointWriter, "room", stop_later)
        store.train("en", corpus="c", vocab_size=2000, special_tokens=SPECIAL, checkpoint_every=50)
    stopped = store.version("en@1")
    assert stopped.status == "training" and stopped.n_merges > 0
    assert reads == [] and store.fresh_counts._kept is None
    resumed = store.resume("en@1")
    assert reads == [1] and resumed.status == "complete" and store.verify(resumed.ref).ok


def test_close_drops_the_kept_counts(db_url, sample_file):
    store = bpestore.open(db_url)
    store.ingest("c", [sample_file])
    assert store.fresh_counts._kept is not None
    store.close()
    assert store.fresh_counts._kept is None


def test_completed_from_the_trainer_tokens_equals_the_concatenations(store, sample_file):
    """``_completed`` with the trainer's tokens: the vocabulary (order included) it makes
    from the merges' concatenations."""
    from bpestore.store import training
    from bpestore.store.vocabulary import Vocabulary
    from bpestore.trainer import BpeTrainer

    initial = [bytes([b]) for b in range(256)] + [b"<|endoftext|>"]
    trainer = BpeTrainer({b"hello": 5, b"world": 3, b"held": 2, b"low": 7}.items(), initial)
    while trainer.step(100, vocab_size=280):
        pass
    columns = trainer.merge_columns()
    kinds = {i: ("special" if i == 256 else "byte") for i in range(257)}
    start = Vocabulary(dict(enumerate(initial)), kinds, [], [], [], [])
    slow, fast = training._completed(start, columns), training._completed(start, columns, trainer.token_bytes)
    assert list(fast.tokens.items()) == list(slow.tokens.items()) and fast.kinds == slow.kinds
    assert len(fast.tokens) > 257




def test_large_generation_is_not_kept(store, sample_file, monkeypatch, reads):
    """A generation of more than MAX_WORDS distinct words is read back (streamed), not kept."""
    from bpestore.store import fresh

    monkeypatch.setattr(fresh, "MAX_WORDS", 10)
    store.ingest("c", [sample_file])
    assert store.fresh_counts._kept is None
    trained = store.train("en", corpus="c", vocab_size=500)
    assert reads == [1] and store.verify(trained.ref).ok
