"""The reads that load a complete version, written once and run two ways.

Loading a tokenizer (``Store.tokenizer``) or looking up a token
(``Store.token``) resolves a ref and reads the version's one row of
``version_facts`` (store/facts.py); listing versions (``Store.versions``,
``Store.version``) reads their rows with their token and merge counts. Those statements are here, as SQL text
with named parameters (``:name``, which both drivers take), and the functions
that use them (``resolve``, ``version_row``, ``facts_row``, ``version_infos``) take a ``Run``:
something that executes one statement and returns its rows. Two things do:

* ``repository.runner(conn)``: a SQLAlchemy connection, on every database;
* ``sqlite_reading(uri)``: the standard library's ``sqlite3`` on a SQLite
  file, read-only, in one transaction, used only where the stored schema
  revision is ``HEAD``. It imports neither SQLAlchemy nor Alembic, so a fresh
  process that encodes or looks up a token starts in a fraction of the time.

The same statements and the same functions give both paths the same answers
and the same errors. Anything else (PostgreSQL, another schema revision, a
version still training or without its facts, every write) goes through
SQLAlchemy as before (``Store.tokenizer`` falls back).

This module imports nothing of SQLAlchemy.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

from ..errors import InvalidArgumentError, NotFoundError
from ..spec import TokenizerSpec
from .db import HEAD

if TYPE_CHECKING:
    from ..records import VersionInfo  # imported where used: loading a tokenizer needs no records

# Executes one statement (SQL text, named parameters) and returns its rows as sequences.
Run = Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]

NUMBER = re.compile(r"[0-9]+")  # a version number (ASCII digits only)

REVISION = "SELECT version_num FROM alembic_version"
TOKENIZER_ID = "SELECT id FROM tokenizers WHERE name = :name"
TOKENIZER_NAMES = "SELECT name FROM tokenizers ORDER BY name"
VERSIONS_OF = "SELECT id, number, status FROM versions WHERE tokenizer_id = :tokenizer_id ORDER BY number"
ALIAS_TARGET = "SELECT version_id FROM aliases WHERE tokenizer_id = :tokenizer_id AND name = :name"
VERSION_ROW = ("SELECT tokenizers.name, versions.number, versions.spec, versions.status, versions.fingerprint "
               "FROM versions JOIN tokenizers ON tokenizers.id = versions.tokenizer_id "
               "WHERE versions.id = :version_id")
FACTS_ROW = ("SELECT version_facts.format, version_facts.packed, version_facts.fast_problem, "
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
    def sealed(self) -> bool:
        """Complete: it never changes again, and has (or should have) its facts row."""
        return self.status == "complete" and self.fingerprint is not None


class FactsRow(NamedTuple):
    """A version's row of version_facts, with the fingerprint its digest covers."""

    format: int
    packed: bytes
    fast_problem: str | None
    digest: str
    fingerprint: str | None


def resolve(run: Run, ref: str) -> int:
    """The version id of ``NAME`` (newest complete), ``NAME@N`` or ``NAME@ALIAS``."""
    name, at, tag = ref.partition("@")
    if at and not tag:
        raise InvalidArgumentError(f"{ref!r}: after '@' comes a version number or an alias "
                                   f"(e.g. {name}@1)")
    found = run(TOKENIZER_ID, {"name": name})
    if not found:
        raise no_tokenizer(run, name)
    tokenizer_id = found[0][0]
    rows = run(VERSIONS_OF, {"tokenizer_id": tokenizer_id})
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
    target = run(ALIAS_TARGET, {"tokenizer_id": tokenizer_id, "name": tag})
    if not target:
        raise NotFoundError(f"{name} has no version or alias {tag!r} (versions: {numbers})")
    return target[0][0]


def no_tokenizer(run: Run, name: str) -> NotFoundError:
    """The error for an unknown tokenizer name, naming those there are."""
    known = [row[0] for row in run(TOKENIZER_NAMES, {})]
    return NotFoundError(f"no tokenizer named {name!r} "
                         f"({'known: ' + ', '.join(known) if known else 'none yet: train or import one'})")


def version_row(run: Run, version_id: int) -> VersionRow:
    return VersionRow(*run(VERSION_ROW, {"version_id": version_id})[0])


def facts_row(run: Run, version_id: int) -> FactsRow | None:
    """A version's row of version_facts (unchecked); None where it has none."""
    rows = run(FACTS_ROW, {"version_id": version_id})
    return FactsRow(*rows[0]) if rows else None


def version_infos(run: Run, *, name: str | None = None, ids: Sequence[int] | None = None) -> list[VersionInfo]:
    """The versions of tokenizer ``name``, or with these ids, or all; by name and
    number. Two statements however many versions there are."""
    from ..records import VersionInfo

    params: dict[str, Any] = {}
    where = ""
    if name is not None:
        where, params = "WHERE tokenizers.name = :name", {"name": name}
    elif ids is not None:
        params = {f"id{i}": version_id for i, version_id in enumerate(ids)}
        where = f"WHERE versions.id IN ({', '.join(':' + key for key in params) or 'NULL'})"
    rows = run(VERSION_INFOS.format(where=where), params)
    if name is not None and not rows and not run(TOKENIZER_ID, {"name": name}):
        raise no_tokenizer(run, name)
    aliases_of: dict[int, list[str]] = {}
    for version_id, alias in run(ALIASES_OF.format(where=where), params):
        aliases_of.setdefault(version_id, []).append(alias)
    return [VersionInfo(
        id=v[0], name=v[1], number=v[2], status=v[3], source=v[4], vocab_size=v[5], n_merges=v[6],
        target_vocab_size=v[7], target_merges=v[8], corpus=v[9],
        parent=None if v[10] is None else f"{v[11]}@{v[12]}", spec=TokenizerSpec.from_json(v[13]),
        min_frequency=v[14], max_token_length=v[15], corpus_digest=v[16], fingerprint=v[17],
        created_at=moment(v[18]), updated_at=moment(v[19]), aliases=tuple(aliases_of.get(v[0], ())),
        corpus_generation=v[20], without_counts=v[21] is not None) for v in rows]


def moment(value: datetime | str) -> datetime:
    """A stored timestamp as an aware datetime: PostgreSQL's as it comes, SQLite's
    from its text; every timestamp bpestore writes is UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


# -- the sqlite3 path ------------------------------------------------------------------
def sqlite_uri(url: str) -> str | None:
    """The ``sqlite3`` URI of a SQLite file as ``db.resolve_url`` names it, opened
    without creating it; None for any other URL (PostgreSQL, in-memory, a URL
    given by hand with options of its own)."""
    if url.startswith("sqlite:///file:") and url.endswith("&uri=true"):  # read-only: mode=ro[&immutable=1]
        return url[len("sqlite:///"):-len("&uri=true")]
    if url.startswith("sqlite:///") and "?" not in url and len(url) > len("sqlite:///"):
        return f"file:{quote(url[len('sqlite:///'):])}?mode=rw"
    return None


def at_head(uri: str) -> bool:
    """Whether the SQLite file ``uri`` exists and its schema is at ``HEAD``."""
    with sqlite_reading(uri) as run:
        return run is not None


@contextmanager
def sqlite_reading(uri: str, *, timeout: float = 30.0) -> Iterator[Run | None]:
    """A read transaction on a SQLite file through ``sqlite3``: a ``Run``, or None
    where this path does not apply (no such file, not at ``HEAD``, or ``sqlite3``
    failed: the caller goes the SQLAlchemy way, which says why where it must)."""
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        yield None
        return
    try:
        try:
            conn.execute("BEGIN")  # one snapshot for every statement
            current = conn.execute(REVISION).fetchone()
        except sqlite3.Error:
            current = None
        if current is None or current[0] != HEAD:
            yield None
            return

        def run(sql: str, params: Mapping[str, Any]) -> list[tuple]:
            return conn.execute(sql, params).fetchall()

        yield run
    finally:
        conn.close()
