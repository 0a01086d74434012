"""The SQL of tokens and merges: a version's vocabulary read (whole, or its tokens
filtered, or its merges with their pairs' bytes) and written (rows in bulk, or
copied from another version), over one ``drivers.Transaction``."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from .drivers import Transaction, in_list
from .vocabulary import Vocabulary

if TYPE_CHECKING:
    from ..records import MergeInfo

TOKEN_ROWS = "SELECT id, bytes, kind FROM tokens WHERE version_id = :version_id {also} ORDER BY id"
MERGE_ROWS = ('SELECT "rank", left_id, right_id, token_id, "count" FROM merges '
              'WHERE version_id = :version_id ORDER BY "rank"')
NEXT_RANK = 'SELECT COALESCE(MAX("rank") + 1, 0) FROM merges WHERE version_id = :version_id'
FIRST_MERGES = 'SELECT token_id, "rank", "count" FROM merges WHERE version_id = :version_id {also} ORDER BY "rank"'
MERGE_INFOS = ('SELECT merges."rank", merges.left_id, merges.right_id, merges.token_id, merges."count", '
               "left_token.bytes, right_token.bytes FROM merges "
               "JOIN tokens AS left_token ON left_token.version_id = merges.version_id "
               "AND left_token.id = merges.left_id "
               "JOIN tokens AS right_token ON right_token.version_id = merges.version_id "
               "AND right_token.id = merges.right_id "
               'WHERE merges.version_id = :version_id AND merges."rank" >= :start ORDER BY merges."rank" {limit}')
COPY_TOKENS = ("INSERT INTO tokens (version_id, id, bytes, kind) SELECT :target, id, bytes, kind FROM tokens "
               "WHERE version_id = :source AND id >= :start {also}")
COPY_MERGES = ('INSERT INTO merges (version_id, "rank", left_id, right_id, token_id, "count") '
               'SELECT :target, "rank", left_id, right_id, token_id, "count" FROM merges '
               "WHERE version_id = :source {also}")
MERGE_COLUMNS = ("version_id", "rank", "left_id", "right_id", "token_id", "count")
IN_LIST = 500  # ids per IN (...) list


def vocabulary(tx: Transaction, version_id: int, *, tokens: bool = True) -> Vocabulary:
    """A version's vocabulary read from its token and merge rows (``tokens=False``: its merges alone)."""
    token_rows = tx.run(TOKEN_ROWS.format(also=""), {"version_id": version_id}) if tokens else []
    return Vocabulary.from_rows(token_rows, tx.run(MERGE_ROWS, {"version_id": version_id}))


def next_rank(tx: Transaction, version_id: int) -> int:
    """The rank of a version's next merge (its merges are ranks 0, 1, ...): one
    index lookup, where counting them reads every one (a checkpoint asks each time)."""
    return tx.one(NEXT_RANK, {"version_id": version_id})


def token_rows(tx: Transaction, version_id: int, *, prefix: bytes = b"",
               match: Callable[[bytes], bool] | None = None) -> list[tuple[int, bytes, str]]:
    """The tokens of a version as (id, bytes, kind), by id: those starting with
    ``prefix`` and (if given) for whose bytes ``match`` is true. On SQLite
    ``match`` runs inside the query, so rows that fail it are never fetched."""
    also, params = "", dict[str, Any](version_id=version_id)
    if prefix:
        also = "AND substr(bytes, 1, :prefix_length) = :prefix"
        params = {**params, "prefix": prefix, "prefix_length": len(prefix)}
    in_query = match is not None and tx.sqlite is not None
    if in_query:
        tx.sqlite.create_function("bpestore_match", 1, match, deterministic=True)  # type: ignore[union-attr]
        also += " AND bpestore_match(bytes) = 1"
    rows = [(token_id, bytes(data), kind) for token_id, data, kind in tx.run(TOKEN_ROWS.format(also=also), params)]
    return rows if match is None or in_query else [r for r in rows if match(r[1])]


def first_merges(tx: Transaction, version_id: int, token_ids: Collection[int] | None = None
                 ) -> dict[int, tuple[int, int]]:
    """The (rank, count) of the merge that first made each token (of ``token_ids``,
    or all). A few ids are looked up; many read every merge once."""
    also, params = "", dict[str, Any](version_id=version_id)
    if token_ids is not None and len(token_ids) <= IN_LIST:
        listed, ids = in_list("token", list(token_ids))
        also, params = f"AND token_id {listed}", {**params, **ids}
    made: dict[int, tuple[int, int]] = {}
    for token_id, rank, count in tx.run(FIRST_MERGES.format(also=also), params):
        made.setdefault(token_id, (rank, count))
    return made


def merge_infos(tx: Transaction, version_id: int, start: int = 0, limit: int | None = None) -> list[MergeInfo]:
    """A version's merges from rank ``start`` on (``limit`` of them), with the bytes of each pair."""
    from ..records import MergeInfo

    params: dict[str, Any] = {"version_id": version_id, "start": start}
    if limit is not None:
        params["limit"] = limit
    rows = tx.run(MERGE_INFOS.format(limit="" if limit is None else "LIMIT :limit"), params)
    return [MergeInfo(rank, a, b, token, count, bytes(data_a), bytes(data_b))
            for rank, a, b, token, count, data_a, data_b in rows]


def add_tokens(tx: Transaction, version_id: int, ids: Sequence[int], data: Sequence[bytes],
               kinds: Sequence[str] | str) -> None:
    """Insert tokens ``ids`` with their bytes ``data`` and ``kinds`` (one each, or one for all), in order."""
    if isinstance(kinds, str):
        tx.insert("tokens", {"id": ids, "bytes": data}, {"version_id": version_id, "kind": kinds})
    else:
        tx.insert("tokens", {"id": ids, "bytes": data, "kind": kinds}, {"version_id": version_id})


def add_merges(tx: Transaction, version_id: int, first_rank: int, columns: Sequence[Sequence[int]]) -> None:
    """Insert merges given as columns (left ids, right ids, token ids, counts), ranks from ``first_rank`` on."""
    lefts, rights, tokens, counts = columns
    tx.insert("merges", dict(zip(MERGE_COLUMNS[1:], (range(first_rank, first_rank + len(lefts)), lefts, rights,
                                                     tokens, counts))), {"version_id": version_id})


def copy_merges(tx: Transaction, source_id: int, target_id: int, *, n_merges: int | None = None,
                token_ids: tuple[int, int | None] = (0, None)) -> None:
    """Copy version ``source_id``'s first ``n_merges`` merges (all when None) and its
    tokens with ids in ``token_ids`` (start, end; end None: all) into ``target_id``."""
    start, end = token_ids
    params = {"source": source_id, "target": target_id, "start": start, "end": end, "n_merges": n_merges}
    tx.run(COPY_TOKENS.format(also="" if end is None else "AND id < :end"), params)
    tx.run(COPY_MERGES.format(also="" if n_merges is None else 'AND "rank" < :n_merges'), params)
