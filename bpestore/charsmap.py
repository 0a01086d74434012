"""SentencePiece's normalizer: its precompiled character map and whitespace rules.

A model's ``normalizer_spec.precompiled_charsmap`` (``nmt_nfkc``, ``nfkc``,
``nmt_nfkc_cf``, ``nfkc_cf`` or a compiled rule TSV) is a uint32 (little-endian)
giving the size in bytes of a Darts double-array trie, the trie's units, then
NUL-terminated normalized strings. At each place of the UTF-8 text the longest
key of the trie found there is replaced by its string; where no key starts,
one character is kept, or where the bytes are not UTF-8, each byte becomes
U+FFFD (not looked up: ``nmt_nfkc`` drops a U+FFFD the text holds). Spaces are then handled as sentencepiece's
``Normalizer::Normalize`` does, on the normalized text.
"""

from __future__ import annotations

import base64
import functools
import re
import sys
from array import array

import regex

from .errors import DamagedDataError

_SPACE, _MARKER, _REPLACEMENT = b" ", "\u2581".encode(), "\ufffd".encode()
_GRAPHEME = regex.compile(r"\X")
_MAX_RESULTS = 32  # sentencepiece's kMaxTrieResultsSize: later prefix matches are not seen


class Charsmap:
    """A precompiled character map, read and checked."""

    def __init__(self, blob: bytes) -> None:
        if len(blob) <= 4:
            raise DamagedDataError("the precompiled character map is broken (no trie size)")
        size = int.from_bytes(blob[:4], "little")
        if size >= len(blob) or size % 4 or size == 0:
            raise DamagedDataError(f"the precompiled character map's trie size {size} does not fit its "
                                   f"{len(blob)} bytes")
        self.blob = blob
        self.units = array("I", blob[4:4 + size])
        if sys.byteorder == "big":
            self.units.byteswap()
        self.strings = blob[4 + size:]
        self._graphemes: dict[str, str] = {}

    def replacement(self, data: bytes, at: int) -> tuple[bytes, int]:
        """(normalized bytes, bytes consumed) at ``data[at:]``, as ``NormalizePrefix``."""
        units, n_units = self.units, len(self.units)
        node = _offset(units[0])
        longest = value = found = 0
        for end in range(at, len(data)):
            byte = data[end]
            node ^= byte
            if node >= n_units:
                break
            unit = units[node]
            if unit & 0x800000FF != byte:
                break
            node ^= _offset(unit)
            if unit >> 8 & 1:
                if node >= n_units:
                    raise DamagedDataError("the precompiled character map's trie points outside it")
                found += 1
                if found <= _MAX_RESULTS:
                    longest, value = end + 1 - at, units[node] & 0x7FFFFFFF
        if longest:
            stop = self.strings.find(b"\0", value)
            if value >= len(self.strings) or stop < 0:
                raise DamagedDataError("the precompiled character map's trie points past its strings")
            return self.strings[value:stop], longest
        length = _char_length(data[at])
        if length > 1 and not _valid(data[at:at + length]):
            return _REPLACEMENT, 1  # each byte of invalid UTF-8 is one U+FFFD, never mapped
        return data[at:at + length], length

    def first_match(self, data: bytes) -> bytes | None:
        """The normalized string of the shortest key that ``data`` starts with (None: no key)."""
        units, n_units = self.units, len(self.units)
        node = _offset(units[0])
        for byte in data:
            if byte == 0:
                break
            node ^= byte
            if node >= n_units:
                return None
            unit = units[node]
            if unit & 0x800000FF != byte:
                return None
            node ^= _offset(unit)
            if unit >> 8 & 1:
                if node >= n_units:
                    raise DamagedDataError("the precompiled character map's trie points outside it")
                value = units[node] & 0x7FFFFFFF
                stop = self.strings.find(b"\0", value)
                return self.strings[value:stop if stop >= 0 else len(self.strings)]
        return None

    def normalize_graphemes(self, text: str) -> str:
        """``text`` as Hugging Face's ``Precompiled`` normalizer maps it: each grapheme
        under 6 bytes that starts with a key becomes the shortest such key's string
        (the whole grapheme, however long the key); otherwise each character does so."""
        cache = self._graphemes
        out = []
        for grapheme in _GRAPHEME.findall(text):
            found = cache.get(grapheme)
            if found is None:
                found = self._grapheme(grapheme)
                if len(cache) >= 1 << 16:
                    cache.clear()
                cache[grapheme] = found
            out.append(found)
        return "".join(out)

    def _grapheme(self, grapheme: str) -> str:
        data = grapheme.encode("utf-8", "surrogatepass")
        whole = self.first_match(data) if len(data) < 6 else None
        if whole is not None:
            return whole.decode("utf-8", "replace")
        parts = []
        for char in grapheme:
            found = self.first_match(char.encode("utf-8", "surrogatepass"))
            parts.append(char if found is None else found.decode("utf-8", "replace"))
        return "".join(parts)

    def normalize(self, text: str, *, dummy_prefix: bool, remove_extra_whitespaces: bool, suffix: bool = False,
                  keep: tuple[str, ...] = ()) -> str:
        """``text`` as sentencepiece normalizes it, spaces written as ▁ (escape_whitespaces);
        ``suffix``: treat_whitespace_as_suffix (the dummy space goes at the end); ``keep``:
        user-defined symbols, left as they are where they start (the longest first)."""
        data = _utf8(text)
        replacement = self.replacement if not keep else functools.partial(self._kept_or_replaced, _matcher(keep))
        at, n = 0, len(data)
        if remove_extra_whitespaces:
            while at < n:
                piece, used = replacement(data, at)
                if piece != _SPACE:
                    break
                at += used
        if at == n:
            return ""
        out = bytearray(_MARKER if dummy_prefix and not suffix else b"")
        after_space = remove_extra_whitespaces
        while at < n:
            piece, used = replacement(data, at)
            at += used
            if after_space:
                piece = piece.lstrip(_SPACE)
            if piece:
                out += piece.replace(_SPACE, _MARKER)
                after_space = piece.endswith(_SPACE)
            if not remove_extra_whitespaces:
                after_space = False
        if remove_extra_whitespaces:
            while out.endswith(_MARKER):
                del out[-len(_MARKER):]
        if dummy_prefix and suffix:
            out += _MARKER
        return out.decode("utf-8", "surrogatepass")


    def _kept_or_replaced(self, matcher: tuple[bytes, re.Pattern[bytes]], data: bytes, at: int) -> tuple[bytes, int]:
        firsts, pattern = matcher
        if data[at] in firsts:
            m = pattern.match(data, at)
            if m is not None:
                return m.group(), m.end() - at
        return self.replacement(data, at)


@functools.lru_cache(maxsize=8)
def _matcher(symbols: tuple[str, ...]) -> tuple[bytes, re.Pattern[bytes]]:
    """The first bytes of the symbols, and a pattern matching the longest of them."""
    encoded = sorted({s.encode("utf-8") for s in symbols}, key=lambda s: (-len(s), s))
    return bytes({s[0] for s in encoded}), re.compile(b"|".join(re.escape(s) for s in encoded))


def _utf8(text: str) -> bytes:
    """The bytes of a text, where bytes that are not UTF-8 come as ``surrogateescape``
    gives them (lone surrogates from elsewhere as their invalid three bytes)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _valid(char: bytes) -> bool:
    try:
        char.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _offset(unit: int) -> int:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def _char_length(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


@functools.lru_cache(maxsize=8)
def charsmap_of(encoded: str) -> Charsmap:
    """The map a spec's ``charsmap`` (``NAME:BASE64``) holds."""
    return Charsmap(base64.b64decode(encoded.partition(":")[2], validate=True))


def encode_charsmap(name: str, blob: bytes) -> str:
    """A spec's ``charsmap`` for a model's normalizer name and map."""
    return f"{name}:{base64.b64encode(blob).decode('ascii')}"


def decode_charsmap(encoded: str) -> tuple[str, bytes]:
    name, _, data = encoded.partition(":")
    return name, base64.b64decode(data, validate=True)
