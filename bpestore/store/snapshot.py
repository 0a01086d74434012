"""The snapshot of a complete version: made once, when it completes, and stored.

A complete version never changes. When one completes (trained, extended,
imported, or copied from an equal run) its snapshot is made from the
vocabulary and merges the trainer or importer holds (``make``, a pure
function) and stored in the transaction that completes it, one row of
``version_facts`` holding:

* its tokens and merges packed in one blob (``pack``): loading its tokenizer
  reads this one row, not a row per token and per merge;
* why tiktoken's rank rule may not give its ids (``fast_problem``; None: it
  gives them). The check behind that (``encoder.rank_rule``) looks at every merged
  token, so it runs here once, not on every load;
* a digest of both and of the version's fingerprint, checked on every load
  (``checked``): a row that does not match is ``DamagedDataError``, never used.

A version still training has no snapshot; it loads from its rows.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import struct
import sys
from array import array
from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import native
from ..errors import DamagedDataError
from ..spec import EncoderFacts, TokenizerSpec
from .vocabulary import KindCodes, Vocabulary

CORE = native.load("_encodecore")[0]  # its token_dict: the tokens without a slice per token
FORMAT = 1  # the layout of ``pack``; another layout comes with a new revision that rewrites the rows
_HEADER = struct.Struct("<III")  # tokens, merges, bytes of the kind names


class Snapshot(NamedTuple):
    """A complete version's stored snapshot: its row of version_facts."""

    format: int
    packed: bytes
    fast_problem: str | None
    digest: str


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
    datas = list(map(vocab.tokens.__getitem__, ids))
    columns = [array("I", ids), array("I", map(len, datas)),
               array("B", map(code.__getitem__, map(vocab.kinds.__getitem__, ids))),
               array("I", lefts), array("I", rights), array("I", made), array("Q", counts)]
    if sys.byteorder != "little":
        for column in columns:
            column.byteswap()
    return b"".join([_HEADER.pack(len(ids), len(lefts), len(kinds)), kinds,
                     *(column.tobytes() for column in columns), *datas])


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
    tokens = _token_dict(data, at, ids, lengths)
    if kinds and max(kinds) >= len(names):
        raise ValueError("a token's kind is not one of the packed names")
    return Vocabulary(tokens, KindCodes(ids, kinds, names), lefts, rights, made, counts)


def _token_dict(data: bytes, at: int, ids: array, lengths: array) -> dict[int, bytes]:
    """{ids[k]: the next lengths[k] bytes of data from at}; ValueError unless they end at data's end."""
    if CORE is not None:
        return CORE.token_dict(data, at, ids, lengths)
    # Every token's bytes sliced in C: ends by accumulate, slices by map.
    ends = list(itertools.accumulate(lengths, initial=at))
    if ends[-1] != len(data):
        raise ValueError("the packed vocabulary's length does not match its header")
    return dict(zip(ids, map(data.__getitem__, map(slice, ends, ends[1:]))))


def digest(fingerprint: str | None, fast_problem: str | None, packed: bytes) -> str:
    """What a snapshot is checked against: its blob, its check's answer, and the
    fingerprint of the version it belongs to."""
    h = hashlib.sha256(json.dumps([FORMAT, fingerprint, fast_problem]).encode())
    h.update(packed)
    return h.hexdigest()


def make(spec: TokenizerSpec, vocab: Vocabulary, fingerprint: str, *, checked: int = 0) -> Snapshot:
    """The snapshot of a version with this spec, vocabulary and fingerprint.
    ``checked``: its first merges are those of a version that passed the check."""
    # Making a snapshot needs the encoder's check; loading one (a fresh process) does not import it.
    from ..encoder.rank_rule import rank_rule_problem_ids

    lefts, rights, made = vocab.columns[:3]
    problem = rank_rule_problem_ids(spec, vocab.tokens, vocab.special_ids().values(), lefts, rights, made,
                                    checked=checked)
    packed = pack(vocab)
    return Snapshot(FORMAT, packed, problem, digest(fingerprint, problem, packed))


def checked(row: Sequence[Any], version_id: int) -> tuple[Vocabulary, EncoderFacts]:
    """The vocabulary and facts of a stored snapshot (format, packed, fast_problem,
    digest, and the version's fingerprint), once its digest matches;
    DamagedDataError where it does not, or where the blob cannot be read."""
    format_, packed, problem, stored_digest, fingerprint = row
    packed = bytes(packed)
    if format_ != FORMAT or digest(fingerprint, problem, packed) != stored_digest:
        raise DamagedDataError(f"the stored facts of version id {version_id} do not match their digest; "
                               "the database is damaged (restore it from a backup)")
    try:
        vocab = unpack(packed)
    except (ValueError, IndexError, struct.error) as exc:
        raise DamagedDataError(f"the stored facts of version id {version_id} cannot be read ({exc}); "
                               "the database is damaged") from None
    return vocab, EncoderFacts(problem)
