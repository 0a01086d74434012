"""How a spec turns words into initial symbols: the starting vocabulary of training.

Byte-level (the default): ids 0..255 are the byte values, then the special
tokens; a word's initial symbols are its bytes. Other alphabets and word
markers extend the two functions here; the trainer only ever sees ids.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from .errors import BpestoreError
from .spec import TokenizerSpec


def initial_vocab(spec: TokenizerSpec) -> list[bytes]:
    """The tokens a version starts with, by id: bytes 0..255, then special tokens."""
    if not spec.byte_level:
        raise BpestoreError("only byte-level versions (alphabet 'bytes') are supported so far")
    return [bytes([i]) for i in range(256)] + [t.encode("utf-8") for t in spec.special_tokens]


def special_ids(spec: TokenizerSpec) -> list[int]:
    return list(range(256, 256 + len(spec.special_tokens)))


def initial_words(spec: TokenizerSpec, word_counts: Mapping[bytes, int]) -> Iterator[tuple[list[int], int]]:
    """Each counted word as its initial symbol ids, with its count."""
    for word, count in word_counts.items():
        yield list(word), count


def hf_order(spec: TokenizerSpec) -> list[int]:
    """Initial ids in Hugging Face's numbering: specials first, then the alphabet
    sorted by the code point of each byte's GPT-2 byte-to-unicode character."""
    from .formats.gpt2 import bytes_to_unicode

    char_of = bytes_to_unicode()
    return special_ids(spec) + sorted(range(256), key=lambda b: ord(char_of[b]))
