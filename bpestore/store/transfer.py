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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, func, insert, select, update

from ..errors import ConflictError, DamagedDataError, InvalidArgumentError, NotFoundError
from ..records import Copied, CorpusInfo, Source
from ..spec import TokenizerSpec, fingerprint
from . import repository, snapshot, wordcounts, writes
from .reader import SnapshotRow, VersionReads, moment
from .schema import aliases as aliases_table
from .schema import corpora, generations, ingests, tokenizers, versions, word_count_history, word_counts
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from .store import Store

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

    @property
    def generation(self) -> int:
        return self.history[-1].generation

    @property
    def ref(self) -> str:
        return f"{self.corpus}@{self.generation}"


# -- reading and checking the source ---------------------------------------------------
def read_chain(conn: Connection, ref: str) -> list[VersionRows]:
    """Version ``ref`` and its parents, root first."""
    reads = VersionReads.over(conn)
    chain: list[VersionRows] = []
    version_id: int | None = reads.resolve(ref)
    while version_id is not None:
        v = reads.info(version_id)
        spec, corpus_id = conn.execute(select(versions.c.spec, versions.c.corpus_id)
                                       .where(versions.c.id == version_id)).one()
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


def check(v: VersionRows, where: str) -> None:
    """DamagedDataError unless a complete version's fingerprint and snapshot match its rows."""
    vocab = v.vocab
    if any(token not in vocab.tokens for column in vocab.columns[:3] for token in column):
        raise DamagedDataError(f"{v.ref} in {where} has merges of tokens it does not hold; it is damaged "
                               "and was not copied")
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


def read_generation(conn: Connection, v: VersionRows, where: str) -> GenerationRows:
    """The corpus generation ``v`` pins, with its history, sources and counts."""
    if v.corpus is None:
        raise InvalidArgumentError(f"{v.ref} was imported ({v.source}): it has no corpus counts to copy",
                                   params=("with_counts",))
    if not v.counts_here:
        raise ConflictError(f"{v.ref} was copied into {where} without its counts ({v.corpus}@"
                            f"{v.corpus_generation}); copy it from the store that holds them",
                            params=("with_counts",))
    if v.corpus_generation is None:
        raise ConflictError(f"{v.ref} was trained before corpus generations existed: the counts it was "
                            "trained on are not kept apart, so they cannot be copied", params=("with_counts",))
    corpus_id = repository.corpus_id(conn, v.corpus)
    spec, created_at = conn.execute(select(corpora.c.spec, corpora.c.created_at)
                                    .where(corpora.c.id == corpus_id)).one()
    history = repository.corpus_log(conn, corpus_id)[:v.corpus_generation]
    counts = wordcounts.counts(conn, corpus_id, v.corpus_generation)
    found = GenerationRows(v.corpus, spec, moment(created_at), history,
                           repository.corpus_sources(conn, corpus_id, v.corpus_generation), counts)
    totals = history[-1]
    if totals.digest != v.corpus_digest or (totals.n_distinct, totals.n_words) != (len(counts), sum(counts.values())):
        raise DamagedDataError(f"the counts of {found.ref} in {where} do not match their digest and totals; "
                               "they were not copied")
    return found


def packed_ref(conn: Connection) -> str:
    """The version a pack holds: the one no other version in it extends."""
    child = versions.alias("child")
    rows = conn.execute(select(tokenizers.c.name, versions.c.number)
                        .join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                        .where(~select(child.c.id).where(child.c.parent_id == versions.c.id).exists())
                        .order_by(tokenizers.c.name, versions.c.number)).all()
    if len(rows) != 1:
        held = ", ".join(f"{name}@{number}" for name, number in rows) or "no version"
        raise InvalidArgumentError(f"this store holds {held}: not one version (a pack); name the version "
                                   "to copy", params=("ref",))
    return f"{rows[0][0]}@{rows[0][1]}"


# -- writing into the target -------------------------------------------------------------
def place_generation(conn: Connection, g: GenerationRows, where: str) -> tuple[int, bool]:
    """Make generation ``g`` readable in the target: a new corpus with its history, or
    an existing one whose history agrees, grown to it (or given it back). Returns the
    corpus' id, and False where the generation was readable there already."""
    conn.execute(repository.dialect(conn).insert(corpora).values(name=g.corpus, spec=g.spec, created_at=g.created_at)
                 .on_conflict_do_nothing(index_elements=[corpora.c.name]))
    corpus_id, spec = conn.execute(select(corpora.c.id, corpora.c.spec).where(corpora.c.name == g.corpus)
                                   .with_for_update()).one()
    if TokenizerSpec.from_json(spec) != TokenizerSpec.from_json(g.spec):
        raise ConflictError(f"corpus {g.corpus!r} in {where} was ingested with another spec; the counts of "
                            f"{g.ref} cannot join it")
    theirs = dict(conn.execute(select(generations.c.number, generations.c.digest)
                               .where(generations.c.corpus_id == corpus_id)).all())
    for info in g.history:
        if info.generation in theirs and theirs[info.generation] != info.digest:
            raise ConflictError(f"corpus {g.corpus!r} in {where} has another history ({g.corpus}@{info.generation}"
                                f" holds other sources); the counts of {g.ref} cannot join it")
    newest = max(theirs, default=0)
    if newest < g.generation:
        _grow(conn, corpus_id, g, newest)
        return corpus_id, True
    if g.generation in repository.kept_generations(conn, corpus_id):
        return corpus_id, False
    _restore(conn, corpus_id, g)
    return corpus_id, True


def _grow(conn: Connection, corpus_id: int, g: GenerationRows, newest: int) -> None:
    """Add generations newest+1..N of ``g`` to a corpus holding 1..newest of the same history."""
    added = [info for info in g.history if info.generation > newest]
    conn.execute(insert(generations), [
        {"corpus_id": corpus_id, "number": info.generation, "n_sources": info.n_sources,
         "size_bytes": info.size_bytes, "n_words": info.n_words, "n_distinct": info.n_distinct,
         "digest": info.digest, "created_at": info.generated_at} for info in added])
    sources = [{"corpus_id": corpus_id, "source": s.source, "sha256": s.sha256, "size_bytes": s.size_bytes,
                "n_words": s.n_words, "n_distinct": s.n_distinct, "created_at": s.created_at,
                "generation": s.generation} for s in g.sources if (s.generation or 0) > newest]
    if sources:
        conn.execute(insert(ingests), sources)
    current = wordcounts.counts(conn, corpus_id) if newest else {}
    if any(word not in g.counts or g.counts[word] < count for word, count in current.items()):
        raise ConflictError(f"corpus {g.corpus!r} in the target holds counts that {g.ref} does not; its "
                            "history differs")
    change = {word: count - current.get(word, 0) for word, count in g.counts.items() if count != current.get(word)}
    pinned = repository.pinned_generations(conn, corpus_id)
    db = writes.Writes.over(conn)
    if pinned and change:
        # The rows a pinned generation reads stay readable: copies valid up to this growth.
        writes.keep_history(db, corpus_id, change, pinned[-1], newest + 1)
    writes.upsert_counts(db, corpus_id, change, g.generation)
    n_distinct = conn.execute(select(func.count()).select_from(word_counts)
                              .where(word_counts.c.corpus_id == corpus_id)).scalar_one()
    if n_distinct != g.history[-1].n_distinct:
        raise ConflictError(f"corpus {g.corpus!r} in the target does not add up to {g.ref} ({n_distinct:,} "
                            f"distinct words, not {g.history[-1].n_distinct:,}); its history differs")


def _restore(conn: Connection, corpus_id: int, g: GenerationRows) -> None:
    """Make generation N of ``g`` readable again in a corpus that grew past it without
    keeping it: the rows unchanged since N must hold its counts; the words changed since
    get history rows valid in N alone. A difference is a history that does not agree."""
    n = g.generation
    differs = ConflictError(f"corpus {g.corpus!r} in the target does not hold the counts of {g.ref} it should; "
                            "its history differs")
    current = {bytes(word): (count, changed_in) for word, count, changed_in in conn.execute(
        select(word_counts.c.word, word_counts.c["count"], word_counts.c.changed_in)
        .where(word_counts.c.corpus_id == corpus_id))}
    kept = {bytes(word): count for word, count in conn.execute(
        select(word_count_history.c.word, word_count_history.c["count"]).where(
            word_count_history.c.corpus_id == corpus_id, word_count_history.c.valid_from <= n,
            word_count_history.c.valid_to > n))}
    visible = {word for word, (_, changed_in) in current.items() if changed_in <= n} | set(kept)
    if not visible <= g.counts.keys():
        raise differs
    copies = []
    for word, count in g.counts.items():
        if word in kept or (word in current and current[word][1] <= n):
            if kept.get(word, current.get(word, (0, 0))[0]) != count:
                raise differs
        elif word in current:
            copies.append({"corpus_id": corpus_id, "word": word, "count": count, "valid_from": n, "valid_to": n + 1})
        else:
            raise differs
    if copies:
        conn.execute(insert(word_count_history), copies)


def readable_corpus(conn: Connection, v: VersionRows) -> int | None:
    """The id of the target's corpus holding the generation ``v`` pins (same digest, kept); else None."""
    if v.corpus is None or v.corpus_generation is None:
        return None
    corpus_id = conn.execute(select(corpora.c.id).where(corpora.c.name == v.corpus)).scalar()
    if corpus_id is None:
        return None
    digest = conn.execute(select(generations.c.digest).where(
        generations.c.corpus_id == corpus_id, generations.c.number == v.corpus_generation)).scalar()
    if digest != v.corpus_digest or v.corpus_generation not in repository.kept_generations(conn, corpus_id):
        return None
    return corpus_id


def lock_tokenizer(conn: Connection, name: str, created_at: datetime) -> int:
    """The id of tokenizer ``name`` (created if new, race-free), its row locked until the
    transaction ends: a concurrent copy of the same version waits, then finds it there."""
    repository.check_name(name, "tokenizer", "as_name")
    conn.execute(repository.dialect(conn).insert(tokenizers).values(name=name, created_at=created_at)
                 .on_conflict_do_nothing(index_elements=[tokenizers.c.name]))
    return conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name).with_for_update()).scalar_one()


def find_version(conn: Connection, tokenizer_id: int, number: int) -> tuple[int, str] | None:
    """The id and content (``VersionRows.content``) of version ``number`` of a tokenizer; None if absent."""
    found = conn.execute(select(versions.c.id).where(versions.c.tokenizer_id == tokenizer_id,
                                                     versions.c.number == number)).scalar()
    if found is None:
        return None
    reads = VersionReads.over(conn)
    v = reads.info(found)
    if v.fingerprint is not None:
        return found, v.fingerprint
    return found, "training:" + fingerprint(v.spec, v.corpus_digest, reads.rows_vocabulary(found).merges)


def place_version(conn: Connection, v: VersionRows, tokenizer_id: int, parent_id: int | None,
                  corpus_id: int | None) -> int:
    """Insert ``v`` as version N (its number) of a tokenizer with its tokens, merges and
    snapshot, its counts in corpus ``corpus_id`` (None: not in this store); returns its id."""
    version_id = conn.execute(insert(versions).values(
        tokenizer_id=tokenizer_id, number=v.number, parent_id=parent_id, corpus_id=corpus_id, spec=v.spec,
        target_vocab_size=v.target_vocab_size, target_merges=v.target_merges, min_frequency=v.min_frequency,
        max_token_length=v.max_token_length, status=v.status, source=v.source, corpus_digest=v.corpus_digest,
        corpus_generation=v.corpus_generation, fingerprint=v.fingerprint, created_at=v.created_at,
        updated_at=v.updated_at, corpus_name=v.corpus if corpus_id is None else None,
    )).inserted_primary_key[0]  # type: ignore[index]
    vocab = v.vocab
    repository.add_tokens(conn, version_id, [(i, data, vocab.kinds[i]) for i, data in vocab.tokens.items()])
    repository.add_merges(conn, version_id, vocab.merges)
    if v.status == "complete":
        assert v.fingerprint is not None  # complete
        made = snapshot.make(TokenizerSpec.from_json(v.spec), vocab, v.fingerprint) if v.snapshot is None else \
            snapshot.Snapshot(v.snapshot.format, bytes(v.snapshot.packed), v.snapshot.fast_problem, v.snapshot.digest)
        repository.add_snapshot(conn, version_id, made)
    return version_id


def link_counts(conn: Connection, version_id: int, g: GenerationRows, where: str) -> bool:
    """Give a version that is there without its counts the generation it pins; False
    where it has its counts already."""
    if conn.execute(select(versions.c.corpus_id).where(versions.c.id == version_id)).scalar() is not None:
        return False
    corpus_id, _ = place_generation(conn, g, where)
    conn.execute(update(versions).where(versions.c.id == version_id).values(corpus_id=corpus_id, corpus_name=None))
    return True


def place_aliases(conn: Connection, name: str, version_id: int, names: Iterable[str], where: str) -> list[str]:
    """Point ``name@ALIAS`` at ``version_id`` for each alias not there yet; returns those written.
    An alias there pointing elsewhere is a clash, refused."""
    tokenizer_id = conn.execute(select(versions.c.tokenizer_id).where(versions.c.id == version_id)).scalar_one()
    written = []
    for alias in names:
        target = conn.execute(select(aliases_table.c.version_id).where(
            aliases_table.c.tokenizer_id == tokenizer_id, aliases_table.c.name == alias)).scalar()
        if target == version_id:
            continue
        if target is not None:
            other = VersionReads.over(conn).info(target).ref
            raise ConflictError(f"alias {name}@{alias} in {where} points at {other}; move it there "
                                f"(bpestore alias), or copy without aliases", params=("aliases",))
        conn.execute(insert(aliases_table).values(tokenizer_id=tokenizer_id, name=alias, version_id=version_id))
        written.append(f"{name}@{alias}")
    return written


# -- the two operations ----------------------------------------------------------------
def copy(source: Store, ref: str | None, to: str | Path | Store, *, with_counts: bool = False,
         as_name: str | None = None, aliases: bool = False) -> Copied:
    """``Store.copy``: version ``ref`` (None: the one version ``source`` holds) and its
    parents, read and checked from ``source``, written into the store ``to``."""
    from .store import Store

    if as_name is not None:
        repository.check_name(as_name, "tokenizer", "as_name")
    with source.reading() as conn:
        ref = ref if ref is not None else packed_ref(conn)
        chain = read_chain(conn, ref)
        for v in chain:
            check(v, source.location)
        counts: dict[tuple[str | None, int | None], GenerationRows] = {}
        for v in chain if with_counts else ():
            if v.corpus is not None and (v.corpus, v.corpus_generation) not in counts:
                counts[v.corpus, v.corpus_generation] = read_generation(conn, v, source.location)
    if isinstance(to, Store):
        return _write(to, chain, counts, as_name=as_name, aliases=aliases)
    with Store(to) as target:
        return _write(target, chain, counts, as_name=as_name, aliases=aliases)


def _write(target: Store, chain: list[VersionRows], counts: Mapping[tuple[str | None, int | None], GenerationRows],
           *, as_name: str | None, aliases: bool) -> Copied:
    """Everything read from the source, written into ``target`` in one transaction.
    A version's generation is placed just before it, so that it pins the generation
    before a later one grows the corpus past it."""
    renamed = {chain[-1].name: as_name} if as_name is not None else {}
    where = target.location
    copied, present, corpora_written, written_aliases, missing = [], [], [], [], []
    with target.writing() as conn:
        ids: dict[str, int] = {}
        for v in chain:
            name = renamed.get(v.name, v.name)
            tokenizer_id = lock_tokenizer(conn, name, v.created_at)
            found = find_version(conn, tokenizer_id, v.number)
            g = counts.get((v.corpus, v.corpus_generation))
            if found is not None:
                if found[1] != v.content():
                    raise ConflictError(f"{name}@{v.number} in {where} is another version (fingerprint "
                                        f"{found[1][:12]}, {v.ref}'s is {v.content()[:12]}); copy it under another "
                                        "name with as_name", params=("as_name",))
                ids[v.ref] = found[0]
                present.append(f"{name}@{v.number}")
                if g is not None and link_counts(conn, found[0], g, where):
                    corpora_written.append(g.ref)
                continue
            if g is None:
                corpus_id = readable_corpus(conn, v)
            else:
                corpus_id, wrote = place_generation(conn, g, where)
                corpora_written += [g.ref] if wrote else []
            ids[v.ref] = place_version(conn, v, tokenizer_id, None if v.parent is None else ids[v.parent], corpus_id)
            copied.append(f"{name}@{v.number}")
            if v.corpus is not None and corpus_id is None:
                missing.append(f"{name}@{v.number}")
        for v in chain if aliases else ():
            written_aliases += place_aliases(conn, renamed.get(v.name, v.name), ids[v.ref], v.aliases, where)
    last = chain[-1]
    return Copied(f"{renamed.get(last.name, last.name)}@{last.number}", where, tuple(copied), tuple(present),
                  tuple(written_aliases), tuple(corpora_written), tuple(missing))


def pack(source: Store, ref: str, out: str | os.PathLike, *, with_counts: bool = False,
         force: bool = False) -> Path:
    """Write version ``ref`` and its parents (with ``with_counts`` the corpus
    generations they pin) as a new SQLite store at ``out``, whole or not at all;
    an existing file is replaced only with ``force``."""
    from .store import Store

    path = Path(out)
    if path.is_dir():
        raise InvalidArgumentError(f"{out} is a folder; give the pack's file name, e.g. {path / 'en.bpestore'}",
                                   params=("out",))
    if not path.parent.exists():
        raise NotFoundError(f"folder {path.parent} does not exist", params=("out",))
    if path.exists() and not force:
        raise ConflictError(f"{out} exists; pass force=True to replace it", params=("force",))
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with Store(partial) as packed:
            copy(source, ref, packed, with_counts=with_counts)
        # One self-contained file: no write-ahead log beside it, no free pages.
        conn = sqlite3.connect(partial, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("VACUUM")
        finally:
            conn.close()
        os.replace(partial, path)
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm"), Path(f"{partial}-train.lock")):
            leftover.unlink(missing_ok=True)
    return path
