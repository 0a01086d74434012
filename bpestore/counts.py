"""Counts files: word counts made anywhere, merged into a corpus later. No SQL.

``count_files`` counts sources with exactly the pipeline ``Store.ingest`` uses
(``ingest.count_sources``) and writes the counts as a Parquet file (through
pyarrow: ``pip install 'bpestore[parquet]'``): columns ``word`` (binary) and
``count`` (int64), in word order, and in the file's metadata (key
``bpestore.counts``) the corpus spec, every source's sha256, size, name, words
and distinct words, the totals, a digest of the rows and a check of all of it
(a file written before the check: its words are checked against its spec). ``read_counts`` reads
one back, checking all of it. ``Store.ingest_counts`` then adds counts files to
a corpus: counting is embarrassingly parallel (any machine, any scheduler: see
the Dask recipe in the README); merging counts is the store's job.

>>> info = count_files(["a.txt"], "a.parquet", special_tokens=["<|endoftext|>"])  # doctest: +SKIP
>>> bpestore.open("store.db").ingest_counts("books", ["a.parquet"])  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import DamagedDataError, InvalidArgumentError, MissingExtraError, NotFoundError
from .files import atomic_path, check_target
from .records import CountsInfo, Progress, Source
from .spec import TokenizerSpec, check_special_tokens

FORMAT = 1
METADATA_KEY = b"bpestore.counts"
ROW_GROUP = 1 << 17  # rows per Parquet row group


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise MissingExtraError("counts files need pyarrow, which is not installed: "
                                "pip install 'bpestore[parquet]'", extra="parquet") from None
    return pyarrow, pyarrow.parquet


def corpus_spec(spec: TokenizerSpec | None = None, **given: Any) -> TokenizerSpec:
    """The part of a spec that decides a corpus' words (what a corpus stores), from
    ``spec`` or from the ingest options given (None: the default)."""
    given = {k: v for k, v in given.items() if v is not None}
    if spec is not None and given:
        raise InvalidArgumentError(f"give spec or {', '.join(given)}, not both", params=("spec", *given))
    if spec is None:
        if "special_tokens" in given:
            given["special_tokens"] = tuple(given["special_tokens"])
            check_special_tokens(given["special_tokens"])
        spec = TokenizerSpec(**given)
    return TokenizerSpec.from_dict(spec.corpus_key())


def words_in_order(paths: Sequence[str], spec: TokenizerSpec, *, errors: str = "strict") -> Counter:
    """The words of sources (each read whole, in order, in this process) with their counts,
    each first listed where the text first shows it: what ``tie_break="first-seen"`` needs.
    """
    from .sources import decode, open_source
    from .text import TextPipeline

    pipeline = TextPipeline(spec)
    counts: Counter = Counter()
    for path in paths:
        stream = open_source(path)
        try:
            text = decode(stream.read(), path, errors)
        finally:
            if path != "-":
                stream.close()
        for word in pipeline.words(text):
            counts[word.encode("utf-8", "surrogatepass")] += 1
    return counts


def rows_digest(counts: Mapping[bytes, int]) -> str:
    """sha256 of the (word, count) rows in word order: equal counts, equal digest."""
    h = hashlib.sha256()
    for word in sorted(counts):
        h.update(len(word).to_bytes(8, "little"))
        h.update(word)
        h.update(counts[word].to_bytes(8, "little"))
    return h.hexdigest()


def count_files(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    spec: TokenizerSpec | None = None,
    special_tokens: Sequence[str] | None = None,
    pretokenizer: str | None = None,
    pattern: str | None = None,
    normalizer: str | None = None,
    space_marker: str | None = None,
    dummy_prefix: str | None = None,
    errors: str = "strict",
    workers: int | None = None,
    glob: str | None = None,
    jsonl_field: str | None = None,
    force: bool = False,
    progress: Callable[[Progress], None] | None = None,
) -> CountsInfo:
    """Count the words of ``paths`` (as ``Store.ingest`` would: files, directories,
    compressed files, JSON Lines with ``jsonl_field``) and write them to the
    counts file ``out``; returns what it holds.

    The spec comes from ``spec`` or the ingest options (``special_tokens``,
    ``pretokenizer``, ``pattern``, ``normalizer``). A source whose content
    repeats an earlier one of the call is left out. ``out`` is written whole or
    not at all (a temporary file renamed), and an existing file is replaced
    only with ``force``.
    """
    from .ingest import count_sources, expand_paths

    pa, pq = _pyarrow()
    spec = corpus_spec(spec, special_tokens=special_tokens, pretokenizer=pretokenizer, pattern=pattern,
                       normalizer=normalizer, space_marker=space_marker, dummy_prefix=dummy_prefix)
    target = Path(out)
    check_target(target, force=force)
    files = expand_paths(paths, glob=glob)
    if not files:
        raise InvalidArgumentError("paths must name at least one file to count", params=("paths",))
    if jsonl_field is None:
        from .sources import warn_raw_json

        warn_raw_json(files)
    from .ingest.shards import merge_firsts

    counts: Counter = Counter()
    firsts: dict[bytes, int] = {}
    sources: list[Source] = []
    for batch in count_sources(files, spec, errors=errors, workers=workers, jsonl_field=jsonl_field,
                               progress=progress):
        counts.update(batch.counts)
        merge_firsts(firsts, batch.firsts)
        sources.extend(s for s in batch.sources if not s.skipped)
    words = sorted(counts)
    info = CountsInfo(str(target), spec, tuple(sources), sum(counts.values()), len(counts), rows_digest(counts),
                      ordered=True)
    # ordinal: where each word first occurred in the sources' text in order (the smaller, the earlier).
    table = pa.table({"word": pa.array(words, type=pa.binary()),
                      "count": pa.array([counts[w] for w in words], type=pa.int64()),
                      "ordinal": pa.array([firsts[w] for w in words], type=pa.int64())})
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(_metadata(info), sort_keys=True)})
    with atomic_path(target, force=force) as temp:
        pq.write_table(table, temp, row_group_size=ROW_GROUP)
    return info


def group_files(paths: Iterable[str | Path], *, group_bytes: int = 64 << 20,
                glob: str | None = None) -> list[list[str]]:
    """The files of ``paths`` (directories expanded, in order) in consecutive groups of
    about ``group_bytes`` each (a larger file is a group of its own): the tasks of a
    distributed count, one counts file per group."""
    from .ingest import expand_paths

    if group_bytes < 1:
        raise InvalidArgumentError(f"group_bytes must be at least 1, not {group_bytes}", params=("group_bytes",))
    groups: list[list[str]] = []
    size = group_bytes
    for name in expand_paths(paths, glob=glob):
        if name == "-":
            raise InvalidArgumentError("a distributed count reads files, not - (standard input)", params=("paths",))
        if size >= group_bytes:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += os.path.getsize(name)
    return groups


def dask_count(client: Any, paths: Iterable[str | Path], out_dir: str | Path, *, group_bytes: int = 64 << 20,
               glob: str | None = None, **options: Any) -> list[CountsInfo]:
    """Count ``paths`` on a Dask cluster: one ``count_files`` task per group of about
    ``group_bytes`` (``group_files``), each writing ``out_dir/part-NNNNN.parquet``;
    returns the counts files' descriptions, in order, for ``Store.ingest_counts``.

    ``client`` is a ``dask.distributed.Client``; the workers must see ``paths`` and
    ``out_dir`` under the same names (a shared file system). ``options`` are
    ``count_files``'s (spec options, ``errors``, ``jsonl_field``, ``force``); each
    task counts in its worker's process (``workers=1``): the cluster is the parallelism.

    >>> from dask.distributed import Client  # doctest: +SKIP
    >>> infos = dask_count(Client("scheduler:8786"), ["/shared/corpus/"], "/shared/counts")  # doctest: +SKIP
    >>> bpestore.open(URL).ingest_counts("web", [i.path for i in infos])  # doctest: +SKIP
    """
    _pyarrow()
    out = Path(out_dir)
    if not out.is_dir():
        raise NotFoundError(f"folder {out} does not exist (out_dir)", params=("out_dir",))
    if "workers" in options:
        raise InvalidArgumentError("dask_count counts one task per worker thread; leave out workers",
                                   params=("workers",))
    corpus_spec(options.get("spec"), **{k: options.get(k) for k in ("special_tokens", "pretokenizer", "pattern",
                                                                    "normalizer", "space_marker",
                                                                    "dummy_prefix")})  # checked here, once
    groups = group_files(paths, group_bytes=group_bytes, glob=glob)
    # A partial: Client.submit has keywords of its own (workers=, key=, retries=).
    task = functools.partial(count_files, workers=1, **options)
    futures = [client.submit(task, group, str(out / f"part-{i:05d}.parquet"), pure=False)
               for i, group in enumerate(groups)]
    infos: list[CountsInfo] = client.gather(futures)
    return infos


def read_counts(path: str | Path) -> tuple[CountsInfo, dict[bytes, int]]:
    """A counts file's description and its counts, each part checked: a file that is
    not a bpestore counts file, truncated, or whose rows do not match its digest
    raises ``DamagedDataError``. A file with ordinals (``CountsInfo.ordered``) gives its
    counts in the order their words first occurred."""
    pa, pq = _pyarrow()
    name = str(path)
    if not Path(name).is_file():
        raise NotFoundError(f"counts file not found: {name}")
    try:
        parquet = pq.ParquetFile(name)
        metadata = parquet.schema_arrow.metadata or {}
    except (pa.ArrowException, OSError) as exc:
        raise DamagedDataError(f"{name} is not a readable Parquet file ({_first_line(exc)}); "
                               "make it again with bpestore count") from None
    if METADATA_KEY not in metadata:
        raise DamagedDataError(f"{name} is a Parquet file but not a bpestore counts file "
                               "(no bpestore.counts metadata); make one with bpestore count")
    try:
        meta = json.loads(metadata[METADATA_KEY])
        if not isinstance(meta, dict):
            raise ValueError(f"a JSON object expected, found {type(meta).__name__}")
        info = _info(name, meta)
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError, InvalidArgumentError) as exc:
        raise DamagedDataError(f"{name}: its bpestore.counts metadata is damaged ({_first_line(exc)})") from None
    if "check" in meta and meta["check"] != _metadata_check(meta):
        raise DamagedDataError(f"{name}: its bpestore.counts metadata does not match its check (changed after "
                               "bpestore count wrote it); make it again")
    ordered = "ordinal" in parquet.schema_arrow.names
    try:
        table = parquet.read(columns=["word", "count", "ordinal"] if ordered else ["word", "count"])
    except (pa.ArrowException, OSError, KeyError) as exc:
        raise DamagedDataError(f"{name}: its rows cannot be read ({_first_line(exc)})") from None
    if table.schema.field("word").type != pa.binary() or table.schema.field("count").type != pa.int64():
        raise DamagedDataError(f"{name}: columns word (binary) and count (int64) expected, "
                               f"found {table.schema}")
    words = table.column("word").to_pylist()
    if ordered:
        if table.schema.field("ordinal").type != pa.int64() or table.column("ordinal").null_count:
            raise DamagedDataError(f"{name}: column ordinal (int64) expected, found {table.schema}")
        ordinals = table.column("ordinal").to_pylist()
        order = sorted(range(len(words)), key=ordinals.__getitem__)
        counts = dict(zip(map(words.__getitem__, order), map(table.column("count").to_pylist().__getitem__, order)))
    else:
        counts = dict(zip(words, table.column("count").to_pylist()))
    if len(counts) != table.num_rows or any(c is None or c <= 0 for c in counts.values()) or \
            rows_digest(counts) != info.digest or sum(counts.values()) != info.n_words:
        raise DamagedDataError(f"{name}: its rows do not match its digest (changed after bpestore count "
                               "wrote it); make it again")
    if "check" not in meta:  # written before the check covered the spec: its words must be the spec's
        _check_words(name, info.spec, counts)
    return dataclasses.replace(info, ordered=ordered), counts


def _metadata_check(meta: Mapping[str, Any]) -> str:
    """sha256 of a counts file's metadata (spec, sources, totals, the rows' digest) but its check."""
    body = json.dumps({k: v for k, v in meta.items() if k != "check"}, sort_keys=True)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _check_words(name: str, spec: TokenizerSpec, counts: Mapping[bytes, int]) -> None:
    """DamagedDataError unless each word is one whole pre-token under ``spec``
    (what counting with another spec, then relabelling, breaks)."""
    from .text import TextPipeline

    pipeline = TextPipeline(spec)
    for word in counts:
        text = word.decode("utf-8", "surrogatepass")
        if pipeline.pretokenize(text) != [text] or pipeline.specials is not None and pipeline.specials.search(text):
            raise DamagedDataError(f"{name}: its word {text!r} is not a word of its spec ({spec.pretokenizer} "
                                   "pre-tokenizer); the spec in its metadata is not the one it was counted with")


def _metadata(info: CountsInfo) -> dict[str, Any]:
    meta = {"format": FORMAT, "spec": info.spec.to_json(), "n_words": info.n_words, "n_distinct": info.n_distinct,
            "digest": info.digest,
            "sources": [{"name": s.source, "sha256": s.sha256, "size": s.size_bytes, "n_words": s.n_words,
                         "n_distinct": s.n_distinct} for s in info.sources]}
    return {**meta, "check": _metadata_check(meta)}


def _info(name: str, meta: dict[str, Any]) -> CountsInfo:
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}, this bpestore reads format {FORMAT}")
    sources = tuple(Source(str(s["name"]), sha256=str(s["sha256"]), size_bytes=int(s["size"]),
                           n_words=int(s["n_words"]), n_distinct=int(s["n_distinct"])) for s in meta["sources"])
    if not sources or any(len(s.sha256) != 64 for s in sources):
        raise ValueError("no sources, or a sha256 that is not one")
    if sum(s.n_words for s in sources) != int(meta["n_words"]):
        raise ValueError("the sources' words do not add up to the total")
    return CountsInfo(name, TokenizerSpec.from_json(meta["spec"]), sources, int(meta["n_words"]),
                      int(meta["n_distinct"]), str(meta["digest"]))


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
