"""The compiled encode core (bpestore/_encodecore.c) as a backend, fed a version's tables.

The core pre-tokenizes with the built-in patterns in C (the scans the counting
core uses, ``_pretok.h``, and whitespace), or takes the words the spec's pipeline
cut in Python (punctuation, none, custom regexes); normalizers run in Python
first. It joins by token rank (tiktoken's rule, where it gives the version's ids:
``build``) or by merge rank, as ``bpe.merge_word`` does, on bytes or on a
character alphabet (unknown token, byte fallback, word markers), so it gives
the pure-Python encoder's ids, which stay the reference and the fallback. It
does not cover longest-match segmentation or dropout (the pure path runs
those). Encoding releases the GIL: threads share one core and its tables.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import alphabet, native
from ..spec import EncoderFacts, TokenizerSpec
from ..text import COUNT_CORE_PATTERNS, char_class, normalize
from .reference import PythonEncoder

CORE, CORE_STATUS = native.load("_encodecore")
MODE_MERGE = 0  # join the adjacent pair of lowest merge rank (bpe.merge_word)
MODE_RANKS = 1  # join the adjacent pair whose bytes have the lowest rank (tiktoken's rule)
# The pre-tokenizers the core scans itself (the others cut words in Python): the counting
# core's three patterns, and whitespace (``\S+``).
SCANNED_PATTERNS = {**COUNT_CORE_PATTERNS, "whitespace": 3}


def encode_core() -> str:
    """How ordinary text is encoded where a version allows: ``compiled (C)`` or ``pure-Python (<why>)``."""
    return native.describe(CORE, CORE_STATUS)


def core_problem(spec: TokenizerSpec) -> str | None:
    """Why the core cannot encode this spec (None: it can, where it is built)."""
    if CORE is None:
        return f"the encode core is {encode_core()}"
    if spec.segmentation != "merge":
        return f"segmentation is {spec.segmentation}"
    if spec.fuse_unk or spec.end_of_word_suffix is not None:
        return "the spec fuses unknown characters or glues a suffix to words"
    if spec.pretokenizer in SCANNED_PATTERNS and (spec.space_marker is not None or spec.dummy_prefix != "never"):
        return "the spec marks spaces or adds a dummy prefix before a pattern the core scans"
    return None


def build(spec: TokenizerSpec, python: PythonEncoder, facts: EncoderFacts | None,
          ranks: Sequence[bytes | None] | None = None) -> CoreEncoder:
    """The core for a version, whatever it came from (the one builder of its tables).

    Token-rank tables (tiktoken's rule; long words by backtracking) from a rank file's
    ``ranks``, or from the tokens by id where ``facts`` say tiktoken's rule gives the
    version's ids; else merge-rank tables (``merge_core``) from the merge ids as a store
    hands them over, or looked up through the reference encoder's token index."""
    vocab, merge_ids = python.vocab, python.merge_ids
    whole = facts is not None and facts.rank_rule_problem is None
    if ranks is None and whole and merge_ids is not None:
        try:
            return _rank_core(spec, rank_tokens(vocab, python.special_ids, merge_ids[2]), python)
        except ValueError:
            pass  # two tokens of the same bytes: the merge-rank tables below
    elif ranks is not None:
        return _rank_core(spec, ranks, python)
    if merge_ids is not None and spec.byte_level and spec.start_of_word is None and spec.end_of_word is None:
        try:
            return CoreEncoder(merge_core(spec, vocab, None, merge_ids, whole=whole, special_ids=python.special_ids),
                               spec, python.pipeline.pretokenize)
        except ValueError:
            pass  # a byte without its token, or two tokens of the same bytes: the index below says which
    id_of = python.index.id_of
    if merge_ids is None or len(id_of) != len(vocab) - len(set(python.special_ids)):
        merges = python.merges
        merge_ids = ([id_of[left] for left, _ in merges], [id_of[right] for _, right in merges],
                     [id_of[left + right] for left, right in merges])
    return CoreEncoder(merge_core(spec, vocab, id_of, merge_ids, whole=whole), spec, python.pipeline.pretokenize)


def _rank_core(spec: TokenizerSpec, tokens: Sequence[bytes | None], python: PythonEncoder) -> CoreEncoder:
    """The core with token-rank tables: ``tokens`` by rank (None where no token has one);
    ValueError where two tokens have the same bytes."""
    assert CORE is not None, "core_problem() said the core is built"
    pattern = SCANNED_PATTERNS.get(spec.pretokenizer, -1)  # byte ids: the ranks of the one-byte tokens
    core = CORE.Encoder(tokens, None, None, mode=MODE_RANKS, pattern=pattern, classify=char_class, unique=True)
    return CoreEncoder(core, spec, python.pipeline.pretokenize, "token ranks")


def rank_tokens(vocab: Mapping[int, bytes], special_ids: Sequence[int], made: Sequence[int]) -> list[bytes | None]:
    """Each id's token where it has a rank under tiktoken's rule (a byte, or a token a
    merge makes; the id is its rank), None elsewhere (special tokens, added tokens)."""
    tokens = by_id(vocab)
    specials = set(special_ids)
    if len(vocab) - len(specials) != 256 + len(made):  # tokens that are neither bytes nor made by merges
        ranked = set(made)
        tokens = [t if i in ranked or (t is not None and len(t) == 1) else None for i, t in enumerate(tokens)]
    for special in specials:
        tokens[special] = None
    return tokens


def merge_core(spec: TokenizerSpec, vocab: Mapping[int, bytes], id_of: Mapping[bytes, int] | None,
               merge_ids: tuple[Sequence[int], Sequence[int], Sequence[int]], *, whole: bool,
               special_ids: Sequence[int] = ()) -> Any:
    """The core with the merge rule: ``merge_ids``: each merge's left, right and made
    ids, by rank; ``whole``: every token a merge makes encodes to itself (else the core
    checks each, once); ``id_of``: each ordinary token's id by its bytes, or None on
    plain byte symbols where every token's bytes are its own (the core then takes each
    byte's id from the tokens, ``special_ids`` aside; ValueError where two tokens' bytes repeat)."""
    assert CORE is not None and spec.segmentation == "merge", "core_problem() said so"
    tokens = by_id(vocab)
    pattern = SCANNED_PATTERNS.get(spec.pretokenizer, -1)
    if id_of is None:
        for special in special_ids:
            tokens[special] = None
        return CORE.Encoder(tokens, merge_ids, None, mode=MODE_MERGE, pattern=pattern, classify=char_class,
                            whole=whole, unique=True)
    byte_ids = alphabet.byte_ids(id_of) if spec.byte_level or spec.byte_fallback else None
    options: dict = {}
    if not spec.byte_level:
        options["chars"] = alphabet.char_ids(id_of)
        options["fallback"] = spec.byte_fallback
        if spec.unk_token is not None:
            options["unk"] = id_of[spec.unk_token.encode("utf-8")]
    if spec.start_of_word is not None:
        options["prefix"] = id_of[spec.start_of_word.encode("utf-8")]
    if spec.end_of_word is not None:
        options["suffix"] = id_of[spec.end_of_word.encode("utf-8")]
    return CORE.Encoder(tokens, merge_ids, byte_ids, mode=MODE_MERGE, pattern=pattern, classify=char_class,
                        whole=whole, **options)


def by_id(vocab: Mapping[int, bytes]) -> list[bytes | None]:
    """Each id's token, None where an id below the largest has none."""
    if not vocab:
        return []
    ids = list(vocab)
    # Distinct ids from 0 to len - 1 in order are 0..len-1 (a stored version's); comparing the
    # sorted list, of the same ints, costs a third of comparing with new ints of a range.
    if ids[0] == 0 and ids[-1] == len(ids) - 1 and ids == sorted(ids):
        return list(vocab.values())
    return list(map(vocab.get, range(max(ids) + 1)))


class CoreEncoder:
    """The compiled core built for one version, no special tokens (the
    tokenizer matches those first)."""

    def __init__(self, core: Any, spec: TokenizerSpec, pretokenize: Callable[[str, bool], list[str]],
                 rule: str = "merge ranks") -> None:
        """``core``: a ``CORE.Encoder``; ``pretokenize``: the spec's pipeline (normalize,
        then cut words), used where the pattern is not one the core scans; ``rule``: the
        tables it was built with, ``token ranks`` (tiktoken's rule) or ``merge ranks``."""
        self._core = core
        self.rule = rule
        self._steps = spec.normalizer_steps
        self._charsmap = spec.charsmap
        self._pretokenize = None if spec.pretokenizer in SCANNED_PATTERNS else pretokenize

    def _ids(self, text: str, as_bytes: bool, first: bool = True) -> list[int] | bytearray | None:
        if self._pretokenize is not None:
            return self._core.encode_words(self._pretokenize(text, first), as_bytes)
        return self._core.encode(normalize(text, self._steps, self._charsmap) if self._steps else text, as_bytes)

    def plain_call(self) -> Callable[[str, bool], list[int] | bytearray | None]:
        """``encode``'s (``as_bytes``: ``encode_packed``'s) one call, the core's own where
        it scans the text itself, unnormalized."""
        return self._core.encode if self._pretokenize is None and not self._steps else self._ids

    def encode(self, text: str) -> list[int] | None:
        """The ids of text as a new list; None where the text holds a lone
        surrogate or a character the version has no symbol for (the pure path
        then says what to do)."""
        ids = self._ids(text, False)
        assert not isinstance(ids, bytearray)
        return ids

    def encode_packed(self, text: str) -> bytearray | None:
        """``encode``'s ids as native uint32 in a new bytearray (no int objects made)."""
        data = self._ids(text, True)
        assert not isinstance(data, list)
        return data

    def encode_batch(self, texts: Sequence[str], workers: int = 1,
                     packed: bool = False) -> list[list[int] | bytearray | None]:
        """``encode`` (``packed``: ``encode_packed``) of each text, in one call of the core, the
        GIL released while they are encoded: on up to ``workers`` threads of the core, each
        taking the next text."""
        if self._pretokenize is not None:  # cut in Python, with the GIL: threads share what the core does
            one = self.encode_packed if packed else self.encode
            if workers > 1 and len(texts) > 1:
                from concurrent.futures import ThreadPoolExecutor  # start-up: 4 ms that one text does without

                with ThreadPoolExecutor(workers) as pool:
                    return list(pool.map(one, texts))
            return [one(text) for text in texts]
        if self._steps:
            texts = [normalize(text, self._steps, self._charsmap) for text in texts]
        return self._core.encode_batch(texts, as_bytes=packed, workers=workers)

    def encode_each(self, words: Sequence[str], workers: int = 1) -> list[bytearray | None]:
        """The ids of each pre-token (normalized and cut by the spec's pipeline) as uint32 bytes,
        in one call of the core on ``workers`` threads: a word alone where it cuts none, else cut
        by a scanned pattern, which cuts each of its own words into itself (its matches at the
        end of a text are the same)."""
        return self._core.encode_batch(words, True, workers)

    def encode_into(self, text: str, out: list | array, first: bool = True) -> bool:
        """Add the ids of text to ``out`` (a list, or a uint32 array); False,
        adding nothing, where ``encode`` gives None (``first``: as ``PythonEncoder.encode_into``)."""
        ids = self._ids(text, isinstance(out, array), first)
        if ids is None:
            return False
        if isinstance(ids, bytearray):
            out.frombytes(ids)  # type: ignore[union-attr]
        else:
            out.extend(ids)
        return True

    def table_bytes(self) -> int:
        """The memory the core's tables take."""
        return self._core.table_bytes()
