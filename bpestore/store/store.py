"""Store: corpora, word counts, versions, merges and tokens in one database.

The facade of the public API. It opens the database, owns the transactions
(where a failure of the database itself becomes ``DatabaseError``) and the
tokenizer cache, and has one short method per public call. The work is done by:

* ``repository``: every SQL query and write;
* ``corpora``: a corpus' spec, and counted sources written one batch per transaction;
* ``training``: train, resume, reuse of an equal run, extension, checkpoints;
* ``imports``: versions made elsewhere.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import BpestoreError, ConflictError, DatabaseError, InvalidArgumentError, NotFoundError, ReadOnlyError
from ..spec import TokenizerSpec
from . import reads
from .db import display_url, lock_wait_seconds, resolve_url

if TYPE_CHECKING:
    # Imported where used: a query loads neither the encoder, the ingest workers nor the
    # trainer; loading a tokenizer through sqlite3 (reads.py) loads neither SQLAlchemy nor
    # the records and queries.
    from sqlalchemy import Connection, Engine
    from sqlalchemy.exc import SQLAlchemyError

    from ..analysis import TextCounts
    from ..encoder import Tokenizer
    from ..ingest import CountedBatch, IngestTuning
    from ..records import (
        CorpusInfo,
        EncodingStats,
        Explanation,
        LineageNode,
        MergeInfo,
        Progress,
        Removed,
        Source,
        TokenInfo,
        VerifyResult,
        VersionChart,
        VersionInfo,
        VersionProgress,
    )
    from ..spec import EncoderFacts
    from . import facts, repository
    from .training import TrainOptions
    from .vocabulary import Vocabulary

T = TypeVar("T")


class _Deferred:
    """A module of this package imported when first used: ``repository`` and
    ``facts`` import SQLAlchemy, which a store read through ``sqlite3``
    (``reads``) never needs."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name, __package__), attribute)


if not TYPE_CHECKING:
    facts, repository = _Deferred(".facts"), _Deferred(".repository")

DEFAULT_CHECKPOINT_EVERY = 1000  # merges (training.py's defaults, kept equal by tests/test_store.py)
DEFAULT_CHECKPOINT_SECONDS = 10.0


class TokenizerCache:
    """Tokenizers loaded in this process, by (database URL, version id, version
    state); the state changes with the version, so a changed version is never
    served stale. When full, the oldest goes. Safe to share between threads
    (a web server's requests)."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._loaded: dict[tuple[str, int, str], Tokenizer] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str]) -> Tokenizer | None:
        with self._lock:
            return self._loaded.get(key)

    def put(self, key: tuple[str, int, str], tokenizer: Tokenizer) -> None:
        with self._lock:
            if key not in self._loaded and len(self._loaded) >= self.size:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[key] = tokenizer

    def clear(self) -> None:
        with self._lock:
            self._loaded.clear()


@contextmanager
def _database_errors() -> Iterator[None]:
    """Turn a failure of the database (SQLAlchemy's errors) into a DatabaseError; a lock
    waited for longer than the bounded wait into one that names the lock."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except SQLAlchemyError as exc:
        lock = _lock_given_up(exc)
        if lock is not None:
            raise DatabaseError(f"gave up after {lock_wait_seconds():g} s waiting for {lock}, which another "
                                "process holds; try again when it is done (BPESTORE_LOCK_WAIT_SECONDS sets "
                                "how long to wait)") from exc
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DatabaseError(f"database error: {message}") from exc


# What holds a row lock of each table on PostgreSQL.
_ROW_LOCKS = {"corpora": "an ingest into it, or a training pinning it",
              "versions": "a training or removal of it", "tokenizers": "a new version of it"}


def _lock_given_up(exc: SQLAlchemyError) -> str | None:
    """The lock a statement gave up waiting for (the bounded lock wait ran out), in words; None otherwise."""
    orig = getattr(exc, "orig", None)
    text = str(orig or exc)
    if "database is locked" in text or "database table is locked" in text:
        return "the SQLite database's write lock"
    if getattr(orig, "sqlstate", None) != "55P03":  # PostgreSQL's lock_not_available
        return None
    diag = getattr(orig, "diag", None)
    context = " ".join((getattr(diag, "context", None) or "").split())
    statement = getattr(exc, "statement", "") or ""
    if "advisory" in statement:
        return "PostgreSQL's schema lock (another process is creating or upgrading the schema)" \
            if "schema" in statement else "a PostgreSQL advisory lock"
    found = re.search(r'relation "([^"]+)"', context) or re.search(r"\bFROM (\w+)", statement)
    if found:
        table = found.group(1)
        held = _ROW_LOCKS.get(table)
        return f"a lock on table {table} ({context or 'a row'}){f'; held by {held}' if held else ''}"
    return f"a PostgreSQL lock ({context or statement.split(chr(10))[0][:80]})"


class Store:
    """A bpestore database (SQLite path or SQLAlchemy URL).

    ``read_only=True``: the store refuses every write (``ReadOnlyError``), and so
    does the database (SQLite opened ``mode=ro``; PostgreSQL sessions with
    ``default_transaction_read_only``); the schema is checked, never upgraded.

    >>> store = Store(":memory:")  # doctest: +SKIP
    """

    #: Shared by every Store of the process.
    tokenizer_cache: ClassVar[TokenizerCache] = TokenizerCache()

    def __init__(self, db: str | Path | None = None, *, upgrade: bool = True, read_only: bool = False) -> None:
        self.read_only = read_only
        self.url = resolve_url(db, read_only=read_only)
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        # A SQLite file already at this bpestore's schema needs no upgrade: its engine
        # (and SQLAlchemy) comes when a query first needs one, and loading a complete
        # version reads it through sqlite3 (store/reads.py).
        self._sqlite = reads.sqlite_uri(self.url)
        if self._sqlite is None or not reads.at_head(self._sqlite):
            self._sqlite = None
            self._connect(upgrade)
            if upgrade:  # now at HEAD (each sqlite3 read checks it again)
                self._sqlite = reads.sqlite_uri(self.url)

    def _connect(self, upgrade: bool) -> Engine:
        """Make the engine; with ``upgrade``, create or upgrade the schema first."""
        from .db import make_engine, upgrade_schema

        with self._engine_lock:
            if self._engine is not None:
                return self._engine
            engine = make_engine(self.url, read_only=self.read_only)
            if upgrade:
                try:
                    with _database_errors():
                        upgrade_schema(engine, read_only=self.read_only)
                except BpestoreError:
                    engine.dispose()
                    raise
            self._engine = engine
            return engine

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (made on first use where the store was opened without one)."""
        return self._engine if self._engine is not None else self._connect(upgrade=False)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Store {display_url(self.url)}>"

    @property
    def location(self) -> str:
        """The database URL, any password hidden."""
        return display_url(self.url)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        from .db import schema_revision

        with _database_errors():
            return schema_revision(self.engine)

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read transaction: its queries see one state of the database (one
        snapshot: on PostgreSQL REPEATABLE READ, as SQLite's reads always are)."""
        with _database_errors(), self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                yield conn

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """A write transaction (on SQLite it takes the write lock at BEGIN, so
        concurrent writers wait for each other instead of failing)."""
        self._check_writable()
        with _database_errors(), self.engine.connect().execution_options(bpestore_write=True) as conn, \
                conn.begin():
            yield conn

    @contextmanager
    def session(self) -> Iterator[Connection]:
        """A connection of its own, for what lasts beyond a transaction (a session lock)."""
        self._check_writable()
        with _database_errors(), self.engine.connect() as conn:
            yield conn

    def _check_writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("this store is open read-only: nothing can be changed through it")

    # -- corpora and ingestion --------------------------------------------------
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
        tuning: IngestTuning | None = None,
    ) -> list[Source]:
        """Count the words of each source into ``corpus`` (created if new).

        Sources are files, directories (their files, recursively, those
        matching ``glob``), ``-`` for standard input, ``.gz``/``.xz``/``.bz2``
        files, or with ``jsonl_field`` JSON Lines files. The corpus' spec
        (special tokens, pre-tokenizer, pattern, normalizer) is set by its
        first ingest; later ones must agree or leave them out. A source whose
        content (sha256) is already in the corpus is skipped unless ``force``.
        ``workers`` processes count (default: one per core); ``tuning`` sets
        the sizes of the pieces they get (``IngestTuning``).

        Every source is written whole or not at all: a large source is one
        transaction; small ones share transactions (each is still all or
        nothing). A source that fails (``errors="strict"`` and invalid UTF-8)
        raises SourceError; the sources before it are kept.

        >>> store.ingest("books", ["books/"], glob="*.txt")  # doctest: +SKIP
        """
        from ..ingest import IngestTuning, count_sources, expand_paths
        from . import corpora

        repository.check_name(corpus, "corpus", "corpus")
        files = expand_paths(paths, glob=glob)
        if not files:
            raise InvalidArgumentError("paths must name at least one file to ingest", params=("paths",))
        with self.reading() as conn:
            spec = corpora.corpus_spec(conn, corpus, special_tokens=special_tokens, pretokenizer=pretokenizer,
                                       pattern=pattern, normalizer=normalizer)
            counted_before = set() if force else repository.source_shas(conn, corpus)
        results: list[Source] = []
        tuning = tuning or IngestTuning()
        for batch in count_sources(files, spec, errors=errors, workers=workers, jsonl_field=jsonl_field,
                                   already_counted=counted_before, force=force, progress=progress,
                                   tuning=tuning):
            while True:
                try:
                    corpora.add_batch(self, corpus, spec, batch, force=force)
                    break
                except corpora.PartlyCounted as meanwhile:
                    # Another process counted some of these sources meanwhile: the rest, again.
                    batch = _recount(batch, meanwhile.present, spec, errors=errors, jsonl_field=jsonl_field,
                                     tuning=tuning)
            for source in batch.sources:
                results.append(source)
                if on_source:
                    on_source(source)
        return results

    def ingest_counts(self, corpus: str, files: Iterable[str | Path], *, force: bool = False,
                      on_source: Callable[[Source], None] | None = None) -> list[Source]:
        """Add counts files (``bpestore.counts.count_files``, e.g. made on a cluster)
        to ``corpus`` (created with their spec if new) as one new generation, in one
        transaction; a directory stands for the files under it.

        Every file is checked whole (its digest) before anything is written, and
        its spec must be the corpus'. A file whose sources (by sha256) are all in
        the corpus already is skipped, so ingesting the same files again changes
        nothing; one holding only some of them is refused, unless ``force``
        (which adds every file again).

        >>> store.ingest_counts("books", ["counts/"])  # doctest: +SKIP
        """
        from ..counts import read_counts
        from ..ingest import expand_paths
        from . import corpora

        repository.check_name(corpus, "corpus", "corpus")
        names = expand_paths(files)
        if not names or "-" in names:
            raise InvalidArgumentError("files must name counts files (bpestore count writes them)",
                                       params=("files",))
        results = corpora.add_counts(self, corpus, [read_counts(name) for name in names], force=force)
        for source in results:
            if on_source:
                on_source(source)
        return results

    def corpora(self) -> list[CorpusInfo]:
        """Every corpus with its totals (as of its newest generation)."""
        with self.reading() as conn:
            return repository.corpus_infos(conn)

    def corpus(self, ref: str) -> CorpusInfo:
        """A corpus as of generation ``C@N``, or ``C``: its newest."""
        with self.reading() as conn:
            corpus_id, generation = repository.corpus_ref(conn, ref)
            if generation is None:
                return repository.corpus_infos(conn, ref)[0]
            return repository.corpus_log(conn, corpus_id)[generation - 1]

    def corpus_log(self, corpus: str) -> list[CorpusInfo]:
        """Every generation of a corpus, oldest first (``kept``: its counts are readable)."""
        with self.reading() as conn:
            return repository.corpus_log(conn, repository.corpus_id(conn, corpus))

    def corpus_sources(self, corpus: str) -> list[Source]:
        """The sources of corpus generation ``C@N`` (``C``: the newest), oldest first."""
        with self.reading() as conn:
            return repository.corpus_sources(conn, *repository.corpus_ref(conn, corpus))

    def top_words(self, corpus: str, n: int = 10) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent words of ``C@N`` (``C``: the newest) with their counts (ties by bytes)."""
        n = min(max(n, 0), 2**62)  # any n is "all of them" beyond the number of words
        with self.reading() as conn:
            return repository.read_counts(conn, corpus, lambda c, g: repository.top_words(conn, c, n, g))

    def word_counts(self, corpus: str) -> dict[bytes, int]:
        """All word counts of ``C@N`` (``C``: the newest); the generation must be kept."""
        with self.reading() as conn:
            return repository.read_counts(conn, corpus, lambda c, g: repository.counts(conn, c, g))

    def corpus_diff(self, ref_a: str, ref_b: str, *, limit: int = 20) -> dict[str, Any]:
        """What changed from corpus generation ``C@A`` to ``C@B``: new and vanished
        words, the largest count changes (``limit`` of each), both totals."""
        with self.reading() as conn:
            a, b = (repository.read_counts(conn, ref, lambda c, g: repository.counts(conn, c, g))
                    for ref in (ref_a, ref_b))
        from ..queries import diff_counts

        result = diff_counts(a, b, limit=limit)
        return {"from": self.corpus(ref_a).to_dict(), "to": self.corpus(ref_b).to_dict(), **result}

    def compact(self, corpus: str) -> dict[str, Any]:
        """Delete the history no version pins; says what it freed and which generations stay readable."""
        with self.writing() as conn:
            corpus_id = repository.corpus_id(conn, corpus)
            repository.lock_corpus_row(conn, corpus_id)
            rows, size = repository.compact(conn, corpus_id)
            return {"corpus": corpus, "rows_freed": rows, "bytes_freed": size,
                    "kept": repository.kept_generations(conn, corpus_id)}

    # -- versions ----------------------------------------------------------------
    def versions(self, name: str | None = None) -> list[VersionInfo]:
        """Every version (of one tokenizer, if named), by name and number."""
        return self._read(lambda run: reads.version_infos(run, name=name))

    def version(self, ref: str) -> VersionInfo:
        """Resolve ``NAME`` (its newest complete version), ``NAME@N`` or ``NAME@ALIAS``."""
        return self._read(lambda run: reads.version_infos(run, ids=[reads.resolve(run, ref)])[0])

    def set_alias(self, ref: str, alias: str) -> VersionInfo:
        """Point ``NAME@ALIAS`` at a version (moving the alias if it exists)."""
        with self.writing() as conn:
            return repository.version_info(conn, repository.set_alias(conn, ref, alias))

    # -- training ----------------------------------------------------------------
    def train(self, name: str, *, corpus: str, options: TrainOptions | None = None,
              progress: Callable[[Progress], None] | None = None, **settings: Any) -> VersionInfo:
        """Train a new version ``NAME@N`` from the word counts of ``corpus``: ``C``
        (its newest generation) or ``C@N`` (a kept one). The version pins it.

        The options are ``TrainOptions`` fields, given as keywords or as
        ``options`` (keywords win):

        * ``vocab_size`` (bytes + specials + merges) or ``merges``: where to stop;
        * ``min_frequency`` (default 1): stop when no pair occurs this often;
        * ``tie_break`` (``"lexicographic"`` or ``"hf"``) and ``special_tokens``
          (default: the corpus');
        * ``parent="NAME@K"``: extend that version: the new one starts with all
          its tokens and merges (ids unchanged) and continues on ``corpus``;
        * ``max_token_length``: no token longer than this many bytes;
        * ``alphabet``, ``unk_token``, ``byte_fallback``, ``end_of_word``,
          ``start_of_word``, ``no_inner_space``: the symbolization (see
          ``TokenizerSpec``), recorded in the version's spec; an extension
          keeps its parent's;
        * ``segmentation``: how encoding cuts a word, ``"merge"`` (BPE merges
          by rank, the default) or ``"longest-match"`` (greedy longest
          vocabulary match, seed 002's segmenter); recorded in the spec, so in
          the fingerprint;
        * ``checkpoint_every`` (1000) merges or ``checkpoint_seconds`` (10):
          how often merges are written; a stopped run continues with ``resume``.

        ``progress`` gets a ``Progress`` after each merge.

        >>> store.train("en", corpus="books", vocab_size=1000)  # doctest: +SKIP
        <VersionInfo en@1 complete ...>
        """
        from . import training

        version_id = training.train(self, name, corpus, training.TrainOptions.given(options, settings), progress)
        self.tokenizer_cache.clear()  # a version changed: drop what it may have held
        return self._version(version_id)

    def resume(self, ref: str, *, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
               checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
               progress: Callable[[Progress], None] | None = None) -> VersionInfo:
        """Continue a version that stopped before its target (``ref`` alone: its newest),
        on the corpus generation it pins, whatever was ingested since."""
        from . import training

        version_id = training.resume(self, ref, checkpoint_every=checkpoint_every,
                                     checkpoint_seconds=checkpoint_seconds, progress=progress)
        self.tokenizer_cache.clear()
        return self._version(version_id)

    def verify(self, ref: str) -> VerifyResult:
        """Retrain version ``ref`` from its pinned corpus generation and settings (an
        extension: from its parent's merges) and compare: ``ok`` when the merges are equal."""
        from . import training

        return training.verify(self, ref)

    def _version(self, version_id: int) -> VersionInfo:
        with self.reading() as conn:
            return repository.version_info(conn, version_id)

    # -- tokenizers: loading, questions, import, export ---------------------------
    def tokenizer(self, ref: str) -> Tokenizer:
        """The Tokenizer of a version, loaded once per process and cached."""
        try:
            found = self._sealed_tokenizer(ref)
        except sqlite3.Error:
            found = None  # the sqlite3 read failed (e.g. busy): SQLAlchemy's path waits, or says why
        if found is not None:
            return found
        with self.reading() as conn:
            run = repository.runner(conn)
            version_id = reads.resolve(run, ref)
            key = (self.url, version_id, repository.version_state(conn, version_id))
            cached = self.tokenizer_cache.get(key)
            if cached is not None:
                return cached
            version = reads.version_row(run, version_id)
            from ..processes import gc_paused

            with gc_paused():  # 50,000 tokens and merges: objects without cycles
                # A complete version: one row, its facts known; one still training: its rows.
                sealed = facts.load(conn, version_id)
                vocab, known = sealed if sealed is not None else (repository.vocabulary(conn, version_id), None)
                tok = _tokenizer_of(version, vocab, known)
        self.tokenizer_cache.put(key, tok)
        return tok

    def _read(self, query: Callable[[reads.Run], T]) -> T:
        """``query`` in one read transaction: through sqlite3 where that applies
        (no SQLAlchemy imported), else, or where sqlite3 failed, through SQLAlchemy."""
        try:
            with self._sqlite_reading() as run:
                if run is not None:
                    return query(run)
        except sqlite3.Error:
            pass  # e.g. busy: SQLAlchemy's path waits, or says why
        with self.reading() as conn:
            return query(repository.runner(conn))

    @contextmanager
    def _sqlite_reading(self) -> Iterator[reads.Run | None]:
        """A read transaction through sqlite3 (store/reads.py), or None where that
        path does not apply: not a SQLite file at this bpestore's schema."""
        if self._sqlite is None:
            yield None
            return
        with reads.sqlite_reading(self._sqlite, timeout=lock_wait_seconds()) as run:
            yield run

    def _sealed(self, ref: str, run: reads.Run) -> tuple[int, reads.VersionRow] | None:
        """The id and row of the version ``ref`` names, where it is complete; None otherwise."""
        version_id = reads.resolve(run, ref)
        version = reads.version_row(run, version_id)
        return (version_id, version) if version.sealed else None

    def _sealed_tokenizer(self, ref: str) -> Tokenizer | None:
        """A complete version's tokenizer read through sqlite3 from its facts row,
        without SQLAlchemy; None where that path does not apply (then
        ``tokenizer`` reads it through SQLAlchemy)."""
        with self._sqlite_reading() as run:
            found = self._sealed(ref, run) if run is not None else None
            if run is None or found is None:
                return None
            version_id, version = found
            key = (self.url, version_id, version.fingerprint or "")
            cached = self.tokenizer_cache.get(key)
            if cached is not None:
                return cached
            row = reads.facts_row(run, version_id)
        if row is None:
            return None
        from ..processes import gc_paused

        with gc_paused():
            vocab, known = facts.checked(row, version_id)
            tok = _tokenizer_of(version, vocab, known)
        self.tokenizer_cache.put(key, tok)
        return tok

    def _sealed_vocabulary(self, ref: str) -> Vocabulary:
        """A version's vocabulary: through sqlite3 where it can (a complete version's
        facts row), else through SQLAlchemy (``facts.vocabulary``)."""
        try:
            with self._sqlite_reading() as run:
                found = self._sealed(ref, run) if run is not None else None
                row = reads.facts_row(run, found[0]) if run is not None and found is not None else None
        except sqlite3.Error:
            row = None
        if found is not None and row is not None:
            return facts.checked(row, found[0])[0]
        with self.reading() as conn:
            return facts.vocabulary(conn, repository.resolve(conn, ref))

    def export(self, ref: str, *, format: str, out: str | Path, force: bool = False) -> list[Path]:  # noqa: A002
        """Write a version as GPT-2 files (``out`` a folder), a Hugging Face
        ``tokenizer.json`` or a tiktoken rank file; returns the files written.
        Each file is written whole or not at all; an existing one is replaced
        only with ``force``; ``out``'s folder must exist.

        >>> store.export("en@1", format="hf", out="tokenizer.json")  # doctest: +SKIP
        [PosixPath('tokenizer.json')]
        """
        from ..formats import export_tokenizer

        return export_tokenizer(self.tokenizer(ref), format, Path(out), force=force)

    def token(self, ref: str, token: str | int) -> dict[str, Any]:
        """A token of a version: its id, bytes, kind and the merges that built it.

        ``token`` is an id (int), or text: a token's exact string, e.g. " the".

        >>> store.token("en@1", " the")["id"]  # doctest: +SKIP
        262
        """
        vocab = self._sealed_vocabulary(ref)
        from ..queries import merge_tree

        if isinstance(token, int):
            token_id = token
            if token_id not in vocab.tokens:
                raise NotFoundError(f"{ref} has no token id {token_id} (ids 0..{max(vocab.tokens)})")
        else:
            wanted = token.encode("utf-8")
            matches = [i for i, data in vocab.tokens.items() if data == wanted]
            if not matches:
                raise NotFoundError(f"{token!r} is not a token of {ref}; encoding it shows how it is split")
            token_id = matches[0]
        info = merge_tree(token_id, vocab.tokens, vocab.made_by())
        info["kind"] = vocab.kinds[token_id]
        info["bytes"] = vocab.tokens[token_id].hex()
        return info

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        """What changed between two versions: shared merge prefix, changed ids, new tokens."""
        with self.reading() as conn:
            a, b = (repository.version_info(conn, repository.resolve(conn, ref)) for ref in (ref_a, ref_b))
            vocab_a, vocab_b = facts.vocabulary(conn, a.id), facts.vocabulary(conn, b.id)
        from ..queries import diff_versions

        result = diff_versions(vocab_a.tokens, vocab_a.merges, vocab_b.tokens, vocab_b.merges)
        spec_a, spec_b = a.spec.to_dict(), b.spec.to_dict()
        result["spec_changes"] = {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)}
        return result

    # -- queries over stored vocabularies ------------------------------------------
    def vocab(self, ref: str, *, grep: str | None = None, prefix: str | None = None,
              longest: int | None = None, limit: int | None = None, timeout: float | None = None
              ) -> list[TokenInfo]:
        """A version's tokens, by id, with the merge that first made each: those
        starting with ``prefix``, whose text matches the regular expression
        ``grep`` (searched in the text ``token_text`` shows: ``\\xNN`` for a
        byte outside UTF-8); ``longest=N``: the N longest instead, longest
        first; at most ``limit``. ``timeout``: seconds the ``grep`` may take in all
        (``InvalidArgumentError`` past them; what a server sets).

        >>> [t.text for t in store.vocab("en@1", grep="^ the", limit=2)]  # doctest: +SKIP
        [' the', ' then']
        """
        from ..queries import pick_tokens, token_matcher
        from ..records import TokenInfo

        match = token_matcher(grep, timeout)
        with self.reading() as conn:
            version_id = repository.resolve(conn, ref)
            rows = repository.token_rows(conn, version_id, prefix=(prefix or "").encode("utf-8", "surrogatepass"),
                                         match=match)
            if getattr(match, "timed_out", False):
                raise InvalidArgumentError(f"grep {grep!r} took longer than {timeout:g}s; give a simpler "
                                           "pattern", params=("grep",))
            rows = pick_tokens(rows, longest=longest, limit=limit)
            made = repository.first_merges(conn, version_id, [r[0] for r in rows])
        return [TokenInfo(token_id, data, kind, *made.get(token_id, (None, None))) for token_id, data, kind in rows]

    def merges(self, ref: str, *, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
        """A version's merges in rank order, from rank ``start`` on, at most ``limit``."""
        for name, value in (("start", start), ("limit", limit)):
            if value is not None and value < 0:
                raise InvalidArgumentError(f"{name} cannot be negative, not {value}", params=(name,))
        with self.reading() as conn:
            return repository.merge_infos(conn, repository.resolve(conn, ref), start, limit)

    def explain(self, ref: str, text: str) -> Explanation:
        """How a version encodes ``text``: per pre-token the merges applied step by
        step (pair, rank) down to the ids, and where unseen characters went
        (``Tokenizer.explain``); special tokens in the text are recognised."""
        return self.tokenizer(ref).explain(text)

    def stats(self, refs: Sequence[str], file: str | Path, *, errors: str = "strict",
              workers: int = 1) -> list[EncodingStats]:
        """How each version encodes a file (``.gz``/``.xz``/``.bz2`` read as text; not
        stdin, which cannot be read again): bytes per token, tokens per word (words:
        runs of non-space characters), the share of unknown tokens, the share of the
        vocabulary used, side by side (``EncodingStats``). One encoding pass over the
        file per version and nothing more; special tokens count as one token each.

        >>> [s.bytes_per_token for s in store.stats(["en@1", "en@2"], "held_out.txt")]  # doctest: +SKIP
        [3.17, 3.41]
        """
        from ..ingest import TextReader, open_source
        from ..queries import TextTotals
        from ..records import EncodingStats
        from ..sources import check_errors

        check_errors(errors)
        if not refs:
            raise InvalidArgumentError("refs must name at least one version", params=("refs",))
        if str(file) == "-":
            raise InvalidArgumentError("stats reads the file once per version: give a file, not -",
                                       params=("file",))
        found = [self.version(ref) for ref in refs]  # every ref checked before any work
        results = []
        totals = TextTotals()  # the file's bytes and words, counted in the first pass
        for version in found:
            tok = self.tokenizer(version.ref)
            unknown = _unknown_ids(tok)
            count_unknown = _counter(unknown or set())
            seen: set[int] = set()
            tokens = n_unknown = 0
            with open_source(str(file)) as stream:
                text = TextReader(stream, str(file), errors=errors)
                for ids in tok.encode_chunks(totals.watch(text) if version is found[0] else text,
                                             workers=workers, allowed_special="all"):
                    seen.update(ids)
                    tokens += len(ids)
                    n_unknown += count_unknown(ids)
            results.append(EncodingStats(
                ref=version.ref, file=str(file), bytes=totals.bytes, words=totals.words, tokens=tokens,
                unknown=None if unknown is None else n_unknown, used_ids=len(seen), vocab_size=version.vocab_size))
        return results

    def progress(self, ref: str, *, last: int = 5) -> VersionProgress:
        """How far a version (training or complete) got, from its stored merge rows
        and checkpoint time alone: merges so far against the target, the mean rate
        from its creation to its last checkpoint, and its ``last`` merges."""
        from datetime import datetime, timezone

        from ..records import VersionProgress

        if last < 0:
            raise InvalidArgumentError(f"last cannot be negative, not {last}", params=("last",))
        with self.reading() as conn:
            v = repository.version_info(conn, repository.resolve(conn, ref))
            recent = repository.merge_infos(conn, v.id, max(0, v.n_merges - last)) if last else []
        base = v.vocab_size - v.n_merges  # the tokens no merge made (bytes, specials, ...)
        target = v.target_merges if v.target_merges is not None else (
            None if v.target_vocab_size is None else max(0, v.target_vocab_size - base))
        if v.status == "complete":
            target = v.n_merges
        seconds = (v.updated_at - v.created_at).total_seconds()
        rate = v.n_merges / seconds if seconds > 0 and v.n_merges else None
        since = (datetime.now(timezone.utc) - v.updated_at).total_seconds()
        return VersionProgress(v, v.n_merges, target, rate, max(0.0, since), tuple(recent))

    def chart(self, ref: str, file: str | Path | None = None, *, text: str | None = None, points: int = 50,
              errors: str = "strict") -> VersionChart:
        """What ``bpestore plot`` draws of one version on a file (``.gz``/``.xz``/``.bz2``
        read as text) or on ``text`` (give one): the compression curve (bytes per
        token as the vocabulary grows along the merge ranks, at ``points`` merge
        counts), each merge's pair count and uses by rank, token lengths
        (``VersionChart``). Costs one encoding of the text (as ``stats``), or
        for some versions (characters, word markers) of each distinct pre-token.

        >>> [p.bytes_per_token for p in store.chart("en@1", "held_out.txt", points=3).curve]  # doctest: +SKIP
        [1.0, 2.84, 3.17]
        """
        return self.charts([ref], file, text=text, points=points, errors=errors)[0]

    def charts(self, refs: Sequence[str], file: str | Path | None = None, *, text: str | None = None,
               points: int = 50, errors: str = "strict") -> list[VersionChart]:
        """``chart`` for several versions, side by side: one encoding of the text
        per version where its merges allow (``analysis.tree_merges``), else the
        text's pre-tokens counted once for all versions that cut words alike."""
        from ..analysis import chart_of_ids, curve_ranks, tree_merges, version_chart
        from ..sources import check_errors

        check_errors(errors)
        if not refs:
            raise InvalidArgumentError("refs must name at least one version", params=("refs",))
        if (file is None) == (text is None):
            raise InvalidArgumentError("give a file or a text, not both and not neither", params=("file", "text"))
        if file is not None and str(file) == "-":
            raise InvalidArgumentError("chart reads a file: give a file, not -", params=("file",))
        curve_ranks(0, points)  # points checked before any work
        found = [self.version(ref) for ref in refs]  # every ref checked before any work
        counted: dict[tuple[Any, ...], TextCounts] = {}
        results = []
        name = "<text>" if file is None else str(file)
        for version in found:
            tok = self.tokenizer(version.ref)
            with self.reading() as conn:
                merge_counts = facts.vocabulary(conn, repository.resolve(conn, version.ref)).columns[3]
            tree = tree_merges(tok)
            if tree is not None:  # one encoding of the text
                n_bytes, id_counts = _count_ids(tok, file, text, errors)
                results.append(chart_of_ids(tok, tree, n_bytes, id_counts, ref=version.ref, file=name,
                                            points=points, merge_counts=merge_counts))
                continue
            spec = tok.spec
            key = (spec.normalizer, spec.pretokenizer, spec.pattern, frozenset(tok.special_tokens))
            counts = counted.get(key)
            if counts is None:
                counts = counted[key] = _count_text(tok, file, text, errors)
            results.append(version_chart(tok, counts, ref=version.ref, file=name, points=points,
                                         merge_counts=merge_counts))
        return results

    # -- the versions' tree, and removal ---------------------------------------------
    def lineage(self, name: str) -> list[LineageNode]:
        """The versions of tokenizer ``name`` as a forest: each root (a version trained
        or imported afresh, or extending another tokenizer's version: see its
        ``parent``) with the versions extending it, in any tokenizer, below it."""
        from ..records import LineageNode

        with self.reading() as conn:
            repository.newest_version(conn, name)  # an unknown name raises, naming those there are
            every = repository.version_infos(conn)
        children: dict[str | None, list[VersionInfo]] = {}
        for v in every:
            children.setdefault(v.parent, []).append(v)

        def node(v: VersionInfo) -> LineageNode:
            return LineageNode(v, tuple(node(c) for c in children.get(v.ref, ())))
        return [node(v) for v in every
                if v.name == name and (v.parent is None or v.parent.partition("@")[0] != name)]

    def remove(self, ref: str, *, force: bool = False) -> Removed:
        """Delete version ``NAME@N`` (its merges and tokens), in one transaction; or,
        given an alias ``NAME@ALIAS``, that alias only (the version stays).

        A version that others extend or that aliases point at is refused unless
        ``force``, which deletes those extensions (and theirs) and aliases with
        it: no version is ever left with a missing parent.
        """
        from ..records import Removed

        name, at, tag = ref.partition("@")
        if not at or not tag:
            raise InvalidArgumentError(f"name the version to remove as {name}@N, or an alias as {name}@ALIAS "
                                       f"(not {ref!r})", params=("ref",))
        if repository.NUMBER.fullmatch(tag):
            # Asked first outside a write transaction, so a run busy writing a checkpoint
            # is reported at once instead of after the lock wait.
            with ExitStack() as probe, self.reading() as conn:
                self._claim_training(conn, probe, repository.resolve(conn, ref))
        with ExitStack() as training_locks, self.writing() as conn:
            version_id = repository.resolve(conn, ref)
            if not repository.NUMBER.fullmatch(tag):
                repository.delete_alias(conn, ref)
                return Removed(aliases=(ref,))
            # Held until the removal commits: no training starts meanwhile.
            doomed = self._claim_training(conn, training_locks, version_id)
            infos = {v.id: v for v in repository.version_infos(conn, ids=doomed)}
            alias_refs = repository.alias_refs(conn, doomed)
            extensions = [infos[i].ref for i in doomed[1:]]
            if (extensions or alias_refs) and not force:
                held = "; ".join(part for part in (
                    f"extended by {', '.join(extensions)}" if extensions else "",
                    f"aliases {', '.join(alias_refs)} point at it" if alias_refs else "") if part)
                raise ConflictError(f"{ref} is in use ({held}); remove those first, or pass force=True to "
                                    "remove them with it", params=("force",))
            repository.delete_versions(conn, doomed)
        self.tokenizer_cache.clear()
        return Removed(versions=tuple(infos[i].ref for i in doomed), aliases=tuple(alias_refs))

    def _claim_training(self, conn: Connection, stack: ExitStack, version_id: int) -> list[int]:
        """Take the training locks of a version and its extensions for as long as ``stack``
        and the transaction last; ConflictError if a run holds one. Returns their ids."""
        from . import locks

        doomed = [version_id, *repository.descendants(conn, version_id)]
        for doomed_id in doomed:
            if not (stack.enter_context(locks.version_lock(self.url, doomed_id))
                    and repository.try_lock_training_xact(conn, doomed_id)):
                raise ConflictError(f"{repository.version_info(conn, doomed_id).ref} is being trained by "
                                    "another process right now; stop it (or wait for it to finish) first")
        return doomed

    def import_vocab(self, name: str, vocab: dict[int, bytes], merge_list: Sequence[tuple[bytes, bytes]],
                     special_tokens: Sequence[str] = (), *, spec: TokenizerSpec | None = None,
                     source: str = "import") -> VersionInfo:
        """Store a vocabulary and merges made elsewhere as a new complete version."""
        from . import imports

        spec = (spec or TokenizerSpec()).replace(special_tokens=tuple(special_tokens))
        return self._version(imports.import_version(self, name, vocab, merge_list, spec, source=source))

    def import_gpt2(self, name: str, *, vocab: str | Path, merges: str | Path) -> VersionInfo:
        """Import GPT-2's ``vocab.json`` and ``merges.txt`` as a new version."""
        from ..formats.gpt2 import read_gpt2

        vocab_map, merge_list, specials = read_gpt2(vocab, merges)
        return self.import_vocab(name, vocab_map, merge_list, specials, source="gpt2")

    def import_hf(self, name: str, path: str | Path) -> VersionInfo:
        """Import a Hugging Face ``tokenizer.json`` holding a BPE model (byte-level,
        or characters with an unknown token) as a new version; a part bpestore has
        no equivalent for is refused, naming it."""
        from ..formats.hf import read_hf

        model = read_hf(path)
        return self.import_vocab(name, model.vocab, model.merges, model.spec.special_tokens, spec=model.spec,
                                 source="hf")

    def import_tiktoken(self, name: str, path: str | Path, *, pattern: str,
                        special_tokens: Mapping[str, int] | None = None) -> VersionInfo:
        """Import a tiktoken rank file as a new version: ids are the ranks, the
        merges are derived from them (each token's split by tiktoken's rule over
        the ranks below it); ``pattern``: gpt2, cl100k, o200k or a regex;
        ``special_tokens``: text -> id, ids the file does not use.

        >>> store.import_tiktoken("r50k", "r50k_base.tiktoken", pattern="gpt2",
        ...                       special_tokens={"<|endoftext|>": 50256})  # doctest: +SKIP
        """
        from ..formats.tiktoken_ranks import read_ranks, tiktoken_version

        vocab, merge_list, spec = tiktoken_version(read_ranks(path), pattern, special_tokens or {})
        return self.import_vocab(name, vocab, merge_list, spec.special_tokens, spec=spec, source="tiktoken")


def _tokenizer_of(version: reads.VersionRow, vocab: Vocabulary, known: EncoderFacts | None) -> Tokenizer:
    """The Tokenizer of a version from its row and vocabulary (``known``: its
    stored facts, where it is complete)."""
    from ..encoder import Tokenizer

    # A complete version's byte pairs are made when first needed (decoding and short texts need none).
    return Tokenizer(vocab.tokens, None if known is not None else vocab.pairs, vocab.special_ids(),
                     spec=TokenizerSpec.from_json(version.spec), name=version.ref, facts=known,
                     merge_ids=vocab.columns[:3])


def _count_text(tok: Tokenizer, file: str | Path | None, text: str | None, errors: str) -> TextCounts:
    """A file's (or a text's) bytes, pre-tokens and special tokens, as ``tok`` cuts them."""
    from ..analysis import TextCounts
    from ..queries import TextTotals

    if text is not None:
        words, specials = tok.count_pretokens([text])
        return TextCounts(len(text.encode("utf-8", "surrogatepass")), words, specials)
    from ..ingest import TextReader, open_source

    totals = TextTotals()
    with open_source(str(file)) as stream:
        words, specials = tok.count_pretokens(totals.watch(TextReader(stream, str(file), errors=errors)))
    return TextCounts(totals.bytes, words, specials)


def _recount(batch: CountedBatch, present: set[str], spec: TokenizerSpec, **options: Any) -> CountedBatch:
    """A batch of small sources counted again without those whose content is in ``present``."""
    from collections import Counter

    from ..ingest import CountedBatch, count_sources

    kept = [s for s in batch.sources if not s.skipped and s.sha256 not in present]
    gone = [dataclasses.replace(s, skipped=True, n_words=0, n_distinct=0)
            for s in batch.sources if s.skipped or s.sha256 in present]
    counts: Counter = Counter()
    sources: list[Source] = []
    for again in count_sources([s.source for s in kept], spec, workers=1, already_counted=present, **options):
        counts.update(again.counts)
        sources.extend(again.sources)
    return CountedBatch(gone + sources, counts)


def _count_ids(tok: Tokenizer, file: str | Path | None, text: str | None,
               errors: str) -> tuple[int, Counter[int]]:
    """A file's (or a text's) bytes, and how often each id occurs in its encoding
    (special tokens recognised)."""
    id_counts: Counter[int] = Counter()
    if text is not None:
        id_counts.update(tok.encode(text, allowed_special="all"))
        return len(text.encode("utf-8", "surrogatepass")), id_counts
    from ..ingest import TextReader, open_source
    from ..queries import TextTotals

    totals = TextTotals()
    with open_source(str(file)) as stream:
        for ids in tok.encode_chunks(totals.watch(TextReader(stream, str(file), errors=errors)),
                                     allowed_special="all"):
            id_counts.update(ids)
    return totals.bytes, id_counts


def _unknown_ids(tok: Tokenizer) -> set[int] | None:
    """The ids that stand for a character a ``chars`` version never saw: its
    unknown token, or with byte fallback the bytes that are no character by
    themselves (0x80 and up); None for byte-level versions, which have neither."""
    if tok.spec.byte_level:
        return None
    found = {tok.token_id(tok.spec.unk_token)} if tok.spec.unk_token is not None else set()
    if tok.spec.byte_fallback:
        found.update(tok.token_id(bytes([b])) for b in range(0x80, 0x100))
    return {i for i in found if i is not None}


def _counter(wanted: set[int]) -> Callable[[list[int]], int]:
    """How many of a list's ids are in ``wanted``, the fastest way for its size."""
    if len(wanted) <= 4:
        return lambda ids: sum(map(ids.count, wanted))
    return lambda ids: sum(map(wanted.__contains__, ids))
