"""Reading sources into word counts: streaming, hashing, UTF-8 checking, parallel counting. No SQL.

A source is a file, ``-`` for standard input, a ``.gz``/``.xz``/``.bz2`` file, or
(with ``jsonl_field``) a JSON Lines file. Pre-tokenizing is the costly part, so
worker processes count, and this process hands out the work and gathers the
counts:

* a large plain file is cut into ranges of a few MB, each at a place no word
  or special token spans (``TextPipeline.cut_anywhere``); the workers read and
  decode their ranges themselves and add up their counts until the source is
  done;
* a compressed file or standard input is read here in chunks (hashed and
  decoded as it is read), re-cut at safe places (``text.rechunk``) and sent;
* small files are read whole and counted in groups.

Counts come back as ``CountedBatch`` es, in source order: a large source is a
batch of its own; small sources share batches (a directory of thousands of
files costs neither a process start nor a transaction each). A source that
fails (invalid UTF-8 under ``errors="strict"``, a bad JSON line) raises after
the batches of the sources before it. The counts equal one
``collections.Counter`` over each whole source.

>>> import io
>>> spec = TokenizerSpec(pretokenizer="whitespace")
>>> [batch] = count_sources(["-"], spec, stdin=io.BytesIO(b"a b a"))
>>> batch.counts, batch.sources[0].n_words
(Counter({b'a': 2, b'b': 1}), 3)
"""

from __future__ import annotations

import bz2
import codecs
import ctypes
import gzip
import hashlib
import itertools
import json
import lzma
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import traceback
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import BinaryIO

from .errors import BpestoreError
from .records import Progress, Source
from .spec import TokenizerSpec
from .text import TextPipeline, rechunk, recut

ERROR_POLICIES = ("strict", "replace", "skip")
COMPRESSED_SUFFIXES = (".gz", ".xz", ".bz2")

# Bytes read at a time; a piece handed to a worker is about this size.
CHUNK_BYTES = 1 << 20
# Plain files up to this size are read whole and counted together with others.
SMALL_SOURCE_BYTES = 1 << 20
# Small sources are grouped into tasks of about this many bytes...
TASK_BYTES = 1 << 20
# ...and into batches (one transaction each) of about this many bytes.
BATCH_BYTES = 64 << 20
# Less text than this is counted in this process: a worker pool would cost more.
PARALLEL_MIN_BYTES = 4 << 20
# Bytes searched for a safe place to cut a file into ranges.
CUT_WINDOW = 64 << 10
# A worker pre-tokenizes a piece in parts of about this many characters.
PART_CHARS = 1 << 18
# A worker hands back the counts it keeps for a large source at this many distinct words.
KEPT_WORDS_LIMIT = 50_000


@dataclass
class CountedBatch:
    """Sources counted together, in order, and the merged counts of those not skipped."""

    sources: list[Source]
    counts: Counter = field(default_factory=Counter)


# ---------------------------------------------------------------------------
# sources: naming, opening, reading
# ---------------------------------------------------------------------------
def expand_paths(paths: Iterable[str | Path], *, glob: str | None = None) -> list[str]:
    """The files to read: each path as given, and the files under each directory
    (recursively, sorted, those matching ``glob`` such as ``"*.txt"``)."""
    files: list[str] = []
    for path in map(str, paths):
        if path == "-":
            if "-" in files:
                raise BpestoreError("'-' (standard input) can be given only once")
            files.append(path)
            continue
        p = Path(path)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob(glob or "*") if f.is_file())
            if not found:
                raise BpestoreError(f"no files{f' matching {glob!r}' if glob else ''} under {path}")
            files.extend(found)
        elif p.exists():
            files.append(path)
        else:
            raise BpestoreError(f"file not found: {path}")
    return files


class _Opened:
    """A source opened for binary reading: ``stream`` gives its (decompressed)
    bytes, ``position()`` how far into the file on disk reading has got."""

    def __init__(self, name: str, stdin: BinaryIO | None = None) -> None:
        self.raw: BinaryIO | None = None
        if name == "-":
            self.stream = stdin if stdin is not None else sys.stdin.buffer
            return
        try:
            self.raw = open(name, "rb")
        except FileNotFoundError:
            raise BpestoreError(f"file not found: {name}") from None
        except IsADirectoryError:
            raise BpestoreError(f"{name} is a directory; give the files in it") from None
        except OSError as exc:
            raise BpestoreError(f"cannot read {name}: {exc.strerror}") from None
        opener = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}.get(Path(name).suffix)
        self.stream = opener(self.raw, "rb") if opener else self.raw

    def position(self) -> int | None:
        return self.raw.tell() if self.raw is not None else None

    def close(self) -> None:
        if self.raw is not None:
            if self.stream is not self.raw:
                self.stream.close()
            self.raw.close()

    def __enter__(self) -> "_Opened":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_source(path: str | Path) -> BinaryIO:
    """A source opened for binary reading, .gz/.xz/.bz2 decompressed; '-' is
    stdin. Closing the stream closes the file."""
    name = str(path)
    if name == "-":
        return sys.stdin.buffer
    opened = _Opened(name)  # the checks and their messages
    if opened.stream is opened.raw:
        return opened.raw
    opened.close()
    # A decompressing stream opened by name owns (and closes) its file.
    return {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}[Path(name).suffix](name, "rb")


class TextReader:
    """Iterate the decoded text of a binary stream, hashing the bytes as read.

    ``errors``: ``strict`` raises BpestoreError naming the byte offset of the
    first invalid UTF-8 sequence; ``replace`` substitutes U+FFFD; ``skip`` drops
    the invalid bytes.
    """

    def __init__(self, stream: BinaryIO, name: str, *, errors: str = "strict",
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        check_errors(errors)
        self.stream = stream
        self.name = name
        self.errors = {"skip": "ignore"}.get(errors, errors)
        self.chunk_bytes = chunk_bytes
        self.sha256 = hashlib.sha256()
        self.size = 0

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(self.errors)
        while True:
            try:
                data = self.stream.read(self.chunk_bytes)
            except (OSError, EOFError, lzma.LZMAError) as exc:
                raise BpestoreError(f"cannot read {self.name}: {exc}") from None
            final = not data
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(data, final)
            except UnicodeDecodeError as exc:
                raise _invalid_utf8(self.name, self.size - pending + exc.start) from None
            self.sha256.update(data)
            self.size += len(data)
            if text:
                yield text
            if final:
                return


def decode(data: bytes, name: str, errors: str, offset: int = 0) -> str:
    """The text of bytes found at ``offset`` in a source, under an --errors policy."""
    try:
        return data.decode("utf-8", {"skip": "ignore"}.get(errors, errors))
    except UnicodeDecodeError as exc:
        raise _invalid_utf8(name, offset + exc.start) from None


def _invalid_utf8(name: str, offset: int) -> BpestoreError:
    return BpestoreError(f"{name} is not valid UTF-8 at byte {offset}; "
                         "pass --errors replace or --errors skip to accept it")


def check_errors(errors: str) -> None:
    if errors not in ERROR_POLICIES:
        raise BpestoreError(f"--errors must be one of {', '.join(ERROR_POLICIES)}, not {errors!r}")


def file_sha256(path: str | Path) -> str:
    """sha256 of a source's content (decompressed), read in chunks."""
    h = hashlib.sha256()
    with _Opened(str(path)) as opened:
        try:
            while data := opened.stream.read(CHUNK_BYTES):
                h.update(data)
        except (OSError, EOFError, lzma.LZMAError) as exc:
            raise BpestoreError(f"cannot read {path}: {exc}") from None
    return h.hexdigest()


# ---------------------------------------------------------------------------
# counting: in worker processes (or here)
# ---------------------------------------------------------------------------
# An item is (source index, source name, text, first line number): one piece of
# a large source, or one whole small source.
Item = tuple[int, str, str, int]


@dataclass
class TaskResult:
    """A worker's answer: counts handed back (if any), and what each item held."""

    counts: dict[bytes, int]
    items: list[tuple[int, int, int]]  # (source index, words, distinct words) per item counted
    error: tuple[int, str] | None = None  # (source index, message): items from it on not counted


class TaskCounter:
    """Counts words with one spec's pipeline; the work of one worker process.

    Messages (each answered by a TaskResult):

    * ``("count", group, items, keep)``: count the items. With ``keep`` (the
      pieces of one large source) the counts stay here, added up across
      pieces, until ``("flush", group)`` or until they reach
      ``KEPT_WORDS_LIMIT`` distinct words; otherwise they come back at once.
    * ``("range", group, index, name, start, end)``: read bytes ``start:end`` of
      file ``name`` and count them like a kept piece.
    * ``("flush", group)``: hand back the counts kept for the group.
    """

    def __init__(self, spec: TokenizerSpec, errors: str, jsonl_field: str | None) -> None:
        self.pipeline = TextPipeline(spec)
        self.errors = errors
        self.jsonl_field = jsonl_field
        self.kept: dict[int, Counter] = {}

    def handle(self, message: tuple) -> TaskResult:
        if message[0] == "flush":
            return TaskResult(_as_bytes(self.kept.pop(message[1], Counter())), [])
        if message[0] == "range":
            _, group, index, name, start, end = message
            try:
                with open(name, "rb") as f:
                    f.seek(start)
                    text = decode(f.read(end - start), name, self.errors, start)
            except OSError as exc:
                return TaskResult({}, [], (index, f"cannot read {name}: {exc.strerror}"))
            except BpestoreError as exc:
                return TaskResult({}, [], (index, str(exc)))
            message = ("count", group, [(index, name, text, 1)], True)
        _, group, items, keep = message
        counts = self.kept.setdefault(group, Counter()) if keep else Counter()
        stats: list[tuple[int, int, int]] = []
        for index, name, text, first_line in items:
            # A small source is counted alone, for its own distinct-word count.
            own = counts if keep or len(items) == 1 else Counter()
            try:
                n_words = self.count_text(text, name, first_line, own)
            except BpestoreError as exc:
                return TaskResult({} if keep else _as_bytes(counts), stats, (index, str(exc)))
            stats.append((index, n_words, len(own)))
            if own is not counts:
                counts.update(own)
        if keep and len(counts) < KEPT_WORDS_LIMIT:
            return TaskResult({}, stats)
        if keep:
            del self.kept[group]  # memory bound: hand back what was counted so far
        result = TaskResult(_as_bytes(counts), stats)
        _trim_heap()
        return result

    def count_text(self, text: str, name: str, first_line: int, counts: Counter) -> int:
        """Add the words of a text (or of each JSON Lines record in it) to counts."""
        if self.jsonl_field is None:
            return self.pipeline.count_strings(text, counts, part_chars=PART_CHARS)
        n_words = 0
        for line_no, line in enumerate(text.split("\n"), start=first_line):
            if line.strip():
                n_words += self.pipeline.count_strings(self.document(line, name, line_no), counts)
        return n_words

    def document(self, line: str, name: str, line_no: int) -> str:
        """The text field of one JSON Lines record."""
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BpestoreError(f"{name}: line {line_no} is not valid JSON ({exc.msg}); "
                                "fix the line or leave the file out") from None
        doc = record.get(self.jsonl_field) if isinstance(record, dict) else None
        if not isinstance(doc, str):
            raise BpestoreError(f"{name}: line {line_no} has no text field {self.jsonl_field!r}; "
                                "name the field with --jsonl-field")
        try:
            doc.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate escaped in JSON ("\\ud800"): not a character.
            if self.errors == "strict":
                raise BpestoreError(f"{name}: line {line_no} holds a lone surrogate (an invalid "
                                    "\\uXXXX escape); pass --errors replace or --errors skip") from None
            replacement = "\ufffd" if self.errors == "replace" else ""
            doc = "".join(c if not "\ud800" <= c <= "\udfff" else replacement for c in doc)
        return doc


try:
    _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):  # not glibc
    _malloc_trim = None


def _trim_heap() -> None:
    """Give freed heap memory back to the system (glibc keeps it otherwise, and
    a worker's size would creep up with the length of the input)."""
    if _malloc_trim is not None:
        _malloc_trim(0)


def _as_bytes(counts: Counter) -> dict[bytes, int]:
    """The counts with UTF-8 keys (they pickle without re-encoding, and the store
    wants them); ``counts`` is emptied as it goes, so both never hold every word."""
    as_bytes = {}
    while counts:
        word, n = counts.popitem()
        as_bytes[word.encode("utf-8", "surrogatepass")] = n
    return as_bytes


def _worker_main(conn: Connection, spec_json: str, errors: str, jsonl_field: str | None,
                 parent_ends: Sequence[Connection]) -> None:
    """A worker process: answer messages until told to stop (None) or orphaned."""
    # Ctrl-C reaches the whole process group; the parent stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker holds copies of the parent's ends of the pipes; closed, so
    # that if the parent dies, reading or writing here fails and the worker ends.
    for end in parent_ends:
        end.close()
    counter = TaskCounter(TokenizerSpec.from_json(spec_json), errors, jsonl_field)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        try:
            reply: object = counter.handle(message)
        except BaseException:  # a bug: report it rather than die silently
            reply = traceback.format_exc()
        try:
            conn.send(reply)
        except OSError:
            return


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _Workers:
    """Worker processes (or this process, until there is enough text to count).

    Every message gets a number; answers are read back in that order. A
    worker has at most one message outstanding, so neither side ever blocks
    writing to a pipe the other is not reading.
    """

    def __init__(self, spec: TokenizerSpec, errors: str, jsonl_field: str | None, workers: int,
                 *, parallel: bool) -> None:
        self.local = TaskCounter(spec, errors, jsonl_field)
        self.config = (spec.to_json(), errors, jsonl_field)
        self.n_workers = workers
        self.parallel = parallel
        self.processes: list = []
        self.conns: list[Connection] = []
        self.outstanding: dict[int, int] = {}  # worker -> number of its unanswered message
        self.answers: dict[int, object] = {}  # number -> answer, read out of order
        self.order: deque[tuple[int, object]] = deque()  # (number, tag) not yet taken
        self.sent = 0
        self.sent_chars = 0
        self.next_worker = 0

    def send(self, message: tuple, tag: object, worker: int | None = None) -> int:
        """Send a message; returns the worker it went to (-1: counted here)."""
        if message[0] != "flush":
            self.sent_chars += (message[5] - message[4] if message[0] == "range"
                                else sum(len(item[2]) for item in message[2]))
            if not self.processes and self.n_workers > 1 and (
                    self.parallel or self.sent_chars >= PARALLEL_MIN_BYTES):
                self.start()
        number, self.sent = self.sent, self.sent + 1
        self.order.append((number, tag))
        if worker == -1 or not self.processes:
            self.answers[number] = self.local.handle(message)
            return -1
        if worker is None:
            while len(self.outstanding) == len(self.conns):
                self.receive()
            worker = next(w for w in self.rotation() if w not in self.outstanding)
        while worker in self.outstanding:
            self.receive()
        self.conns[worker].send(message)
        self.outstanding[worker] = number
        return worker

    def rotation(self) -> list[int]:
        # Take turns, so pieces spread evenly over the workers.
        n = len(self.conns)
        self.next_worker = (self.next_worker + 1) % n
        return [(self.next_worker + i) % n for i in range(n)]

    def start(self) -> None:
        forked = sys.platform == "linux"
        context = multiprocessing.get_context("fork" if forked else None)
        for _ in range(self.n_workers):
            parent_end, child_end = context.Pipe()
            inherited = [*self.conns, parent_end] if forked else []
            process = context.Process(target=_worker_main, daemon=True,
                                      args=(child_end, *self.config, inherited))
            process.start()
            child_end.close()
            self.processes.append(process)
            self.conns.append(parent_end)

    def receive(self) -> None:
        """Wait for answers from busy workers."""
        for conn in multiprocessing.connection.wait([self.conns[w] for w in self.outstanding]):
            worker = self.conns.index(conn)
            try:
                answer = conn.recv()
            except EOFError:
                raise BpestoreError("a counting process died; see the messages above") from None
            if isinstance(answer, str):
                raise RuntimeError(f"a counting process failed:\n{answer}")
            self.answers[self.outstanding.pop(worker)] = answer

    def ready(self) -> bool:
        """Whether the oldest message's answer is in."""
        return bool(self.order) and self.order[0][0] in self.answers

    def next_answer(self) -> tuple[int, object, TaskResult]:
        """The oldest message's number, tag and answer (waiting for it)."""
        number, tag = self.order.popleft()
        while number not in self.answers:
            self.receive()
        return number, tag, self.answers.pop(number)

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for process in self.processes:
            process.join(timeout=1)
            if process.is_alive():
                process.terminate()
                process.join()
        for conn in self.conns:
            conn.close()
        self.processes, self.conns = [], []


# ---------------------------------------------------------------------------
# counting many sources
# ---------------------------------------------------------------------------
_GROUP_KEYS = itertools.count()


@dataclass
class _Group:
    """Sources on their way to becoming one CountedBatch."""

    sources: list[Source] = field(default_factory=list)
    position: dict[int, int] = field(default_factory=dict)  # source index in the call -> in sources
    counts: Counter = field(default_factory=Counter)
    size: int = 0
    large: bool = False  # one large source, counted in pieces the workers add up
    holders: set[int] = field(default_factory=set)  # workers keeping counts of it
    tasks_left: int = 0  # messages not yet answered
    closed: bool = False
    dropped: bool = False  # a duplicate stream, or a source that failed: its counts are not kept
    key: int = field(default_factory=lambda: next(_GROUP_KEYS))  # names it to the workers


class _Counting:
    """The state of one ``count_sources`` call (see there)."""

    def __init__(self, paths: Sequence[str], spec: TokenizerSpec, *, errors: str, workers: int,
                 jsonl_field: str | None, already_counted: Collection[str], force: bool,
                 progress: Callable[[Progress], None] | None, stdin: BinaryIO | None) -> None:
        check_errors(errors)
        self.paths = list(paths)
        self.pipeline = TextPipeline(spec)
        self.jsonl = jsonl_field is not None
        self.force = force
        self.seen = set(already_counted)  # sha256 of contents counted (skip repeats)
        self.progress = progress
        self.stdin = stdin
        self.errors = errors
        self.sizes = [None if p == "-" else _file_size(p) for p in self.paths]
        known = [s for s in self.sizes if s is not None]
        self.total = None if len(known) < len(self.sizes) else sum(known)
        # Compressed text is several times its size on disk.
        expected = sum(s * (4 if p.endswith(COMPRESSED_SUFFIXES) else 1)
                       for p, s in zip(self.paths, self.sizes) if s is not None)
        self.workers = _Workers(spec, errors, jsonl_field, workers,
                                parallel=expected >= PARALLEL_MIN_BYTES)
        self.groups: deque[_Group] = deque()  # in order; the head is the oldest unfinished
        self.small: _Group | None = None  # the open group of small sources
        self.task: list[Item] = []  # small sources not yet submitted
        self.task_chars = 0
        self.done_bytes = 0
        # The first failure, and the first task whose result is not kept.
        self.failure: BpestoreError | None = None
        self.discard_from: int | None = None

    # -- the main loop ---------------------------------------------------
    def run(self) -> Iterator[CountedBatch]:
        try:
            for index, path in enumerate(self.paths):
                try:
                    size = self.sizes[index]
                    if size is not None and size <= SMALL_SOURCE_BYTES and not path.endswith(
                            COMPRESSED_SUFFIXES):
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
            while self.workers.order:
                self.take_result()
            # All counted: the workers' memory goes before the last batches are written.
            self.workers.close()
            yield from self.finished()
        finally:
            self.workers.close()
        if self.failure is not None:
            raise self.failure

    def finished(self) -> Iterator[CountedBatch]:
        """Hand on the groups at the head of the queue whose counting is done."""
        while self.groups and self.groups[0].closed and self.groups[0].tasks_left == 0:
            group = self.groups.popleft()
            if group.large and group.sources:
                group.sources[0].n_distinct = len(group.counts)
            if group.sources:
                yield CountedBatch(group.sources, Counter() if group.dropped else group.counts)

    # -- small sources: read whole, counted and written together ----------
    def add_small(self, index: int, path: str) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise BpestoreError(f"cannot read {path}: {exc.strerror}") from None
        text = decode(data, path, self.errors)
        stats = Source(path, hashlib.sha256(data).hexdigest(), len(data))
        self.report(path, stats.size_bytes, stats.size_bytes, index)
        if self.small is None or self.small.size >= BATCH_BYTES:
            self.close_small()
            self.small = _Group()
            self.groups.append(self.small)
        self.small.position[index] = len(self.small.sources)
        self.small.sources.append(stats)
        self.small.size += stats.size_bytes
        if self.is_repeat(stats):
            return
        self.task.append((index, path, text, 1))
        self.task_chars += len(text)
        if self.task_chars >= TASK_BYTES:
            self.submit_small()

    def submit_small(self) -> None:
        if self.task:
            self.submit(("count", self.small.key, self.task, False), self.small)
            self.task, self.task_chars = [], 0

    def close_small(self) -> None:
        if self.small is not None:
            self.submit_small()
            self.small.closed = True
            self.small = None

    # -- large sources: streamed in pieces, a batch of their own ----------
    def add_large(self, index: int, path: str) -> Iterator[CountedBatch]:
        stats = Source(path)
        group = _Group([stats], {index: 0}, large=True)
        self.groups.append(group)
        plain = path != "-" and not path.endswith(COMPRESSED_SUFFIXES)
        hashed_first = plain and not self.force and bool(self.seen)
        if hashed_first:
            # This content may be in already: hashing a plain file first is cheap,
            # and spares counting a repeat.
            stats.sha256, stats.size_bytes = file_sha256(path), self.sizes[index]
            if self.is_repeat(stats):
                group.closed = True
                self.report(path, stats.size_bytes, stats.size_bytes, index)
                return
        if plain and not self.jsonl and self.pipeline.pattern is not None:
            yield from self.add_ranges(index, path, group)
        else:
            yield from self.add_stream(index, path, group)
        if self.failure is None:
            if not hashed_first and self.is_repeat(stats):  # hashed only now: drop the counts
                group.dropped = True
            self.close_large(group)

    def add_ranges(self, index: int, path: str, group: _Group) -> Iterator[CountedBatch]:
        """A plain file: the workers read it themselves, each a range between safe cuts."""
        stats = group.sources[0]
        stats.size_bytes = self.sizes[index]
        hasher = None if stats.sha256 else hashlib.sha256()
        with open(path, "rb") as f:
            points = self.cut_points(path, stats.size_bytes)
            for start, end in zip(points, points[1:]):
                self.submit(("range", group.key, index, path, start, end), group)
                if hasher is not None:  # hash while the workers count
                    hasher.update(f.read(end - start))
                self.report(path, end, stats.size_bytes, index, final=end == stats.size_bytes)
                yield from self.finished()
                if self.failure is not None:
                    return
        if hasher is not None:
            stats.sha256 = hasher.hexdigest()

    def add_stream(self, index: int, path: str, group: _Group) -> Iterator[CountedBatch]:
        """Standard input, a compressed file, JSON Lines: read here, sent in pieces."""
        stats = group.sources[0]
        try:
            with _Opened(path, self.stdin) as opened:
                reader = TextReader(opened.stream, path, errors=self.errors)
                pieces = recut(self.reported(reader, opened, index), _after_last_line) \
                    if self.jsonl else rechunk(self.reported(reader, opened, index), self.pipeline)
                first_line = 1
                for piece in pieces:
                    self.submit(("count", group.key, [(index, path, piece, first_line)], True),
                                group)
                    if self.jsonl:
                        first_line += piece.count("\n")
                    yield from self.finished()
                    if self.failure is not None:
                        return
        except BpestoreError:
            self.drop(group)  # nothing of a source that failed is kept
            raise
        if not stats.sha256:
            stats.sha256 = reader.sha256.hexdigest()
        stats.size_bytes = reader.size

    def close_large(self, group: _Group) -> None:
        """Ask every worker that kept counts of the group for them."""
        for worker in sorted(group.holders):
            self.submit(("flush", group.key), group, worker)
        group.closed = True

    def cut_points(self, path: str, size: int) -> list[int]:
        """Byte offsets that cut a file into ranges of about CHUNK_BYTES, each
        countable alone (``TextPipeline.cut_anywhere``), from 0 to ``size``."""
        points = [0]
        with open(path, "rb") as f:
            target = CHUNK_BYTES
            while target + CHUNK_BYTES // 2 < size:
                f.seek(target)
                window = f.read(CUT_WINDOW)
                # Start at a character: skip the continuation bytes of one cut in two.
                skip = 0
                while skip < 3 and skip < len(window) and 0x80 <= window[skip] < 0xC0:
                    skip += 1
                # surrogateescape: any bytes decode, and encode back to the same length.
                text = window[skip:].decode("utf-8", "surrogateescape")
                cut = self.pipeline.cut_anywhere(text)
                if cut:
                    points.append(target + skip + len(text[:cut].encode("utf-8", "surrogateescape")))
                    target = points[-1] + CHUNK_BYTES
                else:
                    target += CUT_WINDOW  # no place to cut here: look further on
        points.append(size)
        return points

    def reported(self, reader: TextReader, opened: _Opened, index: int) -> Iterator[str]:
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
            return True
        self.seen.add(stats.sha256)
        return False

    def submit(self, message: tuple, group: _Group, worker: int | None = None) -> None:
        """Send a message about a group to the workers; take the answers that are in."""
        if self.discard_from is not None:
            return  # a task failed: nothing after it is kept
        group.tasks_left += 1
        group.holders.add(self.workers.send(message, group, worker))
        while self.workers.ready():
            self.take_result()

    def take_result(self) -> None:
        number, group, result = self.workers.next_answer()
        group.tasks_left -= 1
        if group.dropped or (self.discard_from is not None and number >= self.discard_from):
            return  # a repeat, or counted after a failure: not kept
        for index, n_words, n_distinct in result.items:
            stats = group.sources[group.position[index]]
            stats.n_words += n_words
            stats.n_distinct = n_distinct  # a small source's; a large one's is set when done
        group.counts.update(result.counts)
        if result.error is not None:
            # The failing source and every later one are not kept.
            failing, message = result.error
            del group.sources[group.position[failing]:]
            group.closed = True
            for later in list(self.groups)[list(self.groups).index(group) + 1:]:
                self.drop(later)
            if not group.sources:
                self.drop(group)
            self.failure = BpestoreError(message)
            self.discard_from = number + 1

    def drop(self, group: _Group) -> None:
        group.sources, group.dropped, group.closed = [], True, True

    def report(self, name: str, source_done: int, source_size: int | None, index: int, *,
               final: bool = True) -> None:
        if self.progress is None:
            return
        done = self.done_bytes + source_done
        if final:
            self.done_bytes = done
        self.progress(Progress("ingest", name, done, self.total, "bytes",
                               sources_done=index + final, sources_total=len(self.paths)))


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        raise BpestoreError(f"file not found: {path}") from None


def _after_last_line(text: str) -> int:
    return text.rfind("\n") + 1


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
) -> Iterator[CountedBatch]:
    """Count the words of each source (a file or ``-``), in order, in batches.

    A source whose sha256 is in ``already_counted``, or repeats one counted
    earlier in the call, is reported as skipped unless ``force``. ``workers``
    processes count (default: one per core); ``jsonl_field`` reads every
    source as JSON Lines and counts that field of each record. A source that
    cannot be read or decoded raises BpestoreError after the batches of the
    sources before it: nothing of it is in any batch.
    """
    counting = _Counting(list(paths), spec, errors=errors,
                         workers=workers if workers is not None else default_workers(),
                         jsonl_field=jsonl_field, already_counted=already_counted, force=force,
                         progress=progress, stdin=stdin)
    return counting.run()
