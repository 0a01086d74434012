"""GPT-2's ``vocab.json`` + ``merges.txt`` and its byte-to-unicode alphabet."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import IO

from ..alphabet import bytes_to_unicode
from ..errors import DamagedDataError, NotFoundError


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def token_to_str(data: bytes) -> str:
    """Bytes written in GPT-2's alphabet (``b" the"`` -> ``"Ġthe"``)."""
    chars = bytes_to_unicode()
    return "".join(chars[b] for b in data)


@lru_cache(maxsize=1)
def _to_latin1() -> dict[int, str]:
    """str.translate's table from GPT-2's alphabet to the bytes as Latin-1 characters;
    a character below 256 outside the alphabet becomes one that Latin-1 cannot encode."""
    table = {ord(c): chr(b) for c, b in unicode_to_bytes().items()}
    return {**{b: "\uffff" for b in range(256) if b not in table}, **table}


def str_to_token(text: str) -> bytes:
    """Inverse of ``token_to_str``; raises DamagedDataError on a foreign character."""
    try:
        return text.translate(_to_latin1()).encode("latin-1")
    except UnicodeEncodeError:
        pass
    table = unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as exc:
        raise DamagedDataError(f"{text!r} is not written in GPT-2's byte alphabet "
                               f"(character {exc.args[0]!r})") from None


def read_gpt2(vocab_path: str | Path, merges_path: str | Path
              ) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], list[str]]:
    """Read GPT-2 files; returns (vocab, merges, special_tokens).

    Special tokens are the entries that are neither single bytes nor made by a
    merge (``<|endoftext|>`` for GPT-2); they are returned as text.
    """
    try:
        with open(vocab_path, encoding="utf-8") as f:
            encoder = json.load(f, object_pairs_hook=_no_repeats(vocab_path))
    except FileNotFoundError:
        raise NotFoundError(f"vocabulary file not found: {vocab_path}", params=("vocab",)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedDataError(f"{vocab_path} is not a JSON vocabulary: {exc}", params=("vocab",)) from None
    except RecursionError:
        raise DamagedDataError(f"{vocab_path} is nested too deeply to be a vocabulary", params=("vocab",)) from None
    if not isinstance(encoder, dict):
        raise DamagedDataError(f"{vocab_path} must map token strings to ids", params=("vocab",))
    merges: list[tuple[bytes, bytes]] = []
    try:
        with open(merges_path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line or (number == 1 and line.startswith("#version")):
                    continue
                parts = line.split(" ")
                if len(parts) != 2:
                    raise DamagedDataError(f"{merges_path}:{number}: a merge is two tokens "
                                           f"separated by one space, got {line!r}", params=("merges",))
                merges.append((str_to_token(parts[0]), str_to_token(parts[1])))
    except FileNotFoundError:
        raise NotFoundError(f"merges file not found: {merges_path}", params=("merges",)) from None
    except UnicodeDecodeError as exc:
        raise DamagedDataError(f"{merges_path} is not UTF-8 text (byte {exc.start}); "
                               "merges.txt holds tokens in GPT-2's byte alphabet", params=("merges",)) from None
    merged = {a + b for a, b in merges}
    vocab: dict[int, bytes] = {}
    specials: list[str] = []
    for text, token_id in encoder.items():
        if type(token_id) is not int or not 0 <= token_id < len(encoder):
            raise DamagedDataError(f"{vocab_path}: the id of {text!r} is {token_id!r}; ids are the whole "
                                   f"numbers 0 to {len(encoder) - 1}, each once", params=("vocab",))
        if token_id in vocab:
            raise DamagedDataError(f"{vocab_path}: id {token_id} is given twice", params=("vocab",))
        try:
            data: bytes | None = str_to_token(text)
        except DamagedDataError:
            data = None
        if data is None or (len(data) > 1 and data not in merged):
            if data is not None and not SPECIAL_LOOK.fullmatch(text):
                raise DamagedDataError(f"{vocab_path}: {text!r} (id {token_id}) is made by no merge of "
                                       f"{merges_path} (is it cut short?)", params=("vocab", "merges"))
            specials.append(text)
            data = text.encode("utf-8")
        vocab[token_id] = data
    return vocab, merges, specials


# An entry that no merge makes is a special token if it looks like one: <|endoftext|>, [CLS], <s>.
SPECIAL_LOOK = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")


def reads_as_special(text: str, merged: set[bytes]) -> bool:
    """Whether ``read_gpt2`` reads the vocab.json entry ``text`` back as a special
    token (GPT-2's files cannot mark one: it is told by its spelling)."""
    if not all(c in unicode_to_bytes() for c in text):
        return True
    data = str_to_token(text)
    return len(data) > 1 and data not in merged and SPECIAL_LOOK.fullmatch(text) is not None


def _no_repeats(path: str | Path):  # noqa: ANN202
    """A json object_pairs_hook that refuses a key given twice (json keeps the last)."""
    def build(pairs: list[tuple[str, object]]) -> dict[str, object]:
        built: dict[str, object] = {}
        for key, value in pairs:
            if key in built:
                raise DamagedDataError(f"{path}: {key!r} is given twice", params=("vocab",))
            built[key] = value
        return built
    return build


def write_gpt2(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], special_tokens: list[str],
               vocab_file: IO[str], merges_file: IO[str]) -> None:
    """Write GPT-2 style files (merges.txt with the ``#version: 0.2`` header) into open text files."""
    special_bytes = {t.encode("utf-8"): t for t in special_tokens}
    encoder = {}
    for token_id, data in sorted(vocab.items()):
        encoder[special_bytes.get(data) or token_to_str(data)] = token_id
    json.dump(encoder, vocab_file, ensure_ascii=False)
    merges_file.write("#version: 0.2\n")
    for left, right in merges:
        merges_file.write(f"{token_to_str(left)} {token_to_str(right)}\n")
