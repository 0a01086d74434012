"""Store: corpora, word counts, versions, merges and tokens in one database.

The only module that speaks SQL. Every write that belongs together is one
transaction: an ingested source (its ingest row and all its counts), a version's
creation (its row, its initial tokens and any inherited merges), a checkpoint
batch of merges (with their tokens).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from ..encoder import Tokenizer
from ..errors import BpestoreError
from ..ingest import CountedBatch, count_sources, expand_paths
from ..queries import diff_versions, first_merges, merge_tree
from ..records import CorpusInfo, Merge, Progress, Source, VersionInfo
from ..spec import TokenizerSpec
from ..alphabet import hf_order, initial_kinds, initial_vocab, initial_words, merge_filter
from ..trainer import BpeTrainer
from .db import display_url, make_engine, resolve_url, upgrade_schema
from .schema import aliases, corpora, ingests, merges, tokenizers, tokens, versions, word_counts

UPSERT_BATCH = 20_000
_NUMBER = re.compile(r"[0-9]+")  # a version number (ASCII digits only)
TOKENIZER_CACHE_SIZE = 8
DEFAULT_CHECKPOINT_EVERY = 1000
DEFAULT_CHECKPOINT_SECONDS = 10.0

# Tokenizers loaded in this process, by (database, version id, fingerprint).
_TOKENIZER_CACHE: dict[tuple[str, int, str], Tokenizer] = {}


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Store:
    """A bpestore database (SQLite path or SQLAlchemy URL).

    >>> store = Store(":memory:")  # doctest: +SKIP
    """

    def __init__(self, db: str | Path | None = None, *, upgrade: bool = True) -> None:
        self.url = resolve_url(db)
        self.engine = make_engine(self.url)
        if upgrade:
            try:
                upgrade_schema(self.engine)
            except BpestoreError:
                self.engine.dispose()
                raise

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Store {display_url(self.url)}>"

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One write transaction (on SQLite it takes the write lock at BEGIN, so
        concurrent writers wait for each other instead of failing)."""
        with self.engine.connect().execution_options(bpestore_write=True) as conn, conn.begin():
            yield conn

    # ------------------------------------------------------------------
    # corpora and ingestion
    # ------------------------------------------------------------------
    def ingest(
        self,
        corpus: str,
        paths: Iterable[str | Path],
        *,
        special_tokens: Sequence[str] | None = None,
        pretokenizer: str | None = None,
        pattern: str | None = None,
        normalizer: str | None = None,
        force: bool = False,
        errors: str = "strict",
        workers: int | None = None,
        glob: str | None = None,
        jsonl_field: str | None = None,
        on_source: Callable[[Source], None] | None = None,
        progress: Callable[[Progress], None] | None = None,
    ) -> list[Source]:
        """Count the words of each source into ``corpus`` (created if new).

        Sources are files, directories (their files, recursively, those
        matching ``glob``), ``-`` for standard input, ``.gz``/``.xz``/``.bz2``
        files, or with ``jsonl_field`` JSON Lines files. The corpus' spec
        (special tokens, pre-tokenizer, pattern, normalizer) is set by its
        first ingest; later ones must agree or leave them out. A source whose
        content (sha256) is already in the corpus is skipped unless ``force``.
        ``workers`` processes count (default: one per core).

        Every source is written whole or not at all: a large source is one
        transaction; small ones share transactions (each is still all or
        nothing). A source that fails (``errors="strict"`` and invalid UTF-8)
        raises BpestoreError; the sources before it are kept.

        >>> store.ingest("books", ["books/"], glob="*.txt")  # doctest: +SKIP
        """
        _check_name(corpus, "corpus")
        files = expand_paths(paths, glob=glob)
        if not files:
            raise BpestoreError("give at least one file to ingest")
        spec = self._corpus_spec(corpus, special_tokens=special_tokens, pretokenizer=pretokenizer,
                                 pattern=pattern, normalizer=normalizer)
        counted_before = set() if force else self._source_shas(corpus)
        results = []
        for batch in count_sources(files, spec, errors=errors, workers=workers,
                                   jsonl_field=jsonl_field, already_counted=counted_before,
                                   force=force, progress=progress):
            for result in self._add_counts(corpus, spec, batch, force=force):
                results.append(result)
                if on_source:
                    on_source(result)
        return results

    def _corpus_spec(self, corpus: str, **given: Any) -> TokenizerSpec:
        """The spec of an existing corpus (checked against what is given), or a new one."""
        given = {k: v for k, v in given.items() if v is not None}
        if "special_tokens" in given:
            given["special_tokens"] = tuple(given["special_tokens"])
        with self.engine.connect() as conn:
            row = conn.execute(select(corpora.c.spec).where(corpora.c.name == corpus)).first()
        if row is None:
            return TokenizerSpec(**given)
        spec = TokenizerSpec.from_json(row.spec)
        asked = spec.replace(**given)
        if asked.corpus_key() != spec.corpus_key():
            diff = [k for k in spec.corpus_key() if spec.corpus_key()[k] != asked.corpus_key()[k]]
            raise BpestoreError(
                f"corpus {corpus!r} was ingested with another {', '.join(diff)} "
                f"({', '.join(f'{k}={spec.corpus_key()[k]!r}' for k in diff)}); words from "
                "different specs never mix: ingest into a new corpus")
        return spec

    def _source_shas(self, corpus: str) -> set[str]:
        """The sha256 of every source already counted into a corpus."""
        with self.engine.connect() as conn:
            return set(conn.execute(
                select(ingests.c.sha256).join(corpora, corpora.c.id == ingests.c.corpus_id)
                .where(corpora.c.name == corpus)).scalars())

    def _add_counts(self, corpus: str, spec: TokenizerSpec, batch: CountedBatch, *,
                    force: bool) -> list[Source]:
        """One transaction: the corpus (if new), the batch's ingest rows, its counts."""
        counted = [s for s in batch.sources if not s.skipped]
        if counted:
            with self._write() as conn:
                # Create the corpus if missing (race-free), then check its spec inside
                # this transaction: a concurrent first ingest may have set another.
                conn.execute(_dialect(conn).insert(corpora)
                             .values(name=corpus, spec=spec.to_json(), created_at=_now())
                             .on_conflict_do_nothing(index_elements=[corpora.c.name]))
                corpus_id, stored_spec = conn.execute(
                    select(corpora.c.id, corpora.c.spec).where(corpora.c.name == corpus)
                    .with_for_update()).one()
                if TokenizerSpec.from_json(stored_spec).corpus_key() != spec.corpus_key():
                    raise BpestoreError(f"corpus {corpus!r} was just created with another spec by "
                                        "a concurrent ingest; ingest again to see it")
                if not force and self._present(conn, corpus_id, [s.sha256 for s in counted]):
                    # Another process ingested the same content since we looked.
                    if len(counted) > 1:
                        raise BpestoreError(
                            f"another process ingested some of these sources into {corpus!r} "
                            "at the same time; run the ingest again (sources already in are skipped)")
                    counted[0].skipped = True
                    counted = []
                if counted:
                    now = _now()
                    conn.execute(insert(ingests), [
                        {"corpus_id": corpus_id, "source": s.source, "sha256": s.sha256,
                         "size_bytes": s.size_bytes, "n_words": s.n_words, "n_distinct": s.n_distinct,
                         "created_at": now} for s in counted])
                    self._upsert_counts(conn, corpus_id, batch.counts)
        for s in batch.sources:
            s.corpus = corpus
            if s.skipped:
                s.n_words = s.n_distinct = 0
        return batch.sources

    @staticmethod
    def _present(conn: Connection, corpus_id: int, shas: Sequence[str]) -> bool:
        """Whether any of these contents is already a source of the corpus."""
        for start in range(0, len(shas), 500):
            if conn.execute(select(ingests.c.id).where(
                    ingests.c.corpus_id == corpus_id,
                    ingests.c.sha256.in_(shas[start:start + 500])).limit(1)).first():
                return True
        return False

    @staticmethod
    def _upsert_counts(conn: Connection, corpus_id: int, counts: Mapping[bytes, int]) -> None:
        """Add counts to word_counts: INSERT ... ON CONFLICT DO UPDATE, in batches.

        The statement is built with SQLAlchemy Core and compiled for the
        connection's dialect, then run with the driver's own executemany on
        plain tuples: per row, SQLAlchemy's parameter handling would cost
        more than the database (2.5x on SQLite). Same connection, same
        transaction.
        """
        stmt = _dialect(conn).insert(word_counts)
        stmt = stmt.on_conflict_do_update(
            index_elements=word_count_key(conn),
            set_={"count": word_counts.c.count + stmt.excluded["count"]})
        compiled = stmt.compile(dialect=conn.dialect)
        sql = str(compiled)
        plain_order = compiled.positional and list(compiled.positiontup) == ["corpus_id", "word", "count"]
        # In word order, so concurrent upserts on PostgreSQL lock rows in one order.
        items = iter(sorted(counts.items()))
        while batch := list(itertools.islice(items, UPSERT_BATCH)):
            if plain_order:  # SQLite's "?" parameters, in column order
                rows: list = [(corpus_id, word, count) for word, count in batch]
            else:
                rows = [{"corpus_id": corpus_id, "word": word, "count": count} for word, count in batch]
                if compiled.positional:
                    rows = [tuple(row[name] for name in compiled.positiontup) for row in rows]
            conn.exec_driver_sql(sql, rows)

    def corpora(self) -> list[CorpusInfo]:
        """Every corpus with its totals."""
        with self.engine.connect() as conn:
            names = conn.execute(select(corpora.c.name).order_by(corpora.c.name)).scalars().all()
            return [self._corpus_info(conn, name) for name in names]

    def corpus(self, name: str) -> CorpusInfo:
        with self.engine.connect() as conn:
            return self._corpus_info(conn, name)

    def _corpus_info(self, conn: Connection, name: str) -> CorpusInfo:
        row = conn.execute(select(corpora).where(corpora.c.name == name)).first()
        if row is None:
            known = conn.execute(select(corpora.c.name)).scalars().all()
            hint = f" (corpora: {', '.join(sorted(known))})" if known else " (no corpus yet: `bpestore ingest`)"
            raise BpestoreError(f"no corpus named {name!r}{hint}")
        totals = conn.execute(select(func.count(), func.coalesce(func.sum(ingests.c.size_bytes), 0),
                                     func.coalesce(func.sum(ingests.c.n_words), 0))
                              .where(ingests.c.corpus_id == row.id)).one()
        n_distinct = conn.execute(select(func.count()).select_from(word_counts)
                                  .where(word_counts.c.corpus_id == row.id)).scalar()
        return CorpusInfo(name=row.name, spec=TokenizerSpec.from_json(row.spec),
                          n_sources=totals[0], size_bytes=int(totals[1]), n_words=int(totals[2]),
                          n_distinct=n_distinct, created_at=_utc(row.created_at),
                          digest=self._corpus_digest(conn, row.id))

    @staticmethod
    def _corpus_digest(conn: Connection, corpus_id: int) -> str:
        """A digest of what the counts were made from: the spec and every source's sha256."""
        spec = conn.execute(select(corpora.c.spec).where(corpora.c.id == corpus_id)).scalar()
        shas = sorted(conn.execute(select(ingests.c.sha256).where(ingests.c.corpus_id == corpus_id)).scalars())
        h = hashlib.sha256(spec.encode())
        for sha in shas:
            h.update(sha.encode())
        return h.hexdigest()

    def corpus_sources(self, corpus: str) -> list[Source]:
        """The sources counted into a corpus, oldest first."""
        with self.engine.connect() as conn:
            corpus_id = self._corpus_id(conn, corpus)
            rows = conn.execute(select(ingests).where(ingests.c.corpus_id == corpus_id)
                                .order_by(ingests.c.id)).all()
        return [Source(r.source, r.sha256, r.size_bytes, r.n_words, r.n_distinct,
                       created_at=_utc(r.created_at)) for r in rows]

    def top_words(self, corpus: str, n: int = 10) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent words of a corpus with their counts (ties by bytes)."""
        with self.engine.connect() as conn:
            corpus_id = self._corpus_id(conn, corpus)
            rows = conn.execute(select(word_counts.c.word, word_counts.c["count"])
                                .where(word_counts.c.corpus_id == corpus_id)
                                .order_by(word_counts.c["count"].desc(), word_counts.c.word)
                                .limit(n)).all()
        return [(bytes(word), count) for word, count in rows]

    def word_counts(self, corpus: str) -> dict[bytes, int]:
        """All word counts of a corpus."""
        with self.engine.connect() as conn:
            corpus_id = self._corpus_id(conn, corpus)
            return self._load_counts(conn, corpus_id)

    @staticmethod
    def _load_counts(conn: Connection, corpus_id: int) -> dict[bytes, int]:
        result = conn.execute(select(word_counts.c.word, word_counts.c.count)
                              .where(word_counts.c.corpus_id == corpus_id))
        return {bytes(word): count for word, count in result}

    def _corpus_id(self, conn: Connection, name: str) -> int:
        corpus_id = conn.execute(select(corpora.c.id).where(corpora.c.name == name)).scalar()
        if corpus_id is None:
            self._corpus_info(conn, name)  # raises the helpful error
        return corpus_id

    # ------------------------------------------------------------------
    # versions
    # ------------------------------------------------------------------
    def versions(self, name: str | None = None) -> list[VersionInfo]:
        """Every version (of one tokenizer, if named), oldest first."""
        with self.engine.connect() as conn:
            query = select(versions.c.id).join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
            if name is not None:
                if conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name)).first() is None:
                    raise BpestoreError(self._unknown_tokenizer(conn, name))
                query = query.where(tokenizers.c.name == name)
            ids = conn.execute(query.order_by(tokenizers.c.name, versions.c.number)).scalars().all()
            return [self._version_info(conn, vid) for vid in ids]

    def version(self, ref: str) -> VersionInfo:
        """Resolve ``NAME``, ``NAME@N`` or ``NAME@ALIAS``."""
        with self.engine.connect() as conn:
            return self._version_info(conn, self._resolve(conn, ref))

    def set_alias(self, ref: str, alias: str) -> VersionInfo:
        """Point ``NAME@ALIAS`` at a version (moving the alias if it exists)."""
        _check_name(alias, "alias")
        if _NUMBER.fullmatch(alias):
            raise BpestoreError(f"an alias cannot be a number ({alias!r} would read as a version)")
        with self._write() as conn:
            version_id = self._resolve(conn, ref)
            tokenizer_id = conn.execute(select(versions.c.tokenizer_id)
                                        .where(versions.c.id == version_id)).scalar()
            stmt = _dialect(conn).insert(aliases).values(tokenizer_id=tokenizer_id, name=alias,
                                                         version_id=version_id)
            conn.execute(stmt.on_conflict_do_update(index_elements=[aliases.c.tokenizer_id, aliases.c.name],
                                                    set_={"version_id": version_id}))
            return self._version_info(conn, version_id)

    @staticmethod
    def _unknown_tokenizer(conn: Connection, name: str) -> str:
        known = conn.execute(select(tokenizers.c.name).order_by(tokenizers.c.name)).scalars().all()
        hint = f"known: {', '.join(known)}" if known else "none yet: `bpestore train` or `bpestore import`"
        return f"no tokenizer named {name!r} ({hint})"

    def _resolve(self, conn: Connection, ref: str) -> int:
        """The version id of a reference, or a BpestoreError saying what exists."""
        name, at, tag = ref.partition("@")
        if at and not tag:
            raise BpestoreError(f"{ref!r}: after '@' comes a version number or an alias (e.g. {name}@1)")
        tokenizer_id = conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name)).scalar()
        if tokenizer_id is None:
            raise BpestoreError(self._unknown_tokenizer(conn, name))
        rows = conn.execute(select(versions.c.id, versions.c.number, versions.c.status)
                            .where(versions.c.tokenizer_id == tokenizer_id)
                            .order_by(versions.c.number)).all()
        numbers = ", ".join(f"{name}@{r.number}" for r in rows)
        if not tag:
            complete = [r for r in rows if r.status == "complete"]
            if not complete:
                raise BpestoreError(f"{name} has no complete version yet ({numbers}); name one, "
                                    f"or finish it with `bpestore train --resume {name}@N`")
            return complete[-1].id
        if _NUMBER.fullmatch(tag):
            for r in rows:
                if r.number == int(tag):
                    return r.id
            raise BpestoreError(f"{name} has no version {tag} (versions: {numbers})")
        version_id = conn.execute(select(aliases.c.version_id).where(
            aliases.c.tokenizer_id == tokenizer_id, aliases.c.name == tag)).scalar()
        if version_id is None:
            raise BpestoreError(f"{name} has no version or alias {tag!r} (versions: {numbers})")
        return version_id

    def _newest_number(self, conn: Connection, name: str) -> int:
        number = conn.execute(select(func.max(versions.c.number))
                              .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                              .where(tokenizers.c.name == name)).scalar()
        if number is None:
            raise BpestoreError(self._unknown_tokenizer(conn, name))
        return number

    def _version_info(self, conn: Connection, version_id: int) -> VersionInfo:
        v = conn.execute(select(versions, tokenizers.c.name.label("tokenizer_name"))
                         .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                         .where(versions.c.id == version_id)).one()
        n_tokens = conn.execute(select(func.count()).select_from(tokens)
                                .where(tokens.c.version_id == version_id)).scalar()
        n_merges = conn.execute(select(func.count()).select_from(merges)
                                .where(merges.c.version_id == version_id)).scalar()
        corpus = (conn.execute(select(corpora.c.name).where(corpora.c.id == v.corpus_id)).scalar()
                  if v.corpus_id is not None else None)
        parent = None
        if v.parent_id is not None:
            p = conn.execute(select(tokenizers.c.name, versions.c.number)
                             .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                             .where(versions.c.id == v.parent_id)).one()
            parent = f"{p.name}@{p.number}"
        alias_names = conn.execute(select(aliases.c.name).where(aliases.c.version_id == version_id)
                                   .order_by(aliases.c.name)).scalars().all()
        return VersionInfo(
            id=v.id, name=v.tokenizer_name, number=v.number, status=v.status, source=v.source,
            vocab_size=n_tokens, n_merges=n_merges, target_vocab_size=v.target_vocab_size,
            target_merges=v.target_merges, corpus=corpus, parent=parent,
            spec=TokenizerSpec.from_json(v.spec), min_frequency=v.min_frequency,
            max_token_length=v.max_token_length, corpus_digest=v.corpus_digest,
            fingerprint=v.fingerprint, created_at=_utc(v.created_at), updated_at=_utc(v.updated_at),
            aliases=tuple(alias_names))

    def _new_version(self, conn: Connection, name: str, **values: Any) -> int:
        """Insert the next version row of tokenizer ``name`` (created if new)."""
        _check_name(name, "tokenizer")
        # Create the tokenizer row if missing, then lock it, so two processes
        # never take the same version number (SQLite's write lock does this alone).
        conn.execute(_dialect(conn).insert(tokenizers).values(name=name, created_at=_now())
                     .on_conflict_do_nothing(index_elements=[tokenizers.c.name]))
        tokenizer_id = conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name)
                                    .with_for_update()).scalar()
        number = (conn.execute(select(func.max(versions.c.number))
                               .where(versions.c.tokenizer_id == tokenizer_id)).scalar() or 0) + 1
        now = _now()
        values.setdefault("min_frequency", 1)
        return conn.execute(insert(versions).values(
            tokenizer_id=tokenizer_id, number=number, created_at=now, updated_at=now,
            **values)).inserted_primary_key[0]

    # ------------------------------------------------------------------
    # training
    # ------------------------------------------------------------------
    def train(
        self,
        name: str,
        *,
        corpus: str,
        vocab_size: int | None = None,
        merges: int | None = None,
        min_frequency: int = 1,
        tie_break: str | None = None,
        special_tokens: Sequence[str] | None = None,
        parent: str | None = None,
        max_token_length: int | None = None,
        alphabet: str | None = None,
        unk_token: str | None = None,
        byte_fallback: bool | None = None,
        end_of_word: str | None = None,
        start_of_word: str | None = None,
        no_inner_space: bool | None = None,
        checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
        checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
        progress: Callable[[Progress], None] | None = None,
    ) -> VersionInfo:
        """Train a new version ``NAME@N`` from the word counts of ``corpus``.

        Give ``vocab_size`` (bytes + specials + merges) or ``merges``. With
        ``parent="NAME@K"`` the new version extends that one: it starts with all
        its tokens and merges (ids unchanged) and continues on ``corpus``.
        Merges are written as they are made, every ``checkpoint_every`` merges
        or ``checkpoint_seconds``; a stopped run continues with ``resume``.

        The symbolization options (``alphabet``, ``unk_token``,
        ``byte_fallback``, ``end_of_word``, ``start_of_word``,
        ``no_inner_space``; see ``TokenizerSpec``) are recorded in the
        version's spec; an extension keeps its parent's.

        >>> store.train("en", corpus="books", vocab_size=1000)  # doctest: +SKIP
        <VersionInfo en@1 complete ...>
        """
        if (vocab_size is None) == (merges is None):
            raise BpestoreError("give either vocab_size (--vocab-size) or merges (--merges)")
        target = vocab_size if vocab_size is not None else merges
        if target is None or target < 0:
            raise BpestoreError("the vocabulary size / merge count must be a positive number")
        if checkpoint_every < 1:
            raise BpestoreError("--checkpoint-every must be at least 1")
        scheme = {k: v for k, v in dict(
            alphabet=alphabet, unk_token=unk_token, byte_fallback=byte_fallback,
            end_of_word=end_of_word, start_of_word=start_of_word,
            no_inner_space=no_inner_space).items() if v is not None}
        with self._write() as conn:
            corpus_id = self._corpus_id(conn, corpus)
            corpus_spec = TokenizerSpec.from_json(
                conn.execute(select(corpora.c.spec).where(corpora.c.id == corpus_id)).scalar())
            if conn.execute(select(word_counts.c.word).where(word_counts.c.corpus_id == corpus_id)
                            .limit(1)).first() is None:
                raise BpestoreError(f"corpus {corpus!r} has no words yet; ingest text first")
            values: dict[str, Any] = dict(
                corpus_id=corpus_id, target_vocab_size=vocab_size, target_merges=merges,
                min_frequency=min_frequency, max_token_length=max_token_length,
                status="training", source="trained",
                corpus_digest=self._corpus_digest(conn, corpus_id))
            if parent is None:
                specials = tuple(special_tokens) if special_tokens is not None else corpus_spec.special_tokens
                spec = corpus_spec.replace(special_tokens=specials,
                                           tie_break=tie_break or corpus_spec.tie_break, **scheme)
                words = None if spec.byte_level else (bytes(w) for w in conn.execute(
                    select(word_counts.c.word).where(word_counts.c.corpus_id == corpus_id)).scalars())
                initial = initial_vocab(spec, words)
                if vocab_size is not None and vocab_size < len(initial):
                    raise BpestoreError(f"--vocab-size must be at least {len(initial)} (the initial "
                                        f"alphabet and {len(specials)} special tokens)")
                version_id = self._new_version(conn, name, spec=spec.to_json(), **values)
                conn.execute(insert(tokens), [
                    {"version_id": version_id, "id": i, "bytes": data, "kind": kind}
                    for i, (data, kind) in enumerate(zip(initial, initial_kinds(spec, initial)))])
                if self._reuse_merges(conn, version_id, len(initial)):
                    return self._version_info(conn, version_id)
            else:
                version_id = self._extend(conn, name, parent, corpus_spec, special_tokens,
                                          tie_break, vocab_size, merges, values, scheme)
        return self._run_training(version_id, checkpoint_every, checkpoint_seconds, progress)

    def _reuse_merges(self, conn: Connection, version_id: int, n_initial: int) -> bool:
        """Start a new version from the merges of an equal run, if there is one.

        Training is deterministic and its stopping point does not change the
        merges before it, so a root version trained on the same counts (same
        corpus digest) with the same spec and limits holds a prefix of this
        version's merges, or all of them. Copies that prefix; returns True when
        it already reaches the target (the version is then complete).
        """
        new = conn.execute(select(versions).where(versions.c.id == version_id)).one()
        candidates = conn.execute(select(versions.c.id, versions.c.status, versions.c.target_vocab_size,
                                         versions.c.target_merges).where(
            versions.c.id != version_id, versions.c.source == "trained", versions.c.parent_id.is_(None),
            versions.c.corpus_id == new.corpus_id, versions.c.corpus_digest == new.corpus_digest,
            versions.c.spec == new.spec, versions.c.min_frequency == new.min_frequency,
            versions.c.max_token_length.is_not_distinct_from(new.max_token_length))).all()
        best, best_merges = None, []
        for donor in candidates:
            rows = conn.execute(select(merges.c.left_id, merges.c.right_id, merges.c.token_id,
                                       merges.c["count"]).where(merges.c.version_id == donor.id)
                                .order_by(merges.c.rank)).all()
            if len(rows) > len(best_merges):
                best, best_merges = donor, rows
        if best is None:
            return False
        # The prefix this version's own run would make before reaching its target.
        taken, n_tokens = 0, n_initial
        for row in best_merges:
            if (new.target_vocab_size is not None and n_tokens >= new.target_vocab_size) or (
                    new.target_merges is not None and taken >= new.target_merges):
                break
            taken += 1
            n_tokens = max(n_tokens, row.token_id + 1)
        reached = (n_tokens >= new.target_vocab_size if new.target_vocab_size is not None
                   else taken >= new.target_merges)
        # A complete donor that stopped short of its own target ran out of pairs:
        # this run would stop at the same place.
        exhausted = best.status == "complete" and taken == len(best_merges) and (
            (best.target_vocab_size is not None and n_tokens < best.target_vocab_size)
            or (best.target_merges is not None and taken < best.target_merges))
        conn.execute(insert(tokens).from_select(
            ["version_id", "id", "bytes", "kind"],
            select(version_id, tokens.c.id, tokens.c.bytes, tokens.c.kind).where(
                tokens.c.version_id == best.id, tokens.c.id >= n_initial, tokens.c.id < n_tokens)))
        conn.execute(insert(merges).from_select(
            ["version_id", "rank", "left_id", "right_id", "token_id", "count"],
            select(version_id, merges.c.rank, merges.c.left_id, merges.c.right_id,
                   merges.c.token_id, merges.c["count"]).where(
                merges.c.version_id == best.id, merges.c.rank < taken)))
        if not (reached or exhausted):
            return False
        spec = TokenizerSpec.from_json(new.spec)
        fingerprint = _fingerprint(spec, new.corpus_digest, [
            Merge(rank, r.left_id, r.right_id, r.token_id, r.count)
            for rank, r in enumerate(best_merges[:taken])])
        conn.execute(update(versions).where(versions.c.id == version_id).values(
            status="complete", fingerprint=fingerprint, updated_at=_now()))
        _TOKENIZER_CACHE.clear()
        return True

    def _extend(self, conn: Connection, name: str, parent: str, corpus_spec: TokenizerSpec,
                special_tokens: Sequence[str] | None, tie_break: str | None,
                vocab_size: int | None, n_merges: int | None, values: dict[str, Any],
                scheme: dict[str, Any]) -> int:
        """Create a child of ``parent`` holding copies of its tokens and merges."""
        parent_id = self._resolve(conn, parent)
        p = self._version_info(conn, parent_id)
        changed = [k for k, v in scheme.items() if getattr(p.spec, k) != v]
        if changed:
            raise BpestoreError(f"an extension keeps the {', '.join(changed)} of {p.ref}; "
                                "leave those options out (or train a new tokenizer)")
        if p.status != "complete":
            raise BpestoreError(f"{p.ref} is still training; finish it first "
                                f"(`bpestore train --resume {p.ref}`)")
        if p.source != "trained":
            raise BpestoreError(f"{p.ref} was imported ({p.source}); only versions trained by "
                                "bpestore can be extended so far (their ids 0-255 are the bytes)")
        if p.spec.corpus_key() != corpus_spec.corpus_key():
            raise BpestoreError(f"the corpus was ingested with another spec than {p.ref}'s; "
                                "an extension continues on words made the same way")
        if special_tokens is not None and tuple(special_tokens) != p.spec.special_tokens:
            raise BpestoreError(f"an extension keeps the special tokens of {p.ref} "
                                f"({', '.join(p.spec.special_tokens) or 'none'})")
        if vocab_size is not None and vocab_size < p.vocab_size:
            raise BpestoreError(f"{p.ref} already has {p.vocab_size} tokens; an extension "
                                f"needs --vocab-size above that")
        if n_merges is not None and n_merges < p.n_merges:
            raise BpestoreError(f"{p.ref} already has {p.n_merges} merges; ask for more")
        spec = p.spec.replace(tie_break=tie_break or p.spec.tie_break)
        version_id = self._new_version(conn, name, spec=spec.to_json(), parent_id=parent_id, **values)
        conn.execute(insert(tokens).from_select(
            ["version_id", "id", "bytes", "kind"],
            select(version_id, tokens.c.id, tokens.c.bytes, tokens.c.kind)
            .where(tokens.c.version_id == parent_id)))
        conn.execute(insert(merges).from_select(
            ["version_id", "rank", "left_id", "right_id", "token_id", "count"],
            select(version_id, merges.c.rank, merges.c.left_id, merges.c.right_id,
                   merges.c.token_id, merges.c["count"])
            .where(merges.c.version_id == parent_id)))
        return version_id

    def resume(self, ref: str, *, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
               checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
               progress: Callable[[Progress], None] | None = None) -> VersionInfo:
        """Continue a version that stopped before its target (``train --resume``)."""
        with self.engine.connect() as conn:
            if "@" in ref:
                version_id = self._resolve(conn, ref)
            else:  # NAME alone: its newest version
                version_id = self._resolve(conn, f"{ref}@{self._newest_number(conn, ref)}")
            v = self._version_info(conn, version_id)
            if v.status == "complete":
                raise BpestoreError(f"{v.ref} is complete; nothing to resume")
            current = self._corpus_digest(conn, conn.execute(
                select(versions.c.corpus_id).where(versions.c.id == version_id)).scalar())
            if current != v.corpus_digest:
                raise BpestoreError(
                    f"corpus {v.corpus!r} has changed since {v.ref} started (new sources were "
                    f"ingested), so resuming would not give the run it began. Extend it instead: "
                    f"bpestore train {v.name} --from {v.ref} --corpus {v.corpus} ...")
        return self._run_training(version_id, checkpoint_every, checkpoint_seconds, progress)

    def _run_training(self, version_id: int, checkpoint_every: int, checkpoint_seconds: float,
                      progress: Callable[[Progress], None] | None) -> VersionInfo:
        """Replay the version's stored merges, then merge on, writing checkpoints."""
        with self.engine.connect() as conn, conn.begin():
            v = self._version_info(conn, version_id)
            corpus_id = conn.execute(select(versions.c.corpus_id)
                                     .where(versions.c.id == version_id)).scalar()
            # In the same read as the counts: were they what the version pinned?
            if self._corpus_digest(conn, corpus_id) != v.corpus_digest:
                raise BpestoreError(f"corpus {v.corpus!r} changed while {v.ref} was starting; "
                                    f"run `bpestore train --resume {v.ref}` again")
            counts = self._load_counts(conn, corpus_id)
            token_rows = conn.execute(select(tokens.c.id, tokens.c.bytes, tokens.c.kind)
                                      .where(tokens.c.version_id == version_id)
                                      .order_by(tokens.c.id)).all()
            stored = conn.execute(select(merges.c.left_id, merges.c.right_id, merges.c.token_id,
                                         merges.c["count"])
                                  .where(merges.c.version_id == version_id)
                                  .order_by(merges.c.rank)).all()
        spec = v.spec
        initial = [bytes(r.bytes) for r in token_rows if r.kind != "merge"]
        special_ids = [r.id for r in token_rows if r.kind == "special"]
        trainer = BpeTrainer(
            initial_words(spec, counts, initial),
            initial,
            tie_break=spec.tie_break,
            hf_order=hf_order(spec, initial) if spec.tie_break == "hf" else None,
            min_frequency=v.min_frequency,
            max_token_length=v.max_token_length,
            allow_merge=merge_filter(spec),
            special_ids=special_ids,
        )
        del counts  # the trainer holds the words now
        trainer.replay([(m.left_id, m.right_id) for m in stored], [m.count for m in stored])
        stored_tokens = {r.id for r in token_rows}
        if [m.token for m in trainer.merges] != [m.token_id for m in stored] or any(
                m.token_id not in stored_tokens for m in stored):
            raise BpestoreError(f"{v.ref}'s stored merges do not replay to their stored tokens; "
                                "the version is damaged")
        known_tokens = len(token_rows)
        pending: list[Merge] = []
        last_write = time.monotonic()
        target = v.target_merges if v.target_merges is not None else v.target_vocab_size

        def write(batch: list[Merge], complete: bool) -> None:
            """One checkpoint: the batch's merges and new tokens, in one transaction."""
            nonlocal known_tokens
            new_tokens = [m.token for m in batch if m.token >= known_tokens]
            with self._write() as conn:
                _insert_rows(conn, merges, [(version_id, m.rank, m.left, m.right, m.token, m.count)
                                            for m in batch])
                _insert_rows(conn, tokens, [(version_id, t, trainer.token_bytes[t], "merge")
                                            for t in new_tokens])
                values: dict[str, Any] = {"updated_at": _now()}
                if complete:
                    values.update(status="complete", fingerprint=_fingerprint(spec, v.corpus_digest, trainer.merges))
                conn.execute(update(versions).where(versions.c.id == version_id).values(**values))
            # Only once committed: a failed batch is written again, whole.
            known_tokens = max(new_tokens, default=known_tokens - 1) + 1

        # Progress counts merges; a vocabulary target counts the alphabet and specials too.
        total_merges = None if target is None else target - (len(initial) if v.target_merges is None else 0)
        try:
            for merge in trainer.train(vocab_size=v.target_vocab_size, max_merges=v.target_merges):
                pending.append(merge)
                if progress is not None:
                    progress(Progress("train", v.ref, merge.rank + 1, total_merges, "merges",
                                      merge=merge, token=trainer.token_bytes[merge.token]))
                if len(pending) >= checkpoint_every or time.monotonic() - last_write >= checkpoint_seconds:
                    write(pending, complete=False)
                    pending = []
                    last_write = time.monotonic()
        except BaseException as exc:
            # Keep what was merged: the rows are valid checkpoints to resume from.
            if pending:
                try:
                    write(pending, complete=False)
                except Exception as flush_error:
                    exc.add_note(f"(the last {len(pending)} merges were not saved either: {flush_error})")
            raise
        write(pending, complete=True)
        _TOKENIZER_CACHE.clear()
        return self.version(f"{v.name}@{v.number}")

    # ------------------------------------------------------------------
    # tokenizers: loading, import, export
    # ------------------------------------------------------------------
    def tokenizer(self, ref: str) -> Tokenizer:
        """The Tokenizer of a version, loaded once per process and cached.

        The cache key includes the version's fingerprint (or, while training,
        its merge count), so a changed version is never served stale.
        """
        with self.engine.connect() as conn:
            version_id = self._resolve(conn, ref)
            row = conn.execute(select(versions.c.fingerprint, versions.c.spec, versions.c.number,
                                      tokenizers.c.name)
                               .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                               .where(versions.c.id == version_id)).one()
            n_merges = conn.execute(select(func.count()).select_from(merges)
                                    .where(merges.c.version_id == version_id)).scalar()
            key = (self.url, version_id, row.fingerprint or f"training:{n_merges}")
            cached = _TOKENIZER_CACHE.get(key)
            if cached is not None:
                return cached
            vocab, merge_list, special_ids = self._load_vocab(conn, version_id)
        tok = Tokenizer(vocab, merge_list, special_ids, spec=TokenizerSpec.from_json(row.spec),
                        name=f"{row.name}@{row.number}")
        if len(_TOKENIZER_CACHE) >= TOKENIZER_CACHE_SIZE:
            _TOKENIZER_CACHE.pop(next(iter(_TOKENIZER_CACHE)))  # the oldest
        _TOKENIZER_CACHE[key] = tok
        return tok

    def export(self, ref: str, *, format: str, out: str | Path) -> list[Path]:  # noqa: A002
        """Write a version as GPT-2 files (``out`` a folder), a Hugging Face
        ``tokenizer.json`` or a tiktoken rank file; returns the files written.

        >>> store.export("en@1", format="hf", out="tokenizer.json")  # doctest: +SKIP
        [PosixPath('tokenizer.json')]
        """
        from ..formats import export_tokenizer

        return export_tokenizer(self.tokenizer(ref), format, Path(out))

    @staticmethod
    def _load_vocab(conn: Connection, version_id: int
                    ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], dict[str, int]]:
        vocab: dict[int, bytes] = {}
        special_ids: dict[str, int] = {}
        for token_id, data, kind in conn.execute(select(tokens.c.id, tokens.c.bytes, tokens.c.kind)
                                                 .where(tokens.c.version_id == version_id)):
            vocab[token_id] = bytes(data)
            if kind == "special":
                special_ids[bytes(data).decode("utf-8")] = token_id
        merge_list = [(vocab[left], vocab[right]) for left, right in conn.execute(
            select(merges.c.left_id, merges.c.right_id).where(merges.c.version_id == version_id)
            .order_by(merges.c.rank))]
        return vocab, merge_list, special_ids

    def _vocab_and_merges(self, conn: Connection, version_id: int) -> tuple[dict[int, bytes], list[Merge]]:
        vocab = {i: bytes(b) for i, b in conn.execute(
            select(tokens.c.id, tokens.c.bytes).where(tokens.c.version_id == version_id))}
        rows = [Merge(*r) for r in conn.execute(
            select(merges.c.rank, merges.c.left_id, merges.c.right_id, merges.c.token_id, merges.c["count"])
            .where(merges.c.version_id == version_id).order_by(merges.c.rank))]
        return vocab, rows

    def token(self, ref: str, token: str | int) -> dict[str, Any]:
        """A token of a version: its id, bytes, kind and the merges that built it.

        ``token`` is an id (int), or text: a token's exact string, e.g. " the".

        >>> store.token("en@1", " the")["id"]  # doctest: +SKIP
        262
        """
        with self.engine.connect() as conn:
            version_id = self._resolve(conn, ref)
            vocab, rows = self._vocab_and_merges(conn, version_id)
            kinds = dict(conn.execute(select(tokens.c.id, tokens.c.kind)
                                      .where(tokens.c.version_id == version_id)).all())
        if isinstance(token, int):
            token_id = token
            if token_id not in vocab:
                raise BpestoreError(f"{ref} has no token id {token_id} (ids 0..{max(vocab)})")
        else:
            matches = [i for i, b in sorted(vocab.items()) if b == token.encode("utf-8")]
            if not matches:
                raise BpestoreError(f"{token!r} is not a token of {ref}; `bpestore encode {ref} "
                                    f"{token!r} --tokens` shows how it is split")
            token_id = matches[0]
        info = merge_tree(token_id, vocab, first_merges(rows))
        info["kind"] = kinds[token_id]
        info["bytes"] = vocab[token_id].hex()
        return info

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        """What changed between two versions: shared merge prefix, changed ids, new tokens."""
        with self.engine.connect() as conn:
            a, b = self._resolve(conn, ref_a), self._resolve(conn, ref_b)
            result = diff_versions(*self._vocab_and_merges(conn, a), *self._vocab_and_merges(conn, b))
            spec_a = self._version_info(conn, a).spec.to_dict()
            spec_b = self._version_info(conn, b).spec.to_dict()
        result["spec_changes"] = {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)}
        return result

    def import_vocab(self, name: str, vocab: dict[int, bytes], merge_list: Sequence[tuple[bytes, bytes]],
                     special_tokens: Sequence[str] = (), *, spec: TokenizerSpec | None = None,
                     source: str = "import") -> VersionInfo:
        """Store a vocabulary and merges made elsewhere as a new complete version."""
        _check_name(name, "tokenizer")
        specials = tuple(special_tokens)
        spec = (spec or TokenizerSpec()).replace(special_tokens=specials)
        special_ids = {t: next(i for i, b in vocab.items() if b == t.encode("utf-8")) for t in specials}
        # The lowest id of each ordinary byte string, as the encoder uses it.
        id_of = {b: i for i, b in sorted(vocab.items(), reverse=True) if i not in special_ids.values()}
        for rank, (left, right) in enumerate(merge_list):
            if left not in id_of or right not in id_of or left + right not in id_of:
                raise BpestoreError(f"merge {rank} ({left!r}, {right!r}) uses or makes a token "
                                    "missing from the vocabulary")
        with self._write() as conn:
            version_id = self._new_version(
                conn, name, spec=spec.to_json(), target_vocab_size=len(vocab), status="complete",
                source=source)
            reserved = set(special_ids.values())
            conn.execute(insert(tokens), [
                {"version_id": version_id, "id": i, "bytes": data,
                 "kind": "special" if i in reserved else ("byte" if len(data) == 1 else "merge")}
                for i, data in sorted(vocab.items())])
            rows = [{"version_id": version_id, "rank": rank, "left_id": id_of[left],
                     "right_id": id_of[right], "token_id": id_of[left + right], "count": 0}
                    for rank, (left, right) in enumerate(merge_list)]
            for start in range(0, len(rows), UPSERT_BATCH):
                conn.execute(insert(merges), rows[start:start + UPSERT_BATCH])
            fingerprint = _fingerprint(spec, None, [
                Merge(r["rank"], r["left_id"], r["right_id"], r["token_id"], 0) for r in rows])
            conn.execute(update(versions).where(versions.c.id == version_id)
                         .values(fingerprint=fingerprint))
            return self._version_info(conn, version_id)

    def import_gpt2(self, name: str, *, vocab: str | Path, merges: str | Path) -> VersionInfo:
        """Import GPT-2's ``vocab.json`` and ``merges.txt`` as a new version."""
        from ..formats.gpt2 import read_gpt2

        vocab_map, merge_list, specials = read_gpt2(vocab, merges)
        return self.import_vocab(name, vocab_map, merge_list, specials, source="gpt2")


def _dialect(conn: Connection):
    """The SQLAlchemy dialect module with INSERT ... ON CONFLICT for this database."""
    dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(conn.dialect.name)
    if dialect is None:
        raise BpestoreError(f"bpestore supports SQLite and PostgreSQL, not {conn.dialect.name}")
    return dialect


def word_count_key(conn: Connection) -> list:
    """The unique key of word_counts: (corpus_id, word), or on PostgreSQL
    (corpus_id, sha256(word)) since its index entries cannot hold long words
    (revision 0002)."""
    if conn.dialect.name == "postgresql":
        return [word_counts.c.corpus_id, func.sha256(word_counts.c.word)]
    return [word_counts.c.corpus_id, word_counts.c.word]


def _check_name(name: str, what: str) -> None:
    """Names are stored as text: they must be non-empty, printable, '@'-free UTF-8."""
    if not name or "@" in name or not name.isprintable():
        raise BpestoreError(f"a {what} name must be non-empty printable text without '@', not {name!r}")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise BpestoreError(f"a {what} name must be valid text, not {name!r}") from None


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every timestamp bpestore writes is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _insert_rows(conn: Connection, table, rows: list[tuple]) -> None:
    """INSERT many rows (tuples in the table's column order) with the driver's
    executemany: a third of the time of Core's per-row parameter handling,
    which matters for checkpoints written while training runs."""
    if not rows:
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(c.name for c in table.columns)
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({columns}) VALUES ({', '.join([mark] * len(table.columns))})",
                         rows)


def _fingerprint(spec: TokenizerSpec, corpus_digest: str | None, merge_list: Iterable[Merge]) -> str:
    """sha256 of the spec, the corpus digest and the merges: equal iff they tokenize alike."""
    h = hashlib.sha256(spec.to_json().encode())
    h.update((corpus_digest or "").encode())
    for m in merge_list:
        h.update(f"{m.left},{m.right},{m.token};".encode())
    return h.hexdigest()
