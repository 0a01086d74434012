"""Versions that travel: one version, with its parents (and the corpus
generations they pin, where asked), copied from one store into another, or
packed as a small SQLite store of its own (a ``.bpestore`` file).

A copy reads everything it needs from the source in one read transaction and
checks it there: each complete version's fingerprint is computed again from
its spec, corpus digest and merges, and its snapshot row (the packed
vocabulary) is packed again from its rows and must give the stored digest. A
mismatch is ``DamagedDataError`` and nothing is written. Then everything is
written in one transaction on the target.

What stays the same in the target: token ids, merges, spec, fingerprint,
status, the versions' names and numbers (``as_name`` renames the copied
version's tokenizer), the corpus' name and generation numbers. What does not:
internal row ids. A version already in the target under its name and number
with the same fingerprint is used as it is; one with other content is a clash,
refused.

Without counts, a trained version keeps its corpus' name (``versions.corpus_name``)
and no ``corpus_id``: verify and resume say why they cannot run. Where the target
holds that generation already (same digest, kept), the copy uses it instead.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import ConflictError, DamagedDataError, InvalidArgumentError, NotFoundError
from ..files import clear_leftovers, partial_path
from ..records import Copied, CorpusInfo, Source
from ..spec import TokenizerSpec, fingerprint
from . import corpus_tables, count_tables, snapshot, version_tables, vocab_tables
from .corpus_tables import CorpusReads
from .drivers import Transaction
from .version_tables import SnapshotRow, VersionReads, check_name, moment
from .vocabulary import Vocabulary

Store = Any  # a Store (store.py, above this module), given by the caller

PACK_SUFFIX = ".bpestore"


@dataclass(frozen=True)
class VersionRows:
    """One version as plain data, read from its store."""

    name: str
    number: int
    spec: str  # TokenizerSpec JSON, as stored
    status: str
    source: str
    target_vocab_size: int | None
    target_merges: int | None
    min_frequency: int
    max_token_length: int | None
    corpus: str | None
    corpus_generation: int | None
    corpus_digest: str | None
    fingerprint: str | None
    created_at: datetime
    updated_at: datetime
    parent: str | None  # its parent's ref in the source
    counts_here: bool  # the source holds the counts of its corpus generation
    vocab: Vocabulary
    snapshot: SnapshotRow | None
    aliases: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.number}"

    def content(self) -> str:
        """What two versions must share to be the same: the fingerprint, or while training
        the fingerprint its merges so far would give."""
        return self.fingerprint or "training:" + fingerprint(TokenizerSpec.from_json(self.spec), self.corpus_digest,
                                                             self.vocab.merges)


@dataclass(frozen=True)
class GenerationRows:
    """A corpus generation as plain data: its history up to it, its sources and its counts."""

    corpus: str
    spec: str  # TokenizerSpec JSON, as stored
    created_at: datetime
    history: list[CorpusInfo]  # generations 1..N
    sources: list[Source]  # the sources up to N, each with the generation it entered in
    counts: dict[bytes, int] = field(repr=False)
    ordered: bool = False  # the counts are in the order their words first occurred (ordinals)

    @property
    def generation(self) -> int:
        return self.history[-1].generation

    @property
    def ref(self) -> str:
        return f"{self.corpus}@{self.generation}"


# -- reading and checking the source ---------------------------------------------------
def read_chain(tx: Transaction, ref: str) -> list[VersionRows]:
    """Version ``ref`` and its parents, root first."""
    reads = VersionReads(tx)
    chain: list[VersionRows] = []
    version_id: int | None = reads.resolve(ref)
    while version_id is not None:
        v = reads.info(version_id)
        if v.mixture:
            raise ConflictError(f"{v.ref} was trained on a mixture of corpora ({v.inputs}); copying such a "
                                "version is not supported yet")
        spec, corpus_id = reads.spec_and_corpus(version_id)
        chain.append(VersionRows(
            name=v.name, number=v.number, spec=spec, status=v.status, source=v.source,
            target_vocab_size=v.target_vocab_size, target_merges=v.target_merges, min_frequency=v.min_frequency,
            max_token_length=v.max_token_length, corpus=v.corpus, corpus_generation=v.corpus_generation,
            corpus_digest=v.corpus_digest, fingerprint=v.fingerprint, created_at=v.created_at,
            updated_at=v.updated_at, parent=v.parent, counts_here=corpus_id is not None,
            vocab=reads.rows_vocabulary(version_id), snapshot=reads.snapshot_row(version_id),
            aliases=v.aliases))
        version_id = None if v.parent is None else reads.resolve(v.parent)
    return chain[::-1]


STATUSES = ("complete", "training")


def check(v: VersionRows, where: str) -> None:
    """DamagedDataError unless the version is whole: a known status, each merge's token
    the bytes of its two parts, and where complete its fingerprint and snapshot
    matching its rows (a version still training has no fingerprint yet)."""
    vocab = v.vocab
    if v.status not in STATUSES or (v.status != "complete") != (v.fingerprint is None):
        raise DamagedDataError(f"{v.ref} in {where} has status {v.status!r}"
                               f"{' and a fingerprint' if v.fingerprint else ' and no fingerprint'}; "
                               "it is damaged and was not copied")
    tokens = vocab.tokens
    if any(token not in tokens for column in vocab.columns[:3] for token in column):
        raise DamagedDataError(f"{v.ref} in {where} has merges of tokens it does not hold; it is damaged "
                               "and was not copied")
    lefts, rights, made = vocab.columns[:3]
    rank = next((k for k, (a, b, t) in enumerate(zip(lefts, rights, made)) if tokens[t] != tokens[a] + tokens[b]),
                None)
    if rank is not None:
        raise DamagedDataError(f"{v.ref} in {where}: token {made[rank]} is not the bytes of the two tokens its "
                               f"merge (rank {rank}) joins; it is damaged and was not copied")
    if v.status != "complete":
        return
    computed = fingerprint(TokenizerSpec.from_json(v.spec), v.corpus_digest, vocab.merges)
    if computed != v.fingerprint:
        raise DamagedDataError(f"{v.ref} in {where} does not match its fingerprint (stored {v.fingerprint}, "
                               f"its merges give {computed}); it is damaged and was not copied")
    stored = v.snapshot
    if stored is None:
        return  # made on arrival
    packed = snapshot.pack(vocab)
    if stored.format != snapshot.FORMAT or bytes(stored.packed) != packed \
            or stored.digest != snapshot.digest(v.fingerprint, stored.fast_problem, packed):
        raise DamagedDataError(f"{v.ref} in {where}: its stored snapshot does not match its tokens and "
                               "merges; it is damaged and was not copied")


def read_generation(tx: Transaction, v: VersionRows, where: str) -> GenerationRows:
    """The corpus generation ``v`` pins, with its history, sources and counts."""
    if v.corpus is None:
        raise InvalidArgumentError(f"{v.ref} was imported ({v.source}): it has no corpus counts to copy; "
                                   "copy it without with_counts", params=("with_counts",))
    if not v.counts_here:
        raise ConflictError(f"{v.ref} was copied into {where} without its counts ({v.corpus}@"
                            f"{v.corpus_generation}); copy it from the store that holds them",
                            params=("with_counts",))
    if v.corpus_generation is None:
        raise ConflictError(f"{v.ref} was trained before corpus generations existed: the counts it was "
                            "trained on are not kept apart, so they cannot be copied", params=("with_counts",))
    corpora = CorpusReads(tx)
    corpus_id = corpora.corpus_id(v.corpus)
    row = corpora.row(corpus_id)
    history = corpora.log(corpus_id)[:v.corpus_generation]
    ordered = corpora.ordinal_end(corpus_id, v.corpus_generation) is not None
    counts = count_tables.counts(tx, corpus_id, v.corpus_generation, first_seen=ordered)
    found = GenerationRows(v.corpus, row.spec, moment(row.created_at), history,
                           corpora.sources(corpus_id, v.corpus_generation), counts, ordered)
    totals = history[-1]
    if totals.digest != v.corpus_digest or (totals.n_distinct, totals.n_words) != (len(counts), sum(counts.values())):
        raise DamagedDataError(f"the counts of {found.ref} in {where} do not match their digest and totals; "
                               "they were not copied")
    return found


def packed_ref(tx: Transaction) -> str:
    """The version a pack holds: the one no other version in it extends."""
    refs = VersionReads(tx).leaves()
    if len(refs) != 1:
        held = ", ".join(refs) or "no version"
        raise InvalidArgumentError(f"this store holds {held}: not one version (a pack); name the version "
                                   "to copy", params=("ref",))
    return refs[0]


# -- writing into the target -------------------------------------------------------------
def place_generation(tx: Transaction, g: GenerationRows, where: str) -> tuple[int, bool]:
    """Make generation ``g`` readable in the target: a new corpus with its history, or
    an existing one whose history agrees, grown to it (or given it back). Returns the
    corpus' id, and False where the generation was readable there already."""
    corpus_id, spec = corpus_tables.lock_corpus(tx, g.corpus, g.spec, g.created_at)
    if spec != TokenizerSpec.from_json(g.spec):
        raise ConflictError(f"corpus {g.corpus!r} in {where} was ingested with another spec; the counts of "
                            f"{g.ref} cannot join it")
    corpora = CorpusReads(tx)
    theirs = {t.number: t.digest for t in corpora.totals(corpus_id)}
    for info in g.history:
        if info.generation in theirs and theirs[info.generation] != info.digest:
            raise ConflictError(f"corpus {g.corpus!r} in {where} has another history ({g.corpus}@{info.generation}"
                                f" holds other sources); the counts of {g.ref} cannot join it")
    newest = max(theirs, default=0)
    if newest < g.generation:
        _grow(tx, corpus_id, g, newest)
        return corpus_id, True
    if g.generation in corpora.kept_generations(corpus_id):
        return corpus_id, False
    _restore(tx, corpus_id, g)
    return corpus_id, True


def _grow(tx: Transaction, corpus_id: int, g: GenerationRows, newest: int) -> None:
    """Add generations newest+1..N of ``g`` to a corpus holding 1..newest of the same history."""
    corpus_tables.add_generations(tx, corpus_id, [info for info in g.history if info.generation > newest])
    corpus_tables.add_sources(tx, corpus_id, [s for s in g.sources if (s.generation or 0) > newest])
    current = count_tables.counts(tx, corpus_id) if newest else {}
    if any(word not in g.counts or g.counts[word] < count for word, count in current.items()):
        raise ConflictError(f"corpus {g.corpus!r} in the target holds counts that {g.ref} does not; its "
                            "history differs")
    change = {word: count - current.get(word, 0) for word, count in g.counts.items() if count != current.get(word)}
    pinned = VersionReads(tx).pinned_generations(corpus_id)
    if pinned and change:
        # The rows a pinned generation reads stay readable: copies valid up to this growth.
        count_tables.keep_history(tx, corpus_id, change, pinned[-1], newest + 1)
    # ordinal: the words new here come after those the corpus holds, in the order they have in g.
    base = CorpusReads(tx).ordinal_end(corpus_id, newest) if newest else 0
    firsts = {word: i for i, word in enumerate(g.counts) if word in change} if g.ordered and base is not None \
        else None
    low = min(firsts.values(), default=0) if firsts else 0
    count_tables.upsert_counts(tx, corpus_id, change, g.generation, firsts, (base or 0) - low)
    if firsts is not None:
        end = (base or 0) + (max(firsts.values()) - low + 1 if firsts else 0)
        for info in g.history[newest:]:
            corpus_tables.set_ordinal_end(tx, corpus_id, info.generation, end)
    n_distinct = count_tables.n_distinct(tx, corpus_id)
    if n_distinct != g.history[-1].n_distinct:
        raise ConflictError(f"corpus {g.corpus!r} in the target does not add up to {g.ref} ({n_distinct:,} "
                            f"distinct words, not {g.history[-1].n_distinct:,}); its history differs")


def _restore(tx: Transaction, corpus_id: int, g: GenerationRows) -> None:
    """Make generation N of ``g`` readable again in a corpus that grew past it without
    keeping it: the rows unchanged since N must hold its counts; the words changed since
    get history rows valid in N alone. A difference is a history that does not agree."""
    n = g.generation
    differs = ConflictError(f"corpus {g.corpus!r} in the target does not hold the counts of {g.ref} it should; "
                            "its history differs")
    current = count_tables.current_rows(tx, corpus_id)
    kept = count_tables.history_at(tx, corpus_id, n)
    visible = {word for word, (_, changed_in) in current.items() if changed_in <= n} | set(kept)
    if not visible <= g.counts.keys():
        raise differs
    copies = []
    for word, count in g.counts.items():
        if word in kept or (word in current and current[word][1] <= n):
            if kept.get(word, current.get(word, (0, 0))[0]) != count:
                raise differs
        elif word in current:
            copies.append((corpus_id, word, count, n, n + 1))
        else:
            raise differs
    count_tables.add_history(tx, copies)


def readable_corpus(tx: Transaction, v: VersionRows) -> int | None:
    """The id of the target's corpus holding the generation ``v`` pins (same digest, kept); else None."""
    if v.corpus is None or v.corpus_generation is None:
        return None
    corpora = CorpusReads(tx)
    if corpora.spec(v.corpus) is None:
        return None
    corpus_id = corpora.corpus_id(v.corpus)
    totals = corpora.totals(corpus_id, v.corpus_generation)
    if not totals or totals[0].digest != v.corpus_digest or v.corpus_generation not in corpora.kept_generations(
            corpus_id):
        return None
    return corpus_id


def find_version(tx: Transaction, tokenizer_id: int, number: int) -> tuple[int, str] | None:
    """The id and content (``VersionRows.content``) of version ``number`` of a tokenizer; None if absent."""
    reads = VersionReads(tx)
    found = reads.find(tokenizer_id, number)
    if found is None:
        return None
    v = reads.info(found)
    if v.fingerprint is not None:
        return found, v.fingerprint
    return found, "training:" + fingerprint(v.spec, v.corpus_digest, reads.rows_vocabulary(found).merges)


def place_version(tx: Transaction, v: VersionRows, tokenizer_id: int, parent_id: int | None,
                  corpus_id: int | None) -> int:
    """Insert ``v`` as version N (its number) of a tokenizer with its tokens, merges and
    snapshot, its counts in corpus ``corpus_id`` (None: not in this store); returns its id."""
    version_id = version_tables.place_version(tx, dict(
        tokenizer_id=tokenizer_id, number=v.number, parent_id=parent_id, corpus_id=corpus_id, spec=v.spec,
        target_vocab_size=v.target_vocab_size, target_merges=v.target_merges, min_frequency=v.min_frequency,
        max_token_length=v.max_token_length, status=v.status, source=v.source, corpus_digest=v.corpus_digest,
        corpus_generation=v.corpus_generation, fingerprint=v.fingerprint, created_at=tx.stamp(v.created_at),
        updated_at=tx.stamp(v.updated_at), corpus_name=v.corpus if corpus_id is None else None))
    vocab = v.vocab
    vocab_tables.add_tokens(tx, version_id, list(vocab.tokens), list(vocab.tokens.values()),
                            [vocab.kinds[i] for i in vocab.tokens])
    vocab_tables.add_merges(tx, version_id, 0, vocab.columns)
    if v.status == "complete":
        assert v.fingerprint is not None  # complete
        made = snapshot.make(TokenizerSpec.from_json(v.spec), vocab, v.fingerprint) if v.snapshot is None else \
            snapshot.Snapshot(v.snapshot.format, bytes(v.snapshot.packed), v.snapshot.fast_problem, v.snapshot.digest)
        version_tables.add_snapshot(tx, version_id, made)
    return version_id


def link_counts(tx: Transaction, version_id: int, g: GenerationRows, where: str) -> bool:
    """Give a version that is there without its counts the generation it pins; False
    where it has its counts already."""
    if VersionReads(tx).spec_and_corpus(version_id)[1] is not None:
        return False
    corpus_id, _ = place_generation(tx, g, where)
    version_tables.link_corpus(tx, version_id, corpus_id)
    return True


def place_aliases(tx: Transaction, name: str, version_id: int, names: Iterable[str], where: str) -> list[str]:
    """Point ``name@ALIAS`` at ``version_id`` for each alias not there yet; returns those written.
    An alias there pointing elsewhere is a clash, refused."""
    reads = VersionReads(tx)
    tokenizer_id = reads.tokenizer_of(version_id)
    written = []
    for alias in names:
        target = reads.alias_target(tokenizer_id, alias)
        if target == version_id:
            continue
        if target is not None:
            other = reads.info(target).ref
            raise ConflictError(f"alias {name}@{alias} in {where} points at {other}; move it there "
                                f"(bpestore alias), or copy without aliases", params=("aliases",))
        version_tables.set_alias(tx, version_id, alias, check=False)
        written.append(f"{name}@{alias}")
    return written


# -- the two operations ----------------------------------------------------------------
def copy(source: Store, ref: str | None, to: str | Path | Store, open_store: Callable[[Any], Store], *,
         with_counts: bool = False, as_name: str | None = None, aliases: bool = False) -> Copied:
    """``Store.copy``: version ``ref`` (None: the one version ``source`` holds) and its
    parents, read and checked from ``source``, written into the store ``to`` (a path
    or URL: opened with ``open_store``)."""
    if as_name is not None:
        check_name(as_name, "tokenizer", "as_name")
    with source.reading() as tx:
        ref = ref if ref is not None else packed_ref(tx)
        chain = read_chain(tx, ref)
        for v in chain:
            check(v, source.location)
        counts: dict[tuple[str | None, int | None], GenerationRows] = {}
        if with_counts and chain[-1].corpus is None:
            read_generation(tx, chain[-1], source.location)  # says why there are none
        for v in chain if with_counts else ():
            if v.corpus is not None and (v.corpus, v.corpus_generation) not in counts:
                counts[v.corpus, v.corpus_generation] = read_generation(tx, v, source.location)
    if not isinstance(to, (str, os.PathLike)):
        return _write(to, chain, counts, as_name=as_name, aliases=aliases)
    new = _new_sqlite_file(to)
    if new is None:
        with open_store(to) as target:
            return _write(target, chain, counts, as_name=as_name, aliases=aliases)
    # A new store file appears whole or not at all: written beside it, then linked into place.
    def fill(target: Store) -> Copied:
        done = _write(target, chain, counts, as_name=as_name, aliases=aliases)
        return replace(done, target=done.target.replace(partial_path(new, "copy").name, new.name))
    return _whole_file(new, "copy", open_store, fill)


def _new_sqlite_file(to: str | os.PathLike) -> Path | None:
    """``to`` as a path, where it names a SQLite store file that does not exist yet."""
    name = os.fspath(to)
    if "://" in name or name == ":memory:" or os.path.lexists(name):
        return None
    return Path(name).expanduser()


def _whole_file(path: Path, kind: str, open_store: Callable[[Any], Store], fill: Callable[[Store], Any],
                *, pack: bool = False, force: bool = False) -> Any:
    """``fill`` a new store written beside ``path`` (``partial_path``), then put it at
    ``path`` in one step: linked where nothing is there (``force``: renamed over it).
    A pack is one self-contained file (no write-ahead log, no free pages). A killed
    run's leftovers are removed by the next (``clear_leftovers``)."""
    clear_leftovers(path)
    partial = partial_path(path, kind)
    try:
        with open_store(partial) as store:
            result = fill(store)
        conn = sqlite3.connect(partial, isolation_level=None)
        try:
            if pack:
                conn.execute("PRAGMA journal_mode=DELETE")
                conn.execute("VACUUM")
            else:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        if force:
            os.replace(partial, path)
        else:
            try:
                os.link(partial, path)
            except FileExistsError:
                raise ConflictError(f"{path} was made meanwhile; run it again", params=("to",)) from None
    finally:
        for leftover in (partial, *(Path(f"{partial}{side}") for side in ("-wal", "-shm", "-journal", "-train.lock"))):
            leftover.unlink(missing_ok=True)
    return result


def _write(target: Store, chain: list[VersionRows], counts: Mapping[tuple[str | None, int | None], GenerationRows],
           *, as_name: str | None, aliases: bool) -> Copied:
    """Everything read from the source, written into ``target`` in one transaction.
    A version's generation is placed just before it, so that it pins the generation
    before a later one grows the corpus past it."""
    renamed = {chain[-1].name: as_name} if as_name is not None else {}
    where = target.location
    copied, present, corpora_written, written_aliases, missing = [], [], [], [], []
    with target.writing() as tx:
        ids: dict[str, int] = {}
        for v in chain:
            name = renamed.get(v.name, v.name)
            check_name(name, "tokenizer", "as_name")
            tokenizer_id = version_tables.lock_tokenizer(tx, name, v.created_at)
            found = find_version(tx, tokenizer_id, v.number)
            g = counts.get((v.corpus, v.corpus_generation))
            if found is not None:
                if found[1] != v.content():
                    raise ConflictError(f"{name}@{v.number} in {where} is another version (fingerprint "
                                        f"{found[1][:12]}, {v.ref}'s is {v.content()[:12]}); copy it under another "
                                        "name with as_name", params=("as_name",))
                ids[v.ref] = found[0]
                present.append(f"{name}@{v.number}")
                if g is not None and link_counts(tx, found[0], g, where):
                    corpora_written.append(g.ref)
                continue
            if g is None:
                corpus_id = readable_corpus(tx, v)
            else:
                corpus_id, wrote = place_generation(tx, g, where)
                corpora_written += [g.ref] if wrote else []
            ids[v.ref] = place_version(tx, v, tokenizer_id, None if v.parent is None else ids[v.parent], corpus_id)
            copied.append(f"{name}@{v.number}")
            if v.corpus is not None and corpus_id is None:
                missing.append(f"{name}@{v.number}")
        for v in chain if aliases else ():
            written_aliases += place_aliases(tx, renamed.get(v.name, v.name), ids[v.ref], v.aliases, where)
    last = chain[-1]
    return Copied(f"{renamed.get(last.name, last.name)}@{last.number}", where, tuple(copied), tuple(present),
                  tuple(written_aliases), tuple(corpora_written), tuple(missing))


def pack(source: Store, ref: str, out: str | os.PathLike, open_store: Callable[[Any], Store], *,
         with_counts: bool = False, force: bool = False) -> Path:
    """Write version ``ref`` and its parents (with ``with_counts`` the corpus
    generations they pin) as a new SQLite store at ``out``, whole or not at all;
    an existing file is replaced only with ``force``."""
    path = Path(out)
    if path.is_dir():
        raise InvalidArgumentError(f"{out} is a folder; give the pack's file name, e.g. {path / 'en.bpestore'}",
                                   params=("out",))
    if not path.parent.exists():
        raise NotFoundError(f"folder {path.parent} does not exist", params=("out",))
    if path.exists() and not force:
        raise ConflictError(f"{out} exists; pass force=True to replace it", params=("force",))
    read = source_file(source)
    if read is not None and path.exists() and os.path.samefile(path, read):
        raise ConflictError(f"{out} is the store {ref} is read from; pack into another file", params=("out",))
    _whole_file(path, "pack", open_store, lambda packed: copy(source, ref, packed, open_store, with_counts=with_counts,
                                                               aliases=True), pack=True, force=True)
    return path


def source_file(store: Store) -> Path | None:
    """The SQLite file a store reads, where it is one."""
    from urllib.parse import unquote

    url: str = store.url
    if url.startswith("sqlite:///file:"):
        return Path(unquote(url[len("sqlite:///file:"):].split("?", 1)[0]))
    if url.startswith("sqlite:///") and "?" not in url and url != "sqlite:///:memory:":
        return Path(url[len("sqlite:///"):])
    return None
