"""Encoding streams and id files: pieces cut at safe places, worker threads or
processes, flat binary files of ids (``Tokenizer.encode_chunks``,
``encode_file``, ``decode_file`` call these)."""

from __future__ import annotations

import codecs
import os
import sys
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..errors import InvalidArgumentError, NotFoundError
from ..text import rechunk
from .core_backend import CoreEncoder
from .engine import Engine, IdsT, Rules

# Imports inside the functions below are for start-up time only: encoding one text in a
# fresh process (``bpestore encode``) does without multiprocessing, concurrent.futures and
# the modules that read sources and write files (measured together: about 15 ms).
if TYPE_CHECKING:
    from concurrent.futures import Executor

    from ..records import Progress

ID_DTYPES = {"uint16": "H", "uint32": "I"}  # id file element types -> array typecodes
PIECE_CHARS = 1 << 18  # characters per piece of a stream encoded at once
RANGE_BYTES = 1 << 20  # bytes of a plain file each encoding process reads at a time
CUT_WINDOW = 64 << 10  # bytes searched for a safe place to cut a file into ranges
BATCH_CHARS = 1 << 21  # characters of encode_batch's texts a worker of the compiled core takes in one call


@dataclass(frozen=True)
class EncodedFile:
    """What ``Tokenizer.encode_file`` wrote."""

    path: str
    tokens: int
    bytes: int
    dtype: str

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0


def encode_stream(engine: Engine, chunks: Iterable[str], rules: Rules, workers: int,
                  container: Callable[[], IdsT]) -> Iterator[IdsT]:
    """The ids of each safely cut piece of a stream, in order, each in a
    new ``container()`` (a list, or a uint32 array for id files).

    Pieces are about PIECE_CHARS characters whatever the chunk size: that
    bounds the memory of one piece's ids and keeps every worker busy.
    With ``workers`` > 1 they go to threads where an accelerated encoder runs
    (it releases the GIL), else to processes (their results come back as
    uint32 arrays: plain bytes between processes). At most ``2 * workers``
    pieces are in flight.
    """
    pieces = rechunk(sliced(chunks, PIECE_CHARS), engine.stream_cutter(rules.allowed | rules.disallowed))
    if workers <= 1:
        for index, piece in enumerate(pieces):
            yield engine.encode(piece, rules, index, container())
        return
    threads = engine.accelerated[0] is not None and not rules.dropout
    calls = ((engine.encode, piece, rules, index, container()) if threads else (_encode_in_worker, piece, rules, index)
             for index, piece in enumerate(pieces))
    for ids in _in_order(_pool(engine, workers, threads), calls, workers):
        yield _into(ids, container)


def encode_file(engine: Engine, path: str | Path, out: str | Path, rules: Rules, *, dtype: str | None,
                workers: int, errors: str, progress: Callable[[Progress], None] | None,
                force: bool) -> EncodedFile:
    """``Tokenizer.encode_file``: every argument is checked before the source is opened."""
    from ..files import atomic_path, check_target
    from ..records import Progress
    from ..sources import TextReader, check_errors, open_source

    dtype = dtype or ("uint16" if engine.n_vocab <= 1 << 16 else "uint32")
    typecode = id_typecode(engine, dtype, writing=True)
    check_errors(errors)
    check_target(Path(out), force=force)
    name = str(path)
    n_tokens = 0
    stream = open_source(path)  # its checks and messages, also where workers read the file
    try:
        plain = name != "-" and not name.endswith((".gz", ".xz", ".bz2")) and os.path.isfile(name)
        total = os.path.getsize(name) if plain else None  # a pipe or device: streamed, as stdin
        reader = TextReader(stream, name, errors=errors, hashed=False)
        parts: Iterator[tuple[bytes | bytearray | memoryview, int, int]]
        if workers > 1 and total is not None and _ranges_apply(engine, rules):
            parts = _encode_ranges(engine, name, total, rules, workers, typecode, errors)
        else:
            parts = ((_pack(data, typecode), len(data) // 4, reader.size)
                     for data in _packed_stream(engine, reader, rules, workers))
        with atomic_path(Path(out), force=force) as temp, open(temp, "wb") as f:
            for data, n, done in parts:
                n_tokens += n
                f.write(data)
                if progress is not None:
                    progress(Progress("encode", name, done, total, "bytes", tokens=n_tokens))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    return EncodedFile(path=str(out), tokens=n_tokens, bytes=total if total is not None else reader.size,
                       dtype=dtype)


def _packed_stream(engine: Engine, chunks: Iterable[str], rules: Rules, workers: int) -> Iterator[bytearray]:
    """``encode_stream``'s pieces' ids as native uint32 bytes (``Engine.encode_packed`` on one thread)."""
    if workers > 1:
        yield from map(bytearray, encode_stream(engine, chunks, rules, workers, _uint32_array))
        return
    pieces = rechunk(sliced(chunks, PIECE_CHARS), engine.stream_cutter(rules.allowed | rules.disallowed))
    for index, piece in enumerate(pieces):
        yield engine.encode_packed(piece, rules, index)


def _ranges_apply(engine: Engine, rules: Rules) -> bool:
    """Whether workers may each read and encode their own ranges of a plain file: no
    dropout (its seeds follow the stream's pieces), a pre-tokenizer that lets a file be
    cut anywhere, and threads (the compiled core: one copy of its tables) or forked
    processes (Linux)."""
    return (not rules.dropout and (_on_threads(engine) or sys.platform == "linux")
            and engine.stream_cutter(rules.allowed | rules.disallowed).cuts_words)


def _on_threads(engine: Engine) -> bool:
    """Whether the compiled core encodes ordinary text (it releases the GIL)."""
    return isinstance(engine.accelerated[0], CoreEncoder)


def encode_batch(engine: Engine, texts: Iterable[str], rules: Rules, workers: int,
                 packed: bool = False) -> list[Any]:
    """``Tokenizer.encode_batch`` (``packed``: each text's ids as native uint32 bytes): where
    the compiled core encodes the texts whole (no special token to match, no dropout), it
    takes them a batch per call, on ``workers`` threads of its own (the GIL released while it
    encodes; one copy of its tables); else each text is encoded alone, on threads where
    tiktoken's core encodes."""
    def one(text: str) -> list[int] | bytearray:
        return engine.encode_packed(text, rules, None) if packed else engine.encode(text, rules, None, [])

    fast = engine.accelerated[0] if not rules.allowed and not rules.dropout else None
    core = fast if isinstance(fast, CoreEncoder) else None  # it encodes these texts whole
    if core is None:
        if workers > 1 and not rules.dropout and engine.accelerated[0] is not None:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers) as pool:
                return list(pool.map(one, texts))
        return [one(text) for text in texts]
    texts = list(texts)
    if rules.disallowed:
        for text in texts:
            engine.refuse_disallowed(text, rules)
    batches = _batches(texts, workers)
    found = core.encode_batch(texts, workers, packed) if len(batches) == 1 else [
        ids for batch in batches for ids in core.encode_batch(batch, workers, packed)]
    if None not in found:
        return found
    # None: a lone surrogate or a character the version has no symbol for (the pure path says what to do).
    return [ids if ids is not None else one(text) for ids, text in zip(found, texts)]


def _batches(texts: list[str], workers: int) -> list[list[str]]:
    """texts cut into runs of about BATCH_CHARS characters a worker (the core's threads
    share a run's texts, each taking the next)."""
    size = BATCH_CHARS * workers
    if sum(map(len, texts)) <= size:
        return [texts]
    batches: list[list[str]] = [[]]
    chars = 0
    for text in texts:
        if chars >= size:
            batches.append([])
            chars = 0
        batches[-1].append(text)
        chars += len(text)
    return batches


def _encode_ranges(engine: Engine, path: str, size: int, rules: Rules, workers: int, typecode: str,
                   errors: str) -> Iterator[tuple[bytes | bytearray, int, int]]:
    """A plain file's ids, packed as ``typecode``, range by range in order:
    each worker (a thread where the compiled core encodes, else a process) reads,
    decodes, encodes and packs a range between safe cuts; this thread only
    writes. Yields (packed ids, ids, bytes done)."""
    from ..sources import cut_points

    cutter = engine.stream_cutter(rules.allowed | rules.disallowed)
    points = cut_points(path, size, cutter, step=RANGE_BYTES, window=CUT_WINDOW)
    threads = _on_threads(engine)  # each thread reads, decodes and packs its range too: this one only writes
    if not threads:
        engine.accelerated[0]  # decided (and checked) once, here: the workers inherit it
    encode_range = partial(_encode_range, engine) if threads else _encode_range_in_worker
    calls = ((encode_range, path, start, end, errors, rules, typecode) for start, end in zip(points, points[1:]))
    for (data, n), done in zip(_in_order(_pool(engine, workers, threads), calls, workers), points[1:]):
        yield data, n, done


def _pool(engine: Engine, workers: int, threads: bool) -> Executor:
    """``workers`` threads, or processes that each hold ``engine`` (forked where the platform can)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    if threads:
        return ThreadPoolExecutor(workers)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                               initializer=_start_worker, initargs=(engine,))


def _in_order(pool: Executor, calls: Iterable[tuple], workers: int) -> Iterator:
    """Each call (a function and its arguments) run on the pool, the results in order,
    at most ``2 * workers`` in flight."""
    with pool:
        window: deque = deque()
        for function, *args in calls:
            window.append(pool.submit(function, *args))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()


def decode_file(engine: Engine, path: str | Path, *, dtype: str | None, errors: str, block: int) -> Iterator[str]:
    """``Tokenizer.decode_file``: the text of a flat id file, streamed."""
    dtype = dtype or ("uint16" if engine.n_vocab <= 1 << 16 else "uint32")
    typecode = id_typecode(engine, dtype, writing=False)
    decoder = codecs.getincrementaldecoder("utf-8")(errors)
    done = 0
    try:
        with open(path, "rb") as f:
            while data := f.read(block * array(typecode).itemsize):
                ids = array(typecode)
                if len(data) % ids.itemsize:
                    raise InvalidArgumentError(
                        f"{path} is not a file of {dtype} ids (its size is not a multiple of "
                        f"{ids.itemsize}); pass the dtype it was written with", params=("dtype",))
                ids.frombytes(data)
                if sys.byteorder != "little":
                    ids.byteswap()
                data = engine.decode_bytes(ids)
                yield decoder.decode(data)
                done += len(data)
            yield decoder.decode(b"", True)
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"the tokens do not decode to valid UTF-8 (byte {done + exc.start}); "
                                   "use errors='replace' to substitute U+FFFD", params=("errors",)) from None
    except FileNotFoundError:
        raise NotFoundError(f"file not found: {path}", params=("path",)) from None


def id_typecode(engine: Engine, dtype: str, *, writing: bool) -> str:
    if dtype not in ID_DTYPES:
        raise InvalidArgumentError(f"unknown id dtype {dtype!r}; choose uint16 or uint32", params=("dtype",))
    if writing and dtype == "uint16" and engine.n_vocab > 1 << 16:
        raise InvalidArgumentError(f"this vocabulary has ids up to {engine.n_vocab - 1}, more than uint16 "
                                   "holds; use dtype='uint32'", params=("dtype",))
    return ID_DTYPES[dtype]


def sliced(chunks: Iterable[str], size: int) -> Iterator[str]:
    """The chunks, each cut into slices of at most ``size`` characters."""
    for chunk in chunks:
        if len(chunk) <= size:
            yield chunk
        else:
            yield from (chunk[i:i + size] for i in range(0, len(chunk), size))


# -- worker processes ---------------------------------------------------------
_WORKER_ENGINE: Engine | None = None


def _start_worker(engine: Engine) -> None:
    global _WORKER_ENGINE
    from ..processes import die_with_parent

    die_with_parent()  # a killed parent leaves no encoding process behind
    _WORKER_ENGINE = engine


def _encode_in_worker(piece: str, rules: Rules, index: int) -> array[int]:
    assert _WORKER_ENGINE is not None, "started by _start_worker"
    return _WORKER_ENGINE.encode(piece, rules, index, _uint32_array())


def _encode_range_in_worker(path: str, start: int, end: int, errors: str, rules: Rules,
                            typecode: str) -> tuple[bytes | bytearray, int]:
    assert _WORKER_ENGINE is not None, "started by _start_worker"
    return _encode_range(_WORKER_ENGINE, path, start, end, errors, rules, typecode)


def _encode_range(engine: Engine, path: str, start: int, end: int, errors: str, rules: Rules,
                  typecode: str) -> tuple[bytes | bytearray, int]:
    """Bytes ``start:end`` of a plain file (cut at a safe place) encoded and
    packed as ``typecode``: the packed ids and how many."""
    from ..sources import decode, read_range

    text = decode(read_range(path, start, end), path, errors, start)
    data = engine.encode_packed(text, rules, None)
    return _pack(data, typecode), len(data) // 4


def _pack(data: bytearray, typecode: str) -> bytearray:
    """Native uint32 ids as little-endian ``typecode`` (I, or H where every id fits in 16 bits)."""
    if sys.byteorder != "little":
        ids = array("I", data)
        ids.byteswap()
        data = bytearray(ids)
    if typecode == "I":
        return data
    # Keep the low two bytes of each four.
    narrow = bytearray(len(data) // 2)
    narrow[0::2], narrow[1::2] = data[0::4], data[1::4]
    return narrow


def id_array(data: bytearray) -> Any:
    """Native uint32 ids as a numpy array where numpy imports (a view of ``data``), else ``array('I')``."""
    numpy = _numpy()
    if numpy is not None:
        frombuffer, uint32 = numpy
        return frombuffer(data, uint32)  # positional, the dtype made once: a quarter of numpy's keyword call
    ids = array("I")
    ids.frombytes(data)
    return ids


@cache
def _numpy() -> tuple[Callable[..., Any], Any] | None:
    """numpy's ``frombuffer`` and its uint32 dtype, or None without numpy."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy.frombuffer, numpy.dtype(numpy.uint32)


def _uint32_array() -> array[int]:
    return array("I")


def _into(ids: list[int] | array[int], container: Callable[[], IdsT]) -> IdsT:
    """ids as the container asked for (a worker process sends arrays)."""
    return cast(IdsT, ids.tolist() if container is list and isinstance(ids, array) else ids)
