"""Corpora: ingesting sources and counts files, a corpus' spec, generations and word counts.

Every source is written whole or not at all: a batch of counted sources (one
large source, or several small ones) is one transaction with the corpus row.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConflictError, InvalidArgumentError
from ..ingest import CountedBatch, IngestTuning, count_sources, expand_paths
from ..ingest.scheduler import merge_counts
from ..ingest.shards import merge_firsts
from ..records import CountsInfo, Progress, Source
from ..sources import warn_raw_json
from ..spec import TokenizerSpec, check_special_tokens
from . import count_tables
from .corpus_tables import CorpusReads, add_generation, lock_corpus, lock_corpus_row, present_shas
from .drivers import Transactions
from .version_tables import check_name


def corpus_spec(stored: TokenizerSpec | None, corpus: str, **given: Any) -> TokenizerSpec:
    """The spec of an existing corpus (``stored``, checked against the fields given), or a new one."""
    given = {k: v for k, v in given.items() if v is not None}
    if "special_tokens" in given:
        given["special_tokens"] = tuple(given["special_tokens"])
        check_special_tokens(given["special_tokens"])
    if stored is None:
        return TokenizerSpec(**given)
    have, asked = stored.corpus_key(), stored.replace(**given).corpus_key()
    if asked != have:
        diff = [k for k in have if have[k] != asked[k]]
        raise InvalidArgumentError(
            f"corpus {corpus!r} was ingested with another {', '.join(diff)} "
            f"({', '.join(f'{k}={have[k]!r}' for k in diff)}); words from different specs never mix: "
            "ingest into a new corpus", params=tuple(diff))
    return stored


class PartlyCounted(Exception):
    """Some sources of a batch were counted into the corpus by another process meanwhile
    (``present``: their sha256): the batch's merged counts cannot be split, so the
    caller counts the others again."""

    def __init__(self, present: set[str]) -> None:
        super().__init__(f"{len(present)} source(s) counted meanwhile")
        self.present = present


def add_batch(db: Transactions, corpus: str, spec: TokenizerSpec, batch: CountedBatch, *, force: bool) -> None:
    """Write a batch of counted sources as the corpus' next generation: the corpus (if
    new), their rows and counts, in one transaction. A source another
    process counted meanwhile is marked skipped."""
    counted = [s for s in batch.sources if not s.skipped]
    generation = digest = None
    db.fresh_counts.drop()
    if counted:
        with db.writing() as tx:
            # Check the stored spec inside this transaction: a concurrent first
            # ingest may have created the corpus with another.
            corpus_id, stored = lock_corpus(tx, corpus, spec.to_json())
            if stored.corpus_key() != spec.corpus_key():
                raise ConflictError(f"corpus {corpus!r} was just created with another spec by "
                                    "a concurrent ingest; ingest again to see it")
            present = set() if force else present_shas(tx, corpus_id, [s.sha256 for s in counted])
            if not present:
                generation = add_generation(tx, corpus_id, counted, batch.counts, batch.firsts)
                if generation == 1:
                    digest = CorpusReads(tx).generation_digest(corpus_id, generation)
        if generation is not None and digest is not None:  # committed
            db.fresh_counts.keep(corpus, generation, digest, batch.counts)
        if present:
            if len(present) < len({s.sha256 for s in counted}):
                # Their counts are merged with the others': the others are counted again.
                raise PartlyCounted(present)
            for s in counted:
                s.skipped = True
    for s in batch.sources:
        s.corpus = corpus
        if not s.skipped:
            s.generation = generation
        if s.skipped:
            s.n_words = s.n_distinct = 0


def check_spec(corpus: str, stored: TokenizerSpec, spec: TokenizerSpec, what: str) -> None:
    """Refuse words made with another spec than the corpus'."""
    have, asked = stored.corpus_key(), spec.corpus_key()
    if asked != have:
        diff = [k for k in have if have[k] != asked[k]]
        raise InvalidArgumentError(
            f"{what} was counted with another {', '.join(diff)} than corpus {corpus!r} "
            f"({', '.join(f'{k}={asked[k]!r}, the corpus has {have[k]!r}' for k in diff)}); "
            "words from different specs never mix: count again with the corpus' spec, or ingest into a new corpus")


def add_counts(db: Transactions, corpus: str, files: Sequence[tuple[CountsInfo, dict[bytes, int]]], *,
               force: bool) -> list[Source]:
    """Add counts files to a corpus as one generation, in one transaction: those whose
    sources are all in the corpus already (or earlier in ``files``) are skipped;
    one holding some of them is refused, since its counts cannot be split."""
    spec = files[0][0].spec
    for info, _ in files:
        check_spec(corpus, spec, info.spec, f"counts file {info.path}")
    results: list[Source] = []
    with db.writing() as tx:
        corpus_id, stored = lock_corpus(tx, corpus, spec.to_json())
        check_spec(corpus, stored, spec, f"counts file {files[0][0].path}")
        every = [s.sha256 for info, _ in files for s in info.sources]
        seen = set() if force else present_shas(tx, corpus_id, every)
        merged: Counter = Counter()
        # ordinal: each file's words in the order they first occurred, the files in order
        firsts: dict[bytes, int] | None = {}
        offset = 0
        added: list[Source] = []
        for info, counts in files:
            shas = {s.sha256 for s in info.sources}
            present = shas & seen
            sources = [dataclasses.replace(s, corpus=corpus) for s in info.sources]
            if present and present == shas:
                for s in sources:
                    s.skipped, s.n_words, s.n_distinct = True, 0, 0
            elif present:
                name = next(s.source for s in info.sources if s.sha256 in present)
                raise ConflictError(f"counts file {info.path} holds {len(present)} of its {len(shas)} sources that "
                                    f"are in {corpus!r} already (e.g. {name}) and others that are not; its counts "
                                    "cannot be split: count the new sources alone, or pass force=True")
            else:
                if firsts is not None and info.ordered:
                    merge_firsts(firsts, dict(zip(counts, range(offset, offset + len(counts)))))
                    offset += len(counts)
                else:
                    firsts = None  # a file from before ordinals: the generation has none
                merge_counts(merged, counts)
                added.extend(sources)
                if not force:
                    seen |= shas
            results.extend(sources)
        if added:
            generation = add_generation(tx, corpus_id, added, merged, firsts)
            for s in added:
                s.generation = generation
    return results


class Corpora:
    """The corpora of a store (``db``: its transactions)."""

    def __init__(self, db: Transactions) -> None:
        self.db = db

    def ingest(self, corpus: str, paths: Iterable[str | Path], *, force: bool, errors: str, workers: int | None,
               glob: str | None, jsonl_field: str | None, on_source: Callable[[Source], None] | None,
               progress: Callable[[Progress], None] | None, tuning: IngestTuning | None,
               **given: Any) -> list[Source]:
        """``Store.ingest`` (``given``: the spec's fields)."""
        check_name(corpus, "corpus", "corpus")
        files = expand_paths(paths, glob=glob)
        if not files:
            raise InvalidArgumentError("paths must name at least one file to ingest", params=("paths",))
        if jsonl_field is None:
            warn_raw_json(files)
        with self.db.reading() as tx:
            corpora = CorpusReads(tx)
            spec = corpus_spec(corpora.spec(corpus), corpus, **given)
            counted_before = set() if force else corpora.source_shas(corpus)
        results: list[Source] = []
        tuning = tuning or IngestTuning()
        for batch in count_sources(files, spec, errors=errors, workers=workers, jsonl_field=jsonl_field,
                                   already_counted=counted_before, force=force, progress=progress,
                                   tuning=tuning):
            while True:
                try:
                    add_batch(self.db, corpus, spec, batch, force=force)
                    break
                except PartlyCounted as meanwhile:
                    # Another process counted some of these sources meanwhile: the rest, again.
                    batch = _recount(batch, meanwhile.present, spec, errors=errors, jsonl_field=jsonl_field,
                                     tuning=tuning)
            for source in batch.sources:
                results.append(source)
                if on_source:
                    on_source(source)
        return results

    def ingest_counts(self, corpus: str, files: Iterable[str | Path], *, force: bool,
                      on_source: Callable[[Source], None] | None) -> list[Source]:
        check_name(corpus, "corpus", "corpus")
        names = expand_paths(files)
        if not names or "-" in names:
            raise InvalidArgumentError("files must name counts files (bpestore count writes them)",
                                       params=("files",))
        from ..counts import read_counts

        self.db.fresh_counts.drop()
        results = add_counts(self.db, corpus, [read_counts(name) for name in names], force=force)
        for source in results:
            if on_source:
                on_source(source)
        return results

    def compact(self, corpus: str) -> dict[str, Any]:
        with self.db.writing() as tx:
            corpora = CorpusReads(tx)
            corpus_id = corpora.corpus_id(corpus)
            lock_corpus_row(tx, corpus_id)
            rows, size = count_tables.compact(tx, corpus_id)
            return {"corpus": corpus, "rows_freed": rows, "bytes_freed": size,
                    "kept": corpora.kept_generations(corpus_id)}


def _recount(batch: CountedBatch, present: set[str], spec: TokenizerSpec, **options: Any) -> CountedBatch:
    """A batch of small sources counted again without those whose content is in ``present``."""
    kept = [s for s in batch.sources if not s.skipped and s.sha256 not in present]
    gone = [dataclasses.replace(s, skipped=True, n_words=0, n_distinct=0)
            for s in batch.sources if s.skipped or s.sha256 in present]
    counts: Counter = Counter()
    firsts: dict[bytes, int] = {}
    sources: list[Source] = []
    for again in count_sources([s.source for s in kept], spec, workers=1, already_counted=present, **options):
        counts.update(again.counts)
        merge_firsts(firsts, again.firsts)
        sources.extend(again.sources)
    return CountedBatch(gone + sources, counts, firsts)
