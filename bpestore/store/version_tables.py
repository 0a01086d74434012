"""The SQL of tokenizers, versions, aliases and version_facts: versions resolved,
listed and read (``VersionReads``), made, completed, aliased and deleted, over one
``drivers.Transaction``. Lookups that find nothing raise ``NotFoundError`` saying
what exists. The tokens and merges of a version: ``vocab_tables``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import InvalidArgumentError, NotFoundError
from ..spec import EncoderFacts, TokenizerSpec
from . import vocab_tables
from .drivers import Transaction, in_list
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from ..records import Merge, VersionInfo
    from .snapshot import Snapshot

NUMBER = re.compile(r"[0-9]+")  # a version number (ASCII digits only)
MAX_NAME = 200  # characters of a corpus, tokenizer or alias name

TOKENIZER_ID = "SELECT id FROM tokenizers WHERE name = :name"
TOKENIZER_NAMES = "SELECT name FROM tokenizers ORDER BY name"
VERSIONS_OF = "SELECT id, number, status FROM versions WHERE tokenizer_id = :tokenizer_id ORDER BY number"
NEWEST_VERSION = ("SELECT versions.id FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
                  "WHERE tokenizers.name = :name ORDER BY versions.number DESC LIMIT 1")
ALIAS_TARGET = "SELECT version_id FROM aliases WHERE tokenizer_id = :tokenizer_id AND name = :name"
VERSION_ROW = ("SELECT tokenizers.name, versions.number, versions.spec, versions.status, versions.fingerprint "
               "FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
               "WHERE versions.id = :version_id")
SNAPSHOT_ROW = ("SELECT version_facts.format, version_facts.packed, version_facts.fast_problem, "
                "version_facts.digest, versions.fingerprint "
                "FROM version_facts JOIN versions ON versions.id = version_facts.version_id "
                "WHERE version_facts.version_id = :version_id")
VERSION_INFOS = (
    "SELECT versions.id, tokenizers.name, versions.number, versions.status, versions.source, "
    "(SELECT count(*) FROM tokens WHERE tokens.version_id = versions.id), "
    "(SELECT count(*) FROM merges WHERE merges.version_id = versions.id), "
    "versions.target_vocab_size, versions.target_merges, COALESCE(corpora.name, versions.corpus_name), "
    "versions.parent_id, "
    "parent_tokenizer.name, parent.number, versions.spec, versions.min_frequency, versions.max_token_length, "
    "versions.corpus_digest, versions.fingerprint, versions.created_at, versions.updated_at, "
    "versions.corpus_generation, versions.corpus_name "
    "FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
    "LEFT JOIN corpora ON corpora.id = versions.corpus_id "
    "LEFT JOIN versions AS parent ON parent.id = versions.parent_id "
    "LEFT JOIN tokenizers AS parent_tokenizer ON parent_tokenizer.id = parent.tokenizer_id "
    "{where} ORDER BY tokenizers.name, versions.number")
ALIASES_OF = ("SELECT aliases.version_id, aliases.name FROM aliases "
              "JOIN versions ON versions.id = aliases.version_id "
              "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id {where} ORDER BY aliases.name")
# The other root version trained on the same counts with the same spec and limits, with the most merges.
EQUAL_RUN = (
    "SELECT versions.id FROM versions JOIN versions AS new ON new.id = :version_id "
    "WHERE versions.id <> :version_id AND versions.source = 'trained' AND versions.parent_id IS NULL "
    "AND versions.corpus_id = new.corpus_id AND versions.corpus_digest = new.corpus_digest "
    "AND versions.spec = new.spec AND versions.min_frequency = new.min_frequency "
    "AND (versions.max_token_length = new.max_token_length "
    "OR versions.max_token_length IS NULL AND new.max_token_length IS NULL) "
    "AND EXISTS (SELECT 1 FROM merges WHERE merges.version_id = versions.id) "
    "ORDER BY (SELECT count(*) FROM merges WHERE merges.version_id = versions.id) DESC, versions.id LIMIT 1")
# A complete version's merges, where its snapshot says all of them pass tiktoken's check; none otherwise.
PASSING_MERGES = ("SELECT (SELECT count(*) FROM merges WHERE version_id = :version_id) FROM version_facts "
                  "WHERE version_id = :version_id AND fast_problem IS NULL")
# The corpus generations versions pin.
PINNED_GENERATIONS = ("SELECT corpus_generation FROM versions "
                      "WHERE corpus_id = :corpus_id AND corpus_generation IS NOT NULL UNION "
                      "SELECT corpus_generation FROM version_inputs WHERE corpus_id = :corpus_id")
# (the parts of mixtures after their first, which is the version's own corpus generation)
PINS = ("SELECT versions.corpus_id, versions.corpus_generation, tokenizers.name, versions.number FROM versions "
        "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id WHERE versions.corpus_generation IS NOT NULL "
        "{also} UNION ALL SELECT version_inputs.corpus_id, version_inputs.corpus_generation, tokenizers.name, "
        "versions.number FROM version_inputs JOIN versions ON versions.id = version_inputs.version_id "
        "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id WHERE version_inputs.position > 0 {also_part} "
        "ORDER BY 3, 4")
MIXTURES = ("SELECT version_inputs.version_id, corpora.name, version_inputs.corpus_id, "
            "version_inputs.corpus_generation, version_inputs.weight FROM version_inputs "
            "JOIN corpora ON corpora.id = version_inputs.corpus_id "
            "JOIN versions ON versions.id = version_inputs.version_id "
            "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id {where} "
            "ORDER BY version_inputs.version_id, version_inputs.position")
NEW_INPUT = ("INSERT INTO version_inputs (version_id, position, corpus_id, corpus_generation, weight) "
             "VALUES (:version_id, :position, :corpus_id, :corpus_generation, :weight)")
VERSION_CORPUS = "SELECT spec, corpus_id FROM versions WHERE id = :version_id"
# A version of a pack: the one no other version extends.
LEAVES = ("SELECT tokenizers.name, versions.number FROM versions "
          "JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
          "WHERE NOT EXISTS (SELECT 1 FROM versions AS child WHERE child.parent_id = versions.id) "
          "ORDER BY tokenizers.name, versions.number")
VERSION_ID = "SELECT id FROM versions WHERE tokenizer_id = :tokenizer_id AND number = :number"
NEW_TOKENIZER = "INSERT INTO tokenizers (name, created_at) VALUES (:name, :now) ON CONFLICT (name) DO NOTHING"
NEXT_NUMBER = "SELECT COALESCE(MAX(number), 0) + 1 FROM versions WHERE tokenizer_id = :tokenizer_id"
VERSION_COLUMNS = ("tokenizer_id", "number", "parent_id", "corpus_id", "spec", "target_vocab_size", "target_merges",
                   "min_frequency", "max_token_length", "status", "source", "corpus_digest", "corpus_generation",
                   "fingerprint", "created_at", "updated_at", "corpus_name")
NEW_VERSION = (f"INSERT INTO versions ({', '.join(VERSION_COLUMNS)}) "
               f"VALUES ({', '.join(':' + c for c in VERSION_COLUMNS)})")
CHECKPOINT = "UPDATE versions SET updated_at = :now WHERE id = :version_id"
COMPLETE = ("UPDATE versions SET updated_at = :now, status = 'complete', fingerprint = :fingerprint "
            "WHERE id = :version_id")
LINK_CORPUS = "UPDATE versions SET corpus_id = :corpus_id, corpus_name = NULL WHERE id = :version_id"
TOKENIZER_OF = "SELECT tokenizer_id FROM versions WHERE id = :version_id"
SET_ALIAS = ("INSERT INTO aliases (tokenizer_id, name, version_id) VALUES (:tokenizer_id, :name, :version_id) "
             "ON CONFLICT (tokenizer_id, name) DO UPDATE SET version_id = excluded.version_id")
NEW_SNAPSHOT = ("INSERT INTO version_facts (version_id, format, packed, fast_problem, digest) "
                "VALUES (:version_id, :format, :packed, :fast_problem, :digest)")
CHILDREN = "SELECT id FROM versions WHERE parent_id {listed} ORDER BY id"
ALIAS_REFS = ("SELECT tokenizers.name, aliases.name FROM aliases "
              "JOIN tokenizers ON tokenizers.id = aliases.tokenizer_id "
              "WHERE aliases.version_id {listed} ORDER BY tokenizers.name, aliases.name")
DELETE_ALIAS = ("DELETE FROM aliases WHERE name = :name "
                "AND tokenizer_id = (SELECT id FROM tokenizers WHERE name = :tokenizer)")
OWNERS = "SELECT DISTINCT tokenizer_id FROM versions WHERE id {listed}"
DELETE_FROM = "DELETE FROM {table} WHERE version_id {listed}"
DELETE_VERSION = "DELETE FROM versions WHERE id = :version_id"
DELETE_UNUSED = ("DELETE FROM tokenizers WHERE id {listed} "
                 "AND NOT EXISTS (SELECT 1 FROM versions WHERE versions.tokenizer_id = tokenizers.id)")
# Advisory locks are database-wide: the schema's name keeps stores in other schemas apart.
TRAINING_LOCK = "SELECT {call}(hashtext(concat('bpestore train ', current_schema())), :version_id)"
# The same lock as pg_locks shows it (its first key as an unsigned oid), asked without taking it.
TRAINING_HELD = ("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
                 "AND classid = (hashtext(concat('bpestore train ', current_schema()))::bigint & 4294967295)::oid "
                 "AND objid = CAST(:version_id AS bigint)::oid")


def unstorable(name: str, what: str) -> None:
    """NotFoundError for a name no store can hold (a NUL character, which PostgreSQL's
    text refuses to be even compared with): the same answer on both databases."""
    if "\0" in name:
        raise NotFoundError(f"no {what} named {name!r}: names hold no NUL character")


def check_name(name: str, what: str, param: str) -> None:
    """Names are stored as text: printable, '@'-free UTF-8, not only spaces, at
    most ``MAX_NAME`` characters (the columns' size on PostgreSQL)."""
    if len(name) > MAX_NAME:
        raise InvalidArgumentError(f"a {what} name is at most {MAX_NAME} characters, not {len(name):,}",
                                   params=(param,))
    if not name.strip() or "@" in name or not name.isprintable():
        raise InvalidArgumentError(f"a {what} name must be printable text, not blank, without '@', "
                                   f"not {name!r}", params=(param,))
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"a {what} name must be valid text, not {name!r}",
                                   params=(param,)) from None


def moment(value: datetime | str) -> datetime:
    """A stored timestamp as an aware datetime: PostgreSQL's as it comes, SQLite's
    from its text; every timestamp bpestore writes is UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


class VersionRow(NamedTuple):
    """What loading a version needs of its row."""

    name: str
    number: int
    spec: str  # TokenizerSpec JSON
    status: str
    fingerprint: str | None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.number}"

    @property
    def complete(self) -> bool:
        """It never changes again, and has (or should have) its snapshot."""
        return self.status == "complete" and self.fingerprint is not None


class SnapshotRow(NamedTuple):
    """A version's stored snapshot (its row of version_facts), with the fingerprint its digest covers."""

    format: int
    packed: bytes
    fast_problem: str | None
    digest: str
    fingerprint: str | None

    def checked(self, version_id: int) -> tuple[Vocabulary, EncoderFacts]:
        from .snapshot import checked  # its digest and unpacking: what listing versions does without

        return checked(self, version_id)


class VersionReads:
    """The reads of versions, over one transaction."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.run = tx.run

    def resolve(self, ref: str) -> int:
        """The version id of ``NAME`` (newest complete), ``NAME@N`` or ``NAME@ALIAS``."""
        name, at, tag = ref.partition("@")
        if at and not tag:
            raise InvalidArgumentError(f"{ref!r}: after '@' comes a version number or an alias "
                                       f"(e.g. {name}@1)")
        unstorable(ref, "version")
        found = self.run(TOKENIZER_ID, {"name": name})
        if not found:
            raise self.no_tokenizer(name)
        tokenizer_id = found[0][0]
        rows = self.run(VERSIONS_OF, {"tokenizer_id": tokenizer_id})
        numbers = ", ".join(f"{name}@{number}" for _, number, _ in rows)
        if not tag:
            complete = [version_id for version_id, _, status in rows if status == "complete"]
            if not complete:
                raise NotFoundError(f"{name} has no complete version yet ({numbers}); name one, "
                                    f"or resume {name}@N to finish it")
            return complete[-1]
        if NUMBER.fullmatch(tag):
            for version_id, number, _ in rows:
                if number == int(tag):
                    return version_id
            raise NotFoundError(f"{name} has no version {tag} (versions: {numbers})")
        target = self.run(ALIAS_TARGET, {"tokenizer_id": tokenizer_id, "name": tag})
        if not target:
            raise NotFoundError(f"{name} has no version or alias {tag!r} (versions: {numbers})")
        return target[0][0]

    def newest(self, name: str) -> int:
        """The id of a tokenizer's newest version, complete or not."""
        found = self.run(NEWEST_VERSION, {"name": name})
        if not found:
            raise self.no_tokenizer(name)
        return found[0][0]

    def no_tokenizer(self, name: str) -> NotFoundError:
        """The error for an unknown tokenizer name, naming those there are."""
        known = [row[0] for row in self.run(TOKENIZER_NAMES, {})]
        return NotFoundError(f"no tokenizer named {name!r} "
                             f"({'known: ' + ', '.join(known) if known else 'none yet: train or import one'})")

    def row(self, version_id: int) -> VersionRow:
        return VersionRow(*self.run(VERSION_ROW, {"version_id": version_id})[0])

    def info(self, version_id: int) -> VersionInfo:
        return self.infos(ids=[version_id])[0]

    def infos(self, *, name: str | None = None, ids: Sequence[int] | None = None) -> list[VersionInfo]:
        """The versions of tokenizer ``name``, or with these ids, or all; by name and
        number. Two statements however many versions there are."""
        from ..records import VersionInfo  # listing versions needs the records; loading one does not

        params: dict[str, Any] = {}
        where = ""
        if name is not None:
            unstorable(name, "tokenizer")
            where, params = "WHERE tokenizers.name = :name", {"name": name}
        elif ids is not None:
            listed, params = in_list("id", ids)
            where = f"WHERE versions.id {listed}"
        rows = self.run(VERSION_INFOS.format(where=where), params)
        if name is not None and not rows and not self.run(TOKENIZER_ID, {"name": name}):
            raise self.no_tokenizer(name)
        aliases_of: dict[int, list[str]] = {}
        for version_id, alias in self.run(ALIASES_OF.format(where=where), params):
            aliases_of.setdefault(version_id, []).append(alias)
        mixtures: dict[int, list[tuple[str, int]]] = {}
        for version_id, corpus, _, generation, weight in self.run(MIXTURES.format(where=where), params):
            mixtures.setdefault(version_id, []).append((f"{corpus}@{generation}", weight))
        return [VersionInfo(
            id=v[0], name=v[1], number=v[2], status=v[3], source=v[4], vocab_size=v[5], n_merges=v[6],
            target_vocab_size=v[7], target_merges=v[8], corpus=v[9],
            parent=None if v[10] is None else f"{v[11]}@{v[12]}", spec=TokenizerSpec.from_json(v[13]),
            min_frequency=v[14], max_token_length=v[15], corpus_digest=v[16], fingerprint=v[17],
            created_at=moment(v[18]), updated_at=moment(v[19]), aliases=tuple(aliases_of.get(v[0], ())),
            corpus_generation=v[20], without_counts=v[21] is not None,
            mixture=tuple(mixtures.get(v[0], ()))) for v in rows]

    def mixture(self, version_id: int) -> list[tuple[int, int, int]]:
        """The parts of a version's training mixture as (corpus id, generation, weight); [] for none."""
        where, params = "WHERE version_inputs.version_id = :version_id", {"version_id": version_id}
        return [(cid, generation, weight) for _, _, cid, generation, weight
                in self.run(MIXTURES.format(where=where), params)]

    def spec_and_corpus(self, version_id: int) -> tuple[str, int | None]:
        """A version's spec as stored (JSON) and its corpus id (None: not in this store)."""
        spec, corpus_id = self.run(VERSION_CORPUS, {"version_id": version_id})[0]
        return spec, corpus_id

    def snapshot_row(self, version_id: int) -> SnapshotRow | None:
        """A complete version's stored snapshot, unchecked; None where it has none
        (a version still training)."""
        rows = self.run(SNAPSHOT_ROW, {"version_id": version_id})
        return SnapshotRow(*rows[0]) if rows else None

    def snapshot(self, version_id: int) -> tuple[Vocabulary, EncoderFacts] | None:
        """A complete version's vocabulary and facts from its stored snapshot, checked;
        None where it has none (a version still training)."""
        row = self.snapshot_row(version_id)
        return None if row is None else row.checked(version_id)

    def rows_vocabulary(self, version_id: int) -> Vocabulary:
        """A version's vocabulary read from its token and merge rows."""
        return vocab_tables.vocabulary(self.tx, version_id)

    def vocabulary(self, version_id: int) -> Vocabulary:
        """A version's vocabulary: from its snapshot where it is complete, else from its rows."""
        found = self.snapshot(version_id)
        return found[0] if found is not None else self.rows_vocabulary(version_id)

    def state(self, version_id: int, row: VersionRow) -> str:
        """What changes when a version does: its fingerprint, or while training its merge count."""
        if row.fingerprint is not None:
            return row.fingerprint
        return f"training:{vocab_tables.next_rank(self.tx, version_id)}"

    def longest_equal_run(self, version_id: int) -> tuple[int, list[Merge]] | None:
        """The other version that trained like this one, with the most merges, and its merges.

        Like this one: a root version trained by bpestore on the same corpus with
        the same counts (corpus digest), spec, min_frequency and max_token_length.
        None when there is none with a merge.
        """
        found = self.run(EQUAL_RUN, {"version_id": version_id})
        if not found:
            return None
        donor = found[0][0]
        return donor, vocab_tables.vocabulary(self.tx, donor, tokens=False).merges

    def passing_merges(self, version_id: int) -> int:
        """How many first merges of a complete version are known to pass tiktoken's
        check: all of them where its snapshot says so, else none."""
        rows = self.run(PASSING_MERGES, {"version_id": version_id})
        return rows[0][0] if rows else 0

    def pinned_generations(self, corpus_id: int) -> list[int]:
        """The generations of a corpus that versions were trained on, ascending."""
        return sorted(row[0] for row in self.run(PINNED_GENERATIONS, {"corpus_id": corpus_id}))

    def pins(self, corpus_id: int | None) -> dict[tuple[int, int], list[str]]:
        """The refs of the versions trained on each (corpus id, generation)."""
        also, params = ("AND versions.corpus_id = :corpus_id", {"corpus_id": corpus_id}) \
            if corpus_id is not None else ("", {})
        also_part = also.replace("versions.", "version_inputs.")
        pins: dict[tuple[int, int], list[str]] = {}
        for cid, generation, name, number in self.run(PINS.format(also=also, also_part=also_part), params):
            pins.setdefault((cid, generation), []).append(f"{name}@{number}")
        return pins

    def leaves(self) -> list[str]:
        """The versions no other version extends, as refs."""
        return [f"{name}@{number}" for name, number in self.run(LEAVES, {})]

    def find(self, tokenizer_id: int, number: int) -> int | None:
        return self.tx.one(VERSION_ID, {"tokenizer_id": tokenizer_id, "number": number})

    def descendants(self, version_id: int) -> list[int]:
        """The versions extending ``version_id``, their extensions and so on: children before grandchildren."""
        found: list[int] = []
        frontier = [version_id]
        while frontier:
            listed, params = in_list("id", frontier)
            frontier = [row[0] for row in self.run(CHILDREN.format(listed=listed), params)]
            found += frontier
        return found

    def alias_refs(self, version_ids: Sequence[int]) -> list[str]:
        """The aliases pointing at these versions, as ``NAME@ALIAS``."""
        listed, params = in_list("id", version_ids)
        return [f"{name}@{alias}" for name, alias in self.run(ALIAS_REFS.format(listed=listed), params)]

    def alias_target(self, tokenizer_id: int, alias: str) -> int | None:
        return self.tx.one(ALIAS_TARGET, {"tokenizer_id": tokenizer_id, "name": alias})

    def tokenizer_of(self, version_id: int) -> int:
        return self.tx.one(TOKENIZER_OF, {"version_id": version_id})


# -- writes ------------------------------------------------------------------------------
def lock_tokenizer(tx: Transaction, name: str, created_at: Any = None) -> int:
    """The id of tokenizer ``name`` (created if new, race-free), its row locked until the
    transaction ends (SQLite's write lock does this alone), so two processes never take
    the same version number."""
    tx.run(NEW_TOKENIZER, {"name": name, "now": tx.now if created_at is None else tx.stamp(created_at)})
    return tx.one(TOKENIZER_ID + (" FOR UPDATE" if tx.postgresql else ""), {"name": name})


def add_inputs(tx: Transaction, version_id: int, parts: Sequence[tuple[int, int, int]]) -> None:
    """Record a version's training mixture: (corpus id, generation, weight) in order."""
    for position, (corpus_id, generation, weight) in enumerate(parts):
        tx.run(NEW_INPUT, {"version_id": version_id, "position": position, "corpus_id": corpus_id,
                           "corpus_generation": generation, "weight": weight})


def new_version(tx: Transaction, name: str, *, spec: TokenizerSpec, status: str, source: str,
                corpus_id: int | None = None, parent_id: int | None = None,
                target_vocab_size: int | None = None, target_merges: int | None = None,
                min_frequency: int = 1, max_token_length: int | None = None,
                corpus_digest: str | None = None, corpus_generation: int | None = None,
                fingerprint: str | None = None) -> int:
    """Insert the next version row of tokenizer ``name`` (created if new); returns its id."""
    check_name(name, "tokenizer", "name")
    tokenizer_id = lock_tokenizer(tx, name)
    number = tx.one(NEXT_NUMBER, {"tokenizer_id": tokenizer_id})
    return place_version(tx, dict(
        tokenizer_id=tokenizer_id, number=number, parent_id=parent_id, corpus_id=corpus_id,
        spec=spec.to_json(), target_vocab_size=target_vocab_size, target_merges=target_merges,
        min_frequency=min_frequency, max_token_length=max_token_length, status=status, source=source,
        corpus_digest=corpus_digest, corpus_generation=corpus_generation, fingerprint=fingerprint,
        created_at=tx.now, updated_at=tx.now, corpus_name=None))


def place_version(tx: Transaction, row: dict[str, Any]) -> int:
    """Insert a version row (every column of ``VERSION_COLUMNS``); returns its id."""
    tx.run(NEW_VERSION, row)
    return tx.one(VERSION_ID, row)


def record_checkpoint(tx: Transaction, version_id: int, fingerprint: str | None = None) -> None:
    """Stamp a version's ``updated_at``; with its fingerprint, mark it complete."""
    if fingerprint is None:
        tx.run(CHECKPOINT, {"now": tx.now, "version_id": version_id})
    else:
        tx.run(COMPLETE, {"now": tx.now, "version_id": version_id, "fingerprint": fingerprint})


def link_corpus(tx: Transaction, version_id: int, corpus_id: int) -> None:
    """Give a version copied without its counts the corpus that now holds them."""
    tx.run(LINK_CORPUS, {"version_id": version_id, "corpus_id": corpus_id})


def add_snapshot(tx: Transaction, version_id: int, made: Snapshot) -> None:
    """Store a version's snapshot (in the transaction that completes it)."""
    tx.run(NEW_SNAPSHOT, {"version_id": version_id, **made._asdict()})


def set_alias(tx: Transaction, version_id: int, alias: str, *, check: bool = True) -> None:
    """Point alias ``alias`` of the version's tokenizer at it (moving the alias if it exists)."""
    if check:
        check_name(alias, "alias", "alias")
        if NUMBER.fullmatch(alias):
            raise InvalidArgumentError(f"an alias cannot be a number ({alias!r} would read as a version)",
                                       params=("alias",))
    tokenizer_id = tx.one(TOKENIZER_OF, {"version_id": version_id})
    tx.run(SET_ALIAS, {"tokenizer_id": tokenizer_id, "name": alias, "version_id": version_id})


def delete_alias(tx: Transaction, ref: str) -> None:
    name, _, tag = ref.partition("@")
    tx.run(DELETE_ALIAS, {"tokenizer": name, "name": tag})


def delete_versions(tx: Transaction, version_ids: Sequence[int]) -> None:
    """Delete versions (extensions after their parents in ``version_ids``), their
    merges, tokens and aliases, and the tokenizers left without a version."""
    listed, params = in_list("id", version_ids)
    owners = [row[0] for row in tx.run(OWNERS.format(listed=listed), params)]
    for table in ("aliases", "merges", "tokens", "version_inputs"):
        tx.run(DELETE_FROM.format(table=table, listed=listed), params)
    for version_id in reversed(version_ids):  # an extension goes before its parent
        tx.run(DELETE_VERSION, {"version_id": version_id})
    listed, params = in_list("id", owners)
    tx.run(DELETE_UNUSED.format(listed=listed), params)


def try_lock_training(tx: Transaction, version_id: int, *, session: bool = True) -> bool:
    """Claim the right to train a version for as long as the session (``session``) or
    the transaction lasts; False if another holds it. PostgreSQL only (an advisory
    lock); elsewhere True: the checkpoint's merge count check is the guard there."""
    if not tx.postgresql:
        return True
    call = "pg_try_advisory_lock" if session else "pg_try_advisory_xact_lock"
    return bool(tx.one(TRAINING_LOCK.format(call=call), {"version_id": version_id}))


def training_held(tx: Transaction, version_id: int) -> bool | None:
    """Whether a run holds a version's training lock, asked without taking it;
    PostgreSQL only (None elsewhere: ``locks.held`` asks SQLite's lock file)."""
    if not tx.postgresql:
        return None
    return bool(tx.one(TRAINING_HELD, {"version_id": version_id}))


def unlock_training(tx: Transaction, version_id: int) -> None:
    if tx.postgresql:
        tx.run(TRAINING_LOCK.format(call="pg_advisory_unlock"), {"version_id": version_id})
