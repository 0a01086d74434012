"""``count_sources``: which source is counted how, and in what batches its counts come back. No SQL.

Sources are taken in order:

* a large plain file is cut into ranges of about ``chunk_bytes``, each at a place no word or special
  token spans (``TextPipeline.cut_anywhere``), sent several consecutive ranges to a task
  (``task_spans``); the workers read and count them one at a time while this process hashes the
  file;
* a compressed file, standard input, a large JSON Lines file (or any large file, under a spec
  without a built-in pre-tokenizer pattern) is read here, hashed and decoded as it is read, re-cut
  at safe places (``text.rechunk``) and sent in pieces;
* small files are sent by name, several to a task: the workers read, hash and count them (one whose
  content was counted before is read and hashed, not counted).

The workers keep the counts of each large source, and of each run of small ones, under a key of its
own, and hand them back, cut into shards, when their share of ``merge_bytes`` is full and when the
group ends; once a group is counted, the workers merge each shard (``pool``), counting each large
source's distinct words as they go: this process merges no counts per task, nor per source. Large
plain files counted in this process (one worker), or each sent whole to a worker (where the files
after it keep the others busy), share one key per group instead: the counting core's table counts
each as a piece of it, which tells its distinct words, and ten files are merged at the end as one
is. Should a source whose counts went into it not be kept, the others of it are counted again.

Consecutive large sources share a group of about ``batch_bytes``, and so do consecutive small ones.
Results are taken in the order the tasks were sent, so the groups come out in source order, and
consecutive groups are handed on as one batch (one transaction, one generation, one upsert) while
its distinct words stay within ``batch_words``: a call ingesting many files writes once.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from ..errors import BpestoreError, InvalidArgumentError
from ..limits import MAX_WORKERS
from ..processes import default_workers
from ..records import Progress, Source
from ..sources import (
    Opened,
    TextReader,
    changed_while_read,
    check_errors,
    cut_points,
    file_sha256,
    file_size,
    file_stamp,
    is_compressed,
    read_range,
)
from ..spec import TokenizerSpec
from ..text import TextPipeline, rechunk, recut
from .groups import Group
from .pieces import FileBytes, FileHash, FileRange, SmallFiles, TextPiece
from .pool import Pool, Task, TaskCounter, as_bytes, merge_counts
from .shards import firsts_of, join_firsts, merge_firsts

if TYPE_CHECKING:
    from .pool import Outcome


@dataclass(frozen=True)
class IngestTuning:
    """Sizes that trade memory, parallelism and overhead in ``count_sources``."""

    chunk_bytes: int = 512 << 10  # bytes read at a time; a range or piece counted is about this size
    small_source_bytes: int = 1 << 20  # plain files up to this size are counted whole, with others
    task_bytes: int = 1 << 20  # small sources are grouped into tasks of about this many bytes...
    batch_bytes: int = 256 << 20  # ...and sources into groups (one flush of the workers) of about this many
    parallel_min_bytes: int = 48 << 20  # N workers start where (N - 1) / N of the text is at least this much
    cut_window: int = 64 << 10  # bytes searched for a safe place to cut a file into ranges
    part_chars: int = 64 << 10  # a text is pre-tokenized in parts of about this many characters
    merge_bytes: int = 64 << 20  # the workers together keep counts of about this size before handing them on
    batch_words: int = 1 << 20  # sources are written together while their distinct words stay within this
    ranges_per_task: int = 8  # at most this many ranges of a large file are sent in one task...
    whole_bytes: int = 16 << 20  # ...but one up to this size goes whole to a worker where files after it wait

    def workers_start_at(self, expected: int, workers: int) -> int:
        """Bytes counted before ``workers`` processes start: none where (N - 1) / N of the
        ``expected`` text is at least ``parallel_min_bytes``, else as many as make it so (text of
        unknown size, a stream, may still get there). On 2 cores, 2 workers below ~100 MB cost more
        CPU and wall time than one process."""
        if expected * (workers - 1) >= self.parallel_min_bytes * workers:
            return 0
        return self.parallel_min_bytes * workers // max(workers - 1, 1)


@dataclass
class CountedBatch:
    """Sources counted together, in order, the merged counts of those not skipped and each
    word's ordinal (where it first occurred in their text, in order: ``shards.ordinals``)."""

    sources: list[Source]
    counts: Counter = field(default_factory=Counter)
    firsts: dict[bytes, int] = field(default_factory=dict)

    def add(self, batch: CountedBatch) -> None:
        """The sources of a batch after these, its counts added (emptied)."""
        self.sources += batch.sources
        small, large = sorted((self.counts, batch.counts), key=len)
        merge_counts(large, small)  # the smaller into the larger: the fewer steps
        self.counts = large
        self.firsts = join_firsts(self.firsts, batch.firsts)


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
class _Sent:
    """A task on its way: the group it counts for, and the sources it counts, in order."""

    future: Outcome
    group: Group
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
        # What the workers skip unread: contents counted before the call.
        self.known = frozenset() if force else frozenset(already_counted)
        self.large_sizes: set[int] = set()  # sizes of the large plain files so far
        self.progress = progress
        self.stdin = stdin
        self.errors = errors
        self.tuning = tuning
        self.stamps, self.sizes, self.compressed, self.small, self.after, self.total, expected = \
            _listed(paths, tuning.small_source_bytes)
        self.pool = Pool(spec, errors=errors, jsonl_field=jsonl_field,
                         part_chars=tuning.part_chars, workers=workers, merge_bytes=tuning.merge_bytes,
                         skip=self.known, start_at=tuning.workers_start_at(expected, workers))
        self.groups: deque[Group] = deque()  # in order; the head is the oldest not handed on
        self.sent: deque[_Sent] = deque()  # tasks in the order sent
        self.open: Group | None = None  # the group sources are added to
        self.unsent: list[Source] = []  # its small sources not yet in a task
        self.unsent_bytes = self.done_bytes = 0
        self.failure: BpestoreError | None = None  # the first source that failed
        self.keys = itertools.count(1)  # Task.keep of each large source and run of small ones
        self.batch: CountedBatch | None = None  # groups counted, not yet handed on (``coalesce``)

    # -- the main loop ---------------------------------------------------
    def run(self) -> Iterator[CountedBatch]:
        index = 0
        try:
            while index < len(self.paths):
                try:
                    if self.small[index]:
                        index = self.add_small(index)
                    else:
                        index += 1
                        yield from self.add_large(index - 1, self.paths[index - 1])
                except BpestoreError as exc:
                    # This source failed while being read: the ones before it still count.
                    self.failure = exc
                if self.failure is not None:
                    break
                if self.groups and self.groups[0].done:  # (no generator made per run of small files)
                    yield from self.finished()
            self.close_group()
            while self.sent:
                self.take_result()
            # All counted: the workers' memory goes before the last batches are written.
            self.pool.close()
            yield from self.finished()
            if self.batch is not None:  # the batch being gathered
                yield self.batch
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
            counts, firsts = group.joined()
            for source in group.repeats:  # counted by a worker before it was found to repeat
                for word, n in recount([source], self.pool.local).items():
                    if counts[word] == n:
                        del counts[word]
                    else:
                        counts[word] -= n
            yield from self.coalesce(CountedBatch(group.sources, counts, firsts))

    def coalesce(self, batch: CountedBatch) -> Iterator[CountedBatch]:
        """Add a counted group to the batch being gathered; hand that on first where the
        two together would hold more than ``batch_words`` distinct words."""
        gathered = self.batch
        if gathered is not None and len(gathered.counts) + len(batch.counts) > self.tuning.batch_words:
            yield gathered
            gathered = None
        if gathered is None:
            self.batch = batch
        else:
            gathered.add(batch)

    # -- groups of sources: one flush of the workers each ----------------------
    def group_for(self, small: bool) -> Group:
        """The open group, or a new one where it is of the other kind or full."""
        group = self.open
        # The shards the parent keeps of a group stay within about ``merge_bytes``
        # where the sources allow: each source's words come in shards of their own.
        if group is None or bool(group.key) != small or group.size >= self.tuning.batch_bytes or \
                group.held >= self.tuning.merge_bytes:
            self.close_group()
            group = self.open = Group(key=next(self.keys) if small else 0)
            self.groups.append(group)
        return group

    def close_group(self) -> None:
        """No more sources come to the open group: its counts are asked for."""
        group, self.open = self.open, None
        if group is not None and not group.closed:
            self.send_small(group)
            self.flush(group)
            group.closed = True
            self.reduce(group)

    # -- small sources: read, hashed and counted whole by the workers -------------
    def add_small(self, index: int) -> int:
        """Small sources from ``index`` on, up to one filling a task or the group, or not small: the index after."""
        paths, sizes, small, tuning = self.paths, self.sizes, self.small, self.tuning
        group = self.group_for(small=True)
        sources, unsent, full = group.sources, self.unsent, min(tuning.task_bytes - self.unsent_bytes,
                                                                tuning.batch_bytes - group.size)
        added = 0
        while True:
            path, size = paths[index], sizes[index] or 0
            if self.progress is not None:
                self.report(path, size, size, index)
            sources.append(stats := Source(path, size_bytes=size))
            unsent.append(stats)
            added += size
            index += 1
            if added >= full or index == len(paths) or not small[index]:
                break
        group.size += added
        self.unsent_bytes += added
        if self.unsent_bytes >= tuning.task_bytes:
            self.send_small(group)
        return index

    def send_small(self, group: Group) -> None:
        """The small sources not yet sent, as one task: one piece, their names and stamps."""
        if self.unsent:
            sources, size = self.unsent, self.unsent_bytes
            self.unsent, self.unsent_bytes = [], 0
            names = [s.source for s in sources]
            self.send(Task((SmallFiles(names, [*map(self.stamps.__getitem__, names)], size),), group.key),
                      group, sources)

    # -- large sources: counted in pieces, under a key of their own -------------
    def add_large(self, index: int, path: str) -> Iterator[CountedBatch]:
        group = self.group_for(small=False)
        stats = Source(path)
        group.sources.append(stats)
        key = next(self.keys)
        group.large[key] = stats
        plain = self.sizes[index] is not None and not self.compressed[index]
        size = self.sizes[index] or 0  # known for every plain file
        group.size += size
        # This content may be in already (counted before the call, or a file of the
        # same size earlier in it): hashing a plain file first spares counting a repeat.
        hashed_first = plain and not self.force and (bool(self.known) or size in self.large_sizes)
        if plain:
            self.large_sizes.add(size)
        try:
            if hashed_first:
                stats.sha256, stats.size_bytes = file_sha256(path), size
                if self.is_repeat(stats):
                    del group.large[key]
                    self.report(path, stats.size_bytes, stats.size_bytes, index)
                    return
            if plain and not self.jsonl and self.pipeline.cuts_words:
                yield from self.add_ranges(index, path, size, group, key)
            else:
                yield from self.add_stream(index, path, group, key)
        except BpestoreError as exc:
            self.fail(group, stats, exc)  # read here: nothing of it is kept
            return
        if self.failure is None and not hashed_first:
            if not plain:
                self.take_earlier(group)  # a small source before it may hold the same content
            if self.is_repeat(stats):  # hashed only now: its counts are not kept
                group.dropped.add(key)
                self.unshare(group, [stats])

    def take_earlier(self, group: Group) -> None:
        """Take the results of every task of an earlier group that counts sources (their
        sha256 are known once taken)."""
        while any(sent.sources and sent.group is not group for sent in self.sent):
            self.take_result()

    def add_ranges(self, index: int, path: str, size: int, group: Group, key: int) -> Iterator[CountedBatch]:
        """A plain file: the workers read it themselves, each a range between safe cuts."""
        stats = group.large[key]
        stats.size_bytes = size
        # Into the group's one table (ten files merged no more at the end than one), each file a piece of it:
        # counted here, or, where the files after it keep the others busy meanwhile, whole by one worker.
        workers = self.pool.workers
        whole = workers > 1 and size <= self.tuning.whole_bytes and self.after[index + 1] >= workers * size
        shared = (workers == 1 or whole) and self.pool.local.shares_tables and group.shared >= 0
        counted_as = group.piece_of(key, self.keys) if shared else key
        with FileHash(path, size, None if stats.sha256 else hashlib.sha256()) as hashing:
            points = cut_points(path, size, self.pipeline, step=self.tuning.chunk_bytes,
                                window=self.tuning.cut_window)
            # Ten 10 MB files: 12 tasks each (a tail of single ranges each), 3 with the files after in view.
            later = 0 if workers == 1 else self.after[index + 1] // self.tuning.chunk_bytes
            spans = [(0, len(points) - 1)] if shared and whole else \
                task_spans(len(points) - 1, workers, self.tuning.ranges_per_task, later)
            for n, (first, last) in enumerate(spans):
                ranges = tuple(FileRange(path, a, b) for a, b in itertools.pairwise(points[first:last + 1]))
                end = points[last]
                self.send(Task(ranges, counted_as, shared=shared, go_on=n > 0), group, [stats])
                self.report(path, end, size, index, final=end == size)
                yield from self.finished()
                if self.failure is not None:
                    return
            if not stats.sha256:
                stats.sha256 = hashing.hexdigest()

    def add_stream(self, index: int, path: str, group: Group, key: int) -> Iterator[CountedBatch]:
        """Standard input, a compressed file, JSON Lines: read here, sent in pieces."""
        stats = group.large[key]
        with Opened(path, self.stdin) as opened:
            reader = TextReader(opened.stream, path, errors=self.errors,
                                chunk_bytes=self.tuning.chunk_bytes)
            texts = self.reported(reader, opened, index)
            pieces = recut(texts, _after_last_line) if self.jsonl else rechunk(texts, self.pipeline)
            first_line = 1
            for piece in pieces:
                self.send(Task((TextPiece(path, piece, first_line),), key), group, [stats])
                if self.jsonl:
                    first_line += piece.count("\n")
                yield from self.finished()
                if self.failure is not None:
                    return
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

    def send(self, task: Task, group: Group, sources: list[Source]) -> None:
        """Send a task counting sources of a group; take the results that are in."""
        while len(self.sent) >= self.pool.capacity:
            self.take_result()
        if group.closed:
            return  # failed: nothing more is counted for it
        group.pending += 1
        self.sent.append(_Sent(self.pool.submit(task), group, sources))
        while self.sent and self.sent[0].future.done():
            self.take_result()

    def flush(self, group: Group) -> None:
        """Ask every worker for the counts it kept (all the group's tasks are sent)."""
        if not group.flushed and group.counts is not None and not group.pending and \
                (changed := group.changed(self.stamps)):  # all read: keys counted here may be merged
            self.fail(group, changed, changed_while_read(changed.source))
        if group.flushed or group.counts is None:
            return
        group.flushed = True
        # In shards wherever workers count: the workers merge them (``reduce``) and the parent gets
        # disjoint parts in word order. Two workers' whole counts merged in the parent cost it more
        # than the round trip (100 MB: 0.4 s of its CPU, 0.1 s at 20 MB).
        shard = group.shards is not None or self.pool.workers > 1 or len(group.large) > 1
        for future in self.pool.flush(shard=shard, dropped=group.dropped if group.checked else None):
            group.pending += 1
            self.sent.append(_Sent(future, group, []))

    def reduce(self, group: Group) -> None:
        """Once a group's tasks and flushes are all answered: a source ``changed`` fails (``fail``: those
        before it are kept), then have the workers merge each shard of the counts they handed on (``Pool.reduce``)."""
        if not group.closed or group.pending or group.counts is None:
            return
        if changed := group.changed(self.stamps):
            self.fail(group, changed, changed_while_read(changed.source))
        if group.shards and group.counts is not None:
            shards = [[(key, piece) for key, piece in pieces if key not in group.dropped]
                      for pieces in group.shards]
            for future in self.pool.reduce(shards, set(group.large) - group.dropped):
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
            return  # not kept
        if counted.shas is not None:  # small sources the worker read and hashed
            for stats, sha, (n_words, n_distinct) in zip(sent.sources, counted.shas, counted.words):
                stats.sha256 = sha
                if self.is_repeat(stats):
                    if sha not in self.known:  # it was counted: its counts come off
                        group.repeats.append(stats)
                else:
                    stats.n_words, stats.n_distinct = n_words, n_distinct
        else:
            for stats, (n_words, n_distinct) in zip(sent.sources, counted.words):
                if not stats.skipped:  # (a large source found to repeat: its counts are not kept)
                    stats.n_words += n_words
                    stats.n_distinct = n_distinct  # a large one's is set when done
        if counted.distinct:
            group.distinct.update(counted.distinct)
        if counted.reduced:
            group.reduced.append((counted.counts, counted.ordinals()))
        elif counted.counts and counted.key not in group.dropped:
            kept = group.counts.get(counted.key)
            if kept is None:
                group.firsts[counted.key] = counted.ordinals()
                group.counts[counted.key] = Counter(counted.counts) if type(counted.counts) is not Counter \
                    else counted.counts
            else:
                merge_firsts(group.firsts[counted.key], counted.ordinals())
                merge_counts(kept, counted.counts)
        if counted.shards:
            for key, shards in counted.shards.items():
                if group.shards is None:
                    group.shards = [[] for _ in shards]
                for pieces, piece in zip(group.shards, shards):
                    pieces.append((key, piece))
                    group.held += sum(map(len, piece))
        if counted.error is not None:
            self.fail(group, sent.sources[len(counted.words)], counted.error)
        else:
            self.reduce(group)

    def fail(self, group: Group, failed: Source, error: BpestoreError) -> None:
        """A source failed: it and every later source are not kept, and no task sent
        after it is taken (but the counts of the sources before it are, the shards of
        an earlier group's included)."""
        self.failure = error
        at = next(i for i, s in enumerate(group.sources) if s is failed)
        gone = group.sources[at:]
        del group.sources[at:]
        group.dropped |= {key for key, source in group.large.items() if any(source is g for g in gone)}
        group.closed = True
        if group is self.open:
            self.open = None
        if not group.sources:
            group.drop()
        elif group.key and group.counts is not None:
            # Small sources before it in its group: the workers kept their counts mixed with the
            # failed one's, so they are counted again here (they are small; after all sent: ordinals).
            recounted = recount([s for s in group.sources if not s.skipped], self.pool.local)
            group.counts, group.shards, group.reduced = {0: recounted}, None, []
            group.firsts = {0: firsts_of(recounted, [(0, next(self.pool.seqs))])}
            group.dropped.add(group.key)
            group.flushed, group.repeats = True, []
        else:
            self.unshare(group, gone)
        groups = list(self.groups)
        earlier = groups[:groups.index(group)]
        for later in groups[groups.index(group) + 1:]:
            later.drop()
        kept: deque[_Sent] = deque()
        for sent in self.sent:
            if any(sent.group is g for g in earlier) or sent.group is group and group.counts is not None and \
                    not any(s is g for s in sent.sources for g in gone):
                kept.append(sent)  # an earlier source's task, or the flush of the sources kept
                continue
            sent.future.cancel()
            sent.group.pending -= 1
        self.sent = kept
        self.unsent, self.unsent_bytes = [], 0
        self.flush(group)  # the large sources before it

    def unshare(self, group: Group, gone: list[Source]) -> None:
        """Where the group's shared table holds counts of a source ``gone`` (not kept): the sources kept
        of it are counted again here (read whole, checked unchanged), the table is not kept."""
        if group.shared > 0 and group.counts is not None and group.holds_pieces_of(gone):
            group.dropped.add(group.shared)
            group.shared = -1
            recounted = recount(group.pieces_kept(), self.pool.local)
            group.counts[0], group.firsts[0] = recounted, firsts_of(recounted, [(0, next(self.pool.seqs))])

    def report(self, name: str, source_done: int, source_size: int | None, index: int, *,
               final: bool = True) -> None:
        if self.progress is None:
            return
        done = self.done_bytes + source_done
        if final:
            self.done_bytes = done
        self.progress(Progress("ingest", name, done, self.total, "bytes",
                               sources_done=index + final, sources_total=len(self.paths)))


def _listed(paths: list[str], small_bytes: int) -> tuple[dict[str, tuple[int, int, int] | None], list[int | None],
                                                      list[bool], list[bool], list[int], int | None, int]:
    """Of each path: its stamp (size and more, from one stat before any is read: 10,000 small files paid a stat
    each more), size, whether it is compressed and whether small (counted whole, with others); the bytes of the
    large plain files from each on; the bytes of them all (None: one's is unknown, a stream), and the text expected."""
    stamps = {p: file_stamp(p) for p in paths}
    sizes = [file_size(p) if (stamp := stamps[p]) is None else stamp[0] for p in paths]
    compressed = [is_compressed(p) for p in paths]
    small = [s is not None and s <= small_bytes and not c for s, c in zip(sizes, compressed)]
    large = [s if s is not None and not is_small and not c else 0 for s, is_small, c in zip(sizes, small, compressed)]
    after = [*itertools.accumulate(large[::-1])][::-1] + [0]
    known = [s for s in sizes if s is not None]
    # Compressed text is several times its size on disk.
    expected = sum(s * (4 if c else 1) for c, s in zip(compressed, sizes) if s is not None)
    return stamps, sizes, compressed, small, after, None if len(known) < len(sizes) else sum(known), expected


def recount(sources: list[Source], counter: TaskCounter) -> Counter:
    """Sources read whole and counted again, each checked to hold what was counted."""
    counts: Counter = Counter()
    for source in sources:
        data = read_range(source.source)
        if hashlib.sha256(data).hexdigest() != source.sha256:
            raise changed_while_read(source.source)
        counter.count(Task((FileBytes(source.source, data),)), into=counts)
    return Counter(as_bytes(counts))


def task_spans(n_ranges: int, workers: int, most: int, later: int = 0) -> list[tuple[int, int]]:
    """Consecutive ranges ``first:last`` of a file, one span per task: up to ``most`` ranges
    a task while each worker still gets four or more tasks (sending a task costs the
    parent about a millisecond) of this file and the ``later`` ranges of the files after it,
    and the last two per worker of them all one range each, so the workers end about together."""
    tail = min(n_ranges, max(0, 2 * workers - later))
    per_task = max(1, min(most, (n_ranges + later - tail) // (4 * workers)))
    firsts = [*range(0, n_ranges - tail, per_task), *range(n_ranges - tail, n_ranges)]
    return list(zip(firsts, [*firsts[1:], n_ranges]))


def _after_last_line(text: str) -> int:
    return text.rfind("\n") + 1
