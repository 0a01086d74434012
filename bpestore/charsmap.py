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

import functools
import re
import sys
from array import array
from collections.abc import Iterable, Iterator

import regex

from .errors import DamagedDataError

_SPACE, _MARKER, _REPLACEMENT = b" ", "\u2581".encode(), "\ufffd".encode()
_GRAPHEME = regex.compile(r"\X")
_WINDOW = 64  # characters looked at where a key may be longer than one character
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
        self._chars: dict[str, tuple[bytes, int]] = {}
        self._chunks: dict[tuple[str, tuple[bool, bool], bool], tuple[bytes, tuple[bool, bool]]] = {}

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
        fast = None if keep else self._by_chunks(text, remove_extra_whitespaces)
        if fast is None:
            data, (started, _) = _spaces(self._pieces(text, keep), (False, remove_extra_whitespaces),
                                         remove_extra_whitespaces)
            out = bytearray(data)
        else:
            out, started = fast
        if not started:
            return ""
        if dummy_prefix and not suffix:
            out[:0] = _MARKER
        if remove_extra_whitespaces:
            while out.endswith(_MARKER):  # (the dummy prefix too, where nothing follows it)
                del out[-len(_MARKER):]
        if dummy_prefix and suffix:
            out += _MARKER
        return out.decode("utf-8", "surrogatepass")

    def _by_chunks(self, text: str, remove: bool) -> tuple[bytearray, bool] | None:
        """``normalize``'s bytes (before the dummy prefix) and whether any place was kept,
        from the text's words each with the space after it: a word is looked up once for
        each state it starts in. None where a word cannot be normalized alone (a key might
        go on past the space after it) or the text holds bytes that are not UTF-8."""
        if not _encodes(text):
            return None
        chunks = text.split(" ")
        out, state, cache, last = bytearray(), (False, remove), self._chunks, len(chunks) - 1
        for at, word in enumerate(chunks):
            chunk = word if at == last else word + " "
            if not chunk:
                continue
            key = (chunk, state, remove)
            found = cache.get(key)
            if found is None:
                if at < last and self._open(chunk):
                    return None
                found = _spaces(self._pieces(chunk, ()), state, remove)
                if len(cache) >= 1 << 16:
                    cache.clear()
                cache[key] = found
            out += found[0]
            state = found[1]
        return out, state[0]

    def _open(self, chunk: str) -> bool:
        """Whether a key starting in ``chunk`` may go on past its end (the trie still walks there)."""
        data, chars = chunk.encode("utf-8"), self._chars
        units, n_units, at = self.units, len(self.units), 0
        for char in chunk:
            found = chars.get(char)
            if found is None:
                found = chars[char] = self._char(char)
            at += len(char.encode("utf-8"))
            node = found[1]
            for byte in data[at:]:
                if node < 0:
                    break
                node ^= byte
                if node >= n_units or units[node] & 0x800000FF != byte:
                    node = -1
                    break
                node ^= _offset(units[node])
            else:
                if node >= 0:
                    return True
        return False

    def _pieces(self, text: str, keep: tuple[str, ...]) -> Iterator[bytes]:
        """The normalized bytes of each place of ``text``, in order (``replacement``). A character
        that no longer key starts with is looked up once (``_char``); bytes that are not UTF-8
        and user symbols take the byte-wise path."""
        if keep or not _encodes(text):
            data = _utf8(text)
            replacement = self.replacement if not keep else functools.partial(self._kept_or_replaced, _matcher(keep))
            at = 0
            while at < len(data):
                piece, used = replacement(data, at)
                at += used
                yield piece
            return
        chars, units, n_units, at, n = self._chars, self.units, len(self.units), 0, len(text)
        while at < n:
            found = chars.get(text[at])
            if found is None:
                found = chars[text[at]] = self._char(text[at])
            node = found[1]
            if node >= 0 and at + 1 < n:
                # A longer key goes on with the next character's first byte: if not with this one, none is here.
                byte = ord(text[at + 1])
                byte = byte if byte < 0x80 else text[at + 1].encode("utf-8")[0]
                if (node ^ byte) >= n_units or units[node ^ byte] & 0x800000FF != byte:
                    node = -1
            if node >= 0 and at + 1 < n:
                window = text[at:at + _WINDOW].encode("utf-8")
                piece, used = self.replacement(window, 0)
                if used == len(window) and at + _WINDOW < n:  # a key as long as the window: look at all
                    window = text[at:].encode("utf-8")
                    piece, used = self.replacement(window, 0)
                at += len(window[:used].decode("utf-8"))
                yield piece
            else:
                at += 1
                yield found[0]

    def _char(self, char: str) -> tuple[bytes, int]:
        """A character's replacement alone, and the trie's node after it where a longer
        key starts with it (else -1)."""
        data = char.encode("utf-8")
        units, n_units = self.units, len(self.units)
        node = _offset(units[0])
        for byte in data:
            node ^= byte
            if node >= n_units or units[node] & 0x800000FF != byte:
                return data, -1  # no key starts with it
            node ^= _offset(units[node])
        longer = any((node ^ label) < n_units and units[node ^ label] & 0x800000FF == label for label in range(1, 256))
        return self.replacement(data, 0)[0], node if longer else -1

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


def _spaces(pieces: Iterable[bytes], state: tuple[bool, bool], remove: bool) -> tuple[bytes, tuple[bool, bool]]:
    """sentencepiece's space rules over normalized pieces: their bytes with spaces as ▁, from
    ``state`` (whether a piece was kept yet, whether the last one ended with a space) to the
    state after them; ``remove``: remove_extra_whitespaces (spaces at the start and repeated go)."""
    out = bytearray()
    started, after_space = state
    for piece in pieces:
        if not started:
            if remove and piece == _SPACE:
                continue  # (a space at the start, not a piece that starts with one)
            started = True
        if after_space:
            piece = piece.lstrip(_SPACE)
        if piece:
            out += piece.replace(_SPACE, _MARKER)
            after_space = remove and piece.endswith(_SPACE)
        elif not remove:
            after_space = False
    return bytes(out), (started, after_space)


def _encodes(text: str) -> bool:
    """Whether ``text`` is UTF-8 text (no lone surrogates: bytes that were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    import base64  # only where a spec holds a map: a plain ingest needs none

    return Charsmap(base64.b64decode(encoded.partition(":")[2], validate=True))


def encode_charsmap(name: str, blob: bytes) -> str:
    """A spec's ``charsmap`` for a model's normalizer name and map."""
    import base64

    return f"{name}:{base64.b64encode(blob).decode('ascii')}"


def decode_charsmap(encoded: str) -> tuple[str, bytes]:
    import base64

    name, _, data = encoded.partition(":")
    return name, base64.b64decode(data, validate=True)
