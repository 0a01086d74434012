"""Training's checkpoints: the merges of a run written as they come, batch after
batch, each in one transaction with the tokens it makes, from a thread of their own.

The merge loop hands a batch over and goes on (the compiled core merges on without
Python's lock, so the thread writes meanwhile); the thread writes the batches in
the order made. Every committed batch extends the stored merges by the next ranks,
so a run stopped anywhere (killed too) has a prefix of its merges stored and
resumes from it to exactly the merges of an uninterrupted run.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence

from ..errors import ConflictError
from . import snapshot, vocab_tables
from .drivers import Transaction, Transactions
from .version_tables import VersionReads, add_snapshot, record_checkpoint


class CheckpointWriter:
    """Writes a run's merges as they come, each batch with the tokens it makes.

    The merges are the trainer's, read as they come by ``columns(start, stop)`` (left,
    right and token ids, counts, of ranks start to stop); a batch is a range of ranks.
    One is handed over every ``every`` merges or ``seconds``; a thread of the writer's own
    writes each in one transaction, in order, while the merge loop goes on
    (``threaded=False``: ``add`` writes it). A batch that fails stays unwritten, and so
    does every batch after it (the thread stops); the failure is raised by the next
    ``add`` or ``wait``, and ``save`` (or ``keep``) writes them all again, whole, in one
    transaction.
    """

    def __init__(self, db: Transactions, version_id: int,
                 columns: Callable[[int, int], Sequence[Sequence[int]]], token_bytes: Sequence[bytes], n_tokens: int,
                 written: int,
                 *, every: int, seconds: float, threaded: bool = True) -> None:
        """``columns``: the trainer's merges of some ranks (it makes more as the loop goes);
        ``written``: how many of them are stored already;
        ``token_bytes``: the trainer's tokens by id; ``n_tokens``: how many are stored."""
        self.db = db
        self.version_id = version_id
        self.columns = columns
        self.token_bytes = token_bytes
        self.n_tokens = n_tokens
        self.every = every
        self.seconds = seconds
        self.threaded = threaded
        self.written = written  # merges committed (ranks below)
        self.handed = written  # merges handed over (ranks below)
        self.made = written  # merges the loop made (ranks below)
        self.failure: BaseException | None = None  # the writer thread's, not raised yet
        self._batches: queue.SimpleQueue[range | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.last_save = time.monotonic()

    @property
    def pending(self) -> int:
        """How many merges made are not written yet."""
        return self.made - self.written

    def room(self) -> tuple[int, float]:
        """The merges, and the seconds, until the next batch is handed over."""
        return self.every - (self.made - self.handed), self.seconds - (time.monotonic() - self.last_save)

    def add(self, n: int) -> None:
        """The loop made ``n`` more merges; hand the batch over when it holds ``every``
        merges or ``seconds`` passed since the last."""
        self.made += n
        if self.made - self.handed >= self.every or time.monotonic() - self.last_save >= self.seconds:
            self._raise_failure()
            if not self.threaded:
                self.save()
                return
            self._hand_over()

    def last(self) -> None:
        """The loop made its last merge: hand the merges not handed yet to the thread, which
        writes them (a checkpoint like any other) while the caller makes the snapshot; the
        completing transaction (``save``) then holds the snapshot alone. Unthreaded: ``save``
        writes them."""
        if self.threaded and self.made > self.handed:
            self._raise_failure()
            self._hand_over()

    def _hand_over(self) -> None:
        batch = range(self.handed, self.made)
        self.handed = self.made
        if self._thread is None:
            self._batches = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._drain, args=(self._batches,),
                                            name="bpestore-checkpoints", daemon=True)
            self._thread.start()
        self._batches.put(batch)
        self.last_save = time.monotonic()

    def wait(self) -> None:
        """Wait until the writer thread wrote what it was handed; raise its failure, if any."""
        if self._thread is not None:
            self._batches.put(None)
            self._thread.join()
            self._thread = None
        self._raise_failure()

    def save(self, fingerprint: str | None = None, made: snapshot.Snapshot | None = None) -> None:
        """Write every pending merge (one transaction, after the thread's); given the run's
        fingerprint and snapshot, mark the version complete."""
        self.wait()
        self._write_batch(range(self.written, self.made), fingerprint, made)
        self.handed = self.made
        self.last_save = time.monotonic()

    def keep(self) -> None:
        """After the run stopped on an error: write what is pending, if anything (the
        thread's failure, if any, is the one being raised or is dropped for this retry)."""
        try:
            self.wait()
        except Exception:  # noqa: S110 - the batches it kept are written below
            pass
        if self.pending:
            self.save()

    def _raise_failure(self) -> None:
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure

    def _drain(self, batches: queue.SimpleQueue[range | None]) -> None:
        """The writer thread: each batch in its own transaction, until None or a failure
        (the batch that failed and those after it stay unwritten)."""
        while (batch := batches.get()) is not None:
            try:
                self._write_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - handed to the merge loop's thread
                self.failure = exc
                return

    def _write_batch(self, ranks: range, fingerprint: str | None = None,
                     made: snapshot.Snapshot | None = None) -> None:
        with self.db.writing() as tx:
            self.write(tx, ranks, fingerprint, made)
        # Only once committed: a failed batch is written again, whole.
        self.written = ranks.stop
        self.n_tokens = max(max(self.columns(ranks.start, ranks.stop)[2], default=0) + 1, self.n_tokens)

    def write(self, tx: Transaction, ranks: range, fingerprint: str | None, made: snapshot.Snapshot | None) -> None:
        """One checkpoint's rows, the merges of ``ranks`` and the tokens they make (the last:
        with the version's snapshot), in the caller's transaction."""
        lefts, rights, tokens, counts = self.columns(ranks.start, ranks.stop)
        stored = vocab_tables.next_rank(tx, self.version_id) if ranks else 0
        if ranks and stored != ranks.start:
            # Another run of this version wrote merges since this one read them.
            raise ConflictError(f"{VersionReads(tx).info(self.version_id).ref} is being trained by "
                                f"another process ({stored:,} merges stored, this run expected "
                                f"{ranks.start:,}); wait for it to finish, then resume it if it stopped")
        vocab_tables.add_merges(tx, self.version_id, ranks.start, (lefts, rights, tokens, counts))
        # The tokens they make: the ids from the first not stored to the highest (new ids come in order).
        new = range(self.n_tokens, max(max(tokens, default=0) + 1, self.n_tokens))
        vocab_tables.add_tokens(tx, self.version_id, new, self.token_bytes[new.start:new.stop], "merge")
        record_checkpoint(tx, self.version_id, fingerprint)
        if made is not None:  # complete
            add_snapshot(tx, self.version_id, made)
