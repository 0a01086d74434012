"""Tiktoken's Rust core as a backend, fed a version's ranks.

It is used only where it provably gives the ids of the reference encoder
(``bpe.merge_word`` on the spec's pre-tokens), which stays the fallback:

1. **The version** passes ``rank_rule.rank_rule_problem``: the spec is exactly
   what tiktoken runs and tiktoken's rank rule gives the merge rule's ids.
   Special tokens are matched before any of this, so they never reach tiktoken.

2. **The text**: the two regex engines (Python's ``regex`` module and Rust's
   ``fancy-regex``) carry their own Unicode tables, which differ for
   characters assigned in newer Unicode versions (tiktoken 0.14 knows the
   letters of Unicode 16.0 but not those of 17.0; ``regex`` 2026.11 knows 17.0
   and later: they split differently around 17,480 letters and digits, none of
   them assigned in Python 3.11's Unicode 14.0). Both engines are checked to
   know a letter new in each Unicode version up to that of Python's
   ``unicodedata``, and a stretch of text holding a character unassigned there
   is encoded by the pure path. ``tests/test_tiktoken_path.py`` compares the engines
   around every code point ``unicodedata`` knows.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from array import array
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import cast

from ..spec import TokenizerSpec
from ..text import PATTERNS

CONCURRENT_CHECK_AFTER = 1 << 20  # characters of a text whose check runs beside its encoding


def tiktoken_problem() -> str | None:
    """None where tiktoken is installed and its Unicode tables can be trusted."""
    if importlib.util.find_spec("tiktoken") is None:
        return "tiktoken is not installed (pip install 'bpestore[fast]')"
    return _unicode_problem()


class TiktokenEncoder:
    """tiktoken's core with a version's ranks and pattern, no special tokens."""

    def __init__(self, spec: TokenizerSpec, ranks: dict[bytes, int]) -> None:
        """``ranks``: each ordinary token's bytes and id, in tiktoken's sense
        (the rank rule holds: a token's id orders it as its merge's rank does)."""
        import tiktoken

        # One special token that is never allowed: without any, the special
        # pattern of tiktoken's encode() is empty and matches everywhere (slow).
        never = {"<|bpestore: never allowed|>": max(ranks.values()) + 1}
        self._encoding = tiktoken.Encoding(name="bpestore", pat_str=PATTERNS[spec.pretokenizer],
                                           mergeable_ranks=ranks, special_tokens=never)

    def encode(self, text: str) -> list[int] | None:
        """The ids of text as a new list (tiktoken's own: no copy); None where
        ``encode_into`` would add nothing."""
        ids = self._checked_ids(text, as_array=False)
        return cast("list[int] | None", ids)

    def encode_into(self, text: str, out: list | array, first: bool = True) -> bool:
        """Add the ids of text to ``out`` (a list, or a uint32 array, which
        gets them without a Python int each); False, adding nothing, where the
        text holds a lone surrogate or a character the two regex engines might
        classify differently. (``first`` changes nothing: the specs this backend
        runs have no dummy prefix.)"""
        ids = self._checked_ids(text, as_array=isinstance(out, array))
        if ids is None:
            return False
        out.extend(ids)
        return True

    def _checked_ids(self, text: str, *, as_array: bool) -> Sequence[int] | None:
        """The ids of text (a list, or with ``as_array`` a uint32 array), or None
        where the text holds a lone surrogate or a character the two regex
        engines might classify differently.

        On a long text that is not ASCII, that check of its characters runs in
        a second thread while tiktoken's core encodes it in this one (the core
        releases the GIL), so it costs no time where a second core is free.
        (The other way round, the core ran 20-25% slower in a thread of its own
        than in the thread that started it, here.)"""
        if _long_space_run(text):
            # tiktoken's regex engine overflows its stack (a Rust panic) on a
            # run of about a million whitespace characters.
            return None
        if text.isascii():
            return self._encode_core(text, as_array)
        if len(text) < CONCURRENT_CHECK_AFTER:
            return self._encode_core(text, as_array) if all_assigned(text) else None
        with ThreadPoolExecutor(1) as pool:
            assigned = pool.submit(all_assigned, text)
            ids = self._encode_core(text, as_array)
            return ids if assigned.result() else None

    def _encode_core(self, text: str, as_array: bool) -> Sequence[int] | None:
        """The ids of text from tiktoken's core; None where the core panicked."""
        core = self._encoding._core_bpe
        try:
            if as_array and hasattr(core, "encode_to_tiktoken_buffer"):
                # The ids as a buffer of uint32 (tiktoken >= 0.9); no specials here.
                ids = array("I")
                ids.frombytes(memoryview(core.encode_to_tiktoken_buffer(text, set())).cast("B"))
                return ids
            return self._encoding.encode_ordinary(text)
        except BaseException as exc:  # a Rust panic is a BaseException
            if type(exc).__name__ != "PanicException":
                raise
            return None


_SPACE_RUN = re.compile(r"\s{50000}")


def _long_space_run(text: str) -> bool:
    """True where text holds a run of 100,000 whitespace characters (or of
    50,000, at least). Such a run holds a multiple p of 50,000 and stretches
    50,000 after p or 50,000 before it, so only every 50,000th character
    needs a look: no cost on ordinary text."""
    step = 50_000
    for p in range(0, len(text), step):
        if text[p].isspace() and (_SPACE_RUN.match(text, p) or
                                  (p >= step and _SPACE_RUN.match(text, p - step + 1))):
            return True
    return False


# -- the text: Unicode ---------------------------------------------------------

# One letter first assigned in each Unicode version (Lo or Lu there).
_NEW_LETTERS = {
    "13.0.0": "\U00010E80",  # YEZIDI LETTER ELIF
    "14.0.0": "\U00010F70",  # OLD UYGHUR LETTER ALEPH
    "15.0.0": "\U00011F04",  # KAWI LETTER A
    "15.1.0": "\U0002EBF0",  # CJK UNIFIED IDEOGRAPH-2EBF0
    "16.0.0": "\U00010D50",  # GARAY CAPITAL LETTER A
    "17.0.0": "\U00010940",  # a letter of the Sidetic script
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@lru_cache(maxsize=1)
def _unicode_problem() -> str | None:
    """Check that both regex engines know every letter of Python's Unicode version."""
    import regex
    import tiktoken

    known = _version(unicodedata.unidata_version)
    if known > max(map(_version, _NEW_LETTERS)):
        return f"Python's Unicode {unicodedata.unidata_version} is newer than bpestore knows"
    probes = [c for v, c in _NEW_LETTERS.items() if _version(v) <= known]
    # Each probe "a" + letter is one pre-token (hence the whole token) exactly
    # when the engine takes the letter for a letter.
    ranks = {bytes([b]): b for b in range(256)}
    for i, letter in enumerate(probes):
        ranks[("a" + letter).encode()] = 256 + i
    probe = tiktoken.Encoding(name="probe", pat_str=r"\p{L}+|[^\p{L}]", mergeable_ranks=ranks,
                              special_tokens={})
    for i, letter in enumerate(probes):
        if probe.encode_ordinary("a" + letter) != [256 + i]:
            return f"tiktoken's regex engine does not know U+{ord(letter):04X}"
        if regex.fullmatch(r"\p{L}", letter) is None:
            return f"the regex module does not know U+{ord(letter):04X}"
    return None


@lru_cache(maxsize=1)
def _unassigned_or_astral() -> re.Pattern:
    """Stdlib ``re`` matching a BMP character unassigned in ``unicodedata``, or
    any astral character (whose assignment is checked one by one): a set of
    BMP ranges compiles to a bitmap, so the scan runs at hundreds of MB/s."""
    # One byte per BMP code point, 1 where unassigned; the runs of 1s are the ranges.
    unassigned = bytes(category in ("Cn", "Cs") for category in map(unicodedata.category, map(chr, range(0x10000))))
    ranges = [(m.start(), m.end() - 1) for m in re.finditer(b"\x01+", unassigned)]
    body = "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    return re.compile(f"[{body}\\U00010000-\\U0010ffff]")


SCAN_CHARS = 1 << 14  # characters searched per call (see all_assigned)


def all_assigned(text: str) -> bool:
    """True where every character of text is assigned in Python's Unicode version.

    The text is looked at a stretch at a time: a stretch that is ASCII (known
    in C as it is cut out) needs no search, so source code or English with a
    few other characters costs a few milliseconds, not a search of all of it;
    and one search holds the GIL until it ends: beside tiktoken's core
    (``TiktokenEncoder._checked_ids``), a search of the whole text kept the core
    from starting (it needs the GIL to take the text) until it was done."""
    if text.isascii():
        return True
    pattern = _unassigned_or_astral()
    for start in range(0, len(text), SCAN_CHARS):
        piece = text[start:start + SCAN_CHARS]
        if piece.isascii():
            continue
        for m in pattern.finditer(piece):
            ch = m.group()
            if ch <= "\uffff" or unicodedata.category(ch) == "Cn":
                return False
    return True
