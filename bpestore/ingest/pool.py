"""Counting words in worker processes: ``Task`` s in, ``Counted`` results out. No SQL.

A task is a few pieces of sources (``pieces``): a ``FileRange`` (bytes of a large plain file, read by the worker
itself), ``SmallFiles`` (small files, each read, hashed and checked unchanged by the worker), a
``FileBytes`` (a small file the caller read) or a ``TextPiece`` (text the caller read and decoded:
standard input, a compressed file, JSON Lines). A source that cannot be read, decoded or parsed comes
back as ``Counted.error``, an exception the caller raises; the pieces before it in the task are counted.

A task is counted into the worker's own counts of its key (``Task.keep``: one per large source, one
for a run of small ones), which the worker hands back, every key it holds, only once they outgrow
its share of one memory budget (``hold_bytes``: the budget divided by the number of workers), and
when the caller ``Pool.flush`` es them: the workers together hold about the same memory at any
worker count. The caller flushes once for many sources (a batch), and the shards say which key each
word came from, so that each large source's distinct words are still counted exactly
(``reduce_shard``). What a worker hands on while it counts is cut by word into one shard per worker,
each packed as three byte strings (``shard_counts``); the caller stores them unopened and, once the
batch is counted, has each shard merged and sorted by a worker (``Pool.reduce``): the parent does no
work per word handed on, which would bound many workers (at 16 they hand on several times the
distinct words), and gets the batch's counts as one sorted, disjoint part per shard (the upsert's
sort then only merges sorted runs). At the flush a worker hands on its counts in shards too where
the batch has shards anyway, several large sources, or more than two workers count (merging four
workers' whole counts in the parent kept 4 workers barely faster than 2), else whole. Tasks counted
in this process (one worker, or before the workers start) keep their counts per key the same way,
until the flush, which merges several keys' tables in one pass (``shards.merge_tables``).

``Pool`` is a ``concurrent.futures.ProcessPoolExecutor`` that starts only once enough text was submitted
(less is counted in this process), whose workers ignore Ctrl-C (the parent stops them) and end when the
parent is killed.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import itertools
import json
import os
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..errors import BpestoreError, SourceError
from ..processes import die_with_parent
from ..sources import decode, read_range
from ..spec import TokenizerSpec
from ..text import COUNT_CORE, TextPipeline
from . import shards
from .pieces import FileBytes, FileRange, Piece, SmallFiles, TextPiece
from .shards import Packed, as_bytes, merge_counts, merge_pairs, pack_shard, unpack_shard, utf8_keys

if TYPE_CHECKING:  # multiprocessing and concurrent.futures are imported where the workers start
    from concurrent.futures import Future, ProcessPoolExecutor
    from typing import TypeAlias

    Outcome: TypeAlias = "Future[Counted] | Done"  # a task's result: from a worker, or counted here


@dataclass(frozen=True)
class Task:
    """Pieces to count together; with several, each is counted alone too (for its
    own distinct words)."""

    pieces: tuple[Piece, ...]
    keep: int = 0  # not 0: a worker keeps the counts under key ``keep`` until they are flushed
    seq: int = 0  # its place among the tasks of a call: the high part of its words' ordinals
    # Ranges of one source counted into a ``CountTable`` other sources share (``keep``): its
    # distinct words are the table's piece's (``go_on``: the piece of the source's task before).
    shared: bool = False
    go_on: bool = False

    @property
    def size(self) -> int:
        return sum(piece.size for piece in self.pieces)


@dataclass
class Counted:
    """A task's counts (UTF-8 keys) of key ``key``, and the words and distinct words
    of each piece it counted, in order (``shas``: the sha256 of each of
    ``SmallFiles`` read; one whose sha256 the worker was told to skip is not counted). With
    ``error``, the next piece failed: it and the rest of the task are not counted.
    ``shards``: counts a worker handed on instead, per key, cut by word into one
    packed shard each (``shard_counts``), which the caller keeps unopened until
    ``reduce_shard`` merges each shard in a worker."""

    counts: dict[bytes, int]
    words: list[tuple[int, int]]
    error: BpestoreError | None = None
    shards: dict[int, list[Packed]] | None = None
    reduced: bool = False  # one shard's merged counts: no word of it is in another shard's
    key: int = 0
    shas: list[str] | None = None
    distinct: dict[int, int] | None = None  # reduced: each key's distinct words in this shard
    segments: list[tuple[int, int]] | None = None  # counts (in first-occurrence order): their ordinals
    firsts: dict[bytes, int] | None = None  # reduced: each word's ordinal

    def ordinals(self) -> dict[bytes, int]:
        """Each word of counts with its ordinal."""
        if self.firsts is not None:
            return self.firsts
        return shards.firsts_of(self.counts, self.segments or [(0, 0)])


def shard_of(word: bytes, n_shards: int) -> int:
    """The shard a word belongs to: the same in every process (crc32, not the per-process ``hash``)."""
    return zlib.crc32(word) % n_shards


def shard_counts(counts: shards.Counts, n_shards: int, segments: shards.Segments | None = None) -> list[Packed]:
    """A worker's counts (str or UTF-8 keys, in the order their words first occurred,
    emptied) as ``n_shards`` packed shards of UTF-8 words in word order, with their
    ordinals where ``segments`` are given, word ``w`` in shard ``shard_of(w)``: the caller
    only stores them, and each shard is merged in a worker (``reduce_shard``)."""
    if not isinstance(counts, dict):
        return counts.shard(n_shards, segments)
    if COUNT_CORE is not None and utf8_keys(counts):
        return COUNT_CORE.shard(counts, n_shards, segments)
    parts: list[dict[bytes, tuple[int, int]]] = [{} for _ in range(n_shards)]
    crc32 = zlib.crc32
    utf8 = utf8_keys(counts)
    for (word, n), first in zip(counts.items(), shards.ordinals(len(counts), segments or [(0, 0)])):
        key = word if utf8 else word.encode("utf-8", "surrogatepass")
        parts[crc32(key) % n_shards][key] = n, first
    counts.clear()
    packed = []
    for shard in parts:
        words = sorted(shard)
        packed.append(pack_shard(words, [shard[w][0] for w in words],
                                 None if segments is None else [shard[w][1] for w in words]))
    return packed


def reduce_shard(pieces: list[tuple[int, Packed]], keys: Collection[int]) -> Counted:
    """One shard's pieces (``shard_counts``, each with its key) merged, in word order,
    and the distinct words of each of ``keys`` in it (a word that two keys share
    is one of each)."""
    _trim_heap()  # what the counts flushed before it freed
    by_key: dict[int, list[Packed]] = {}
    for key, piece in pieces:
        by_key.setdefault(key, []).append(piece)
    if COUNT_CORE is not None:  # one pass: the merge tells each key's distinct words too
        index = {key: i for i, key in enumerate(by_key)}
        merged, firsts, each = COUNT_CORE.merge_shard([piece for _, piece in pieces],
                                                      [index[key] for key, _ in pieces])
        return Counted(merged, [], reduced=True, firsts=firsts,
                       distinct={key: each[i] for key, i in index.items() if key in keys})
    total: Counter = Counter()
    every: dict[bytes, int] = {}
    distinct: dict[int, int] = {}
    for key, packed in by_key.items():
        # A key's words, one key at a time: where it is alone, they are the total's.
        own: set[bytes] | None = set() if key in keys and len(by_key) > 1 and len(packed) > 1 else None
        for piece in packed:
            words, counts = unpack_shard(piece)
            firsts = shards.packed_firsts(piece)
            if total:
                merge_pairs(total, words, counts)
            else:  # the first piece: its words are distinct, nothing to add to
                dict.update(total, zip(words, counts))
            shards.merge_firsts(every, dict(zip(words, firsts or [])))
            if own is not None:
                own.update(words)
        if key in keys:
            distinct[key] = len(total) if len(by_key) == 1 else len(own) if own is not None else len(words)
    merged = in_order(total)
    return Counted(merged, [], reduced=True, firsts={word: every[word] for word in merged} if every else None,
                   distinct=distinct)


def in_order(counts: Counter) -> dict[bytes, int]:
    """The counts with UTF-8 keys, in word order (emptied as it goes)."""
    utf8 = as_bytes(counts)
    words = sorted(utf8)
    ordered = dict(zip(words, map(utf8.__getitem__, words)))
    utf8.clear()
    return ordered


class TaskCounter:
    """Counts the words of tasks with one spec's pipeline."""

    def __init__(self, spec: TokenizerSpec, errors: str, jsonl_field: str | None,
                 part_chars: int, skip: Collection[str] = frozenset(), threads: int = 1) -> None:
        self.pipeline = TextPipeline(spec)
        self.errors = errors
        self.jsonl_field = jsonl_field
        self.part_chars = part_chars
        self.skip = skip  # sha256 of contents counted before: a small file with one is not counted
        self.threads = threads  # threads counting a large source's ranges (``TextPipeline.count_bytes``)

    @property
    def shares_tables(self) -> bool:
        """Whether sources may share the counts they are kept in (``Task.shared``): the counting core's table."""
        return self.jsonl_field is None and self.pipeline.count_core is not None

    def new_counts(self) -> shards.Counts:
        """Counts to keep tasks in: the counting core's table where it counts them."""
        return Counter() if self.jsonl_field is not None else self.pipeline.new_counts()  # type: ignore[return-value]

    def count(self, task: Task, into: shards.Counts | None = None) -> Counted:
        """Count a task; with ``into``, into those counts, and hand back none (several
        pieces then are ranges of one source, each read and counted in turn)."""
        counts: Any = Counter() if into is None else into
        if not isinstance(task.pieces[0], SmallFiles) and _one_source(task.pieces):
            pieces = cast("tuple[FileRange | FileBytes | TextPiece, ...]", task.pieces)
            n_words = 0
            together = self.jsonl_field is None and self.pipeline.count_core is not None and utf8_keys(counts)
            step = TOGETHER if together else 1
            bytes_ok = together and self.pipeline.counts_bytes and not isinstance(counts, dict)  # else: not read twice
            pieced = task.shared and not isinstance(counts, dict)  # a table others share: the source, a piece of it
            for at in range(0, len(pieces), step):
                try:
                    if pieced and (at or task.go_on):
                        counts.go_on()
                    if together:
                        some = pieces[at:at + step]
                        raw = [read_range(p.name, p.start, p.end) if isinstance(p, FileRange) and bytes_ok else None
                               for p in some]
                        # None: decoded, as the errors policy says
                        n = self.pipeline.count_bytes(raw, counts, self.threads)
                        n_words += self.pipeline.count_together([p.decoded(self.errors) for p in some], counts) \
                            if n is None else n
                        continue
                    piece = pieces[at]
                    n_words += self.count_text(piece.decoded(self.errors), piece.name, piece.first_line, counts)
                except BpestoreError as exc:
                    return Counted({}, [], exc)
            distinct = counts.piece_distinct() if pieced else len(counts)
            return Counted({} if into is not None else as_bytes(counts), [(n_words, distinct)], key=task.keep,
                           segments=[(0, task.seq)])
        words, shas, error = self.count_pieces(task.pieces, counts)
        # On an error, only the pieces before the failing one are in counts.
        return Counted({} if into is not None else as_bytes(counts), words, error, key=task.keep,
                       shas=shas or None, segments=[(0, task.seq)])

    def count_pieces(self, pieces: tuple[Piece, ...], counts: Any
                     ) -> tuple[list[tuple[int, int]], list[str], BpestoreError | None]:
        """Add several pieces' words to counts: each piece's (each small file's) words and distinct
        words, up to the first that fails, the sha256 of each of ``SmallFiles``, and the error."""
        shas: list[str] = []
        error: BpestoreError | None = None
        small = pieces[0] if len(pieces) == 1 and isinstance(pieces[0], SmallFiles) else None
        raw = small is not None and not isinstance(counts, dict)
        if small is not None:
            names, lines = small.names, [1] * len(small.names)
            datas, error = small.read()
            shas = [hashlib.sha256(data).hexdigest() for data in datas]
            skip = self.skip
            # None: a small file counted before; bytes: one not yet decoded (raw)
            texts: list[Any] = [None if sha in skip else data for sha, data in zip(shas, datas)] if skip else datas
        else:
            listed = cast("tuple[FileRange | FileBytes | TextPiece, ...]", pieces)
            names, lines = [piece.name for piece in listed], [piece.first_line for piece in listed]
            texts = []
            for piece in listed:
                try:
                    texts.append(piece.decoded(self.errors))
                except BpestoreError as exc:
                    error = exc
                    break
        if raw and (done := self.pipeline.count_bytes_each([t for t in texts if t is not None], counts)) is not None:
            return [(0, 0) if text is None else done.pop() for text in texts[::-1]][::-1], shas, error
        for i, (name, text) in enumerate(zip(names, texts) if small is not None else ()):  # decoded after all
            try:
                texts[i] = text if text is None else decode(text, name, self.errors)
            except BpestoreError as exc:
                del texts[i:], shas[i:]
                error = exc
                break
        counted = [text for text in texts if text is not None]
        if self.jsonl_field is None and self.pipeline.count_core is not None and utf8_keys(counts):
            each = iter(self.pipeline.count_each(counted, counts))
            return [(0, 0) if text is None else next(each) for text in texts], shas, error
        words: list[tuple[int, int]] = []
        for name, first_line, text in zip(names, lines, texts):
            own: Counter = Counter()
            if text is not None:
                try:
                    n_words = self.count_text(text, name, first_line, own)
                except BpestoreError as exc:
                    return words, shas[:len(words)], exc
            words.append((n_words if text is not None else 0, len(own)))
            merge_counts(counts, own)
        return words, shas, error

    def count_text(self, text: str, name: str, first_line: int, counts: Counter) -> int:
        """Add the words of a text (or of each JSON Lines record in it) to counts:
        str keys, or UTF-8 where the counting core counts them (``as_bytes``)."""
        if self.jsonl_field is None:
            return self.count_document(text, counts)
        n_words = 0
        for line_no, line in enumerate(text.split("\n"), start=first_line):
            if line.strip():
                n_words += self.count_document(self.document(line, name, line_no), counts)
        return n_words

    def count_document(self, text: str, counts: Counter) -> int:
        if self.pipeline.count_core is not None:
            return self.pipeline.count_utf8(text, counts)
        return self.pipeline.count_strings(text, counts, part_chars=self.part_chars)

    def document(self, line: str, name: str, line_no: int) -> str:
        """The text field of one JSON Lines record."""
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(f"{name}: line {line_no} is not valid JSON ({exc.msg}); "
                              "fix the line or leave the file out", source=name) from None
        doc = record.get(self.jsonl_field) if isinstance(record, dict) else None
        if not isinstance(doc, str):
            raise SourceError(f"{name}: line {line_no} has no text field {self.jsonl_field!r}; "
                              "name the field with jsonl_field", source=name, params=("jsonl_field",))
        try:
            doc.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate escaped in JSON ("\\ud800"): not a character.
            if self.errors == "strict":
                raise SourceError(f"{name}: line {line_no} holds a lone surrogate (an invalid "
                                  "\\uXXXX escape); pass errors='replace' or errors='skip'",
                                  source=name, params=("errors",)) from None
            replacement = "\ufffd" if self.errors == "replace" else ""
            doc = "".join(c if not "\ud800" <= c <= "\udfff" else replacement for c in doc)
        return doc


def _one_source(pieces: tuple[Piece, ...]) -> bool:
    """Whether the pieces are one piece, or ranges of one file (a large source's,
    counted as one)."""
    first = pieces[0]
    return len(pieces) == 1 or isinstance(first, FileRange) and \
        all(isinstance(p, FileRange) and p.name == first.name for p in pieces)


TOGETHER = 4  # pieces of a source counted at once (``TextPipeline.count_together``): a few MB of text


# -- the worker processes ------------------------------------------------------------
# Roughly what one distinct word takes in a Counter (the str, its count, the
# dict's slot): how a worker judges the size of the counts it keeps.
WORD_BYTES = 128

_counter: TaskCounter | None = None  # a worker's, set when it starts
_held: dict[int, shards.Counts] = {}  # a worker's counts kept per key (Task.keep)
_segments: dict[int, shards.Segments] = {}  # the ordinals of each key's counts kept
_hold_bytes = 0  # a worker's share of the memory budget for them
_barrier: Any = None  # all workers meet there to flush: each takes exactly one flush task
_n_shards = 1  # the shards a worker cuts the counts it hands on into


def _start_worker(spec_json: str, errors: str, jsonl_field: str | None, part_chars: int, skip: Collection[str],
                  parent: int, hold_bytes: int = 0, barrier: Any = None, n_shards: int = 1) -> None:
    global _counter, _hold_bytes, _barrier, _n_shards
    import signal

    # Ctrl-C reaches the whole process group; the parent stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)
    _counter = TaskCounter(TokenizerSpec.from_json(spec_json), errors, jsonl_field, part_chars, skip)
    _hold_bytes, _barrier, _n_shards = hold_bytes, barrier, n_shards
    threading.Thread(target=_exit_when_orphaned, args=(parent,), daemon=True).start()


def _exit_when_orphaned(parent: int) -> None:
    """A killed parent cannot stop its workers: they notice and end."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _count(task: Task) -> Counted:
    assert _counter is not None, "not a worker"
    _trim_heap()  # what the last task freed
    if not task.keep or _barrier is None:
        return _counter.count(task)
    counted = _counter.count(task, into=shards.keep_into(_held, _segments, task.keep, task.seq, _counter.new_counts))
    # A failed source's counts stay: the caller leaves its key out of what it keeps.
    if sum(map(len, _held.values())) * WORD_BYTES >= _hold_bytes:
        counted.shards = _hand_on()  # over this worker's share
    return counted


def _hand_on() -> dict[int, list[Packed]]:
    """Every key's counts this worker holds, cut into shards, let go."""
    return {key: shard_counts(_held.pop(key), _n_shards, _segments.pop(key)) for key in list(_held)}


def _flush(shard: bool) -> Counted:
    """Every count this worker holds (``shard``, or of more than one key: cut into
    shards, else whole); then wait for every other worker to take a flush task too,
    so that each takes one."""
    if shard or len(_held) > 1:
        counted = Counted({}, [], shards=_hand_on())
    else:
        key, held = _held.popitem() if _held else (0, Counter())
        counted = Counted(as_bytes(held), [], key=key, segments=_segments.pop(key, [(0, 0)]))
    _trim_heap()  # the counts just let go, while the other workers still count
    assert _barrier is not None, "not a worker"
    try:
        _barrier.wait()
    except threading.BrokenBarrierError:  # the parent stopped the flush (a source failed)
        pass
    return counted


_malloc_trim: list[Callable[[int], int] | None] = []  # glibc's, once looked up


def _trim_heap() -> None:
    """Give freed heap memory back to the system (glibc keeps it otherwise, and
    a worker's size would creep up with the length of the input)."""
    if not _malloc_trim:
        import ctypes

        try:
            _malloc_trim.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):  # not glibc
            _malloc_trim.append(None)
    trim = _malloc_trim[0]
    if trim is not None:
        trim(0)


class Done:
    """The result of a task counted in this process, as the ``Future`` of one sent to a
    worker gives it (the methods the scheduler calls): one worker needs no concurrent.futures."""

    __slots__ = ("value",)

    def __init__(self, value: Counted) -> None:
        self.value = value

    def done(self) -> bool:
        return True

    def result(self) -> Counted:
        return self.value

    def cancel(self) -> bool:
        return False  # done already, as a finished Future


class Pool:
    """Counts tasks in ``workers`` processes, started once ``start_at`` bytes of
    text were submitted; until then (and with one worker) in this process."""

    def __init__(self, spec: TokenizerSpec, *, errors: str, jsonl_field: str | None,
                 part_chars: int, workers: int, start_at: int, merge_bytes: int = 64 << 20,
                 skip: Collection[str] = frozenset()) -> None:
        # Before the workers start (below ``start_at``), the text counted here takes two threads.
        self.local = TaskCounter(spec, errors, jsonl_field, part_chars, skip, threads=min(workers, 2))
        self.config: tuple = (spec.to_json(), errors, jsonl_field, part_chars, skip, os.getpid())
        self.hold_bytes = merge_bytes // max(workers, 1)
        self.workers = workers
        self.start_at = start_at
        self.submitted = 0
        self.executor: ProcessPoolExecutor | None = None
        self.barrier: Any = None  # where workers keep counts (Task.keep) until flushed
        self.forked = False  # whether the workers were started
        self.held: dict[int, shards.Counts] = {}  # counts per key (Task.keep) counted in this process
        self.segments: dict[int, shards.Segments] = {}  # their ordinals
        self.seqs = itertools.count(1)  # Task.seq

    @property
    def capacity(self) -> int:
        """How many tasks to keep submitted and not yet taken: one more than the
        workers, so none waits for the next."""
        return self.workers + 1

    def submit(self, task: Task) -> Outcome:
        self.submitted += task.size
        task = dataclasses.replace(task, seq=next(self.seqs))  # ordinals: tasks numbered in the order sent
        if self.executor is None and self.workers > 1 and self.submitted >= self.start_at:
            # Forked where that is safe: no import or set-up again in each worker.
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("fork" if sys.platform == "linux" else None)
            # Workers keep counts only where all of them start at once (fork), so
            # that a flush reaches every one.
            self.barrier = context.Barrier(self.workers) if sys.platform == "linux" else None
            self.executor = ProcessPoolExecutor(self.workers, mp_context=context, initializer=_start_worker,
                                                initargs=(*self.config, self.hold_bytes, self.barrier,
                                                          self.workers))
        if self.executor is not None:
            if self.forked:
                return self.executor.submit(_count, task)
            # The workers are forked on the first submit: with the objects of this
            # process frozen, their garbage collector never writes to them, so
            # the pages stay shared instead of being copied into every worker.
            gc.freeze()
            try:
                return self.executor.submit(_count, task)
            finally:
                self.forked = True
                gc.unfreeze()
        return Done(self.count_here(task))

    def count_here(self, task: Task) -> Counted:
        """Count a task in this process; its counts are kept per key (as a worker
        keeps them) until the flush: one conversion to UTF-8 keys and no merge
        per task."""
        if not task.keep:
            return self.local.count(task)
        return self.local.count(task, into=shards.keep_into(self.held, self.segments, task.keep, task.seq,
                                                            self.local.new_counts))

    def flush(self, *, shard: bool = False, dropped: Collection[int] | None = None) -> list[Outcome]:
        """Every count kept: here (per key, or keys merged but ``dropped`` ones, None: not; in word order),
        and a task per worker handing back what it kept; ``shard``: cut into shards."""
        futures: list[Outcome] = []
        keeping = self.barrier is not None and self.executor is not None
        if shard and not keeping and dropped is not None and len(self.held) > 1 and (both := shards.merge_tables(
                self.held, self.segments, dropped)) is not None:  # one merge, not a dict per key
            futures.append(Done(Counted(both[0], [], reduced=True, firsts=both[1], distinct=both[2])))
        while self.held:
            key, held = self.held.popitem()
            segments = self.segments.pop(key)
            ordered = None if shard and keeping else shards.in_word_order(held, segments)
            futures.append(Done(Counted({}, [], shards={key: shard_counts(held, self.workers, segments)})
                                if shard and keeping else Counted(ordered[0], [], key=key, firsts=ordered[1])
                                if ordered else Counted(as_bytes(held), [], key=key, segments=segments)))
        if keeping:
            assert self.executor is not None
            futures += [self.executor.submit(_flush, shard) for _ in range(self.workers)]
        return futures

    def reduce(self, shards: list[list[tuple[int, Packed]]], keys: Collection[int]) -> list[Outcome]:
        """One task per shard that merges its pieces (``reduce_shard``) in a worker, and
        counts the distinct words of each of ``keys``."""
        assert self.executor is not None, "shards come only from workers"
        return [self.executor.submit(reduce_shard, pieces, keys) for pieces in shards if pieces]

    @staticmethod
    def take(future: Outcome) -> Counted:
        """A task's result, waiting for it; a worker's bug is raised here."""
        if isinstance(future, Done):
            return future.value
        from concurrent.futures import BrokenExecutor  # imported already: the workers started

        try:
            return future.result()
        except BrokenExecutor:  # a worker died
            raise BpestoreError("a counting process died; see the messages above") from None

    def close(self) -> None:
        """Stop the workers (a task already running ends first)."""
        self.held.clear()
        self.segments.clear()
        if self.executor is not None:
            if self.barrier is not None:
                self.barrier.abort()  # a flush cut short by a failure: its workers stop waiting
            self.executor.shutdown(wait=True, cancel_futures=True)
            self.executor, self.barrier, self.forked = None, None, False
