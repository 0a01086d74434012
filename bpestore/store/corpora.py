"""Corpora: the spec a corpus' words are made with, and writing counted sources into it.

Every source is written whole or not at all: a batch of counted sources (one
large source, or several small ones) is one transaction with the corpus row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from ..errors import ConflictError, InvalidArgumentError
from ..spec import TokenizerSpec
from . import repository
from .repository import Transactions

if TYPE_CHECKING:
    from ..ingest import CountedBatch


def corpus_spec(conn: Connection, corpus: str, **given: Any) -> TokenizerSpec:
    """The spec of an existing corpus (checked against the fields given), or a new one."""
    given = {k: v for k, v in given.items() if v is not None}
    if "special_tokens" in given:
        given["special_tokens"] = tuple(given["special_tokens"])
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
            if not force and repository.any_source_present(conn, corpus_id, [s.sha256 for s in counted]):
                if len(counted) > 1:
                    raise ConflictError(
                        f"another process ingested some of these sources into {corpus!r} at the "
                        "same time; ingest again (sources already in are skipped)")
                counted[0].skipped = True
                counted = []
            generation = repository.add_generation(conn, corpus_id, counted, batch.counts) if counted else None
    for s in batch.sources:
        s.corpus = corpus
        if not s.skipped:
            s.generation = generation
        if s.skipped:
            s.n_words = s.n_distinct = 0
