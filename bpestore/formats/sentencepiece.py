"""SentencePiece ``.model`` files holding a BPE model, read and written.

The file is a protobuf ``ModelProto`` (sentencepiece_model.proto). Only a few
of its fields matter here, so they are read and written by the small wire-format
codec below rather than through the ``protobuf`` package: bpestore then needs
neither ``protobuf`` nor ``sentencepiece`` to import or export (and no
generated ``_pb2`` module whose protobuf runtime must match). Unknown fields are
skipped when reading.

How a SentencePiece BPE model maps onto bpestore:

* pieces are tokens, their ids are their places in the file; ``▁`` stays in
  the tokens' text (``space_marker="▁"``), ``<0xNN>`` byte pieces are the
  byte ``NN`` (``byte_fallback``), the unknown piece is ``unk_token``, control
  pieces (``<s>``, ``</s>``) are special tokens (sentencepiece reads them in text
  as characters: encode with ``disallowed_special=()``), user-defined pieces
  are ``user_symbols``;
* SentencePiece merges the two adjacent symbols whose concatenation is the
  piece of highest score (the leftmost among equals): that is bpestore's
  ``segmentation="piece"`` with the pieces in score order as the merges' order
  (one split of each piece is stored as its merge; the encoder merges at
  every split);
* a run of unknown characters is one unknown piece (``fuse_unk``);
* ``treat_whitespace_as_suffix``: ``space_suffix``;
* normalizer ``identity``, or a precompiled character map (``nmt_nfkc``,
  ``nfkc_cf``, a compiled rule TSV, ...: the spec's ``charsmap``, written back
  as read), ``add_dummy_prefix`` (``dummy_prefix="always"``),
  ``remove_extra_whitespaces`` (normalizer step ``collapse-spaces``).
"""

from __future__ import annotations

import bisect
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..charsmap import Charsmap, decode_charsmap, encode_charsmap
from ..errors import DamagedDataError, InvalidArgumentError
from ..files import read_bounded
from ..records import ForeignModel
from ..spec import TokenizerSpec

if TYPE_CHECKING:
    from ..encoder import Tokenizer

MARKER = "\u2581"  # ▁, SentencePiece's space symbol
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
_TYPE_NAMES = {NORMAL: "normal", UNKNOWN: "unknown", CONTROL: "control", USER_DEFINED: "user-defined",
               UNUSED: "unused", BYTE: "byte"}
_BPE = 2
_MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}
# The roles of special tokens, by their usual names (SentencePiece's defaults first).
BOS_NAMES = ("<s>", "<|begin_of_text|>", "<bos>", "[CLS]")
EOS_NAMES = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "[SEP]")
PAD_NAMES = ("<pad>", "[PAD]", "<|pad|>")
# What a model file may hold: the largest published models have a few hundred thousand pieces in a few MB.
MAX_MODEL_BYTES = 64 << 20
MAX_PIECES = 1_000_000
MAX_PIECE_BYTES = 7999  # sentencepiece refuses a longer piece ("piece is too long")
_BYTE_PIECE = re.compile(r"<0x([0-9A-F]{2})>")  # exactly what sentencepiece writes and reads back


# -- protobuf wire format ----------------------------------------------------------------------
def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ValueError("a varint runs past the end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("a varint is too long")


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a message: ints for varint and fixed fields, bytes for length-delimited."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 1:
            value, at = int.from_bytes(data[at:at + 8], "little"), at + 8
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at:at + size], at + size
        elif wire == 5:
            value, at = int.from_bytes(data[at:at + 4], "little"), at + 4
        else:
            raise ValueError(f"wire type {wire} of field {number} is not one protobuf writes")
        if at > len(data):
            raise ValueError(f"field {number} runs past the end")
        yield number, value


def _key(number: int, wire: int) -> bytes:
    return _encode_varint((number << 3) | wire)


def _encode_varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int32 -1 is written as ten bytes, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _message(fields: list[tuple[int, Any]]) -> bytes:
    """A message from (number, value): bool/int as varint, float as fixed32, str/bytes length-delimited."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, float):
            out += _key(number, 5) + struct.pack("<f", value)
        elif isinstance(value, (bool, int)):
            out += _key(number, 0) + _encode_varint(int(value))
        else:
            data = value.encode("utf-8") if isinstance(value, str) else value
            out += _key(number, 2) + _encode_varint(len(data)) + data
    return bytes(out)


# -- the model -----------------------------------------------------------------------------------
@dataclass
class Piece:
    text: str
    score: float
    type: int


@dataclass
class SentencePieceModel:
    """The parts of a ModelProto bpestore uses (field numbers of sentencepiece_model.proto)."""

    pieces: list[Piece]
    trainer: dict[int, int | bytes] = field(default_factory=dict)
    normalizer: dict[int, int | bytes] = field(default_factory=dict)
    denormalizer: dict[int, int | bytes] = field(default_factory=dict)


def parse_model(data: bytes, max_pieces: int = MAX_PIECES) -> SentencePieceModel:
    """The pieces and specs of a serialized ModelProto (ValueError if it is not one)."""
    n_pieces = 0
    for number, _ in _fields(data):  # counted first: no memory goes to a model refused for its size
        n_pieces += number == 1
        if n_pieces > max_pieces:
            raise ValueError(f"more than {max_pieces:,} pieces (the most bpestore reads)")
    pieces: list[Piece] = []
    model = SentencePieceModel(pieces)
    for number, value in _fields(data):
        if not isinstance(value, bytes):
            if number in (1, 2, 3, 5):
                raise ValueError(f"field {number} is not a message")
            continue
        if number == 1:
            text, score, kind = None, 0.0, NORMAL
            for sub, sub_value in _fields(value):
                if sub == 1 and isinstance(sub_value, bytes):
                    if len(sub_value) > MAX_PIECE_BYTES:
                        raise ValueError(f"piece {len(pieces)} is over {MAX_PIECE_BYTES} bytes long, as "
                                         "sentencepiece allows")
                    text = sub_value.decode("utf-8")
                elif sub == 2 and isinstance(sub_value, int):
                    score = struct.unpack("<f", sub_value.to_bytes(4, "little"))[0]
                elif sub == 3 and isinstance(sub_value, int):
                    kind = sub_value
            if not text:
                raise ValueError(f"piece {len(pieces)} has no text")
            if "\0" in text:
                raise ValueError(f"piece {len(pieces)} holds a NUL character")
            if not math.isfinite(score):
                raise ValueError(f"piece {len(pieces)} has the score {score}")
            pieces.append(Piece(text, score, kind))
        elif number in (2, 3, 5):
            target = {2: model.trainer, 3: model.normalizer, 5: model.denormalizer}[number]
            target.update(_fields(value))
    if not pieces:
        raise ValueError("no pieces")
    return model


def serialize_model(model: SentencePieceModel) -> bytes:
    pieces = [(1, _message([(1, p.text), (2, float(p.score)), (3, p.type)])) for p in model.pieces]
    parts = pieces + [(2, _message(sorted(model.trainer.items()))), (3, _message(sorted(model.normalizer.items())))]
    return _message(parts)


# -- reading -------------------------------------------------------------------------------------
def read_sentencepiece(path: str | Path) -> ForeignModel:
    """Read a SentencePiece BPE ``.model``; a part bpestore cannot run is refused by name."""
    data = read_bounded(path, MAX_MODEL_BYTES, "SentencePiece model")
    try:
        model = parse_model(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedDataError(f"{path} is not a SentencePiece model: {exc}", params=("path",)) from None
    return _Converter(str(path), model).convert()


class _Converter:
    def __init__(self, path: str, model: SentencePieceModel) -> None:
        self.path, self.model = path, model

    def refuse(self, part: str, why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{self.path}: {part}: {why}; bpestore has no equivalent", params=("path",))

    def convert(self) -> ForeignModel:
        model, trainer = self.model, self.model.trainer
        model_type = trainer.get(3, 1)
        if model_type != _BPE:
            raise self.refuse("trainer_spec.model_type",
                              f"{_MODEL_TYPES.get(model_type, model_type)} (only BPE models are read)")  # type: ignore[arg-type]
        suffix = bool(trainer.get(24))
        spec_fields = self.normalizer_fields()
        byte_fallback = bool(trainer.get(35, 0))
        vocab: dict[int, bytes] = {}
        specials: list[str] = []
        users: list[str] = []
        unk: str | None = None
        normal: list[tuple[float, int, str]] = []
        n_bytes = 0
        seen: dict[str, int] = {}
        for token_id, piece in enumerate(model.pieces):
            if seen.setdefault(piece.text, token_id) != token_id:
                raise DamagedDataError(f"{self.path}: pieces {seen[piece.text]} and {token_id} are both "
                                       f"{piece.text!r}", params=("path",))
            if piece.type == UNUSED:
                raise self.refuse(f"piece {token_id} ({piece.text!r})", f"type {_TYPE_NAMES[piece.type]}")
            if piece.type == BYTE:
                byte = _BYTE_PIECE.fullmatch(piece.text)
                if byte is None:
                    raise DamagedDataError(f"{self.path}: piece {token_id}: byte piece {piece.text!r} is not <0xNN> "
                                           "(NN: two hex digits 0-9, A-F)", params=("path",))
                vocab[token_id] = bytes([int(byte[1], 16)])
                n_bytes += 1
                continue
            vocab[token_id] = piece.text.encode("utf-8")
            if piece.type == UNKNOWN:
                if unk is not None:
                    raise DamagedDataError(f"{self.path}: two unknown pieces ({unk!r}, {piece.text!r})",
                                           params=("path",))
                unk = piece.text
            elif piece.type == CONTROL:
                specials.append(piece.text)
            elif piece.type == USER_DEFINED:
                users.append(piece.text)
            elif piece.type == NORMAL:
                normal.append((piece.score, token_id, piece.text))
            else:
                raise self.refuse(f"piece {token_id} ({piece.text!r})", f"type {piece.type}")
        if unk is None:
            raise DamagedDataError(f"{self.path}: no unknown piece", params=("path",))
        if byte_fallback and n_bytes != 256:
            raise DamagedDataError(f"{self.path}: byte_fallback with {n_bytes} byte pieces, not 256", params=("path",))
        # Words cut before each ▁ only where that cannot split a run of unknown characters.
        inner_space = any(MARKER in (text[:-1] if suffix else text[1:]) for _, _, text in normal)
        cut_words = not inner_space and (byte_fallback or any(text == MARKER for _, _, text in normal))
        spec = TokenizerSpec(alphabet="chars", unk_token=unk, byte_fallback=byte_fallback, layout="sentencepiece",
                             fuse_unk=True,
                             special_tokens=tuple(specials), segmentation="piece",
                             pretokenizer="metaspace" if cut_words else "none", space_suffix=suffix,
                             user_symbols=tuple(users), **spec_fields)
        return ForeignModel(vocab, self.merges(normal), spec)

    def normalizer_fields(self) -> dict[str, Any]:
        norm = self.model.normalizer
        raw, blob = norm.get(1, b""), norm.get(2, b"")
        name = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
        fields: dict[str, Any] = {}
        if isinstance(blob, bytes) and blob:
            try:
                Charsmap(blob)
            except DamagedDataError as exc:
                raise DamagedDataError(f"{self.path}: normalizer_spec.precompiled_charsmap: {exc}",
                                       params=("path",)) from None
            fields["charsmap"] = encode_charsmap(name, blob)
        elif name not in ("", "identity"):
            raise self.refuse("normalizer_spec.name", f"{name!r} without a precompiled character map")
        elif norm.get(6):
            raise self.refuse("normalizer_spec.normalization_rule_tsv", "set")
        if not norm.get(5, 1):
            raise self.refuse("normalizer_spec.escape_whitespaces", "false")
        if self.model.denormalizer.get(2) or self.model.denormalizer.get(6):
            raise self.refuse("denormalizer_spec", "a character map")
        steps = "collapse-spaces" if norm.get(4, 1) else "none"
        return {"normalizer": steps, "space_marker": MARKER, "dummy_prefix": "always" if norm.get(3, 1) else "never",
                **fields}

    def merges(self, normal: list[tuple[float, int, str]]) -> list[tuple[bytes, bytes]]:
        """The merged pieces by score (highest first), each with one split into two pieces;
        a piece no split makes is a token no merge makes (SentencePiece cannot make it either)."""
        merged = sorted((p for p in normal if len(p[2]) > 1), key=lambda p: (-p[0], p[1]))
        for before, after in zip(merged, merged[1:]):
            if before[0] == after[0]:
                raise self.refuse(f"pieces {before[1]} and {after[1]} ({before[2]!r}, {after[2]!r})",
                                  f"the same score {before[0]} (merges need a strict order)")
        order = {text: rank for rank, (_, _, text) in enumerate(merged)}
        known = {text for _, _, text in normal}
        lengths = sorted({len(text) for text in known})
        merges = []
        for _, _, text in merged:
            # Only cuts at the lengths pieces have: slicing at every cut is quadratic in a long piece.
            cuts = lengths[:bisect.bisect_left(lengths, len(text))]
            splits = [(max(order.get(text[:cut], -1), order.get(text[cut:], -1)), cut)
                      for cut in cuts if text[:cut] in known and text[cut:] in known]
            if splits:
                cut = min(splits)[1]
                merges.append((text[:cut].encode("utf-8"), text[cut:].encode("utf-8")))
        return merges


# -- writing -------------------------------------------------------------------------------------
def sentencepiece_model(tok: Tokenizer) -> bytes:
    """A SentencePiece BPE model that encodes like ``tok``, or InvalidArgumentError
    naming what SentencePiece cannot express."""
    from ..alphabet import fallback_byte_ids

    spec = tok.spec
    refusals = [what for what, present in (
        ("alphabet='bytes' (SentencePiece's symbols are characters)", spec.byte_level),
        ("no space_marker='▁' (SentencePiece writes spaces as ▁)", spec.space_marker != MARKER),
        (f"pretokenizer={spec.pretokenizer!r} (SentencePiece cuts words before ▁ only)",
         spec.pretokenizer not in ("metaspace", "none")),
        (f"segmentation={spec.segmentation!r} (SentencePiece merges by piece: train with segmentation='piece')",
         spec.segmentation != "piece"),
        (f"normalizer={spec.normalizer!r} (only none and collapse-spaces)",
         any(step != "collapse-spaces" for step in spec.normalizer_steps)),
        (f"dummy_prefix={spec.dummy_prefix!r}", spec.dummy_prefix in ("unless-space", "first")),
        ("no unk_token (SentencePiece always has an unknown piece)", spec.unk_token is None),
        ("no fuse_unk (SentencePiece makes a run of unknown characters one unknown piece)",
         not spec.fuse_unk and not spec.byte_fallback),
        ("word markers", spec.start_of_word is not None or spec.end_of_word is not None
         or spec.end_of_word_suffix is not None),
        ("no_inner_space", spec.no_inner_space),
        ("byte fallback tokens that are also characters (train with layout='sentencepiece' to keep them apart)",
         spec.byte_fallback and spec.layout != "sentencepiece")) if present]
    if refusals:
        raise InvalidArgumentError(f"{tok.name or 'this version'} has {refusals[0]}; it cannot be exported "
                                   "as a SentencePiece model", params=("format",))
    vocab = tok.vocab
    if sorted(vocab) != list(range(len(vocab))):
        raise InvalidArgumentError("SentencePiece's ids are places in a list: the version's ids have gaps",
                                   params=("format",))
    special_ids = set(tok.special_tokens.values())
    unk_id = tok.token_id(spec.unk_token or "")
    byte_of: dict[int, int] = {}
    if spec.byte_fallback:
        byte_of = {token_id: b for b, token_id in enumerate(fallback_byte_ids(vocab, special_ids))}
    users = {symbol.encode("utf-8") for symbol in spec.user_symbols}
    first_rank: dict[int, int] = {}
    for rank, (left, right) in enumerate(tok.merges):
        made = tok.token_id(left + right)
        if made is not None:
            first_rank.setdefault(made, rank)
    pieces = []
    for token_id in range(len(vocab)):
        data = vocab[token_id]
        if token_id in byte_of:
            pieces.append(Piece(f"<0x{byte_of[token_id]:02X}>", 0.0, BYTE))
        elif token_id == unk_id:
            pieces.append(Piece(data.decode("utf-8"), 0.0, UNKNOWN))
        elif token_id in special_ids:
            pieces.append(Piece(data.decode("utf-8"), 0.0, CONTROL))
        elif data in users:
            pieces.append(Piece(data.decode("utf-8"), 0.0, USER_DEFINED))
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidArgumentError(f"token {token_id} ({data!r}) is not UTF-8 text",
                                           params=("format",)) from None
            # Characters never come from a merge: their scores rank below every merge.
            order = first_rank.get(token_id, len(tok.merges) + token_id)
            pieces.append(Piece(text, -float(order), NORMAL))
    roles = special_roles(tok.special_tokens)
    trainer: dict[int, int | bytes] = {3: _BPE, 4: len(pieces), 35: int(spec.byte_fallback),
                                       40: unk_id if unk_id is not None else -1,
                                       45: (spec.unk_token or "<unk>").encode("utf-8")}
    if spec.space_suffix:
        trainer[24] = 1
    for role, id_field, piece_field in (("bos", 41, 46), ("eos", 42, 47), ("pad", 43, 48)):
        role_token = roles.get(role)
        trainer[id_field] = tok.special_tokens[role_token] if role_token is not None else -1
        if role_token is not None:
            trainer[piece_field] = role_token.encode("utf-8")
    normalizer: dict[int, int | bytes] = {1: b"identity", 3: int(spec.dummy_prefix == "always"),
                                          4: int("collapse-spaces" in spec.normalizer_steps), 5: 1}
    if spec.charsmap is not None:
        name, blob = decode_charsmap(spec.charsmap)
        normalizer.update({1: name.encode("utf-8"), 2: blob})
    return serialize_model(SentencePieceModel(pieces, trainer, normalizer))


def special_roles(special_tokens: dict[str, int] | tuple[str, ...] | list[str]) -> dict[str, str]:
    """bos / eos / pad: the special token playing each role, found by its usual name."""
    roles = {}
    for role, names in (("bos", BOS_NAMES), ("eos", EOS_NAMES), ("pad", PAD_NAMES)):
        found = [name for name in names if name in special_tokens]
        if found:
            roles[role] = found[0]
    return roles
