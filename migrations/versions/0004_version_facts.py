"""Facts of complete versions, computed once and stored.

* ``version_facts``: one row per complete version: its tokens and merges packed
  in one blob (what loading its tokenizer reads), why tiktoken's core may not
  encode with it (NULL: it may), and a digest of both and of the version's
  fingerprint (see bpestore/store/snapshot.py).

Every complete version of an existing store gets its row here (reading its
rows with this revision's own SQL, packed by this revision's own copy of
format 1; the check is bpestore.fast's pure function of the merges). Versions
still training get theirs when they complete.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""
import hashlib
import json
import struct
import sys
from array import array

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "version_facts",
        sa.Column("version_id", sa.Integer, sa.ForeignKey("versions.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("format", sa.Integer, nullable=False),
        sa.Column("packed", sa.LargeBinary, nullable=False),
        sa.Column("fast_problem", sa.Text, nullable=True),
        sa.Column("digest", sa.String(64), nullable=False),
    )
    fill(op.get_bind(), table)


def fill(conn: sa.Connection, table: sa.Table) -> None:
    from bpestore.encoder import rank_rule
    from bpestore.spec import TokenizerSpec

    complete = conn.execute(sa.text("SELECT id, spec, fingerprint FROM versions "
                                    "WHERE status = 'complete' ORDER BY id")).all()
    for version_id, spec, fingerprint in complete:
        token_rows = conn.execute(sa.text("SELECT id, bytes, kind FROM tokens WHERE version_id = :v ORDER BY id"),
                                  {"v": version_id}).all()
        tokens = {token_id: bytes(data) for token_id, data, _kind in token_rows}
        kinds = {token_id: kind for token_id, _data, kind in token_rows}
        merge_rows = conn.execute(sa.text('SELECT left_id, right_id, token_id, "count" FROM merges '
                                          'WHERE version_id = :v ORDER BY "rank"'), {"v": version_id}).all()
        columns = tuple(list(column) for column in zip(*merge_rows)) or ([], [], [], [])
        problem = rank_rule.spec_problem(TokenizerSpec.from_json(spec))
        if problem is None:
            problem = _rank_problem(tokens, kinds, columns)
        packed = _pack(tokens, kinds, columns)
        conn.execute(table.insert().values(version_id=version_id, format=FORMAT, packed=packed,
                                           fast_problem=problem, digest=_digest(fingerprint, problem, packed)))


# -- format 1, frozen here: the revision writes what it wrote when it was applied first -----
FORMAT = 1
_HEADER = struct.Struct("<III")  # tokens, merges, bytes of the kind names


def _pack(tokens: dict[int, bytes], kinds: dict[int, str], columns: tuple[list[int], ...]) -> bytes:
    """A header, then little-endian columns (token ids, lengths and kinds; merges'
    left, right and made ids; their counts), then every token's bytes, in id order."""
    ids = sorted(tokens)
    names = sorted(set(kinds.values()))
    code = {name: i for i, name in enumerate(names)}
    lefts, rights, made, counts = columns
    kind_names = ",".join(names).encode()
    arrays = [array("I", ids), array("I", [len(tokens[i]) for i in ids]), array("B", [code[kinds[i]] for i in ids]),
              array("I", lefts), array("I", rights), array("I", made), array("Q", counts)]
    if sys.byteorder != "little":
        for column in arrays:
            column.byteswap()
    return b"".join([_HEADER.pack(len(ids), len(lefts), len(kind_names)), kind_names,
                     *(column.tobytes() for column in arrays), *(tokens[i] for i in ids)])


def _digest(fingerprint: str | None, fast_problem: str | None, packed: bytes) -> str:
    h = hashlib.sha256(json.dumps([FORMAT, fingerprint, fast_problem]).encode())
    h.update(packed)
    return h.hexdigest()


def _rank_problem(tokens: dict[int, bytes], kinds: dict[int, str], columns: tuple[list[int], ...]) -> str | None:
    """bpestore.encoder.rank_rule's check of the merges (the pure function; its answer is what the
    version's merges decide, whatever the code's version)."""
    from bpestore.alphabet import byte_ids, ordinary_ids
    from bpestore.bpe import merge_word, pair_key
    from bpestore.encoder import rank_rule

    id_of = ordinary_ids(tokens, [i for i, kind in kinds.items() if kind == "special"])
    lefts, rights, made = columns[:3]
    pairs = [(tokens[a], tokens[b]) for a, b in zip(lefts, rights)]

    def encode_bytes(data: bytes) -> list[int]:
        ranks: dict[int, int] = {}
        for rank, key in enumerate(map(pair_key, lefts, rights)):
            ranks.setdefault(key, rank)
        by_byte = byte_ids(id_of)
        return merge_word([by_byte[b] for b in data], ranks, list(made))

    return rank_rule.rank_equivalence_problem(pairs, id_of, encode_bytes)


def downgrade() -> None:
    op.drop_table("version_facts")
