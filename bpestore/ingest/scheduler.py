"""``count_sources``: which source is counted how, and in what batches its counts come back. No SQL.

Sources are taken in order:

* a large plain file is cut into ranges of about ``chunk_bytes``, each at a
  place no word or special token spans (``TextPipeline.cut_anywhere``), sent
  several consecutive ranges to a task (``task_spans``); the workers read and
  count them one at a time while this process hashes the file;
* a compressed file, standard input, a large JSON Lines file (or any large
  file, under a spec without a built-in pre-tokenizer pattern) is read here, hashed and
  decoded as it is read, re-cut at safe places (``text.rechunk``) and sent in
  pieces;
* small files are read and hashed here and sent whole, several to a task.

The workers keep the counts of a large source, or of a group of small ones, and
hand them back, cut into shards, when their share of ``merge_bytes`` is full
and when the group ends; once a group is counted, the workers merge each shard
(``pool``): this process merges no counts per task.

A large source is counted as a group of its own; small ones share groups of
about ``batch_bytes``. Results are taken in the order the tasks were sent, so the
groups come out in source order, and consecutive groups are handed on as one
batch (one transaction, one generation, one upsert) while its distinct words
stay within ``batch_words``: a call ingesting many files writes once.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import stat
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import BinaryIO

from ..errors import BpestoreError, InvalidArgumentError, SourceError
from ..limits import MAX_WORKERS
from ..processes import default_workers
from ..records import Progress, Source
from ..sources import Opened, TextReader, check_errors, cut_points, file_sha256, file_size, is_compressed, read_range
from ..spec import TokenizerSpec
from ..text import TextPipeline, rechunk, recut
from .pool import Counted, FileBytes, FileRange, Packed, Pool, Task, TextPiece, as_bytes, merge_counts


@dataclass(frozen=True)
class IngestTuning:
    """Sizes that trade memory, parallelism and overhead in ``count_sources``."""

    chunk_bytes: int = 512 << 10  # bytes read at a time; a range or piece counted is about this size
    small_source_bytes: int = 1 << 20  # plain files up to this size are counted whole, with others
    task_bytes: int = 1 << 20  # small sources are grouped into tasks of about this many bytes...
    batch_bytes: int = 256 << 20  # ...and into batches (one transaction each) of about this many
    parallel_min_bytes: int = 4 << 20  # less text than this is counted in this process
    cut_window: int = 64 << 10  # bytes searched for a safe place to cut a file into ranges
    part_chars: int = 64 << 10  # a text is pre-tokenized in parts of about this many characters
    merge_bytes: int = 64 << 20  # the workers together keep counts of about this size before handing them on
    batch_words: int = 1 << 20  # sources are written together while their distinct words stay within this
    ranges_per_task: int = 8  # at most this many ranges of a large file are sent in one task


@dataclass
class CountedBatch:
    """Sources counted together, in order, and the merged counts of those not skipped."""

    sources: list[Source]
    counts: Counter = field(default_factory=Counter)


def count_sources(
    paths: Sequence[str],
    spec: TokenizerSpec,
    *,
    errors: str = "strict",
    workers: int | None = None,
    jsonl_field: str | None = None,
    already_counted: Collection[str] = (),
    force: bool = False,
    progress: Callable[[Progress], None] | None = None,
    stdin: BinaryIO | None = None,
    tuning: IngestTuning = IngestTuning(),
) -> Iterator[CountedBatch]:
    """Count the words of each source (a file or ``-``), in order, in batches.

    A source whose sha256 is in ``already_counted``, or repeats one counted
    earlier in the call, is reported as skipped unless ``force``. ``workers``
    processes count (default: one per core); ``jsonl_field`` reads every
    source as JSON Lines and counts that field of each record. A source that
    cannot be read or decoded raises ``SourceError`` after the batches of the
    sources before it: nothing of it is in any batch. The counts equal one
    ``collections.Counter`` over each whole source.
    """
    check_errors(errors)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise InvalidArgumentError(f"workers must be 1 to {MAX_WORKERS}, not {workers}", params=("workers",))
    counting = _Counting(list(paths), spec, errors=errors,
                         workers=workers if workers is not None else default_workers(),
                         jsonl_field=jsonl_field, already_counted=already_counted, force=force,
                         progress=progress, stdin=stdin, tuning=tuning)
    return counting.run()


@dataclass(eq=False)
class _Group:
    """Sources on their way to becoming one CountedBatch."""

    sources: list[Source] = field(default_factory=list)
    counts: Counter | None = field(default_factory=Counter)  # None: not kept (a repeat, a failure)
    key: int = 0  # the workers keep its counts under this key (Task.keep)
    size: int = 0  # bytes of its sources
    pending: int = 0  # its tasks not yet answered
    closed: bool = False  # no more sources or tasks come
    shards: list[list[Packed]] | None = None  # counts workers handed on, per shard, not yet reduced
    reduced: list[dict[bytes, int]] = field(default_factory=list)  # each shard's counts, once reduced

    def joined(self) -> Counter:
        """Its counts: the reduced shards (no word in two of them: joined without
        adding, each let go once in: the parent never holds the counts twice) and
        whatever else came back."""
        if not self.reduced or self.counts is None:
            return self.counts if self.counts is not None else Counter()
        total: Counter = Counter()
        while self.reduced:
            dict.update(total, self.reduced.pop(0))
        merge_counts(total, self.counts)
        return total

    @property
    def done(self) -> bool:
        return self.closed and self.pending == 0 and not self.shards

    def drop(self) -> None:
        """Keep nothing of it."""
        self.sources, self.counts, self.closed, self.shards, self.reduced = [], None, True, None, []


@dataclass(eq=False)
class _Sent:
    """A task on its way: the group it counts for, and the sources it counts, in order."""

    future: Future[Counted]
    group: _Group
    sources: list[Source]


class _Counting:
    """The state of one ``count_sources`` call."""

    def __init__(self, paths: list[str], spec: TokenizerSpec, *, errors: str, workers: int,
                 jsonl_field: str | None, already_counted: Collection[str], force: bool,
                 progress: Callable[[Progress], None] | None, stdin: BinaryIO | None,
                 tuning: IngestTuning) -> None:
        self.paths = paths
        self.pipeline = TextPipeline(spec)
        self.jsonl = jsonl_field is not None
        self.force = force
        self.seen = set(already_counted)  # sha256 of contents counted (skip repeats)
        self.progress = progress
        self.stdin = stdin
        self.errors = errors
        self.tuning = tuning
        # Each file's size and stamp, from one stat before any is read (10,000 small
        # files paid a stat each more when each was read).
        self.stamps: dict[str, tuple[int, int, int] | None] = {p: _stamp(p) for p in paths}
        self.sizes = [file_size(p) if (stamp := self.stamps[p]) is None else stamp[0] for p in paths]
        known = [s for s in self.sizes if s is not None]
        self.total = None if len(known) < len(self.sizes) else sum(known)
        # Compressed text is several times its size on disk.
        expected = sum(s * (4 if is_compressed(p) else 1)
                       for p, s in zip(paths, self.sizes) if s is not None)
        self.pool = Pool(spec, errors=errors, jsonl_field=jsonl_field,
                         part_chars=tuning.part_chars, workers=workers, merge_bytes=tuning.merge_bytes,
                         start_at=0 if expected >= tuning.parallel_min_bytes
                         else tuning.parallel_min_bytes)
        self.groups: deque[_Group] = deque()  # in order; the head is the oldest not handed on
        self.sent: deque[_Sent] = deque()  # tasks in the order sent
        self.small: _Group | None = None  # the open group of small sources
        self.unsent: list[tuple[Source, FileBytes]] = []  # its sources not yet in a task
        self.unsent_bytes = 0
        self.done_bytes = 0
        self.failure: BpestoreError | None = None  # the first source that failed
        self.keys = itertools.count(1)  # Task.keep of each large source
        self.batch: CountedBatch | None = None  # groups counted, not yet handed on (``coalesce``)

    # -- the main loop ---------------------------------------------------
    def run(self) -> Iterator[CountedBatch]:
        try:
            for index, path in enumerate(self.paths):
                try:
                    size = self.sizes[index]
                    if size is not None and size <= self.tuning.small_source_bytes and \
                            not is_compressed(path):
                        self.add_small(index, path)
                    else:
                        self.close_small()
                        yield from self.add_large(index, path)
                except BpestoreError as exc:
                    # This source failed while being read: the ones before it still count.
                    self.failure = exc
                if self.failure is not None:
                    break
                yield from self.finished()
            self.close_small()
            while self.sent:
                self.take_result()
            # All counted: the workers' memory goes before the last batches are written.
            self.pool.close()
            yield from self.finished()
            yield from self.hand_on()
        finally:
            self.pool.close()
        if self.failure is not None:
            raise self.failure

    def finished(self) -> Iterator[CountedBatch]:
        """Hand on the groups at the head of the queue whose counting is done."""
        while self.groups and self.groups[0].done:
            group = self.groups.popleft()
            if not group.sources:
                continue
            for source in group.sources:
                if not source.skipped and _stamp(source.source) != self.stamps.get(source.source):
                    yield from self.hand_on()  # the sources before it are kept
                    raise SourceError(f"{source.source} changed while it was read; nothing of it was stored: "
                                      "ingest it again once it stays as it is", source=source.source)
            counts = group.joined()
            if len(group.sources) == 1 and group.counts is not None:
                # A large source's pieces each report their own distinct words.
                group.sources[0].n_distinct = len(counts)
            yield from self.coalesce(CountedBatch(group.sources, counts))

    def coalesce(self, batch: CountedBatch) -> Iterator[CountedBatch]:
        """Add a counted group to the batch being gathered; hand that on first where the
        two together would hold more than ``batch_words`` distinct words."""
        gathered = self.batch
        if gathered is None:
            self.batch = batch
            return
        if len(gathered.counts) + len(batch.counts) > self.tuning.batch_words:
            yield gathered
            self.batch = batch
            return
        gathered.sources += batch.sources
        small, large = sorted((gathered.counts, batch.counts), key=len)
        merge_counts(large, small)  # the smaller into the larger: the fewer steps
        gathered.counts = large

    def hand_on(self) -> Iterator[CountedBatch]:
        """The batch being gathered, if any."""
        if self.batch is not None:
            batch, self.batch = self.batch, None
            yield batch

    # -- small sources: read whole, counted and written together --------------
    def add_small(self, index: int, path: str) -> None:
        data = read_range(path)
        stats = Source(path, hashlib.sha256(data).hexdigest(), len(data))
        self.report(path, stats.size_bytes, stats.size_bytes, index)
        if self.small is None or self.small.size >= self.tuning.batch_bytes:
            self.close_small()
            self.small = _Group(key=next(self.keys))
            self.groups.append(self.small)
        self.small.sources.append(stats)
        self.small.size += stats.size_bytes
        if self.is_repeat(stats):
            return
        self.unsent.append((stats, FileBytes(path, data)))
        self.unsent_bytes += len(data)
        if self.unsent_bytes >= self.tuning.task_bytes:
            self.send_small()

    def send_small(self) -> None:
        if self.small is not None and self.unsent:
            sources, pieces = zip(*self.unsent)
            self.unsent, self.unsent_bytes = [], 0
            self.send(Task(pieces, self.small.key), self.small, list(sources))

    def close_small(self) -> None:
        if self.small is not None:
            self.send_small()
            self.flush(self.small)
            self.small.closed = True
            self.reduce(self.small)
            self.small = None

    # -- large sources: counted in pieces, a batch of their own ----------------
    def add_large(self, index: int, path: str) -> Iterator[CountedBatch]:
        stats = Source(path)
        group = _Group([stats], key=next(self.keys))
        self.groups.append(group)
        plain = self.sizes[index] is not None and not is_compressed(path)
        size = self.sizes[index] or 0  # known for every plain file
        hashed_first = plain and not self.force and bool(self.seen)
        if hashed_first:
            # This content may be in already: hashing a plain file first is cheap,
            # and spares counting a repeat.
            stats.sha256, stats.size_bytes = file_sha256(path), size
            if self.is_repeat(stats):
                group.closed = True
                self.report(path, stats.size_bytes, stats.size_bytes, index)
                return
        if plain and not self.jsonl and self.pipeline.cuts_words:
            yield from self.add_ranges(index, path, size, group)
        else:
            yield from self.add_stream(index, path, group)
        if self.failure is None:
            if not hashed_first and self.is_repeat(stats):  # hashed only now: drop the counts
                group.counts = None
            self.flush(group)
            group.closed = True
            self.reduce(group)

    def add_ranges(self, index: int, path: str, size: int, group: _Group) -> Iterator[CountedBatch]:
        """A plain file: the workers read it themselves, each a range between safe cuts."""
        stats = group.sources[0]
        stats.size_bytes = size
        hasher = None if stats.sha256 else hashlib.sha256()
        with open(path, "rb") as f:
            points = cut_points(path, size, self.pipeline, step=self.tuning.chunk_bytes,
                                window=self.tuning.cut_window)
            for first, last in task_spans(len(points) - 1, self.pool.workers, self.tuning.ranges_per_task):
                ranges = tuple(FileRange(path, a, b) for a, b in itertools.pairwise(points[first:last + 1]))
                start, end = points[first], points[last]
                self.send(Task(ranges, group.key), group, [stats])
                if hasher is not None:  # hash while the workers count
                    hasher.update(f.read(end - start))
                self.report(path, end, size, index, final=end == size)
                yield from self.finished()
                if self.failure is not None:
                    return
        if hasher is not None:
            stats.sha256 = hasher.hexdigest()

    def add_stream(self, index: int, path: str, group: _Group) -> Iterator[CountedBatch]:
        """Standard input, a compressed file, JSON Lines: read here, sent in pieces."""
        stats = group.sources[0]
        try:
            with Opened(path, self.stdin) as opened:
                reader = TextReader(opened.stream, path, errors=self.errors,
                                    chunk_bytes=self.tuning.chunk_bytes)
                texts = self.reported(reader, opened, index)
                pieces = recut(texts, _after_last_line) if self.jsonl else rechunk(texts, self.pipeline)
                first_line = 1
                for piece in pieces:
                    self.send(Task((TextPiece(path, piece, first_line),), group.key), group, [stats])
                    if self.jsonl:
                        first_line += piece.count("\n")
                    yield from self.finished()
                    if self.failure is not None:
                        return
        except BpestoreError:
            group.drop()  # nothing of a source that failed is kept
            raise
        if not stats.sha256:
            stats.sha256 = reader.sha256.hexdigest()
        stats.size_bytes = reader.size

    def reported(self, reader: TextReader, opened: Opened, index: int) -> Iterator[str]:
        for text in reader:
            position = opened.position()
            self.report(reader.name, reader.size if position is None else position,
                        self.sizes[index], index, final=False)
            yield text
        self.report(reader.name, opened.position() or reader.size, self.sizes[index], index)

    # -- shared steps ------------------------------------------------------
    def is_repeat(self, stats: Source) -> bool:
        """Whether this content was counted already (then the source is skipped)."""
        if not self.force and stats.sha256 in self.seen:
            stats.skipped = True
            stats.n_words = stats.n_distinct = 0
            return True
        self.seen.add(stats.sha256)
        return False

    def send(self, task: Task, group: _Group, sources: list[Source]) -> None:
        """Send a task counting sources of a group; take the results that are in."""
        while len(self.sent) >= self.pool.capacity:
            self.take_result()
        if group.closed:
            return  # failed: nothing more is counted for it
        group.pending += 1
        self.sent.append(_Sent(self.pool.submit(task), group, sources))
        while self.sent and self.sent[0].future.done():
            self.take_result()

    def flush(self, group: _Group) -> None:
        """Ask every worker for the counts it kept of a large source (all its tasks are sent)."""
        if group.closed:
            return
        # In shards where more than two workers count, or shards were handed on already:
        # the workers merge them (``reduce``) and the parent gets disjoint parts in word
        # order. Else each worker's counts come whole: the parent's merge of two costs
        # less than a round trip more.
        for future in self.pool.flush(group.key, shard=group.shards is not None or self.pool.workers > 2):
            group.pending += 1
            self.sent.append(_Sent(future, group, []))

    def reduce(self, group: _Group) -> None:
        """Once a group's tasks and flushes are all answered, have the workers merge
        each shard of the counts they handed on (``Pool.reduce``)."""
        if group.closed and group.pending == 0 and group.shards and group.counts is not None:
            for future in self.pool.reduce(group.shards):
                group.pending += 1
                self.sent.append(_Sent(future, group, []))
            group.shards = None

    def take_result(self) -> None:
        """Take the oldest task's result (waiting for it) into its group."""
        sent = self.sent.popleft()
        counted = self.pool.take(sent.future)
        group = sent.group
        group.pending -= 1
        if group.counts is None:
            return  # a repeat found late: not kept
        for stats, (n_words, n_distinct) in zip(sent.sources, counted.words):
            stats.n_words += n_words
            stats.n_distinct = n_distinct  # a small source's; a large one's is set when done
        if counted.reduced:
            group.reduced.append(counted.counts)
        else:
            merge_counts(group.counts, counted.counts)
        if counted.shards:
            if group.shards is None:
                group.shards = [[] for _ in counted.shards]
            for pieces, piece in zip(group.shards, counted.shards):
                pieces.append(piece)
        if counted.error is not None:
            self.fail(group, sent.sources[len(counted.words)], counted.error)
        else:
            self.reduce(group)

    def fail(self, group: _Group, failed: Source, error: BpestoreError) -> None:
        """A source failed in a task: it and every later source are not kept, and
        no task sent after it is taken (but the shards of an earlier source, sent
        once its counting ended, are still merged)."""
        self.failure = error
        del group.sources[next(i for i, s in enumerate(group.sources) if s is failed):]
        group.closed = True
        if not group.sources:
            group.drop()
        elif group.counts is not None:
            # Small sources before it in its group: the workers kept their counts mixed
            # with the failed one's, so they are counted again here (they are small).
            group.counts, group.shards, group.reduced = self.recount(group.sources), None, []
        groups = list(self.groups)
        earlier = groups[:groups.index(group)]
        for later in groups[groups.index(group) + 1:]:
            later.drop()
        kept: deque[_Sent] = deque()
        for sent in self.sent:
            if any(sent.group is g for g in earlier):
                kept.append(sent)
                continue
            sent.future.cancel()
            sent.group.pending -= 1
        self.sent = kept
        self.unsent, self.unsent_bytes = [], 0

    def recount(self, sources: list[Source]) -> Counter:
        counts: Counter = Counter()
        for source in sources:
            if not source.skipped:
                self.pool.local.count(Task((FileBytes(source.source, read_range(source.source)),)), into=counts)
        return Counter(as_bytes(counts))

    def report(self, name: str, source_done: int, source_size: int | None, index: int, *,
               final: bool = True) -> None:
        if self.progress is None:
            return
        done = self.done_bytes + source_done
        if final:
            self.done_bytes = done
        self.progress(Progress("ingest", name, done, self.total, "bytes",
                               sources_done=index + final, sources_total=len(self.paths)))


def task_spans(n_ranges: int, workers: int, most: int) -> list[tuple[int, int]]:
    """Consecutive ranges ``first:last`` of a file, one span per task: up to ``most`` ranges
    a task while each worker still gets four or more tasks (sending a task costs the
    parent about a millisecond), and the last two per worker one range each, so the
    workers end about together."""
    tail = min(n_ranges, 2 * workers)
    per_task = max(1, min(most, (n_ranges - tail) // (4 * workers)))
    firsts = [*range(0, n_ranges - tail, per_task), *range(n_ranges - tail, n_ranges)]
    return list(zip(firsts, [*firsts[1:], n_ranges]))


def _stamp(path: str) -> tuple[int, int, int] | None:
    """What changes when a file is written: its size, modification time and inode (None: stdin, a
    stream such as a FIFO (read once: its time changes as it is read), or gone)."""
    if path == "-":
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return found.st_size, found.st_mtime_ns, found.st_ino


def _after_last_line(text: str) -> int:
    return text.rfind("\n") + 1
