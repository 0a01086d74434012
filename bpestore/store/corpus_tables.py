"""The SQL of corpora, ingests and generations: corpora and their generations read
(``CorpusReads``), a corpus made and locked, its next generation written (sources,
counts, totals), a generation's rows copied in, over one ``drivers.Transaction``.
The counts themselves: ``count_tables``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..errors import InvalidArgumentError, NotFoundError
from ..spec import TokenizerSpec
from . import count_tables
from .drivers import Transaction, by_column, in_list
from .version_tables import NUMBER, VersionReads, moment, unstorable

if TYPE_CHECKING:  # opening a store and loading a tokenizer do without the records (~8 ms of dataclasses)
    from ..records import CorpusInfo, Source

MAX_INTEGER: Final = 2**63 - 1  # the largest integer SQLite and PostgreSQL's bigint hold

CORPUS_ID = "SELECT id FROM corpora WHERE name = :name"
CORPUS_SPEC = "SELECT spec FROM corpora WHERE name = :name"
CORPUS_NAMES = "SELECT name FROM corpora ORDER BY name"
NEW_CORPUS = ("INSERT INTO corpora (name, spec, created_at) VALUES (:name, :spec, :now) "
              "ON CONFLICT (name) DO NOTHING")
CORPUS = "SELECT id, spec FROM corpora WHERE name = :name"
CORPUS_ROW = "SELECT id, name, spec, created_at FROM corpora WHERE id = :corpus_id"
# A corpus with its newest generation's totals (none before its first source).
CORPORA = ("SELECT corpora.id, corpora.name, corpora.spec, corpora.created_at, generations.number, "
           "generations.n_sources, generations.size_bytes, generations.n_words, generations.n_distinct, "
           "generations.digest, generations.created_at FROM corpora "
           "LEFT OUTER JOIN generations ON generations.corpus_id = corpora.id AND generations.number = "
           "(SELECT max(later.number) FROM generations AS later WHERE later.corpus_id = corpora.id) "
           "{where} ORDER BY corpora.name")
NEWEST_GENERATION = "SELECT COALESCE(MAX(number), 0) FROM generations WHERE corpus_id = :corpus_id"
GENERATION_TOTALS = ("SELECT number, n_sources, size_bytes, n_words, n_distinct, digest, created_at FROM generations "
                     "WHERE corpus_id = :corpus_id {also} ORDER BY number")
GENERATION_COLUMNS = ("corpus_id", "number", "n_sources", "size_bytes", "n_words", "n_distinct", "digest",
                      "created_at")
SOURCE_SHAS = ("SELECT ingests.sha256 FROM ingests JOIN corpora ON corpora.id = ingests.corpus_id "
               "WHERE corpora.name = :name")
PRESENT = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id AND sha256 {listed}"
ANY_SOURCE = "SELECT 1 FROM ingests WHERE corpus_id = :corpus_id LIMIT 1"
SOURCES_ADDED = "SELECT corpus_id, generation, count(*) FROM ingests {where} GROUP BY corpus_id, generation"
SOURCES = ("SELECT source, sha256, size_bytes, n_words, n_distinct, created_at, generation FROM ingests "
           "WHERE corpus_id = :corpus_id {also} ORDER BY id")
SOURCE_COLUMNS = ("corpus_id", "source", "sha256", "size_bytes", "n_words", "n_distinct", "created_at", "generation")
SHAS = "SELECT sha256 FROM ingests WHERE corpus_id = :corpus_id"
ORDINAL_END = "SELECT ordinal_end FROM generations WHERE corpus_id = :corpus_id AND number = :number"
SET_ORDINAL_END = "UPDATE generations SET ordinal_end = :end WHERE corpus_id = :corpus_id AND number = :number"


class Totals(NamedTuple):
    """A generation's row: its number and totals."""

    number: int
    n_sources: int
    size_bytes: int
    n_words: int
    n_distinct: int
    digest: str
    created_at: Any


class CorpusRow(NamedTuple):
    id: int
    name: str
    spec: str  # TokenizerSpec JSON
    created_at: Any


class CorpusReads:
    """The reads of corpora, their generations and word counts, over one transaction."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.run = tx.run
        self.versions = VersionReads(tx)

    def corpus_id(self, name: str) -> int:
        unstorable(name, "corpus")
        found = self.run(CORPUS_ID, {"name": name})
        if not found:
            raise self.no_corpus(name)
        return found[0][0]

    def spec(self, name: str) -> TokenizerSpec | None:
        """The spec a corpus' words were made with, or None for a new corpus."""
        unstorable(name, "corpus")
        found = self.run(CORPUS_SPEC, {"name": name})
        return TokenizerSpec.from_json(found[0][0]) if found else None

    def row(self, corpus_id: int) -> CorpusRow:
        return CorpusRow(*self.run(CORPUS_ROW, {"corpus_id": corpus_id})[0])

    def source_shas(self, name: str) -> set[str]:
        """The sha256 of every source already counted into a corpus (none if it is new)."""
        return {row[0] for row in self.run(SOURCE_SHAS, {"name": name})}

    def no_corpus(self, name: str) -> NotFoundError:
        known = [row[0] for row in self.run(CORPUS_NAMES, {})]
        return NotFoundError(f"no corpus named {name!r} "
                             f"({'corpora: ' + ', '.join(known) if known else 'no corpus yet: ingest text first'})")

    def ref(self, ref: str) -> tuple[int, int | None]:
        """The corpus id and generation of ``C@N``; ``C`` alone: the newest (None)."""
        name, at, tag = ref.partition("@")
        found = self.corpus_id(name)
        if not at:
            return found, None
        newest = self.newest_generation(found)
        if not NUMBER.fullmatch(tag):
            raise InvalidArgumentError(f"{ref!r}: after '@' comes a generation number "
                                       f"(e.g. {name}@{max(newest, 1)})")
        if not 1 <= int(tag) <= newest:
            known = f"generations: {name}@1 to {name}@{newest}" if newest else "no generation yet: ingest text first"
            raise NotFoundError(f"corpus {name!r} has no generation {int(tag)} ({known})")
        return found, int(tag)

    def newest_generation(self, corpus_id: int) -> int:
        """The number of a corpus' newest generation; 0 before its first source."""
        return self.run(NEWEST_GENERATION, {"corpus_id": corpus_id})[0][0]

    def kept_generations(self, corpus_id: int) -> list[int]:
        """The generations whose counts are readable: the pinned ones and the newest."""
        newest = self.newest_generation(corpus_id)
        return sorted(set(self.versions.pinned_generations(corpus_id)) | ({newest} if newest else set()))

    def readable_generation(self, ref: str) -> tuple[int, int]:
        """Like ``ref``, for reading counts: the generation (the newest when not named)
        must be kept; one that is not raises NotFoundError naming those that are."""
        found, generation = self.ref(ref)
        newest = self.newest_generation(found)
        if generation is None or generation == newest:
            return found, newest
        kept = self.kept_generations(found)
        if generation not in kept:
            name = ref.partition("@")[0]
            raise NotFoundError(f"the word counts of {name}@{generation} are not kept (kept: "
                                f"{', '.join(f'{name}@{g}' for g in kept)}): only the newest generation and "
                                "those a version was trained on are")
        return found, generation

    def read_generation(self, ref: str, read: Callable[[Transaction, int, int | None], Any]) -> Any:
        """``read(tx, corpus_id, generation)`` for the corpus generation ``ref`` (``C``:
        the newest, read as None); the generation must be kept. An unpinned newest
        generation that another ingest replaced during the read raises NotFoundError."""
        found, generation = self.readable_generation(ref)
        if "@" not in ref:
            return read(self.tx, found, None)
        result = read(self.tx, found, generation)
        if generation != self.newest_generation(found) and generation not in self.versions.pinned_generations(found):
            raise NotFoundError(f"{ref} stopped being the newest generation while it was read, and no version "
                                "keeps it; read it again by name, or train on it to keep it")
        return result

    def generation_digest(self, corpus_id: int, generation: int | None) -> str:
        """The digest of a generation (None: the newest)."""
        if generation is None:
            generation = self.newest_generation(corpus_id)
        totals = self.totals(corpus_id, generation)
        if not totals:  # no source yet
            return sources_digest(self.row(corpus_id).spec, [])
        return totals[0].digest

    def ordinal_end(self, corpus_id: int, generation: int) -> int | None:
        """Where the ordinals of a generation's words end; None: some word of it has none
        (ingested before bpestore kept them), or it has no row."""
        found = self.run(ORDINAL_END, {"corpus_id": corpus_id, "number": generation})
        return found[0][0] if found else None

    def totals(self, corpus_id: int, generation: int | None = None, *, newest: bool = False) -> list[Totals]:
        """The totals of every generation of a corpus (or of one, or of its newest), oldest first."""
        also, params = ("AND number = :number", {"number": generation}) if generation is not None else ("", {})
        if newest:
            also = "AND number = (SELECT MAX(number) FROM generations WHERE corpus_id = :corpus_id)"
        return [Totals(*r) for r in self.run(GENERATION_TOTALS.format(also=also), {**params, "corpus_id": corpus_id})]

    def infos(self, name: str | None = None) -> list[CorpusInfo]:
        """Every corpus (or the one named) as of its newest generation, in three queries."""
        where, params = "", {}
        if name is not None:
            unstorable(name, "corpus")
            where, params = "WHERE corpora.name = :name", {"name": name}
        rows = self.run(CORPORA.format(where=where), params)
        if name is not None and not rows:
            raise self.no_corpus(name)
        corpus_id = None if name is None else rows[0][0]
        pins, added = self.versions.pins(corpus_id), self.sources_added(corpus_id)
        return [corpus_info(CorpusRow(*r[:4]), r[4] or 0, pins, added, kept=True,
                            totals=None if r[4] is None else Totals(*r[4:])) for r in rows]

    def log(self, corpus_id: int) -> list[CorpusInfo]:
        """Every generation of a corpus, oldest first."""
        corpus = self.row(corpus_id)
        rows = self.totals(corpus_id)
        pins, added = self.versions.pins(corpus_id), self.sources_added(corpus_id)
        newest = rows[-1].number if rows else 0
        return [corpus_info(corpus, r.number, pins, added, kept=r.number == newest or (corpus_id, r.number) in pins,
                            totals=r) for r in rows]

    def info(self, ref: str) -> CorpusInfo:
        """A corpus as of generation ``C@N``, or ``C``: its newest."""
        corpus_id, generation = self.ref(ref)
        if generation is None:
            return self.infos(ref)[0]
        return self.log(corpus_id)[generation - 1]

    def sources_added(self, corpus_id: int | None) -> dict[tuple[int, int], int]:
        where, params = ("WHERE corpus_id = :corpus_id", {"corpus_id": corpus_id}) \
            if corpus_id is not None else ("", {})
        return {(cid, generation): n for cid, generation, n in self.run(SOURCES_ADDED.format(where=where), params)}

    def sources(self, corpus_id: int, generation: int | None = None) -> list[Source]:
        """The sources counted into a corpus (up to a generation), oldest first."""
        from ..records import Source

        also, params = "", dict[str, Any](corpus_id=corpus_id)
        if generation is not None:
            also, params["generation"] = "AND generation <= :generation", generation
        return [Source(r[0], r[1], r[2], r[3], r[4], created_at=moment(r[5]), generation=r[6])
                for r in self.run(SOURCES.format(also=also), params)]


def sources_digest(spec_json: str, shas: Iterable[str]) -> str:
    """What a corpus' counts were made from: its spec and every source's sha256."""
    return hashlib.sha256((spec_json + "".join(sorted(shas))).encode()).hexdigest()


def corpus_info(corpus: CorpusRow, generation: int, pins: Mapping[tuple[int, int], list[str]],
                added: Mapping[tuple[int, int], int], *, kept: bool, totals: Totals | None) -> CorpusInfo:
    from ..records import CorpusInfo

    spec = TokenizerSpec.from_json(corpus.spec)
    if not generation or totals is None:  # no source yet
        return CorpusInfo(name=corpus.name, spec=spec, n_sources=0, size_bytes=0, n_words=0, n_distinct=0,
                          created_at=moment(corpus.created_at), digest=sources_digest(corpus.spec, []))
    return CorpusInfo(
        name=corpus.name, spec=spec, n_sources=totals.n_sources, size_bytes=int(totals.size_bytes),
        n_words=int(totals.n_words), n_distinct=int(totals.n_distinct), created_at=moment(corpus.created_at),
        digest=totals.digest, generation=generation, sources_added=added.get((corpus.id, generation), 0),
        kept=kept, pinned_by=tuple(pins.get((corpus.id, generation), ())), generated_at=moment(totals.created_at))


# -- writes ------------------------------------------------------------------------------
def lock_corpus(tx: Transaction, name: str, spec: str, created_at: Any = None) -> tuple[int, TokenizerSpec]:
    """Create the corpus with ``spec`` (JSON) if it is new (race-free), lock its row until
    the transaction ends (on SQLite the write lock does); returns its id and stored spec."""
    tx.run(NEW_CORPUS, {"name": name, "spec": spec,
                        "now": tx.now if created_at is None else tx.stamp(created_at)})
    found, stored = tx.run(CORPUS + (" FOR UPDATE" if tx.postgresql else ""), {"name": name})[0]
    return found, TokenizerSpec.from_json(stored)


def lock_corpus_row(tx: Transaction, corpus_id: int) -> None:
    """Lock a corpus' row until the transaction ends: ingests into it wait (PostgreSQL;
    on SQLite every writer holds the database's write lock)."""
    if tx.postgresql:
        tx.run("SELECT id FROM corpora WHERE id = :corpus_id FOR UPDATE", {"corpus_id": corpus_id})


def present_shas(tx: Transaction, corpus_id: int, shas: Sequence[str]) -> set[str]:
    """Which of these contents are already sources of the corpus."""
    present: set[str] = set()
    if not shas or not tx.run(ANY_SOURCE, {"corpus_id": corpus_id}):  # a new corpus: none (no list of them)
        return present
    for start in range(0, len(shas), 500):
        listed, params = in_list("sha", shas[start:start + 500])
        present.update(row[0] for row in tx.run(PRESENT.format(listed=listed), {**params, "corpus_id": corpus_id}))
    return present


def add_sources(tx: Transaction, corpus_id: int, sources: Sequence[Source], generation: int | None = None) -> None:
    """Insert sources' rows, each in ``generation`` (None: its own, with its own time)."""
    if generation is not None:  # the time and generation written into the statement: a row binds 5 values
        tx.insert("ingests", by_column(SOURCE_COLUMNS[1:6], [
            (s.source, s.sha256, s.size_bytes, s.n_words, s.n_distinct) for s in sources]),
            {"corpus_id": corpus_id, "created_at": tx.now, "generation": generation})
        return
    tx.insert("ingests", by_column(SOURCE_COLUMNS[1:], [
        (s.source, s.sha256, s.size_bytes, s.n_words, s.n_distinct, tx.stamp(s.created_at), s.generation)
        for s in sources]), {"corpus_id": corpus_id})


def add_generations(tx: Transaction, corpus_id: int, infos: Sequence[CorpusInfo]) -> None:
    """Insert generations' rows as another store holds them."""
    tx.insert("generations", by_column(GENERATION_COLUMNS[1:], [
        (i.generation, i.n_sources, i.size_bytes, i.n_words, i.n_distinct, i.digest,
         tx.stamp(i.generated_at)) for i in infos]), {"corpus_id": corpus_id})


def add_generation(tx: Transaction, corpus_id: int, sources: Sequence[Source], counts: Mapping[bytes, int],
                   firsts: Mapping[bytes, int] | None = None) -> int:
    """The corpus' next generation: its sources, counts and totals; returns its number.

    ``firsts``: each word's ordinal, where it first occurred in the sources' text in
    order (any numbers in that order): its new words are given ordinals after every
    word the corpus holds. Without, or after a generation without, the generation
    has none (no first-seen training on it).

    Call with the corpus row locked (``lock_corpus``). Before a count changes, its
    row is copied to word_count_history if a version pins a generation the row is
    valid in; with nothing pinned, this is one upsert."""
    reads = CorpusReads(tx)
    previous = reads.totals(corpus_id, newest=True)
    last = previous[0] if previous else Totals(0, 0, 0, 0, 0, "", None)
    number, n_words = last.number + 1, last.n_words + sum(s.n_words for s in sources)
    if n_words > MAX_INTEGER:  # then no word's count can pass it either (SQLite would make it a float)
        raise InvalidArgumentError(f"the corpus would hold {n_words:,} words, more than the database's "
                                   f"integers hold ({MAX_INTEGER:,}); nothing was added", params=("files",))
    pinned = reads.versions.pinned_generations(corpus_id)
    if pinned:
        count_tables.keep_history(tx, corpus_id, counts, pinned[-1], number, corpus_words=last.n_distinct)
    # Its sources' rows the corpus' first (no row before them): their sha256 are those in hand.
    first = not previous and not tx.run(ANY_SOURCE, {"corpus_id": corpus_id})
    base = reads.ordinal_end(corpus_id, last.number) if previous else 0
    shift, end = 0, None
    if base is not None and not counts:
        end = base
    elif base is not None and firsts:
        low = min(firsts.values())
        shift, end = base - low, base + max(firsts.values()) - low + 1
    count_tables.upsert_counts(tx, corpus_id, counts, number, firsts if end is not None else None, shift)
    # The sources' rows after the counts: on SQLite, the statements adding rows to the sha256
    # index (in no order) journal pages past 64 kB, into a temporary file every later statement
    # of the transaction then writes to (2,000 sources: the count rows' ~2,600 page writes).
    add_sources(tx, corpus_id, sources, number)
    # A corpus' rows come with its generations: before its first, it has none, and then
    # holds the batch's words (counting its rows cost a scan of them all).
    n_distinct = len(counts) if not previous else count_tables.n_distinct(tx, corpus_id)
    shas = [s.sha256 for s in sources] if first else [row[0] for row in tx.run(SHAS, {"corpus_id": corpus_id})]
    tx.insert("generations", by_column(GENERATION_COLUMNS[1:], [(
        number, last.n_sources + len(sources), last.size_bytes + sum(s.size_bytes for s in sources),
        n_words, n_distinct, sources_digest(reads.row(corpus_id).spec, shas), tx.now)]), {"corpus_id": corpus_id})
    if end is not None:
        set_ordinal_end(tx, corpus_id, number, end)
    return number


def set_ordinal_end(tx: Transaction, corpus_id: int, generation: int, end: int) -> None:
    """Mark a generation's words as having ordinals, all below ``end``."""
    tx.run(SET_ORDINAL_END, {"corpus_id": corpus_id, "number": generation, "end": end})
