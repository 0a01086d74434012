"""tiktoken rank files (``base64-token rank`` per line): read, turned into a
version (its merges derived by ``bpe.derive_merges``), or loaded as a Tokenizer
that encodes by tiktoken's rule straight from the ranks."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import cast

from ..bpe import derive_merges
from ..encoder import Tokenizer, core_backend
from ..errors import DamagedDataError, InvalidArgumentError, NotFoundError
from ..limits import MAX_INT
from ..spec import TokenizerSpec

NAMED_PATTERNS = ("gpt2", "cl100k", "o200k")
MAX_LINE = 1 << 20  # bytes of a rank file's line (real ones: under 200)


def read_ranks(path: str | Path) -> dict[bytes, int]:
    """The token -> rank map of a rank file; DamagedDataError naming the line
    of a malformed entry, a token or a rank given twice."""
    ranks: dict[bytes, int] = {}
    seen: dict[int, int] = {}
    try:
        with open(path, "rb") as f:
            for number, line in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
                if len(line) > MAX_LINE:
                    raise DamagedDataError(f"{path}:{number}: a line longer than {MAX_LINE:,} bytes; a rank "
                                           "file's lines are a token and its rank", params=("path",))
                if not line.strip():
                    continue
                parts = line.split()
                try:
                    if len(parts) != 2:
                        raise ValueError
                    token = base64.b64decode(parts[0], validate=True)
                    rank = int(parts[1])
                except (ValueError, binascii.Error):
                    raise DamagedDataError(f"{path}:{number}: a line is a base64 token and its rank, got "
                                           f"{line[:80]!r}", params=("path",)) from None
                if not token or not 0 <= rank <= MAX_INT:
                    raise DamagedDataError(f"{path}:{number}: an empty token or a rank out of range ({rank})",
                                           params=("path",))
                if token in ranks:
                    raise DamagedDataError(f"{path}:{number}: token {token!r} is given twice", params=("path",))
                if rank in seen:
                    raise DamagedDataError(f"{path}:{number}: rank {rank} is given twice (line {seen[rank]} "
                                           "has it too)", params=("path",))
                ranks[token] = rank
                seen[rank] = number
    except FileNotFoundError:
        raise NotFoundError(f"file not found: {path}", params=("path",)) from None
    except IsADirectoryError:
        raise InvalidArgumentError(f"{path} is a folder; give the rank file", params=("path",)) from None
    if not ranks:
        raise DamagedDataError(f"{path} holds no ranks", params=("path",))
    return ranks


def parse_special_tokens(items: Iterable[str]) -> dict[str, int]:
    """``TOK=ID`` strings as a map (the last ``=`` separates the id)."""
    found: dict[str, int] = {}
    for item in items:
        text, eq, number = item.rpartition("=")
        if not eq or not text:
            raise InvalidArgumentError(f"special token {item!r} is not TOKEN=ID", params=("special_tokens",))
        try:
            found[text] = int(number)
        except ValueError:
            raise InvalidArgumentError(f"special token {item!r}: the id {number!r} is not a whole number",
                                       params=("special_tokens",)) from None
    return found


def tiktoken_version(ranks: Mapping[bytes, int], pattern: str, special_tokens: Mapping[str, int]
                     ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], TokenizerSpec]:
    """(vocab, merges, spec) of a rank file: the ids are the ranks, the special
    tokens at their ids; ``pattern`` is gpt2, cl100k, o200k or a regex."""
    vocab, spec = _vocab_and_spec({rank: token for token, rank in ranks.items()}, pattern, special_tokens)
    return vocab, derive_merges(ranks), spec


def _vocab_and_spec(vocab: dict[int, bytes], pattern: str, special_tokens: Mapping[str, int]
                    ) -> tuple[dict[int, bytes], TokenizerSpec]:
    """The rank file's vocabulary with the special tokens at their ids, and the spec."""
    for text, token_id in special_tokens.items():
        if not text:
            raise InvalidArgumentError("a special token cannot be empty", params=("special_tokens",))
        if type(token_id) is not int or not 0 <= token_id <= MAX_INT:
            raise InvalidArgumentError(f"special token {text!r}: id {token_id!r} is out of range",
                                       params=("special_tokens",))
        if token_id in vocab:
            raise InvalidArgumentError(f"special token {text!r}: id {token_id} is already the rank of "
                                       f"{vocab[token_id]!r}", params=("special_tokens",))
        vocab[token_id] = text.encode("utf-8")
    if not pattern:
        raise InvalidArgumentError("pattern cannot be empty; give gpt2, cl100k, o200k or a regex",
                                   params=("pattern",))
    if pattern in NAMED_PATTERNS:
        spec = TokenizerSpec(pretokenizer=pattern, special_tokens=tuple(special_tokens))
    else:
        spec = TokenizerSpec(pretokenizer="regex", pattern=pattern, special_tokens=tuple(special_tokens))
    return vocab, spec


def rank_tokens(path: str | Path) -> list[bytes | None]:
    """The tokens of a rank file by rank (None where no token has a rank): read in C
    where the encode core is built and the file is plain, else by ``read_ranks``
    (which says what is wrong with a file that is not)."""
    tokens = None
    if core_backend.CORE is not None:
        try:
            tokens = core_backend.CORE.read_rank_file(Path(path).read_bytes())
        except OSError:
            pass  # read_ranks says what
    if tokens is None:
        ranks = read_ranks(path)
        tokens = [None] * (max(ranks.values()) + 1)
        for token, rank in ranks.items():
            tokens[rank] = token
    return tokens


def load_tokenizer(path: str | Path, pattern: str, special_tokens: Mapping[str, int] | None = None, *,
                   name: str | None = None) -> Tokenizer:
    """A Tokenizer of a rank file that encodes by tiktoken's rule (the lowest-ranked
    adjacent pair joined first), the compiled core's tables built straight from the
    ranks; the merges are derived (``derive_merges``) only where first needed (the
    pure-Python path, ``Tokenizer.merges``, pickling).

    Its ids are tiktoken's: the compiled core's by construction; the pure-Python
    path's where the derived merges give tiktoken's ids, as they do for every file
    whose tokens each encode to themselves by them (GPT-2's, cl100k's, o200k's).
    """
    tokens = rank_tokens(path)
    present = set(tokens)
    if not all(bytes([b]) in present for b in range(256)):
        derive_merges({token: 0 for token in present if token is not None and len(token) == 1})  # its error
    vocab = cast(dict[int, bytes], dict(enumerate(tokens)))
    if None in present:  # ranks that no token has
        vocab = {rank: token for rank, token in vocab.items() if token is not None}
    vocab, spec = _vocab_and_spec(vocab, pattern, special_tokens or {})
    return Tokenizer(vocab, None, dict(special_tokens or {}), spec=spec, name=name, ranks=tokens)
