"""Tokenizer: encode and decode with a version's merges, held in memory.

The encoder takes a vocabulary and merges; where they came from (a store, GPT-2
files, ``train_bpe``) is not its business. Text goes through the spec's
pipeline (special tokens, normalizer, pre-tokenizer), then every pre-token is
split into bytes and merged by rank (``bpe.merge_word``). A bounded cache
remembers the ids of recent pre-tokens.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import AbstractSet, Literal

from . import alphabet
from .bpe import PAIR_SHIFT, merge_word
from .errors import BpestoreError
from .spec import TokenizerSpec
from .text import TextPipeline, rechunk, special_tokens_regex

WORD_CACHE_SIZE = 200_000


class DisallowedSpecialError(BpestoreError, ValueError):
    """The text holds a special token that the call did not allow."""


class Tokenizer:
    """A byte-level BPE tokenizer.

    >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"},
    ...                 [(b"a", b"b")])
    >>> tok.encode("abc")
    [256, 99]
    >>> tok.decode([256, 99])
    'abc'
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | dict[str, int] = (),
        *,
        spec: TokenizerSpec | None = None,
        name: str | None = None,
    ) -> None:
        """``vocab`` maps ids to bytes; ``merges`` are byte pairs in rank order;
        ``special_tokens`` are in ``vocab`` as their UTF-8 bytes; pass a dict
        (text -> id) where a special token's bytes also name an ordinary token."""
        special_ids = dict(special_tokens) if isinstance(special_tokens, dict) else {}
        special_tokens = list(special_tokens)
        if spec is None:
            spec = TokenizerSpec(special_tokens=tuple(special_tokens))
        elif special_tokens and tuple(special_tokens) != spec.special_tokens:
            spec = spec.replace(special_tokens=tuple(special_tokens))
        self.spec = spec
        self.name = name
        self._vocab = dict(vocab)
        self._merges = list(merges)
        for text in spec.special_tokens:
            if text not in special_ids:
                found = [i for i, b in sorted(self._vocab.items()) if b == text.encode("utf-8")]
                if not found:
                    raise BpestoreError(f"special token {text!r} is not in the vocabulary")
                special_ids[text] = found[0]
        self.special_tokens: dict[str, int] = special_ids
        # Ordinary bytes -> id; where a byte string has two ids the lowest wins.
        reserved = set(special_ids.values())
        self._id_of: dict[bytes, int] = {}
        for token_id in sorted(self._vocab):
            if token_id not in reserved:
                self._id_of.setdefault(self._vocab[token_id], token_id)
        # How a pre-token becomes initial ids: its bytes (the fast path below),
        # or the spec's own symbolization (characters, word markers).
        self._symbolize = alphabet.symbolizer(spec, self._id_of)
        if self._symbolize is None:
            self._byte_ids = alphabet.byte_ids(self._id_of)
        # Merge table: pair of ids -> rank, and the id each rank makes.
        self._ranks: dict[int, int] = {}
        self._merged_ids: list[int] = []
        for rank, (left, right) in enumerate(self._merges):
            try:
                key = (self._id_of[left] << PAIR_SHIFT) | self._id_of[right]
                merged = self._id_of[left + right]
            except KeyError:
                raise BpestoreError(f"merge {rank} ({left!r}, {right!r}) uses or makes a "
                                    "token missing from the vocabulary") from None
            self._ranks.setdefault(key, rank)
            self._merged_ids.append(merged)
        self._pipeline = TextPipeline(spec.replace(special_tokens=()))
        self._all_specials = TextPipeline(spec)  # for cutting streams
        self._special_regex_cache: dict[frozenset[str], object] = {}
        self._cache: dict[str, list[int]] = {}

    # -- what it is --------------------------------------------------------
    @property
    def vocab(self) -> dict[int, bytes]:
        """Every token id and its bytes."""
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges as byte pairs, in rank order."""
        return list(self._merges)

    @property
    def n_vocab(self) -> int:
        return max(self._vocab) + 1 if self._vocab else 0

    def token_id(self, data: bytes | str) -> int | None:
        """The id of a token given as bytes or text (special tokens included), or None."""
        if isinstance(data, str):
            if data in self.special_tokens:
                return self.special_tokens[data]
            data = data.encode("utf-8")
        return self._id_of.get(data)

    def __repr__(self) -> str:
        return f"<Tokenizer {self.name or ''} vocab={len(self._vocab)} merges={len(self._merges)}>"

    # -- encoding ----------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special tokens as ordinary text.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_ordinary("hi")
        [104, 105]
        """
        text = _fix_surrogates(text)
        out: list[int] = []
        self._encode_segment(text, out)
        return out

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode text to ids, with tiktoken's rules for special tokens.

        Special tokens in ``allowed_special`` become their ids; any in
        ``disallowed_special`` (by default every special token not allowed)
        raises ``DisallowedSpecialError``; the rest are encoded as plain text.

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"<|e|>"}, [],
        ...                 special_tokens=["<|e|>"])
        >>> tok.encode("a<|e|>", allowed_special="all")
        [97, 256]
        """
        allowed = self._resolve_allowed(allowed_special)
        if disallowed_special == "all":
            disallowed = set(self.special_tokens) - allowed
        else:
            disallowed = set(disallowed_special)
        text = _fix_surrogates(text)
        if disallowed:
            regex = self._specials_regex(frozenset(disallowed))
            match = regex.search(text) if regex is not None else None
            if match is not None:
                raise DisallowedSpecialError(
                    f"the text contains the special token {match.group()!r}, which is not "
                    "allowed. Pass allowed_special={" + repr(match.group()) + "} (or 'all') "
                    "to encode it as a special token, or disallowed_special=() to encode it "
                    "as ordinary text.")
        out: list[int] = []
        regex = self._specials_regex(frozenset(allowed)) if allowed else None
        if regex is None:
            self._encode_segment(text, out)
            return out
        start = 0
        for m in regex.finditer(text):
            self._encode_segment(text[start:m.start()], out)
            out.append(self.special_tokens[m.group()])
            start = m.end()
        self._encode_segment(text[start:], out)
        return out

    def encode_batch(self, texts: Iterable[str], **options) -> list[list[int]]:
        """``encode`` each text; takes the same keyword options."""
        return [self.encode(text, **options) for text in texts]

    def encode_iterable(self, chunks: Iterable[str], **options) -> Iterator[int]:
        """Encode a stream of text (e.g. an open file) lazily, in bounded memory.

        Chunks are re-cut at safe places, so no pre-token or special token is
        split across two chunks: the ids equal ``encode("".join(chunks))``.
        Takes the same keyword options as ``encode``.
        """
        for piece in rechunk(chunks, self._all_specials):
            yield from self.encode(piece, **options)

    def _resolve_allowed(self, allowed_special) -> set[str]:
        if allowed_special == "all":
            return set(self.special_tokens)
        allowed = set(allowed_special)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise BpestoreError(f"not a special token of this tokenizer: {sorted(unknown)[0]!r}")
        return allowed

    def _specials_regex(self, tokens: frozenset[str]):
        regex = self._special_regex_cache.get(tokens)
        if regex is None and tokens:
            regex = self._special_regex_cache[tokens] = special_tokens_regex(tokens)
        return regex

    def _encode_segment(self, text: str, out: list[int]) -> None:
        """Encode a stretch of text that holds no special token to be matched."""
        if not text:
            return
        cache = self._cache
        for word in self._pipeline.pretokenize(text):
            ids = cache.get(word)
            if ids is None:
                ids = self._encode_word(word)
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                cache[word] = ids
            out.extend(ids)

    def _encode_word(self, word: str) -> list[int]:
        if self._symbolize is not None:
            ids = self._symbolize(word)
        else:
            byte_ids = self._byte_ids
            ids = [byte_ids[b] for b in word.encode("utf-8")]
        if len(ids) < 2:
            return ids
        return merge_word(ids, self._ranks, self._merged_ids)

    # -- decoding ----------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids."""
        vocab = self._vocab
        try:
            return b"".join([vocab[i] for i in ids])
        except KeyError as exc:
            raise BpestoreError(f"unknown token id {exc.args[0]} (the vocabulary has ids "
                                f"0..{self.n_vocab - 1})") from None
        except TypeError:
            raise BpestoreError("token ids must be integers") from None

    def decode(self, ids: Iterable[int], *, errors: str = "replace") -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD unless errors="strict"."""
        data = self.decode_bytes(ids)
        try:
            return data.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise BpestoreError(f"the tokens do not decode to valid UTF-8 (byte {exc.start}); "
                                "use errors='replace' to substitute U+FFFD") from None

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token."""
        return self.decode_bytes([token_id])


def _fix_surrogates(text: str) -> str:
    """Replace lone surrogates with U+FFFD, as tiktoken does before encoding."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
