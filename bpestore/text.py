"""Normalizers and pre-tokenizers: text in, words out. Pure functions, no I/O.

The pipeline for one piece of text is:

    split on special tokens  ->  normalize each ordinary segment  ->  pre-tokenize

Special tokens are matched on the raw text, longest first, so a normalizer never
touches them. ``TextPipeline`` bundles the three steps for one ``TokenizerSpec``;
``rechunk`` cuts a stream of text at places where the pipeline gives the same
words as it would on the whole text, which is what lets ingestion and
``encode_iterable`` stream with bounded memory and count in parallel.
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Literal

import regex

from . import native
from .charsmap import charsmap_of
from .errors import InvalidArgumentError
from .spec import TokenizerSpec, template_pieces

if TYPE_CHECKING:
    from ._countcore import CountTable

# The regexes of the reference tokenizers (GPT-2's encoder.py and tiktoken's
# openai_public.py). GPT-2's is spelled as tiktoken's r50k equivalent, without
# the possessive quantifiers: the same matches, found 15% faster by `regex`
# than in GPT-2's spelling, r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
# ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""" (a single whitespace is all the last
# alternative can ever match there: a longer run matches the one before).
# cl100k and o200k are tiktoken's strings verbatim (cl100k's `\s++$` takes
# trailing whitespace whole; a stream is never cut inside whitespace, so `$`
# only ever meets the true end).
PATTERNS: dict[str, str] = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s""",
    "cl100k": (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
               r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""),
    "o200k": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
    # Words are the runs of non-space characters (HF's WhitespaceSplit).
    "whitespace": r"""\S+""",
    # Words are runs of word characters; each punctuation mark is a word of its own.
    "punctuation": r"""\w+|[^\w\s]""",
}

# Where a stream may be cut: right before a whitespace character that follows a
# letter or digit and precedes a non-space. No match of the built-in patterns
# runs from a letter or digit into whitespace, and none has a look-behind, so
# both sides of such a cut pre-tokenize exactly as the whole text does. The
# cut is also harmless to the normalizers: whitespace composes with nothing,
# and lowercasing's final-sigma rule sees the same end-of-word on both sides.
_SAFE_CUT = regex.compile(r"(?r)(?<=[\p{L}\p{N}])\s(?=\S)")
_SAFE_CUT_AHEAD = regex.compile(r"(?<=[\p{L}\p{N}])\s(?=\S)")  # the same, searched forwards


# The built-in patterns' pre-tokenizer and word count in one pass, in C
# (bpestore/_countcore.c), or None; the number it knows each pattern by.
COUNT_CORE, COUNT_CORE_STATUS = native.load("_countcore")
COUNT_CORE_PATTERNS = {"gpt2": 0, "cl100k": 1, "o200k": 2}


def counting_core() -> str:
    """How ingestion counts the built-in patterns' words: ``compiled (C)`` or ``pure-Python (<reason>)``."""
    return native.describe(COUNT_CORE, COUNT_CORE_STATUS)


# The classes the built-in patterns tell apart, and the letters of their contractions
# (compiled when first asked: only counting needs them).
_CATEGORIES = (r"[\p{Lu}\p{Lt}]", r"\p{Ll}", r"[\p{Lm}\p{Lo}]", r"\p{M}", r"\p{N}", r"\s")
_FOLDS = tuple(f"(?i:{letter})" for letter in "sdmtlver")


def char_class(code_point: int) -> int:
    """A character's class in the built-in patterns, as ``regex`` sees it (the
    counting core asks this once per code point): its category, 1 ``Lu``/``Lt``,
    2 ``Ll``, 3 ``Lm``/``Lo``, 4 ``\\p{M}``, 5 ``\\p{N}``, 6 ``\\s``, 7 anything else;
    plus 16 times the letter of ``sdmtlver`` it is case-insensitively (1-8), if any.

    >>> [char_class(ord(c)) for c in "Ab7 ,中\u0301\u3000"]
    [1, 2, 5, 6, 7, 3, 4, 6]
    >>> [char_class(ord(c)) >> 4 for c in "sSſdtLe"]
    [1, 1, 1, 2, 4, 5, 7]
    """
    page = _CLASS_PAGES.get(code_point >> 8)
    if page is None:  # the classes of the 256 code points around it, found at once (CJK: thousands of them)
        page = _CLASS_PAGES[code_point >> 8] = _page_classes(code_point >> 8)
    return page[code_point & 255]


_CLASS_PAGES: dict[int, bytes] = {}


def _page_classes(page: int) -> bytes:
    """``char_class`` of code points ``256 * page`` to ``256 * page + 255``: each pattern
    matches one character, so scanning the page's characters with it finds them all."""
    chars = "".join(map(chr, range(page << 8, (page + 1) << 8)))
    folds = _class_patterns()[1]
    classes = bytearray([7] * 256)
    for k, cls in reversed(list(enumerate(_class_runs(), start=1))):  # the first pattern that matches wins
        for m in cls.finditer(chars):
            classes[m.start():m.end()] = bytes([k]) * (m.end() - m.start())
    for m in _any_fold().finditer(chars):  # few characters are one of the letters: find them, then which
        classes[m.start()] |= next(k for k, letter in enumerate(folds, start=1) if letter.match(m.group())) << 4
    return bytes(classes)


@functools.cache
def _any_fold() -> regex.Pattern:
    return regex.compile("|".join(_FOLDS))


@functools.cache
def _class_runs() -> list[regex.Pattern]:
    return [regex.compile(f"(?:{c})+") for c in _CATEGORIES]


@functools.cache
def _class_patterns() -> tuple[list[regex.Pattern], list[regex.Pattern]]:
    return [regex.compile(c) for c in _CATEGORIES], [regex.compile(f) for f in _FOLDS]


_UNICODE_FORMS: dict[str, Literal["NFC", "NFD", "NFKC", "NFKD"]] = {
    "nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD"}


def normalize(text: str, steps: tuple[str, ...], charsmap: str | None = None) -> str:
    """Apply normalizer steps in order ('nfkc', 'lowercase', 'alphanumeric', ...;
    'precompiled' applies ``charsmap`` as Hugging Face's Precompiled does)."""
    for step in steps:
        if step == "precompiled":
            text = charsmap_of(charsmap or "").normalize_graphemes(text)
        elif step == "lowercase":
            text = text.lower()
        elif step == "strip-right":
            text = _TRAILING_WHITESPACE.sub("", text)
        elif step == "squeeze-spaces":
            text = _SPACE_RUNS.sub(" ", text)
        elif step == "collapse-spaces":
            # SentencePiece's remove_extra_whitespaces: spaces (U+0020 only) at the ends go, runs become one.
            text = _SPACE_RUNS.sub(" ", text.strip(" "))
        elif step == "alphanumeric":
            # Keep letters, digits and whitespace (whitespace keeps words apart).
            text = "".join(ch for ch in text if ch.isalnum() or ch.isspace())
        else:
            text = unicodedata.normalize(_UNICODE_FORMS[step], text)
    return text


_SPACE_RUNS = regex.compile(" {2,}")
_TRAILING_WHITESPACE = regex.compile(r"\p{White_Space}+\Z")  # (what Rust's char::is_whitespace is)


def mark_spaces(text: str, spec: TokenizerSpec, first: bool = True) -> str:
    """A normalized text with its spaces as the spec's space marker, after a
    dummy prefix where the spec asks for one (an empty text stays empty);
    ``first``: the text starts the whole text (not after a special token).

    >>> mark_spaces("Hello  world", TokenizerSpec(alphabet="chars", space_marker="▁", dummy_prefix="always"))
    '▁Hello▁▁world'
    """
    marker = spec.space_marker
    if not text or (marker is None and spec.dummy_prefix == "never"):
        return text
    if spec.space_suffix and marker is not None:
        text = text.replace(" ", marker)
        if "collapse-spaces" in spec.normalizer_steps:
            text = text.rstrip(marker)
        return text + marker if spec.dummy_prefix == "always" else text  # text was not empty
    prefix = spec.dummy_prefix
    if prefix == "always" or (prefix == "unless-space" or prefix == "first" and first) and text[0] not in (" ", marker):
        text = " " + text
    if marker is None:
        return text
    text = text.replace(" ", marker)
    if "collapse-spaces" in spec.normalizer_steps:
        text = text.rstrip(marker)  # SentencePiece strips a trailing marker, even one the text held
    return text


def unmark_spaces(text: str, spec: TokenizerSpec) -> str:
    """Decoded text with the space marker as spaces, less the dummy prefix
    (with ``collapse-spaces``: every space at the start, as SentencePiece decodes).

    >>> unmark_spaces("▁Hello▁world", TokenizerSpec(alphabet="chars", space_marker="▁", dummy_prefix="always"))
    'Hello world'
    """
    marker = spec.space_marker
    if marker is None:
        return text
    text = text.replace(marker, " ")
    if "collapse-spaces" in spec.normalizer_steps:
        return text.lstrip(" ")
    return text[1:] if spec.dummy_prefix != "never" and text.startswith(" ") else text


def apply_template(template: str, ids: list[int], special_tokens: Mapping[str, int]) -> list[int]:
    """A text's ids inside a single-text template (``$A``: the ids).

    >>> apply_template("<s>:0 $A:0", [7, 8], {"<s>": 1})
    [1, 7, 8]
    """
    out: list[int] = []
    for piece, _ in template_pieces(template):
        if piece == "$A":
            out += ids
        elif piece in special_tokens:
            out.append(special_tokens[piece])
        else:
            raise InvalidArgumentError(f"the template {template!r} names {piece!r}, which is not a special token "
                                       "of this version", params=("template",))
    return out


def special_tokens_regex(special_tokens: Iterable[str]) -> regex.Pattern | None:
    """A regex matching any special token, the longest first where they overlap."""
    tokens = sorted(set(special_tokens), key=lambda t: (-len(t), t))
    if not tokens:
        return None
    return regex.compile("|".join(regex.escape(t) for t in tokens))


class TextPipeline:
    """Special-token split, normalizer and pre-tokenizer of one spec.

    >>> pipe = TextPipeline(TokenizerSpec(special_tokens=("<|endoftext|>",)))
    >>> list(pipe.words("Hi there<|endoftext|>!"))
    ['Hi', ' there', '!']
    """

    def __init__(self, spec: TokenizerSpec) -> None:
        self.spec = spec
        self.steps = spec.normalizer_steps
        if spec.pretokenizer == "none":
            self.pattern = None
        elif spec.pretokenizer == "metaspace":
            marker = regex.escape(spec.space_marker or "")
            self.pattern = regex.compile(f"[^{marker}]*{marker}|[^{marker}]+" if spec.space_suffix
                                         else f"[^{marker}]+|{marker}[^{marker}]*")
        else:
            source = spec.pattern if spec.pretokenizer == "regex" else PATTERNS[spec.pretokenizer]
            self.pattern = regex.compile(source)
        # A stream is cut inside a segment only under a built-in pattern (see
        # _SAFE_CUT). Whether a cut changes what another regex finds cannot be
        # known (a look-ahead sees past it, a match may span it), so a custom
        # pattern meets each segment whole: exactly regex.findall's words.
        # A space marker's dummy prefix and stripped ends belong to the whole text: never cut inside it.
        self.cuts_words = spec.pretokenizer in PATTERNS and spec.space_marker is None and spec.dummy_prefix == "never"
        # A built-in pattern's words are counted in C (count_utf8) where the counting core is built.
        self.count_core = COUNT_CORE if self.cuts_words and spec.pretokenizer in COUNT_CORE_PATTERNS else None
        self.count_pattern = COUNT_CORE_PATTERNS.get(spec.pretokenizer, -1)
        self.specials = special_tokens_regex(spec.special_tokens)
        # Where nothing is normalized, the core counts UTF-8 where it lies (count_bytes): the special
        # tokens are found in it as in the text (valid UTF-8 matches only at character boundaries).
        pattern = "" if self.specials is None else self.specials.pattern
        self.counts_bytes = self.count_core is not None and not self.steps and _is_utf8(pattern)
        self.specials_utf8 = regex.compile(pattern.encode()) if self.counts_bytes and self.specials else None
        self.user_symbols = special_tokens_regex(spec.user_symbols)
        self.max_special_len = max((len(t) for t in spec.special_tokens), default=0)

    def mark_normalized(self, text: str, first: bool = True) -> str:
        """Normalized, then its spaces marked (a SentencePiece charsmap does both, its own way;
        ``first``: as ``mark_spaces``)."""
        spec = self.spec
        if spec.charsmap is not None and "precompiled" not in self.steps:
            return charsmap_of(spec.charsmap).normalize(
                text, dummy_prefix=spec.dummy_prefix == "always" or (spec.dummy_prefix == "first" and first),
                remove_extra_whitespaces="collapse-spaces" in self.steps, suffix=spec.space_suffix,
                keep=spec.user_symbols)
        return mark_spaces(normalize(text, self.steps, spec.charsmap), spec, first)

    # -- the three steps -------------------------------------------------
    def segments(self, text: str) -> Iterator[tuple[str, bool]]:
        """Split text into (segment, is_special) pairs, dropping empty segments."""
        if self.specials is None:
            if text:
                yield text, False
            return
        start = 0
        for m in self.specials.finditer(text):
            if m.start() > start:
                yield text[start:m.start()], False
            yield m.group(), True
            start = m.end()
        if start < len(text):
            yield text[start:], False

    def pretokenize(self, segment: str, first: bool = True) -> list[str]:
        """Normalize and pre-tokenize one segment that holds no special token
        (``first``: it starts the text, see ``mark_spaces``). Lone surrogates (bytes
        that are not UTF-8, as ``surrogateescape`` carries them) become U+FFFD each."""
        segment = self.mark_normalized(segment if self.spec.charsmap is not None else fix_surrogates(segment), first)
        if self.user_symbols is None:
            return self._cut(segment)
        words: list[str] = []
        start = 0
        for m in self.user_symbols.finditer(segment):  # each a word of its own, the text between cut as usual
            words += self._cut(segment[start:m.start()])
            words.append(m.group())
            start = m.end()
        return words + self._cut(segment[start:])

    def _cut(self, segment: str) -> list[str]:
        if self.pattern is None:
            return [segment] if segment else []
        words = self.pattern.findall(segment)
        # A custom pattern may match the empty string (``x*``): that is no word.
        return words if self.cuts_words else [w for w in words if w]

    def ordinary_segments(self, text: str) -> Iterator[str]:
        """The normalized segments of text between its special tokens (with a
        space marker: each line of them, marked, as ``spm_train`` reads text)."""
        after_special = False
        for segment, is_special in self.segments(text):
            if is_special:
                after_special = True
                continue
            if self.spec.space_marker is None and self.spec.dummy_prefix == "never":
                yield normalize(segment, self.steps, self.spec.charsmap)
                continue
            for at, line in enumerate(segment.split("\n")):
                yield self.mark_normalized(line, at > 0 or not after_special)

    def words(self, text: str) -> Iterator[str]:
        """The pre-tokens of a text, special tokens dropped."""
        for segment, is_special in self.segments(text):
            if not is_special:
                yield from self.pretokenize(segment)

    def count_strings(self, text: str, counts: Counter, *, part_chars: int = 1 << 19) -> int:
        """Add every pre-token of text (as a str) to counts; returns how many there were.

        A long segment is pre-tokenized in parts of about ``part_chars``
        characters, cut where ``safe_cut`` would cut: the list of words of a
        part takes many times its size in memory.
        """
        n_words = 0
        for segment in self.ordinary_segments(text):
            if self.pattern is None:
                counts.update([segment] if segment else [])
                n_words += bool(segment)
                continue
            if not self.cuts_words:
                words = [w for w in self.pattern.findall(segment) if w]
                n_words += len(words)
                counts.update(words)
                continue
            for start, end in _parts(segment, part_chars):
                words = self.pattern.findall(segment, start, end)
                n_words += len(words)
                counts.update(words)
        return n_words

    def count_utf8(self, text: str, counts: dict[bytes, int]) -> int:
        """Add the UTF-8 bytes of every pre-token of text to counts; returns how
        many there were. A built-in pattern's words are counted by the compiled counting core
        where it is built (the same counts as ``count_strings``, then encoded)."""
        if self.count_core is None:
            strings: Counter = Counter()
            n_words = self.count_strings(text, strings)
            # Count strings first, encode each distinct one once.
            for word, n in strings.items():
                key = word.encode("utf-8", "surrogatepass")
                counts[key] = counts.get(key, 0) + n
            return n_words
        return sum(self.count_core.count(segment, counts, char_class, self.count_pattern)
                   for segment in self.ordinary_segments(text))

    def new_counts(self) -> dict[bytes, int] | CountTable:
        """Empty counts for ``count_together`` and ``count_each``: the counting core's own
        table where it counts this pipeline's words (no dict step per text), else a Counter."""
        return Counter() if self.count_core is None else self.count_core.CountTable()

    def count_together(self, texts: list[str], counts: dict[bytes, int] | CountTable) -> int:
        """``count_utf8`` of texts as one: the counting core counts them in one table, adding
        to counts once (a ``CountTable``: into it); how many words there were."""
        if self.count_core is None:
            assert isinstance(counts, dict), "a CountTable comes only from the counting core"
            return sum(self.count_utf8(text, counts) for text in texts)
        segments = [segment for text in texts for segment in self.ordinary_segments(text)]
        if not isinstance(counts, dict):
            return counts.count(segments, char_class, self.count_pattern)
        [(n_words, _)] = self.count_core.count_many([segments], counts, char_class, self.count_pattern)
        return n_words

    def utf8_segments(self, data: bytes) -> list[bytes]:
        """``ordinary_segments`` of the UTF-8 of a text (``counts_bytes``: none is normalized)."""
        if self.specials_utf8 is None:
            return [data]
        cuts = [0, *itertools.chain.from_iterable(m.span() for m in self.specials_utf8.finditer(data)), len(data)]
        return [data[a:b] for a, b in zip(cuts[::2], cuts[1::2]) if b > a]

    def count_bytes(self, datas: list[bytes | None], counts: dict[bytes, int] | CountTable,
                    threads: int = 1) -> int | None:
        """``count_together`` of texts given as UTF-8 (``counts``: a ``CountTable``), read where they
        lie; None (nothing counted) where the core cannot: a text is not given (None), counts are
        a dict, a normalizer, or one is not strict UTF-8 or holds a NUL byte (decode it).
        ``threads`` 2: the later half of the texts is counted by a second thread (the same counts)."""
        if not self.counts_bytes or isinstance(counts, dict) or any(data is None for data in datas):
            return None
        segments = [s for data in datas if data is not None for s in self.utf8_segments(data)]
        each = counts.count_utf8([segments], char_class, self.count_pattern, threads)
        return None if each is None else each[0][0]

    def count_bytes_each(self, datas: list[bytes], counts: CountTable) -> list[tuple[int, int]] | None:
        """``count_each`` of texts given as UTF-8, as ``count_bytes`` counts them, or None."""
        if not self.counts_bytes:
            return None
        return counts.count_utf8([self.utf8_segments(data) for data in datas], char_class, self.count_pattern)

    def count_each(self, texts: list[str], counts: dict[bytes, int] | CountTable) -> list[tuple[int, int]]:
        """``count_utf8`` of each text into counts; the words and distinct words of each.
        The counting core counts them together, adding to counts once; else each
        text is counted alone, then added."""
        if self.count_core is not None:
            pieces = [list(self.ordinary_segments(text)) for text in texts]
            if not isinstance(counts, dict):
                return counts.count_each(pieces, char_class, self.count_pattern)
            return self.count_core.count_many(pieces, counts, char_class, self.count_pattern)
        assert isinstance(counts, dict), "a CountTable comes only from the counting core"
        each = []
        for text in texts:
            own: dict[bytes, int] = {}
            each.append((self.count_utf8(text, own), len(own)))
            for word, n in own.items():
                counts[word] = counts.get(word, 0) + n
        return each

    def count_words(self, text: str, counts: Counter | None = None) -> Counter:
        """Add the UTF-8 bytes of every pre-token of text to counts (a Counter).

        >>> sorted(TextPipeline(TokenizerSpec()).count_words("the cat and the hat").items())
        [(b' and', 1), (b' cat', 1), (b' hat', 1), (b' the', 1), (b'the', 1)]
        """
        counts = Counter() if counts is None else counts
        self.count_utf8(text, counts)
        return counts

    # -- streaming -------------------------------------------------------
    def safe_cut(self, text: str) -> int:
        """The last position where text can be split without changing its words.

        0 means no such position: keep reading. A cut is safe at the start or
        end of a special token that is fully in view (no longer special token
        could still start there), or inside an ordinary segment at a
        letter-or-digit / whitespace / non-space boundary.
        """
        segment_start = 0
        limit = len(text)
        if self.specials is not None:
            for m in self.specials.finditer(text):
                if m.start() + self.max_special_len > len(text):
                    # A longer special token might start here once more text comes.
                    limit = m.start()
                    break
                segment_start = m.end()
            else:
                # A special token could still begin in the last max_len-1 characters.
                limit = max(segment_start, len(text) - self.max_special_len + 1)
        cut = segment_start
        if self.cuts_words:
            m = _SAFE_CUT.search(text, segment_start, limit)
            if m is not None and m.end() < len(text):
                cut = m.start()
        return cut

    def cut_anywhere(self, window: str) -> int:
        """A place in ``window``, a stretch from anywhere in a stream, where the
        stream can be cut without changing its words: what comes before and
        after the window does not matter. 0 if there is none.

        It is a letter-or-digit / whitespace / non-space boundary (see
        ``safe_cut``) that no occurrence of a special token spans, at least a
        special token's length from both ends of the window (so every
        occurrence that could span it is in view). With pre-tokenizer
        ``none`` there is no such place.

        >>> pipe = TextPipeline(TokenizerSpec(special_tokens=("<|a b|>",)))
        >>> window = "one <|a b|> two three four"
        >>> cut = pipe.cut_anywhere(window); window[:cut], window[cut:]
        ('one <|a b|> two', ' three four')
        """
        if not self.cuts_words:
            return 0
        # Candidates lie in [first, last]; the search sees one more character,
        # for the look-ahead.
        first = max(self.max_special_len - 1, 1)
        last = len(window) - max(self.max_special_len - 1, 2)
        while last >= first:
            m = _SAFE_CUT.search(window, first, last + 2)
            if m is None:
                return 0
            cut = m.start()
            if not any(window.find(t, cut - len(t) + 1, cut + len(t) - 1) >= 0
                       for t in self.spec.special_tokens):
                return cut
            last = cut - 1
        return 0


def _parts(text: str, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) spans of about ``size`` characters covering ``text``, cut at
    safe places (the text holds no special token)."""
    start = 0
    while len(text) - start > size:
        # The last cut in the next `size` characters (the search sees one more,
        # for the look-ahead), else the first one after them.
        m = _SAFE_CUT.search(text, start + 1, start + size + 1) or \
            _SAFE_CUT_AHEAD.search(text, start + size)
        if m is None:
            break
        yield start, m.start()
        start = m.start()
    yield start, len(text)


def rechunk(chunks: Iterable[str], pipeline: TextPipeline) -> Iterator[str]:
    """Re-cut a stream of text so every piece can be pre-tokenized on its own.

    Joined together the pieces are the input; their words, concatenated, are the
    words of the whole input. Memory is bounded by the input chunk size plus the
    longest stretch without a safe cut (for pre-tokenizer ``none``: a document
    between two special tokens).
    """
    return recut(chunks, pipeline.safe_cut)


def recut(chunks: Iterable[str], last_cut: Callable[[str], int]) -> Iterator[str]:
    """Re-cut a stream of text where ``last_cut(text)`` says (0: no cut yet).

    >>> list(recut(["a b|c", "d|e"], lambda text: text.rfind("|") + 1))
    ['a b|', 'cd|', 'e']
    """
    carry = ""
    for chunk in chunks:
        if not chunk:
            continue
        buffer = carry + chunk if carry else chunk
        cut = last_cut(buffer)
        if cut > 0:
            yield buffer[:cut]
            carry = buffer[cut:]
        else:
            carry = buffer
    if carry:
        yield carry


def _is_utf8(text: str) -> bool:
    """Whether text can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fix_surrogates(text: str) -> str:
    """Replace lone surrogates with U+FFFD, as tiktoken does before encoding."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
