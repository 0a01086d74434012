"""Store: corpora, word counts, versions, merges and tokens in one database.

The facade of the public API. It opens the database, owns the transactions
(through the driver, store/drivers.py, else the engine; a failure of the
database itself becomes ``DatabaseError``) and the tokenizer cache, and hands each public call to the
service that does the work:

* ``corpora.Corpora``: ingest, counts files, generations, word counts, compaction;
* ``versions.Versions``: train, resume, verify, import, aliases, lineage, removal;
* ``questions.Questions``: top words, corpus and version diffs, tokens, merges;
* ``loading``: versions loaded as tokenizers, and cached;
* ``bpestore.analysis``: what a version makes of a file (statistics, charts).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import BpestoreError, ReadOnlyError
from ..limits import DEFAULT_CHECKPOINT_EVERY, DEFAULT_CHECKPOINT_SECONDS
from ..queries import token_info
from ..spec import TokenizerSpec
from . import count_tables
from .corpus_tables import CorpusReads
from .db import create_sqlite_file, display_url, make_engine, resolve_url, schema_revision, upgrade_schema
from .drivers import Driver, Transaction, open_driver, translated
from .fresh import FreshCounts
from .loading import TokenizerCache, load, vocabulary
from .packs import check_pack, is_pack, pack_url
from .version_tables import VersionReads

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from ..encoder import Tokenizer
    from ..ingest import IngestTuning
    from ..records import (
        Copied,
        CorpusInfo,
        CorpusStats,
        EncodingStats,
        Explanation,
        LineageNode,
        MergeInfo,
        Progress,
        Removed,
        Source,
        TokenInfo,
        TokenUsage,
        VerifyResult,
        VersionChart,
        VersionInfo,
        VersionProgress,
    )
    from .corpora import Corpora
    from .questions import Questions
    from .training import TrainOptions
    from .versions import Versions


def _engine(url: str, *, read_only: bool, upgrade: bool) -> Engine:
    """A new engine; with ``upgrade``, the schema created or upgraded first."""
    engine = make_engine(url, read_only=read_only)
    if upgrade:
        try:
            with translated():
                upgrade_schema(engine, read_only=read_only)
        except BpestoreError:
            engine.dispose()
            raise
    return engine


class Database:
    """A store's database: its URL, its driver (store/drivers.py) where it applies and
    its engine where not, and the transactions of both (the Store's, below)."""

    def __init__(self, db: str | Path | None = None, *, upgrade: bool = True, read_only: bool = False,
                 pack: bool | None = None) -> None:
        named = os.fspath(db) if db is not None else os.environ.get("BPESTORE_DB", "")
        self.pack_file = is_pack(named) if pack is None else pack
        if self.pack_file:  # somebody else's file: checked first, then only read (store/packs.py)
            check_pack(named)
            self.read_only, self.url = True, pack_url(named)
        else:
            self.read_only, self.url = read_only, resolve_url(db, read_only=read_only)
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()
        self.fresh_counts = FreshCounts()
        # A store already at this bpestore's schema is read and written through its driver alone
        # (store/drivers.py); its engine (and SQLAlchemy) comes only where that does not apply.
        self.driver: Driver | None = open_driver(self.url)  # chosen once, here
        if self.driver is None and upgrade and not self.read_only and create_sqlite_file(self.url):
            self.driver = open_driver(self.url)
        if self.driver is None:  # the engine now, the schema created or upgraded
            self._connect(upgrade)
            if upgrade:
                self.driver = open_driver(self.url)

    def _connect(self, upgrade: bool) -> Engine:
        """Make the engine; with ``upgrade``, create or upgrade the schema first."""
        with self._engine_lock:
            if self._engine is None:
                self._engine = _engine(self.url, read_only=self.read_only, upgrade=upgrade)
            return self._engine

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (made on first use where the store was opened without one)."""
        return self._engine if self._engine is not None else self._connect(upgrade=False)

    def close(self) -> None:
        self.fresh_counts.drop()
        if self.driver is not None:
            self.driver.close()
        if self._engine is not None:
            self._engine.dispose()

    def __repr__(self) -> str:
        return f"<Store {display_url(self.url)}>"

    @property
    def location(self) -> str:
        """The database URL, any password hidden."""
        return display_url(self.url)

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        with translated():
            return schema_revision(self.engine)

    def reading(self) -> AbstractContextManager[Transaction]:
        """A read transaction: its queries see one state of the database (one
        snapshot: on PostgreSQL REPEATABLE READ, as SQLite's reads always are)."""
        return self._transaction(write=False)

    def writing(self) -> AbstractContextManager[Transaction]:
        """A write transaction, committed at the end, rolled back on an error (on SQLite
        it takes the write lock at BEGIN, so concurrent writers wait for each other
        instead of failing)."""
        self._check_writable()
        return self._transaction(write=True)

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[Transaction]:
        """Through the driver where it applies, else through the engine."""
        if self.driver is not None:
            with self.driver.transaction(write=write) as tx:
                if tx is not None:
                    yield tx
                    return
        with translated(), self._engine_connection(write) as conn, conn.begin():
            yield Transaction.over(conn)

    def _engine_connection(self, write: bool) -> Connection:
        conn = self.engine.connect()
        if write:
            return conn.execution_options(bpestore_write=True)
        if conn.dialect.name == "postgresql":
            return conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        return conn

    @contextmanager
    def session(self) -> Iterator[Transaction]:
        """A connection of its own outside any transaction, for what lasts beyond one (a session lock)."""
        self._check_writable()
        if self.driver is not None:
            with self.driver.session() as tx:
                yield tx
            return
        with translated(), self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":  # a lock of the session's, no transaction left open
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            yield Transaction.over(conn)

    def _check_writable(self) -> None:
        if self.pack_file:
            raise ReadOnlyError("a pack file is only read: copy its version into a store to change it "
                                "(bpestore copy FILE.bpestore --to STORE)")
        if self.read_only:
            raise ReadOnlyError("this store is open read-only: nothing can be changed through it")


class Transfers:
    """The calls of Store that move versions between stores (the work is store/transfer.py's)."""

    def copy(self, ref: str | None, to: str | Path | Store, *, with_counts: bool = False,
             as_name: str | None = None, aliases: bool = False) -> Copied:
        """Copy version ``ref`` and its parents into the store ``to`` (a path, a URL
        or a Store), in one transaction there: tokens, merges, spec, fingerprint,
        status, names and numbers (``as_name``: under another tokenizer name), with
        ``aliases`` their aliases; with ``with_counts`` the corpus generations they
        pin, so that verify and resume work there. ``ref`` None: the one version
        this store holds (a pack). Fingerprints and snapshots are checked first
        (``DamagedDataError``, nothing written); what is there already is used, a
        clash refused (``ConflictError``).

        >>> store.copy("en@3", "postgresql+psycopg://host/db", with_counts=True)  # doctest: +SKIP
        """
        from .transfer import copy

        return copy(self, ref, to, Store, with_counts=with_counts, as_name=as_name, aliases=aliases)

    def pack(self, ref: str, out: str | Path, *, with_counts: bool = False, force: bool = False) -> Path:
        """Write version ``ref`` and its parents (with ``with_counts`` the corpus
        generations they pin) as one file, a small SQLite store that ``copy``,
        ``--db FILE`` and ``bpestore.open(FILE, read_only=True)`` take; whole or not
        at all, an existing file replaced only with ``force``."""
        from .transfer import pack

        return pack(self, ref, out, Store, with_counts=with_counts, force=force)


class Store(Database, Transfers):
    """A bpestore database (SQLite path or SQLAlchemy URL).

    ``read_only=True``: the store refuses every write (``ReadOnlyError``), and so
    does the database (SQLite opened ``mode=ro``; PostgreSQL sessions with
    ``default_transaction_read_only``); the schema is checked, never upgraded.

    >>> store = Store(":memory:")  # doctest: +SKIP
    """

    #: Shared by every Store of the process.
    tokenizer_cache: ClassVar[TokenizerCache] = TokenizerCache()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # The services, made when first asked for: a read through sqlite3 needs none of their imports.
    @cached_property
    def _corpora(self) -> Corpora:
        from .corpora import Corpora
        return Corpora(self)

    @cached_property
    def _versions(self) -> Versions:
        from .versions import Versions
        return Versions(self, self.tokenizer_cache)

    @cached_property
    def _questions(self) -> Questions:
        from .questions import Questions
        return Questions(self)

    # -- corpora and ingestion --------------------------------------------------
    def ingest(self, corpus: str, paths: Iterable[str | Path], *, special_tokens: Sequence[str] | None = None,
               pretokenizer: str | None = None, pattern: str | None = None, normalizer: str | None = None,
               space_marker: str | None = None, dummy_prefix: str | None = None, force: bool = False,
               errors: str = "strict", workers: int | None = None, glob: str | None = None,
               jsonl_field: str | None = None, on_source: Callable[[Source], None] | None = None,
               progress: Callable[[Progress], None] | None = None, tuning: IngestTuning | None = None
               ) -> list[Source]:
        """Count the words of each source into ``corpus`` (created if new).

        Sources are files, directories (their files, recursively, those
        matching ``glob``), ``-`` for standard input, ``.gz``/``.xz``/``.bz2``
        files, or with ``jsonl_field`` JSON Lines files. The corpus' spec (special
        tokens, pre-tokenizer, pattern, normalizer, space marker, dummy prefix) is set by its
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
        return self._corpora.ingest(corpus, paths, force=force, errors=errors, workers=workers, glob=glob,
                                    jsonl_field=jsonl_field, on_source=on_source, progress=progress,
                                    tuning=tuning, special_tokens=special_tokens, pretokenizer=pretokenizer,
                                    pattern=pattern, normalizer=normalizer, space_marker=space_marker,
                                    dummy_prefix=dummy_prefix)

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
        return self._corpora.ingest_counts(corpus, files, force=force, on_source=on_source)

    def corpora(self) -> list[CorpusInfo]:
        """Every corpus with its totals (as of its newest generation)."""
        with self.reading() as tx:
            return CorpusReads(tx).infos()

    def corpus(self, ref: str) -> CorpusInfo:
        """A corpus as of generation ``C@N``, or ``C``: its newest."""
        with self.reading() as tx:
            return CorpusReads(tx).info(ref)

    def corpus_log(self, corpus: str) -> list[CorpusInfo]:
        """Every generation of a corpus, oldest first (``kept``: its counts are readable)."""
        with self.reading() as tx:
            corpora = CorpusReads(tx)
            return corpora.log(corpora.corpus_id(corpus))

    def corpus_sources(self, corpus: str) -> list[Source]:
        """The sources of corpus generation ``C@N`` (``C``: the newest), oldest first."""
        with self.reading() as tx:
            corpora = CorpusReads(tx)
            return corpora.sources(*corpora.ref(corpus))

    def top_words(self, corpus: str, n: int = 10) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent words of ``C@N`` (``C``: the newest) with their counts (ties by bytes)."""
        return self._questions.top_words(corpus, n)

    def word_counts(self, corpus: str) -> dict[bytes, int]:
        """All word counts of ``C@N`` (``C``: the newest); the generation must be kept."""
        with self.reading() as tx:
            return CorpusReads(tx).read_generation(corpus, count_tables.counts)

    def corpus_diff(self, ref_a: str, ref_b: str, *, limit: int = 20) -> dict[str, Any]:
        """What changed from corpus generation ``C@A`` to ``C@B``: new and vanished
        words, the largest count changes (``limit`` of each), both totals."""
        return self._questions.corpus_diff(ref_a, ref_b, limit)

    def compact(self, corpus: str) -> dict[str, Any]:
        """Delete the history no version pins; says what it freed and which generations stay readable."""
        return self._corpora.compact(corpus)

    # -- versions ----------------------------------------------------------------
    def versions(self, name: str | None = None) -> list[VersionInfo]:
        """Every version (of one tokenizer, if named), by name and number."""
        with self.reading() as tx:
            return VersionReads(tx).infos(name=name)

    def version(self, ref: str) -> VersionInfo:
        """Resolve ``NAME`` (its newest complete version), ``NAME@N`` or ``NAME@ALIAS``."""
        with self.reading() as tx:
            reads = VersionReads(tx)
            return reads.info(reads.resolve(ref))

    def set_alias(self, ref: str, alias: str) -> VersionInfo:
        """Point ``NAME@ALIAS`` at a version (moving the alias if it exists)."""
        return self._versions.set_alias(ref, alias)

    def train(self, name: str, *, corpus: str | Sequence[str], options: TrainOptions | None = None,
              progress: Callable[[Progress], None] | None = None, **settings: Any) -> VersionInfo:
        """Train a new version ``NAME@N`` from the word counts of ``corpus``: ``C``
        (its newest generation) or ``C@N`` (a kept one). The version pins it.

        The options are ``TrainOptions`` fields, given as keywords or as
        ``options`` (keywords win):

        * ``vocab_size`` (bytes + specials + merges) or ``merges``: where to stop;
        * ``min_frequency`` (default 1): stop when no pair occurs this often;
        * ``tie_break`` (``"lexicographic"``, ``"hf"`` or ``"first-seen"``: the pair
          that occurs first in the corpus' text, as minbpe picks it; a generation
          ingested before bpestore kept word order raises ConflictError) and
          ``special_tokens`` (default: the corpus');
        * ``parent="NAME@K"``: extend that version: the new one starts with all
          its tokens and merges (ids unchanged) and continues on ``corpus``;
        * ``max_token_length``: no token longer than this many bytes;
        * ``alphabet``, ``unk_token``, ``byte_fallback``, ``end_of_word``, ``start_of_word``,
          ``no_inner_space``, ``layout``, ``fuse_unk``, ``end_of_word_suffix``: the symbolization (see
          ``TokenizerSpec``), recorded in the version's spec; an extension
          keeps its parent's;
        * ``segmentation``: how encoding cuts a word, ``"merge"`` (BPE merges
          by rank, the default), ``"longest-match"`` (greedy longest vocabulary match,
          seed 002's segmenter) or ``"piece"`` (SentencePiece's: any two symbols making a
          merged token merge, in its rank); recorded in the spec, so in the fingerprint;
        * ``corpus`` a list of generations, with ``weights`` (whole numbers, one each, default 1):
          a mixture, each generation's counts times its weight, added (1:1 is exactly one corpus
          holding both texts); its corpora must cut words alike; the version pins each
          (``VersionInfo.mixture``), and verify and resume use it;
        * ``checkpoint_every`` (1000) merges or ``checkpoint_seconds`` (10):
          how often merges are written; a stopped run continues with ``resume``.

        ``progress`` gets a ``Progress`` after each merge.

        >>> store.train("en", corpus="books", vocab_size=1000)  # doctest: +SKIP
        <VersionInfo en@1 complete ...>
        """
        return self._versions.train(name, corpus, options, progress, settings)

    def resume(self, ref: str, *, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
               checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
               progress: Callable[[Progress], None] | None = None) -> VersionInfo:
        """Continue a version that stopped before its target (``ref`` alone: its newest),
        on the corpus generation it pins, whatever was ingested since."""
        return self._versions.resume(ref, checkpoint_every, checkpoint_seconds, progress)

    def verify(self, ref: str) -> VerifyResult:
        """Retrain version ``ref`` from its pinned corpus generation and settings (an
        extension: from its parent's merges) and compare: ``ok`` when the merges are equal."""
        return self._versions.verify(ref)

    # -- tokenizers: loading, questions, export --------------------------------
    def tokenizer(self, ref: str) -> Tokenizer:
        """The Tokenizer of a version, loaded once per process and cached."""
        return load(self.reading, self.url, ref, self.tokenizer_cache)

    def export(self, ref: str, *, format: str, out: str | Path, force: bool = False) -> list[Path]:  # noqa: A002
        """Write a version as GPT-2 files (``out`` a folder), a Hugging Face
        ``tokenizer.json``, a tiktoken rank file or a SentencePiece ``.model``; returns the files written.
        Each file is written whole or not at all; an existing one is replaced
        only with ``force``; ``out``'s folder must exist.

        >>> store.export("en@1", format="hf", out="tokenizer.json")  # doctest: +SKIP
        [PosixPath('tokenizer.json')]
        """
        from ..formats import export_tokenizer  # the formats' writers: an export's alone

        return export_tokenizer(self.tokenizer(ref), format, out, force=force)

    def token(self, ref: str, token: str | int) -> dict[str, Any]:
        """A token of a version: its id, bytes, kind and the merges that built it.

        ``token`` is an id (int), or text: a token's exact string, e.g. " the".

        >>> store.token("en@1", " the")["id"]  # doctest: +SKIP
        262
        """
        return token_info(ref, token, vocabulary(self.reading, ref))

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        """What changed between two versions: shared merge prefix, changed ids, new tokens."""
        return self._questions.diff(ref_a, ref_b)

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
        return self._questions.vocab(ref, grep=grep, prefix=prefix, longest=longest, limit=limit, timeout=timeout)

    def merges(self, ref: str, *, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
        """A version's merges in rank order, from rank ``start`` on, at most ``limit``."""
        return self._questions.merges(ref, start, limit)

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
        from .. import analysis  # reading and encoding files: the statistics' alone

        return analysis.file_stats(refs, file, self.tokenizer, errors=errors, workers=workers)

    def corpus_stats(self, refs: Sequence[str], corpora: Sequence[str]) -> list[CorpusStats]:
        """``stats`` on corpus generations (``C``: the newest, or ``C@N``) from their word
        counts, without their text: one row per version and corpus (versions outer). Each
        distinct word is encoded once and weighted by its count, so the tokens equal
        encoding the text (special tokens aside). A corpus counted under another
        pre-tokenizer, pattern, normalizer or space marker than a version's is refused
        (``InvalidArgumentError``, naming them).

        >>> store.corpus_stats(["gpt2", "en@1"], ["books@3"])[0].bytes_per_token  # doctest: +SKIP
        4.41
        """
        return self._questions.corpus_stats(refs, corpora)

    def token_usage(self, ref: str, corpus: str | None = None, *, rare: int = 10) -> TokenUsage:
        """Each token's count on a corpus generation (None: the one the version was trained
        on): the tokens never emitted, unreachable (``encode(decode([t])) != [t]``) and
        rare (fewer than ``rare`` times), and tokens by script (``usage.script_of``)."""
        return self._questions.token_usage(ref, corpus, rare)

    def compare(self, ref_a: str, ref_b: str, corpora: Sequence[str], *, limit: int = 20) -> list[dict[str, Any]]:
        """Two versions on corpus generations, one dict per corpus: both ``corpus_stats``,
        the change in bytes per token (b - a) and the ``limit`` tokens (by bytes) whose
        counts moved most."""
        return self._questions.compare(ref_a, ref_b, corpora, limit)

    def progress(self, ref: str, *, last: int = 5) -> VersionProgress:
        """How far a version (training or complete) got, from its stored merge rows
        and checkpoint time alone: merges so far against the target, the mean rate
        from its creation to its last checkpoint, and its ``last`` merges."""
        return self._versions.progress(ref, last)

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
        from .. import analysis  # reading and encoding files: the charts' alone

        return analysis.charts(refs, file, self._charted, text=text, points=points, errors=errors)

    def _charted(self, ref: str) -> tuple[Tokenizer, Sequence[int]]:
        """A version's tokenizer and its merges' pair counts, by rank."""
        return self.tokenizer(ref), vocabulary(self.reading, ref).columns[3]

    # -- the versions' tree, removal, imports ------------------------------------
    def lineage(self, name: str) -> list[LineageNode]:
        """The versions of tokenizer ``name`` as a forest: each root (a version trained
        or imported afresh, or extending another tokenizer's version: see its
        ``parent``) with the versions extending it, in any tokenizer, below it."""
        return self._versions.lineage(name)

    def remove(self, ref: str, *, force: bool = False) -> Removed:
        """Delete version ``NAME@N`` (its merges and tokens), in one transaction; or,
        given an alias ``NAME@ALIAS``, that alias only (the version stays).

        A version that others extend or that aliases point at is refused unless
        ``force``, which deletes those extensions (and theirs) and aliases with
        it: no version is ever left with a missing parent.
        """
        return self._versions.remove(ref, force)

    def import_vocab(self, name: str, vocab: dict[int, bytes], merge_list: Sequence[tuple[bytes, bytes]],
                     special_tokens: Sequence[str] = (), *, spec: TokenizerSpec | None = None,
                     source: str = "import") -> VersionInfo:
        """Store a vocabulary and merges made elsewhere as a new complete version."""
        return self._versions.import_vocab(name, vocab, merge_list, special_tokens, spec, source)

    def import_gpt2(self, name: str, *, vocab: str | Path, merges: str | Path) -> VersionInfo:
        """Import GPT-2's ``vocab.json`` and ``merges.txt`` as a new version."""
        return self._versions.import_gpt2(name, vocab, merges)

    def import_hf(self, name: str, path: str | Path) -> VersionInfo:
        """Import a Hugging Face ``tokenizer.json`` (a BPE model); a part bpestore cannot run is refused by name."""
        return self._versions.import_hf(name, path)

    def import_sentencepiece(self, name: str, path: str | Path) -> VersionInfo:
        """Import a SentencePiece BPE ``.model``, with its ids; a part bpestore cannot run is refused by name."""
        return self._versions.import_sentencepiece(name, path)

    def import_tiktoken(self, name: str, path: str | Path, *, pattern: str,
                        special_tokens: Mapping[str, int] | None = None) -> VersionInfo:
        """Import a tiktoken rank file as a new version: ids are the ranks, the
        merges are derived from them (each token's split by tiktoken's rule over
        the ranks below it); ``pattern``: gpt2, cl100k, o200k or a regex;
        ``special_tokens``: text -> id, ids the file does not use.

        >>> store.import_tiktoken("r50k", "r50k_base.tiktoken", pattern="gpt2",
        ...                       special_tokens={"<|endoftext|>": 50256})  # doctest: +SKIP
        """
        return self._versions.import_tiktoken(name, path, pattern, special_tokens)
