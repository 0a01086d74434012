"""Corpora: the spec a corpus' words are made with, and writing counted sources into it.

Every source is written whole or not at all: a batch of counted sources (one
large source, or several small ones) is one transaction with the corpus row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from ..errors import ConflictError, InvalidArgumentError
from ..spec import TokenizerSpec, check_special_tokens
from . import repository
from .repository import Transactions

if TYPE_CHECKING:
    from ..ingest import CountedBatch
    from ..records import CountsInfo, Source


def corpus_spec(conn: Connection, corpus: str, **given: Any) -> TokenizerSpec:
    """The spec of an existing corpus (checked against the fields given), or a new one."""
    given = {k: v for k, v in given.items() if v is not None}
    if "special_tokens" in given:
        given["special_tokens"] = tuple(given["special_tokens"])
        check_special_tokens(given["special_tokens"])
    stored = repository.corpus_spec(conn, corpus)
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
    new), their rows and counts, in one transaction. A source another process counted
    meanwhile is marked skipped."""
    counted = [s for s in batch.sources if not s.skipped]
    generation = None
    if counted:
        with db.writing() as conn:
            # Check the stored spec inside this transaction: a concurrent first
            # ingest may have created the corpus with another.
            corpus_id, stored = repository.lock_corpus(conn, corpus, spec)
            if stored.corpus_key() != spec.corpus_key():
                raise ConflictError(f"corpus {corpus!r} was just created with another spec by "
                                    "a concurrent ingest; ingest again to see it")
            present = set() if force else repository.present_shas(conn, corpus_id, [s.sha256 for s in counted])
            if present:
                if len(present) < len({s.sha256 for s in counted}):
                    # Their counts are merged with the others': the others are counted again.
                    raise PartlyCounted(present)
                for s in counted:
                    s.skipped = True
                counted = []
            generation = repository.add_generation(conn, corpus_id, counted, batch.counts) if counted else None
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
    from collections import Counter

    from ..ingest.scheduler import merge_counts

    spec = files[0][0].spec
    for info, _ in files:
        check_spec(corpus, spec, info.spec, f"counts file {info.path}")
    results: list[Source] = []
    with db.writing() as conn:
        corpus_id, stored = repository.lock_corpus(conn, corpus, spec)
        check_spec(corpus, stored, spec, f"counts file {files[0][0].path}")
        every = [s.sha256 for info, _ in files for s in info.sources]
        seen = set() if force else repository.present_shas(conn, corpus_id, every)
        merged: Counter = Counter()
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
                merge_counts(merged, counts)
                added.extend(sources)
                if not force:
                    seen |= shas
            results.extend(sources)
        if added:
            generation = repository.add_generation(conn, corpus_id, added, merged)
            for s in added:
                s.generation = generation
    return results
