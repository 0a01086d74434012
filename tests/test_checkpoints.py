"""Training's checkpoints are written by a thread of their own: the merge loop hands a
batch over and goes on; a failed batch is raised in the loop and written again whole;
the result is the uninterrupted run's (the kill tests: tests/test_kills.py)."""

from __future__ import annotations

import threading
import time

import pytest

import bpestore
from bpestore.store.checkpoints import CheckpointWriter
from bpestore.trainer import train_word_counts

from .conftest import corpus_path

EOT = "<|endoftext|>"
EVERY = 20
VOCAB = 600


@pytest.fixture
def shakes(db_url):
    with bpestore.open(db_url) as store:
        store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
        yield store


def reference(store) -> list[tuple[bytes, bytes]]:
    """The pure trainer on the store's counts, no database."""
    return train_word_counts(store.word_counts("shakes"), vocab_size=VOCAB, special_tokens=[EOT])[1]


def writes_by_thread(monkeypatch) -> list[tuple[str, int]]:
    """Each checkpoint's (thread name, merges), as written."""
    real_write = CheckpointWriter.write
    seen: list[tuple[str, int]] = []

    def write(writer, conn, merges, *rest):
        seen.append((threading.current_thread().name, len(merges)))
        real_write(writer, conn, merges, *rest)
    monkeypatch.setattr(CheckpointWriter, "write", write)
    return seen


def test_the_merge_loop_goes_on_while_a_checkpoint_is_written(shakes, monkeypatch):
    """The first checkpoint's write waits until the loop has made three more batches:
    a loop that waited for the database would never get there (the write gives up)."""
    real_write = CheckpointWriter.write
    further = threading.Event()
    threads: list[str] = []

    def slow_write(writer, conn, merges, *rest):
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            assert further.wait(60), "the merge loop waited for the checkpoint"
        real_write(writer, conn, merges, *rest)

    def progress(p):
        if p.done >= 4 * EVERY:
            further.set()
    monkeypatch.setattr(CheckpointWriter, "write", slow_write)
    version = shakes.train("en", corpus="shakes", vocab_size=VOCAB, checkpoint_every=EVERY, progress=progress)
    assert version.status == "complete"
    assert threads[0] != threading.current_thread().name  # the writer's own thread
    assert threads[-1] == threading.current_thread().name  # the last, with the snapshot: after the loop
    assert shakes.tokenizer("en@1").merges == reference(shakes)
    assert shakes.verify("en@1").ok


@pytest.mark.parametrize("when", ["during the loop", "after the loop"])
def test_a_checkpoint_failing_in_the_thread_stops_the_run_and_keeps_the_merges(shakes, monkeypatch, when):
    """A batch that fails is raised in the caller's thread (at the next hand-over, or
    when the loop waits for the writer at its end); every merge made is written by
    one more transaction, and a resume ends as an uninterrupted run."""
    real_write = CheckpointWriter.write
    reached, loop_done, failed = threading.Event(), threading.Event(), threading.Event()
    calls: dict = {"write": 0}
    made: list[int] = []

    def flaky_write(writer, conn, merges, *rest):
        calls["write"] += 1
        calls["writer"] = writer
        real_write(writer, conn, merges, *rest)  # the rows go in...
        if calls["write"] == 2:  # it fails once the loop is where the test wants it
            assert (loop_done if when == "after the loop" else reached).wait(60)
            failed.set()
            raise OSError("disk full")  # ...then the transaction fails

    def progress(p):
        made.append(p.done)
        if when == "during the loop" and p.done == 5 * EVERY:
            reached.set()
            assert failed.wait(60)
            deadline = time.monotonic() + 60
            while calls["writer"].failure is None and time.monotonic() < deadline:
                time.sleep(0.001)  # the thread records it once the transaction is rolled back
            # the next hand-over raises it
        if p.done >= p.total:
            loop_done.set()
    monkeypatch.setattr(CheckpointWriter, "write", flaky_write)
    with pytest.raises(OSError, match="disk full"):
        shakes.train("en", corpus="shakes", vocab_size=VOCAB, checkpoint_every=EVERY, progress=progress)
    monkeypatch.setattr(CheckpointWriter, "write", real_write)
    v = shakes.version("en@1")
    assert v.status == "training"
    if when == "during the loop":  # raised by the hand-over of merge 6 * EVERY, which is kept too
        assert max(made) == 6 * EVERY - 1 and v.n_merges == 6 * EVERY
    else:
        assert loop_done.is_set() and v.n_merges == max(made)
    assert shakes.tokenizer("en@1").merges == reference(shakes)[:v.n_merges]
    assert shakes.resume("en@1").status == "complete"
    assert shakes.tokenizer("en@1").merges == reference(shakes)


def test_an_in_memory_store_writes_checkpoints_in_the_loop(monkeypatch):
    """One connection (in-memory SQLite) is not for a second thread: the loop writes."""
    seen = writes_by_thread(monkeypatch)
    with bpestore.open("sqlite://") as store:
        store.ingest("shakes", [corpus_path("tinyshakespeare.txt")], special_tokens=[EOT])
        store.train("en", corpus="shakes", vocab_size=VOCAB, checkpoint_every=EVERY)
        assert store.tokenizer("en@1").merges == reference(store)
    assert len(seen) > 3 and {name for name, _n in seen} == {threading.current_thread().name}


def test_checkpoints_hold_every_merge_once_in_order(shakes, monkeypatch):
    seen = writes_by_thread(monkeypatch)
    shakes.train("en", corpus="shakes", vocab_size=VOCAB, checkpoint_every=EVERY)
    n = shakes.version("en@1").n_merges
    assert sum(count for _name, count in seen) == n
    # The last merges are a checkpoint of the thread's too, written while the snapshot is
    # made; the completing transaction (the loop's thread) holds the snapshot alone.
    (*batches, (last_thread, last)), (done_thread, done) = seen[:-1], seen[-1]
    assert all(count == EVERY for _name, count in batches) and 0 < last <= EVERY and done == 0
    assert last_thread == "bpestore-checkpoints" and done_thread == threading.current_thread().name
    assert shakes.tokenizer("en@1").merges == reference(shakes)
