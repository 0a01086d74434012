"""Reading corpora and stored vocabularies: SQL text with named parameters over
one read transaction of the store's reader (``reader.VersionReads``), so that on a
SQLite file at ``HEAD`` they run through ``sqlite3`` without importing SQLAlchemy,
and elsewhere (PostgreSQL, or a transaction that writes) through its connection.
Same statements, same answers and errors on both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from ..errors import InvalidArgumentError, NotFoundError
from ..queries import diff_counts, diff_versions, pick_tokens, token_matcher
from ..records import CorpusInfo, MergeInfo, Source, TokenInfo
from ..spec import TokenizerSpec
from .reader import NUMBER, VersionReader, VersionReads, moment, unstorable

CORPUS_ID = "SELECT id FROM corpora WHERE name = :name"
CORPUS_SPEC = "SELECT spec FROM corpora WHERE name = :name"
SOURCE_SHAS = ("SELECT ingests.sha256 FROM ingests JOIN corpora ON corpora.id = ingests.corpus_id "
               "WHERE corpora.name = :name")
CORPUS_NAMES = "SELECT name FROM corpora ORDER BY name"
NEWEST_GENERATION = "SELECT COALESCE(MAX(number), 0) FROM generations WHERE corpus_id = :corpus_id"
PINNED_GENERATIONS = ("SELECT DISTINCT corpus_generation FROM versions "
                      "WHERE corpus_id = :corpus_id AND corpus_generation IS NOT NULL")
# A corpus with its newest generation's totals (none before its first source).
CORPORA = ("SELECT corpora.id, corpora.name, corpora.spec, corpora.created_at, generations.number, "
           "generations.n_sources, generations.size_bytes, generations.n_words, generations.n_distinct, "
           "generations.digest, generations.created_at FROM corpora "
           "LEFT OUTER JOIN generations ON generations.corpus_id = corpora.id AND generations.number = "
           "(SELECT max(later.number) FROM generations AS later WHERE later.corpus_id = corpora.id) "
           "{where} ORDER BY corpora.name")
CORPUS_ROW = "SELECT id, name, spec, created_at FROM corpora WHERE id = :corpus_id"
GENERATIONS = ("SELECT number, n_sources, size_bytes, n_words, n_distinct, digest, created_at FROM generations "
               "WHERE corpus_id = :corpus_id ORDER BY number")
PINS = ("SELECT versions.corpus_id, versions.corpus_generation, tokenizers.name, versions.number FROM versions "
        "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id WHERE versions.corpus_generation IS NOT NULL "
        "{also} ORDER BY tokenizers.name, versions.number")
SOURCES_ADDED = "SELECT corpus_id, generation, count(*) FROM ingests {where} GROUP BY corpus_id, generation"
SOURCES = ("SELECT source, sha256, size_bytes, n_words, n_distinct, created_at, generation FROM ingests "
           "WHERE corpus_id = :corpus_id {also} ORDER BY id")
# (word, count) of a generation: the newest's rows, or those unchanged since it and the history valid in it.
NEWEST_COUNTS = 'SELECT word, "count" FROM word_counts WHERE corpus_id = :corpus_id'
COUNTS_AT = (NEWEST_COUNTS + ' AND changed_in <= :generation UNION ALL SELECT word, "count" FROM word_count_history '
             "WHERE corpus_id = :corpus_id AND valid_from <= :generation AND valid_to > :generation")
TOP_WORDS = 'SELECT word, "count" FROM ({counts}) AS counted ORDER BY "count" DESC, word LIMIT :n'
TOKENS = "SELECT id, bytes, kind FROM tokens WHERE version_id = :version_id {also} ORDER BY id"
FIRST_MERGES = 'SELECT token_id, "rank", "count" FROM merges WHERE version_id = :version_id {also} ORDER BY "rank"'
MERGE_INFOS = ('SELECT merges."rank", merges.left_id, merges.right_id, merges.token_id, merges."count", '
               "left_token.bytes, right_token.bytes FROM merges "
               "JOIN tokens AS left_token ON left_token.version_id = merges.version_id "
               "AND left_token.id = merges.left_id "
               "JOIN tokens AS right_token ON right_token.version_id = merges.version_id "
               "AND right_token.id = merges.right_id "
               'WHERE merges.version_id = :version_id AND merges."rank" >= :start ORDER BY merges."rank" {limit}')
IN_LIST = 500  # ids per IN (...) list
MAX_RANK = 2**31 - 1  # the largest rank (an INTEGER column)


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


def in_list(name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``IN (:name0, :name1, ...)`` and its parameters (never empty: ``IN (NULL)``)."""
    params = {f"{name}{i}": value for i, value in enumerate(values)}
    return f"IN ({', '.join(':' + key for key in params) or 'NULL'})", params


class CorpusReads:
    """The reads of corpora, their generations and word counts, over one transaction."""

    def __init__(self, reads: VersionReads) -> None:
        self.run = reads.run

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

    def pinned_generations(self, corpus_id: int) -> list[int]:
        """The generations of a corpus that versions were trained on, ascending."""
        return sorted(row[0] for row in self.run(PINNED_GENERATIONS, {"corpus_id": corpus_id}))

    def kept_generations(self, corpus_id: int) -> list[int]:
        """The generations whose counts are readable: the pinned ones and the newest."""
        newest = self.newest_generation(corpus_id)
        return sorted(set(self.pinned_generations(corpus_id)) | ({newest} if newest else set()))

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

    def read_generation(self, ref: str, read: Callable[[int, int | None], Any]) -> Any:
        """``read(corpus_id, generation)`` for the corpus generation ``ref`` (``C``:
        the newest, read as None); the generation must be kept. An unpinned newest
        generation that another ingest replaced during the read raises NotFoundError."""
        found, generation = self.readable_generation(ref)
        if "@" not in ref:
            return read(found, None)
        result = read(found, generation)
        if generation != self.newest_generation(found) and generation not in self.pinned_generations(found):
            raise NotFoundError(f"{ref} stopped being the newest generation while it was read, and no version "
                                "keeps it; read it again by name, or train on it to keep it")
        return result

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
        pins, added = self.pins(corpus_id), self.sources_added(corpus_id)
        return [corpus_info(CorpusRow(*r[:4]), r[4] or 0, pins, added, kept=True,
                            totals=None if r[4] is None else Totals(*r[4:])) for r in rows]

    def log(self, corpus_id: int) -> list[CorpusInfo]:
        """Every generation of a corpus, oldest first."""
        corpus = CorpusRow(*self.run(CORPUS_ROW, {"corpus_id": corpus_id})[0])
        rows = [Totals(*r) for r in self.run(GENERATIONS, {"corpus_id": corpus_id})]
        pins, added = self.pins(corpus_id), self.sources_added(corpus_id)
        newest = rows[-1].number if rows else 0
        return [corpus_info(corpus, r.number, pins, added, kept=r.number == newest or (corpus_id, r.number) in pins,
                            totals=r) for r in rows]

    def info(self, ref: str) -> CorpusInfo:
        """A corpus as of generation ``C@N``, or ``C``: its newest."""
        corpus_id, generation = self.ref(ref)
        if generation is None:
            return self.infos(ref)[0]
        return self.log(corpus_id)[generation - 1]

    def pins(self, corpus_id: int | None) -> dict[tuple[int, int], list[str]]:
        """The refs of the versions trained on each (corpus id, generation)."""
        also, params = ("AND versions.corpus_id = :corpus_id", {"corpus_id": corpus_id}) \
            if corpus_id is not None else ("", {})
        pins: dict[tuple[int, int], list[str]] = {}
        for cid, generation, name, number in self.run(PINS.format(also=also), params):
            pins.setdefault((cid, generation), []).append(f"{name}@{number}")
        return pins

    def sources_added(self, corpus_id: int | None) -> dict[tuple[int, int], int]:
        where, params = ("WHERE corpus_id = :corpus_id", {"corpus_id": corpus_id}) \
            if corpus_id is not None else ("", {})
        return {(cid, generation): n for cid, generation, n in self.run(SOURCES_ADDED.format(where=where), params)}

    def sources(self, corpus_id: int, generation: int | None = None) -> list[Source]:
        """The sources counted into a corpus (up to a generation), oldest first."""
        also, params = "", dict[str, Any](corpus_id=corpus_id)
        if generation is not None:
            also, params["generation"] = "AND generation <= :generation", generation
        return [Source(r[0], r[1], r[2], r[3], r[4], created_at=moment(r[5]), generation=r[6])
                for r in self.run(SOURCES.format(also=also), params)]

    def counts(self, corpus_id: int, generation: int | None = None) -> dict[bytes, int]:
        """Every word of a corpus' generation (None: the newest) with its count."""
        sql, params = counts_of(corpus_id, generation)
        return {bytes(word): count for word, count in self.run(sql, params)}

    def top_words(self, corpus_id: int, n: int, generation: int | None = None) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent words of a corpus' generation with their counts (ties by bytes)."""
        sql, params = counts_of(corpus_id, generation)
        return [(bytes(word), count) for word, count in self.run(TOP_WORDS.format(counts=sql), {**params, "n": n})]


def counts_of(corpus_id: int, generation: int | None) -> tuple[str, dict[str, Any]]:
    """(word, count) of a corpus' generation (None: the newest) as one statement, so
    it reads one snapshot. The generation must be kept (``readable_generation``)."""
    if generation is None:
        return NEWEST_COUNTS, {"corpus_id": corpus_id}
    return COUNTS_AT, {"corpus_id": corpus_id, "generation": generation}


def sources_digest(spec_json: str, shas: Iterable[str]) -> str:
    """What a corpus' counts were made from: its spec and every source's sha256."""
    h = hashlib.sha256(spec_json.encode())
    for sha in sorted(shas):
        h.update(sha.encode())
    return h.hexdigest()


def corpus_info(corpus: CorpusRow, generation: int, pins: Mapping[tuple[int, int], list[str]],
                added: Mapping[tuple[int, int], int], *, kept: bool, totals: Totals | None) -> CorpusInfo:
    spec = TokenizerSpec.from_json(corpus.spec)
    if not generation or totals is None:  # no source yet
        return CorpusInfo(name=corpus.name, spec=spec, n_sources=0, size_bytes=0, n_words=0, n_distinct=0,
                          created_at=moment(corpus.created_at), digest=sources_digest(corpus.spec, []))
    return CorpusInfo(
        name=corpus.name, spec=spec, n_sources=totals.n_sources, size_bytes=int(totals.size_bytes),
        n_words=int(totals.n_words), n_distinct=int(totals.n_distinct), created_at=moment(corpus.created_at),
        digest=totals.digest, generation=generation, sources_added=added.get((corpus.id, generation), 0),
        kept=kept, pinned_by=tuple(pins.get((corpus.id, generation), ())), generated_at=moment(totals.created_at))


class VocabularyReads:
    """The reads of a stored version's tokens and merges, over one transaction."""

    def __init__(self, reads: VersionReads) -> None:
        self.run = reads.run
        self.sqlite = reads.sqlite

    def token_rows(self, version_id: int, *, prefix: bytes = b"",
                   match: Callable[[bytes], bool] | None = None) -> list[tuple[int, bytes, str]]:
        """The tokens of a version as (id, bytes, kind), by id: those starting with
        ``prefix`` and (if given) for whose bytes ``match`` is true. On SQLite
        ``match`` runs inside the query, so rows that fail it are never fetched."""
        also, params = "", dict[str, Any](version_id=version_id)
        if prefix:
            also = "AND substr(bytes, 1, :prefix_length) = :prefix"
            params = {**params, "prefix": prefix, "prefix_length": len(prefix)}
        in_query = match is not None and self.sqlite is not None
        if in_query:
            self.sqlite.create_function("bpestore_match", 1, match, deterministic=True)  # type: ignore[union-attr]
            also += " AND bpestore_match(bytes) = 1"
        rows = [(token_id, bytes(data), kind) for token_id, data, kind in self.run(TOKENS.format(also=also), params)]
        return rows if match is None or in_query else [r for r in rows if match(r[1])]

    def first_merges(self, version_id: int, token_ids: Collection[int] | None = None) -> dict[int, tuple[int, int]]:
        """The (rank, count) of the merge that first made each token (of ``token_ids``,
        or all). A few ids are looked up; many read every merge once."""
        also, params = "", dict[str, Any](version_id=version_id)
        if token_ids is not None and len(token_ids) <= IN_LIST:
            listed, ids = in_list("token", list(token_ids))
            also, params = f"AND token_id {listed}", {**params, **ids}
        made: dict[int, tuple[int, int]] = {}
        for token_id, rank, count in self.run(FIRST_MERGES.format(also=also), params):
            made.setdefault(token_id, (rank, count))
        return made

    def merge_infos(self, version_id: int, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
        """A version's merges from rank ``start`` on (``limit`` of them), with the bytes of each pair."""
        params: dict[str, Any] = {"version_id": version_id, "start": start}
        if limit is not None:
            params["limit"] = limit
        rows = self.run(MERGE_INFOS.format(limit="" if limit is None else "LIMIT :limit"), params)
        return [MergeInfo(rank, a, b, token, count, bytes(data_a), bytes(data_b))
                for rank, a, b, token, count, data_a, data_b in rows]


class Readable(Protocol):
    reader: VersionReader  # the store's reader (chosen when it opens)


class Questions:
    """What a store answers by reading alone: its corpora, their word counts, its stored
    vocabularies; each in one read transaction of the store's reader (``sqlite3`` or SQLAlchemy)."""

    def __init__(self, store: Readable) -> None:
        self.store = store

    def corpora(self) -> list[CorpusInfo]:
        with self.store.reader.reading() as reads:
            return CorpusReads(reads).infos()

    def corpus(self, ref: str) -> CorpusInfo:
        with self.store.reader.reading() as reads:
            return CorpusReads(reads).info(ref)

    def corpus_log(self, corpus: str) -> list[CorpusInfo]:
        with self.store.reader.reading() as reads:
            corpora = CorpusReads(reads)
            return corpora.log(corpora.corpus_id(corpus))

    def corpus_sources(self, corpus: str) -> list[Source]:
        with self.store.reader.reading() as reads:
            corpora = CorpusReads(reads)
            return corpora.sources(*corpora.ref(corpus))

    def top_words(self, corpus: str, n: int) -> list[tuple[bytes, int]]:
        n = min(max(n, 0), 2**62)  # any n is "all of them" beyond the number of words
        with self.store.reader.reading() as reads:
            corpora = CorpusReads(reads)
            return corpora.read_generation(corpus, lambda c, g: corpora.top_words(c, n, g))

    def word_counts(self, corpus: str) -> dict[bytes, int]:
        with self.store.reader.reading() as reads:
            corpora = CorpusReads(reads)
            return corpora.read_generation(corpus, corpora.counts)

    def corpus_diff(self, ref_a: str, ref_b: str, limit: int) -> dict[str, Any]:
        with self.store.reader.reading() as reads:
            corpora = CorpusReads(reads)
            a, b = (corpora.read_generation(ref, corpora.counts) for ref in (ref_a, ref_b))
        result = diff_counts(a, b, limit=limit)
        return {"from": self.corpus(ref_a).to_dict(), "to": self.corpus(ref_b).to_dict(), **result}

    def vocab(self, ref: str, *, grep: str | None, prefix: str | None, longest: int | None, limit: int | None,
              timeout: float | None) -> list[TokenInfo]:
        match = token_matcher(grep, timeout)
        with self.store.reader.reading() as reads:
            version_id = reads.resolve(ref)
            vocabulary = VocabularyReads(reads)
            rows = vocabulary.token_rows(version_id, prefix=(prefix or "").encode("utf-8", "surrogatepass"),
                                         match=match)
            if getattr(match, "timed_out", False):
                raise InvalidArgumentError(f"grep {grep!r} took longer than {timeout:g}s; give a simpler "
                                           "pattern", params=("grep",))
            rows = pick_tokens(rows, longest=longest, limit=limit)
            made = vocabulary.first_merges(version_id, [r[0] for r in rows])
        return [TokenInfo(token_id, data, kind, *made.get(token_id, (None, None))) for token_id, data, kind in rows]

    def merges(self, ref: str, start: int, limit: int | None) -> list[MergeInfo]:
        for name, value in (("start", start), ("limit", limit)):
            if value is not None and value < 0:
                raise InvalidArgumentError(f"{name} cannot be negative, not {value}", params=(name,))
        if start > MAX_RANK:
            return []  # past every rank (and past what the rank column holds)
        limit = None if limit is not None and limit > MAX_RANK else limit
        with self.store.reader.reading() as reads:
            return VocabularyReads(reads).merge_infos(reads.resolve(ref), start, limit)

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        with self.store.reader.reading() as reads:
            a, b = (reads.info(reads.resolve(ref)) for ref in (ref_a, ref_b))
            vocab_a, vocab_b = reads.vocabulary(a.id), reads.vocabulary(b.id)
        result = diff_versions(vocab_a.tokens, vocab_a.merges, vocab_b.tokens, vocab_b.merges)
        spec_a, spec_b = a.spec.to_dict(), b.spec.to_dict()
        result["spec_changes"] = {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)}
        return result
