"""The SQL of corpora, generations, versions, tokens and merges: queries and
writes over a Connection (the word counts' rows: ``wordcounts``; reading
versions: ``reader``).

The modules above (the Store's services, ``training``, ``imports``) open the
transactions, pass their connection in and get plain data or
``bpestore.records`` back. Lookups that find nothing raise ``NotFoundError``
saying what exists. Bulk rows (checkpoints) go through the driver
(``insert_rows``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any, Protocol

from sqlalchemy import (
    Connection,
    Table,
    delete,
    func,
    insert,
    literal,
    select,
    update,
)

from ..errors import InvalidArgumentError, NotFoundError
from ..records import CorpusInfo, Merge, MergeInfo, Source
from ..spec import TokenizerSpec
from .reader import NUMBER, VersionReads, check_name
from .reads import CorpusReads, VocabularyReads, sources_digest
from .schema import (
    aliases,
    corpora,
    generations,
    merges,
    tokenizers,
    tokens,
    version_facts,
    versions,
)
from .snapshot import Snapshot


class Transactions(Protocol):
    """What the modules above the repository open connections with (the Store)."""

    url: str

    def reading(self) -> AbstractContextManager[Connection]: ...

    def writing(self) -> AbstractContextManager[Connection]: ...

    def session(self) -> AbstractContextManager[Connection]: ...


# -- corpora and word counts --------------------------------------------------
def corpus_spec(conn: Connection, name: str) -> TokenizerSpec | None:
    return _corpora(conn).spec(name)


def corpus_id(conn: Connection, name: str) -> int:
    return _corpora(conn).corpus_id(name)


def readable_generation(conn: Connection, ref: str) -> tuple[int, int]:
    """``reads.CorpusReads.readable_generation`` in this transaction."""
    return _corpora(conn).readable_generation(ref)


def newest_generation(conn: Connection, corpus_id: int) -> int:
    return _corpora(conn).newest_generation(corpus_id)


def pinned_generations(conn: Connection, corpus_id: int) -> list[int]:
    return _corpora(conn).pinned_generations(corpus_id)


def kept_generations(conn: Connection, corpus_id: int) -> list[int]:
    return _corpora(conn).kept_generations(corpus_id)


def corpus_log(conn: Connection, corpus_id: int) -> list[CorpusInfo]:
    return _corpora(conn).log(corpus_id)


def corpus_sources(conn: Connection, corpus_id: int, generation: int | None = None) -> list[Source]:
    return _corpora(conn).sources(corpus_id, generation)


def _corpora(conn: Connection) -> CorpusReads:
    """The reads of corpora (store/reads.py: SQL text either driver runs) in this transaction."""
    return CorpusReads(VersionReads.over(conn))


def generation_digest(conn: Connection, corpus_id: int, generation: int | None) -> str:
    """The digest of a generation (None: the newest)."""
    if generation is None:
        generation = newest_generation(conn, corpus_id)
    digest = conn.execute(select(generations.c.digest).where(
        generations.c.corpus_id == corpus_id, generations.c.number == generation)).scalar()
    if digest is None:  # no source yet
        return sources_digest(conn.execute(select(corpora.c.spec).where(corpora.c.id == corpus_id)).scalar_one(), [])
    return digest


def lock_corpus_row(conn: Connection, corpus_id: int) -> None:
    """Lock a corpus' row until the transaction ends: ingests into it wait (PostgreSQL;
    on SQLite every writer holds the database's write lock)."""
    conn.execute(select(corpora.c.id).where(corpora.c.id == corpus_id).with_for_update())


# -- versions ---------------------------------------------------------------
def _not_found(conn: Connection, table: Table, message: str, known_as: str, none_yet: str) -> NotFoundError:
    """``message``, with the names the table does hold (or ``none_yet``)."""
    known = conn.execute(select(table.c.name).order_by(table.c.name)).scalars().all()
    return NotFoundError(f"{message} ({f'{known_as}: ' + ', '.join(known) if known else none_yet})")


def newest_version(conn: Connection, name: str) -> int:
    """The id of a tokenizer's newest version, complete or not."""
    found = conn.execute(select(versions.c.id).join(tokenizers, tokenizers.c.id == versions.c.tokenizer_id)
                         .where(tokenizers.c.name == name)
                         .order_by(versions.c.number.desc()).limit(1)).scalar()
    if found is None:
        raise _not_found(conn, tokenizers, f"no tokenizer named {name!r}", "known", "none yet: train or import one")
    return found


def new_version(conn: Connection, name: str, *, spec: TokenizerSpec, status: str, source: str,
                corpus_id: int | None = None, parent_id: int | None = None,
                target_vocab_size: int | None = None, target_merges: int | None = None,
                min_frequency: int = 1, max_token_length: int | None = None,
                corpus_digest: str | None = None, corpus_generation: int | None = None,
                fingerprint: str | None = None) -> int:
    """Insert the next version row of tokenizer ``name`` (created if new); returns its id."""
    check_name(name, "tokenizer", "name")
    # Create the tokenizer row if missing, then lock it, so two processes
    # never take the same version number (SQLite's write lock does this alone).
    conn.execute(dialect(conn).insert(tokenizers).values(name=name, created_at=utc_now())
                 .on_conflict_do_nothing(index_elements=[tokenizers.c.name]))
    tokenizer_id = conn.execute(select(tokenizers.c.id).where(tokenizers.c.name == name)
                                .with_for_update()).scalar()
    number = (conn.execute(select(func.max(versions.c.number))
                           .where(versions.c.tokenizer_id == tokenizer_id)).scalar() or 0) + 1
    now = utc_now()
    inserted = conn.execute(insert(versions).values(
        tokenizer_id=tokenizer_id, number=number, parent_id=parent_id, corpus_id=corpus_id,
        spec=spec.to_json(), target_vocab_size=target_vocab_size, target_merges=target_merges,
        min_frequency=min_frequency, max_token_length=max_token_length, status=status, source=source,
        corpus_digest=corpus_digest, corpus_generation=corpus_generation, fingerprint=fingerprint,
        created_at=now, updated_at=now))
    return inserted.inserted_primary_key[0]  # type: ignore[index]  # None only for statements that insert nothing


def next_rank(conn: Connection, version_id: int) -> int:
    """The rank of a version's next merge (its merges are ranks 0, 1, ...): one
    index lookup, where counting them reads every one (a checkpoint asks each time)."""
    return conn.execute(select(func.coalesce(func.max(merges.c.rank) + 1, 0))
                        .where(merges.c.version_id == version_id)).scalar_one()


def try_lock_training(conn: Connection, version_id: int) -> bool:
    """Claim the right to train a version for as long as ``conn`` stays open; False
    if another session holds it. PostgreSQL only (a session advisory lock);
    elsewhere True: the checkpoint's merge count check is the guard there."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.execute(select(func.pg_try_advisory_lock(_training_lock_space(), version_id))).scalar())


def try_lock_training_xact(conn: Connection, version_id: int) -> bool:
    """``try_lock_training`` until the transaction ends (PostgreSQL; elsewhere True)."""
    if conn.dialect.name != "postgresql":
        return True
    return bool(conn.execute(select(func.pg_try_advisory_xact_lock(_training_lock_space(), version_id))).scalar())


def unlock_training(conn: Connection, version_id: int) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_unlock(_training_lock_space(), version_id)))


def _training_lock_space() -> Any:
    """Advisory locks are database-wide: the schema's name keeps stores in other schemas apart."""
    return func.hashtext(func.concat("bpestore train ", func.current_schema()))


def record_checkpoint(conn: Connection, version_id: int, fingerprint: str | None = None) -> None:
    """Stamp a version's ``updated_at``; with its fingerprint, mark it complete."""
    values: dict[str, Any] = {"updated_at": utc_now()}
    if fingerprint is not None:
        values.update(status="complete", fingerprint=fingerprint)
    conn.execute(update(versions).where(versions.c.id == version_id).values(**values))


def set_alias(conn: Connection, version_id: int, alias: str) -> None:
    """Point alias ``alias`` of the version's tokenizer at it (moving the alias if it exists)."""
    check_name(alias, "alias", "alias")
    if NUMBER.fullmatch(alias):
        raise InvalidArgumentError(f"an alias cannot be a number ({alias!r} would read as a version)",
                                   params=("alias",))
    tokenizer_id = conn.execute(select(versions.c.tokenizer_id).where(versions.c.id == version_id)).scalar()
    stmt = dialect(conn).insert(aliases).values(tokenizer_id=tokenizer_id, name=alias, version_id=version_id)
    conn.execute(stmt.on_conflict_do_update(index_elements=[aliases.c.tokenizer_id, aliases.c.name],
                                            set_={"version_id": version_id}))


# -- tokens and merges --------------------------------------------------------
def add_snapshot(conn: Connection, version_id: int, made: Snapshot) -> None:
    """Store a version's snapshot (in the transaction that completes it)."""
    conn.execute(insert(version_facts).values(version_id=version_id, **made._asdict()))


def add_tokens(conn: Connection, version_id: int, rows: Iterable[tuple[int, bytes, str]]) -> None:
    """Insert tokens given as (id, bytes, kind)."""
    insert_rows(conn, tokens, [(version_id, token_id, data, kind) for token_id, data, kind in rows])


def add_merges(conn: Connection, version_id: int, merge_rows: Iterable[Merge]) -> None:
    insert_rows(conn, merges, [(version_id, m.rank, m.left, m.right, m.token, m.count) for m in merge_rows])


def copy_merges(conn: Connection, source_id: int, target_id: int, *, n_merges: int | None = None,
                token_ids: tuple[int, int | None] = (0, None)) -> None:
    """Copy version ``source_id``'s first ``n_merges`` merges (all when None) and its
    tokens with ids in ``token_ids`` (start, end; end None: all) into ``target_id``."""
    start, end = token_ids
    token_rows = select(literal(target_id), tokens.c.id, tokens.c.bytes, tokens.c.kind).where(
        tokens.c.version_id == source_id, tokens.c.id >= start)
    if end is not None:
        token_rows = token_rows.where(tokens.c.id < end)
    merge_rows = select(literal(target_id), merges.c.rank, merges.c.left_id, merges.c.right_id, merges.c.token_id,
                        merges.c["count"]).where(merges.c.version_id == source_id)
    if n_merges is not None:
        merge_rows = merge_rows.where(merges.c.rank < n_merges)
    conn.execute(insert(tokens).from_select(["version_id", "id", "bytes", "kind"], token_rows))
    conn.execute(insert(merges).from_select(
        ["version_id", "rank", "left_id", "right_id", "token_id", "count"], merge_rows))


# -- queries over stored vocabularies, and removal ------------------------------
def merge_infos(conn: Connection, version_id: int, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
    return VocabularyReads(VersionReads.over(conn)).merge_infos(version_id, start, limit)


def descendants(conn: Connection, version_id: int) -> list[int]:
    """The versions extending ``version_id``, their extensions and so on: children before grandchildren."""
    found: list[int] = []
    frontier = [version_id]
    while frontier:
        frontier = list(conn.execute(select(versions.c.id).where(versions.c.parent_id.in_(frontier))
                                     .order_by(versions.c.id)).scalars())
        found += frontier
    return found


def alias_refs(conn: Connection, version_ids: Sequence[int]) -> list[str]:
    """The aliases pointing at these versions, as ``NAME@ALIAS``."""
    return list(conn.execute(select(tokenizers.c.name + "@" + aliases.c.name)
                             .join(tokenizers, tokenizers.c.id == aliases.c.tokenizer_id)
                             .where(aliases.c.version_id.in_(version_ids))
                             .order_by(tokenizers.c.name, aliases.c.name)).scalars())


def delete_alias(conn: Connection, ref: str) -> None:
    name, _, tag = ref.partition("@")
    tokenizer_id = select(tokenizers.c.id).where(tokenizers.c.name == name).scalar_subquery()
    conn.execute(delete(aliases).where(aliases.c.tokenizer_id == tokenizer_id, aliases.c.name == tag))


def delete_versions(conn: Connection, version_ids: Sequence[int]) -> None:
    """Delete versions (extensions after their parents in ``version_ids``), their
    merges, tokens and aliases, and the tokenizers left without a version."""
    owners = list(conn.execute(select(versions.c.tokenizer_id).distinct()
                               .where(versions.c.id.in_(version_ids))).scalars())
    for table in (aliases, merges, tokens):
        conn.execute(delete(table).where(table.c.version_id.in_(version_ids)))
    for version_id in reversed(version_ids):  # an extension goes before its parent
        conn.execute(delete(versions).where(versions.c.id == version_id))
    has_version = select(versions.c.id).where(versions.c.tokenizer_id == tokenizers.c.id).exists()
    conn.execute(delete(tokenizers).where(tokenizers.c.id.in_(owners), ~has_version))


def insert_rows(conn: Connection, table: Table, rows: list[tuple]) -> None:
    """INSERT rows (tuples in the table's column order): on SQLite as statements of
    many rows each, elsewhere with the driver's executemany."""
    if not rows:
        return
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(c.name for c in table.columns)
    row = f"({', '.join([mark] * len(table.columns))})"
    sql = f"INSERT INTO {table.name} ({columns}) VALUES "
    if conn.dialect.name != "sqlite":
        conn.exec_driver_sql(sql + row, rows)
        return
    # One statement is one step of SQLite's, which the driver runs without the GIL
    # (executemany takes the GIL back after each row): about half the time, and a
    # thread beside it (training's checkpoint writer) is hardly held up.
    per = max(1, min(_sqlite_variables(conn) // len(table.columns), 2000))
    raw: Any = conn.connection.driver_connection
    cursor = raw.cursor()
    try:
        for start in range(0, len(rows), per):
            part = rows[start:start + per]
            cursor.execute(sql + ", ".join([row] * len(part)), [value for r in part for value in r])
    finally:
        cursor.close()


def _sqlite_variables(conn: Connection) -> int:
    """How many parameters one SQLite statement may take (999 before SQLite 3.32)."""
    raw: Any = conn.connection.driver_connection
    if not hasattr(raw, "getlimit"):  # Python before 3.11
        return 999
    return raw.getlimit(9)  # SQLITE_LIMIT_VARIABLE_NUMBER



# -- helpers -------------------------------------------------------------------
def dialect(conn: Connection) -> Any:
    """The SQLAlchemy dialect module with INSERT ... ON CONFLICT for this database."""
    if conn.dialect.name not in ("sqlite", "postgresql"):
        raise InvalidArgumentError(f"bpestore supports SQLite and PostgreSQL, not {conn.dialect.name}",
                                   params=("db",))
    # Imported here: the PostgreSQL dialect alone costs a tenth of a query's start-up.
    return importlib.import_module(f"sqlalchemy.dialects.{conn.dialect.name}")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
