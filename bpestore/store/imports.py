"""Versions made elsewhere: a vocabulary and merges, checked and stored complete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..alphabet import byte_ids, fallback_byte_ids, ordinary_ids, symbolizer
from ..errors import InvalidArgumentError
from ..limits import MAX_INT
from ..records import Merge
from ..spec import TokenizerSpec, fingerprint
from . import snapshot, vocab_tables
from .drivers import Transactions
from .version_tables import add_snapshot, check_name, new_version
from .vocabulary import Vocabulary


def import_version(db: Transactions, name: str, vocab: Mapping[int, bytes],
                   merge_list: Sequence[tuple[bytes, bytes]], spec: TokenizerSpec, *, source: str) -> int:
    """Store ``vocab`` and ``merge_list`` (in rank order) as the next version of
    ``name``; returns its id. ``spec.special_tokens`` must be in ``vocab``.
    Tokens' kinds: special, byte, merge, and for ``alphabet='chars'`` unk and char."""
    check_name(name, "tokenizer", "name")
    first_id: dict[bytes, int] = {}
    specials = {t.encode("utf-8") for t in spec.special_tokens}
    for token_id, data in vocab.items():
        if type(token_id) is not int or not 0 <= token_id <= MAX_INT:
            raise InvalidArgumentError(f"token id {token_id!r} is out of range: ids are 0 to {MAX_INT:,}",
                                       params=("vocab",))
        if not isinstance(data, bytes) or not data:
            raise InvalidArgumentError(f"token {token_id} is {data!r}, not non-empty bytes", params=("vocab",))
        # Byte fallback: a byte token and a character may be the same byte (SentencePiece's <0x41> and A).
        if data in first_id and data not in specials and not (spec.byte_fallback and len(data) == 1):
            raise InvalidArgumentError(f"tokens {first_id[data]} and {token_id} are both {data!r}; "
                                       "a vocabulary holds each token once", params=("vocab",))
        first_id.setdefault(data, token_id)
    missing = [t for t in spec.special_tokens if t.encode("utf-8") not in first_id]
    if missing:
        raise InvalidArgumentError(f"special token {missing[0]!r} is not in the vocabulary",
                                   params=("special_tokens",))
    reserved = {first_id[t.encode("utf-8")] for t in spec.special_tokens}
    id_of = ordinary_ids(vocab, reserved, chars_over_bytes=spec.byte_fallback)
    fallback = set(fallback_byte_ids(vocab, reserved)) if spec.byte_fallback and not spec.byte_level else set()
    if spec.byte_level:
        byte_ids(id_of)  # every byte is a token (else: an error naming the first missing)
    # The word markers and unknown token are tokens (else: an error naming one).
    symbolizer(spec, id_of, fallback_byte_ids(vocab, reserved) if spec.byte_fallback else None)
    merges = []
    made = {left + right for left, right in merge_list}
    for rank, (left, right) in enumerate(merge_list):
        if left not in id_of or right not in id_of or left + right not in id_of:
            raise InvalidArgumentError(f"merge {rank} ({left!r}, {right!r}) uses or makes a token "
                                       "missing from the vocabulary", params=("merge_list",))
        merges.append(Merge(rank, id_of[left], id_of[right], id_of[left + right], 0))
    tokens = dict(sorted(vocab.items()))
    kind_of = {i: "byte" if i in fallback else _kind(spec, data, i in reserved, made) for i, data in tokens.items()}
    stored = Vocabulary(tokens, kind_of, [m.left for m in merges], [m.right for m in merges],
                        [m.token for m in merges], [m.count for m in merges])
    done = fingerprint(spec, None, merges)
    snap = snapshot.make(spec, stored, done)
    with db.writing() as tx:
        version_id = new_version(tx, name, spec=spec, status="complete", source=source,
                                            target_vocab_size=len(vocab), fingerprint=done)
        vocab_tables.add_tokens(tx, version_id, list(tokens), list(tokens.values()), list(kind_of.values()))
        vocab_tables.add_merges(tx, version_id, 0, stored.columns)
        add_snapshot(tx, version_id, snap)
    return version_id


def _kind(spec: TokenizerSpec, data: bytes, special: bool, made: set[bytes]) -> str:
    if special:
        return "special"
    if spec.unk_token is not None and data == spec.unk_token.encode("utf-8"):
        return "unk"
    if spec.byte_level:
        if len(data) == 1:
            return "byte"
    elif data not in made:
        return "char"
    return "merge"
