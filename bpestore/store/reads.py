"""The reads that load a complete version, written once and run two ways.

Loading a tokenizer (``Store.tokenizer``) or looking up a token
(``Store.token``) resolves a ref and reads the version's one row of
``version_facts`` (store/facts.py). Those statements are here, as SQL text
with named parameters (``:name``, which both drivers take), and the functions
that use them (``resolve``, ``version_row``, ``facts_row``) take a ``Run``:
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
from typing import Any, NamedTuple
from urllib.parse import quote

from ..errors import InvalidArgumentError, NotFoundError
from .db import HEAD

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
