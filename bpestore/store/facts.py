"""The facts of a complete version: computed once, when it completes, and stored.

A complete version never changes. When one completes (trained, extended,
imported, or copied from an equal run) its row of ``version_facts`` is
written in the same transaction, holding:

* its tokens and merges packed in one blob (``pack``): loading its tokenizer
  reads this one row, not a row per token and per merge;
* its ``EncoderFacts``: whether tiktoken's core may encode with it. The check
  behind that (``bpestore.fast``) encodes every merged token, about 0.2-0.5 s
  for GPT-2, so it runs here once, not on every load;
* a digest of both and of the version's fingerprint, checked on every load: a
  row that does not match is ``DamagedDataError``, never used.

A version still training has no row; it loads from its rows, as before.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
import sys
from array import array
from typing import TYPE_CHECKING

from ..errors import DamagedDataError
from ..spec import EncoderFacts, TokenizerSpec
from .reads import FactsRow
from .vocabulary import KindCodes, Vocabulary

if TYPE_CHECKING:
    from sqlalchemy import Connection

FORMAT = 1  # the layout of ``pack``; another layout comes with a new revision that rewrites the rows
_HEADER = struct.Struct("<III")  # tokens, merges, bytes of the kind names


def pack(vocab: Vocabulary) -> bytes:
    """A vocabulary as one blob: a header, then little-endian columns (token
    ids, lengths and kinds; merges' left, right and made ids; their counts),
    then every token's bytes, in id order.

    >>> v = Vocabulary({0: b"a", 1: b"b", 2: b"ab"}, {0: "byte", 1: "byte", 2: "merge"}, [0], [1], [2], [7])
    >>> unpack(pack(v)).tokens == v.tokens and unpack(pack(v)).merges == v.merges
    True
    """
    ids = sorted(vocab.tokens)
    names = sorted(set(vocab.kinds.values()))
    code = {name: i for i, name in enumerate(names)}
    lefts, rights, made, counts = vocab.columns
    kinds = ",".join(names).encode()
    columns = [array("I", ids), array("I", [len(vocab.tokens[i]) for i in ids]),
               array("B", [code[vocab.kinds[i]] for i in ids]),
               array("I", lefts), array("I", rights), array("I", made), array("Q", counts)]
    if sys.byteorder != "little":
        for column in columns:
            column.byteswap()
    return b"".join([_HEADER.pack(len(ids), len(lefts), len(kinds)), kinds,
                     *(column.tobytes() for column in columns), *(vocab.tokens[i] for i in ids)])


def unpack(data: bytes) -> Vocabulary:
    """The vocabulary ``pack`` made ``data`` from."""
    n_tokens, n_merges, n_kinds = _HEADER.unpack_from(data)
    view = memoryview(data)
    at = _HEADER.size
    names = bytes(view[at:at + n_kinds]).decode().split(",")
    at += n_kinds
    columns = []
    for typecode, n in (("I", n_tokens), ("I", n_tokens), ("B", n_tokens), ("I", n_merges), ("I", n_merges),
                        ("I", n_merges), ("Q", n_merges)):
        column = array(typecode)
        column.frombytes(view[at:at + n * column.itemsize])
        if sys.byteorder != "little":
            column.byteswap()
        columns.append(column)
        at += n * column.itemsize
    ids, lengths, kinds, lefts, rights, made, counts = columns
    # Every token's bytes sliced in C: ends by accumulate, slices by map.
    ends = list(itertools.accumulate(lengths, initial=at))
    tokens = dict(zip(ids, map(data.__getitem__, map(slice, ends, ends[1:]))))
    at = ends[-1]
    if at != len(data):
        raise ValueError("the packed vocabulary's length does not match its header")
    if kinds and max(kinds) >= len(names):
        raise ValueError("a token's kind is not one of the packed names")
    return Vocabulary(tokens, KindCodes(ids, kinds, names), lefts, rights, made, counts)


def digest(fingerprint: str | None, fast_problem: str | None, packed: bytes) -> str:
    """What a row of version_facts is checked against: its blob, its facts, and
    the fingerprint of the version it belongs to."""
    h = hashlib.sha256(json.dumps([FORMAT, fingerprint, fast_problem]).encode())
    h.update(packed)
    return h.hexdigest()


def encoder_facts(spec: TokenizerSpec, vocab: Vocabulary, *, checked: int = 0) -> EncoderFacts:
    """The EncoderFacts of a vocabulary; ``checked``: its first merges are those
    of a version whose facts allow tiktoken's core (``fast.rank_equivalence_problem``)."""
    from ..encoder import Tokenizer

    tok = Tokenizer(vocab.tokens, vocab.pairs, vocab.special_ids(), spec=spec, fast=False)
    return tok._computed_facts(checked=checked)


def seal(conn: Connection, version_id: int, *, vocab: Vocabulary | None = None,
         copied_from: int | None = None) -> None:
    """Compute and store the facts of a version that has just completed, in the
    transaction that completes it. ``vocab``: its tokens and merges, where the
    caller holds them (else its rows are read); ``copied_from``: a version whose
    first merges it copied (an equal run), whose facts may answer for it.

    A version whose merges start with those of a version that may take
    tiktoken's core (its parent, or ``copied_from``) checks only its own.
    """
    from . import repository

    v = repository.version_info(conn, version_id)
    if vocab is None:
        vocab = repository.vocabulary(conn, version_id)
    related = copied_from
    if related is None and v.parent is not None:
        related = repository.resolve(conn, v.parent)
    known = load(conn, related) if related is not None else None
    if known is not None and known[1].fast_problem is None and copied_from is not None \
            and len(vocab.columns[0]) <= len(known[0].columns[0]):
        facts = known[1]  # a prefix of merges that pass, with the same spec, passes
    else:
        checked = len(known[0].columns[0]) if known is not None and known[1].fast_problem is None else 0
        facts = encoder_facts(v.spec, vocab, checked=checked)
    packed = pack(vocab)
    repository.add_version_facts(conn, version_id, format=FORMAT, packed=packed, fast_problem=facts.fast_problem,
                                 digest=digest(v.fingerprint, facts.fast_problem, packed))


def load(conn: Connection, version_id: int) -> tuple[Vocabulary, EncoderFacts] | None:
    """A complete version's vocabulary and facts from its one row; None where it
    has none (a version still training). DamagedDataError where the row does not
    match its digest."""
    from . import repository

    row = repository.version_facts(conn, version_id)
    if row is None:
        return None
    return checked(row, version_id)


def checked(row: FactsRow, version_id: int) -> tuple[Vocabulary, EncoderFacts]:
    """The vocabulary and facts of a version_facts row, once its digest matches;
    DamagedDataError where it does not, or where the blob cannot be read."""
    packed = bytes(row.packed)
    if row.format != FORMAT or digest(row.fingerprint, row.fast_problem, packed) != row.digest:
        raise DamagedDataError(f"the stored facts of version id {version_id} do not match their digest; "
                               "the database is damaged (restore it from a backup)")
    try:
        vocab = unpack(packed)
    except (ValueError, IndexError, struct.error) as exc:
        raise DamagedDataError(f"the stored facts of version id {version_id} cannot be read ({exc}); "
                               "the database is damaged") from None
    return vocab, EncoderFacts(row.fast_problem)


def vocabulary(conn: Connection, version_id: int) -> Vocabulary:
    """A version's vocabulary: from its facts where it is complete, else from its rows."""
    from . import repository

    found = load(conn, version_id)
    return found[0] if found is not None else repository.vocabulary(conn, version_id)
