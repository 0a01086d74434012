"""Tokenizer: encode and decode with a version's merges, held in memory.

The encoder takes a vocabulary and merges; where they came from (a store, GPT-2
files, ``train_bpe``) is not its business. Text goes through the spec's
pipeline (special tokens, normalizer, pre-tokenizer), then every pre-token is
turned into symbols (its bytes) and segmented: merged by rank
(``bpe.merge_word``, the default) or cut by greedy longest match. Bounded
caches remember the ids of recent pre-tokens and of the pieces long
pre-tokens split into.

Where a version allows it (``bpestore.fast``), ordinary text is encoded by
tiktoken's Rust core instead, with identical ids; the pure-Python path stays
the reference and the fallback. ``Tokenizer.backend`` says which one runs.
"""

from __future__ import annotations

import codecs
import gc
import os
import random
import sys
from array import array
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias, TypeVar, cast

from . import alphabet
from .bpe import (
    PAIR_SHIFT,
    LongestMatch,
    joinable_table,
    merge_ranks,
    merge_steps,
    merge_word,
    merge_word_dropout,
    piece_ranks,
    split_bytes,
)
from .errors import InvalidArgumentError, NotFoundError
from .spec import EncoderFacts, TokenizerSpec
from .text import TextPipeline, rechunk, special_tokens_regex, unmark_spaces

if TYPE_CHECKING:  # imported where used: encoding does without them
    from concurrent.futures import Executor

    from .records import Explanation, Progress, UnknownChar, WordExplanation

WORD_CACHE_SIZE = 100_000  # pre-tokens remembered (cleared when full)
PIECE_CACHE_SIZE = 100_000  # pieces of long pre-tokens remembered
ID_DTYPES = {"uint16": "H", "uint32": "I"}  # id file element types -> array typecodes
PIECE_CHARS = 1 << 18  # characters per piece of a stream encoded at once
RANGE_BYTES = 1 << 20  # bytes of a plain file each encoding process reads at a time
FAST_CHECK_AFTER = 10_000  # characters of one text that make the fast path worth checking
# What Tokenizer._build_ids and _build_tables make (on first use, where the tokenizer was given its facts).
_IDS = frozenset({"_id_of", "_word_symbols", "_byte_ids"})
_TABLES = frozenset({"_ranks", "_merged_ids", "_longest_match"})
SHORT_WORD = 16  # bytes of a pre-token merged whole until a longer one needed the joinable table

# Token ids: a list, or a uint32 array (id files, worker results).
Ids: TypeAlias = "list[int] | array[int]"
IdsT = TypeVar("IdsT", list[int], "array[int]")


class DisallowedSpecialError(InvalidArgumentError):
    """The text holds a special token that the call did not allow: a ValueError
    with tiktoken's message, so code written for tiktoken handles it alike."""

    def __init__(self, token: str) -> None:
        super().__init__(
            f"Encountered text corresponding to disallowed special token {token!r}.\n"
            "If you want this text to be encoded as a special token, "
            f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
            "If you want this text to be encoded as normal text, disable the check for this token "
            f"by passing `disallowed_special=(set(tok.special_tokens) - {{{token!r}}})`.\n"
            "To disable this check for all special tokens, pass `disallowed_special=()`.\n",
            params=("allowed_special", "disallowed_special"))
        self.token = token


class _Rules(NamedTuple):
    """How one encode call treats special tokens and dropout (plain data, so
    it travels to worker processes)."""

    allowed: frozenset[str]
    disallowed: frozenset[str]
    dropout: float = 0.0
    seed: int | str | None = None


_ORDINARY = _Rules(frozenset(), frozenset())


@dataclass(frozen=True)
class EncodedFile:
    """What ``Tokenizer.encode_file`` wrote."""

    path: str
    tokens: int
    bytes: int
    dtype: str

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0


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
        merges: Sequence[tuple[bytes, bytes]] | None,
        special_tokens: Iterable[str] | dict[str, int] = (),
        *,
        spec: TokenizerSpec | None = None,
        name: str | None = None,
        fast: bool = True,
        facts: EncoderFacts | None = None,
        merge_ids: tuple[Sequence[int], Sequence[int], Sequence[int]] | None = None,
    ) -> None:
        """``vocab`` maps ids to bytes; ``merges`` are byte pairs in rank order;
        ``special_tokens`` are in ``vocab`` as their UTF-8 bytes; pass a dict
        (text -> id) where a special token's bytes also name an ordinary token.
        ``fast=False`` keeps to the pure-Python encoder even where tiktoken's
        core could run (see ``bpestore.fast``). ``facts``: this tokenizer's
        ``facts`` computed before (a store passes those of a complete version,
        checked when it completed): nothing is computed or checked again, and
        the pure-Python encoder's tables are built when first needed, from
        ``merge_ids`` where given with them: each merge's left, right and
        made token ids (a store has them), which spares looking up 150,000
        byte strings; then ``merges`` may be None: the byte pairs are made from
        ``merge_ids`` when first needed (decoding and short texts need none)."""
        special_ids = dict(special_tokens) if isinstance(special_tokens, dict) else {}
        special_tokens = list(special_tokens)
        if spec is None:
            spec = TokenizerSpec(special_tokens=tuple(special_tokens))
        elif special_tokens and tuple(special_tokens) != spec.special_tokens:
            spec = spec.replace(special_tokens=tuple(special_tokens))
        self.spec = spec
        self.name = name
        self._vocab = dict(vocab)
        if merges is None and merge_ids is None:
            raise InvalidArgumentError("give the merges (or their ids as merge_ids)", params=("merges",))
        if merges is not None:
            self._merges = list(merges)
        elif facts is None:
            self._merges = self._pairs_of(merge_ids)  # type: ignore[arg-type]  # not None: checked above
        for text in spec.special_tokens:
            if text not in special_ids:
                found = [i for i, b in sorted(self._vocab.items()) if b == text.encode("utf-8")]
                if not found:
                    raise InvalidArgumentError(f"special token {text!r} is not in the vocabulary",
                                               params=("special_tokens",))
                special_ids[text] = found[0]
        self.special_tokens: dict[str, int] = special_ids
        self._facts = facts
        self._merge_ids = merge_ids if facts is not None else None
        if facts is None:
            self._build_ids()
            self._build_tables()  # checks the merges against the vocabulary now
        self._pipeline = TextPipeline(spec.replace(special_tokens=()))
        self._cutters: dict[frozenset[str], TextPipeline] = {}  # for cutting streams
        self._special_regex_cache: dict[frozenset[str], object] = {}
        self._words: dict[str, tuple[int, ...]] = {}
        self._pieces: dict[bytes, tuple[int, ...]] = {}
        self._use_fast = fast
        self._fast = None  # a fast.FastEncoder once checked, where the version allows
        self._fast_checked = False
        self._backend = "python"

    def __reduce__(self):
        # Pickled (for worker processes started by spawn) without caches.
        return (_rebuild, (self._vocab, self._merges, self.special_tokens, self.spec, self.name,
                           self._use_fast, self._facts))

    def _build_tables(self) -> None:
        """The ids of tokens and the pure-Python encoder's tables; an error
        where the merges use or make a token the vocabulary lacks."""
        spec = self.spec
        # Merge table: pair of ids -> rank, and the id each rank makes.
        ordinary = len(self._vocab) - len(set(self.special_tokens.values()))
        if self._merge_ids is not None and len(self._id_of) == ordinary:
            # Every ordinary token's bytes are its own: a merge's ids are those its bytes look up.
            lefts, rights, made = self._merge_ids
            keys = [(left << PAIR_SHIFT) | right for left, right in zip(lefts, rights)]
            # Where a pair repeats, its lowest rank wins: the dict keeps the last value written.
            ranks = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
            merged_ids = list(made)
        else:
            ranks, merged_ids = self._ranks_of_bytes()
        if spec.segmentation == "piece":
            vocab = self._vocab
            ranks = piece_ranks(map(vocab.__getitem__, merged_ids), self._id_of, whole_chars=not spec.byte_level)
        longest_match = None
        if spec.segmentation == "longest-match":
            longest_match = LongestMatch(self._token_symbols(merged_ids))
        self._ranks, self._merged_ids, self._longest_match = ranks, merged_ids, longest_match

    def _ranks_of_bytes(self) -> tuple[dict[int, int], list[int]]:
        """The merge table from the merges' bytes; an error where a merge uses or
        makes a token the vocabulary lacks."""
        id_of = self._id_of
        ranks: dict[int, int] = {}
        merged_ids: list[int] = []
        for rank, (left, right) in enumerate(self._merges):
            try:
                key = (id_of[left] << PAIR_SHIFT) | id_of[right]
                merged = id_of[left + right]
            except KeyError:
                raise InvalidArgumentError(f"merge {rank} ({left!r}, {right!r}) uses or makes a "
                                           "token missing from the vocabulary", params=("merges",)) from None
            ranks.setdefault(key, rank)
            merged_ids.append(merged)
        return ranks, merged_ids

    def _token_symbols(self, merged_ids: list[int]) -> dict[tuple[int, ...], int]:
        """Each ordinary token as the initial symbols a word holds where the
        token stands (what longest match looks for): a merged token, its pair's
        symbols joined; any other token, itself (a byte, a character, a word
        marker, the unknown token), or on byte-level specs its bytes."""
        id_of = self._id_of
        symbols: dict[int, tuple[int, ...]] = {}
        for (left, right), made in zip(self._merges, merged_ids):
            if made not in symbols:
                symbols[made] = self._symbols_of(left, symbols) + self._symbols_of(right, symbols)
        tokens: dict[tuple[int, ...], int] = {}
        for data, token_id in id_of.items():
            tokens.setdefault(symbols.get(token_id) or self._symbols_of(data, symbols), token_id)
        return tokens

    def _symbols_of(self, data: bytes, made: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
        token_id = self._id_of[data]
        found = made.get(token_id)
        if found is not None:
            return found
        if self.spec.byte_level and self._word_symbols is None:
            return tuple(self._symbolize(data))
        return (token_id,)

    def _build_ids(self) -> None:
        """The id of each ordinary token's bytes, and how a pre-token becomes ids."""
        specials, fallback = self.special_tokens.values(), self.spec.byte_fallback
        id_of = alphabet.ordinary_ids(self._vocab, specials, chars_over_bytes=fallback)
        # How a pre-token becomes initial ids: its bytes (the byte path below),
        # or the spec's own symbols (characters, word markers).
        self._word_symbols = alphabet.symbolizer(
            self.spec, id_of, alphabet.fallback_byte_ids(self._vocab, specials) if fallback else None)
        self._byte_ids = alphabet.byte_ids(id_of) if self.spec.byte_level else []
        self._id_of = id_of

    def _pairs_of(self, merge_ids: tuple[Sequence[int], Sequence[int], Sequence[int]]) -> list[tuple[bytes, bytes]]:
        """The merges as byte pairs, from their left and right ids; an error where an id is not in the vocabulary."""
        vocab = self._vocab
        try:
            return list(zip(map(vocab.__getitem__, merge_ids[0]), map(vocab.__getitem__, merge_ids[1])))
        except KeyError as exc:
            raise InvalidArgumentError(f"a merge uses id {exc.args[0]}, which the vocabulary lacks",
                                       params=("merge_ids",)) from None

    def __getattr__(self, name: str):
        # The tables of _build_ids and _build_tables, where the tokenizer was
        # given its facts and has not needed them yet (called for a missing attribute only).
        if "_facts" in self.__dict__:
            if name in _IDS:
                with gc_paused():
                    self._build_ids()
                return self.__dict__[name]
            if name in _TABLES:
                with gc_paused():
                    self._build_tables()
                return self.__dict__[name]
            if name == "_merges":
                assert self._merge_ids is not None, "a tokenizer given its facts without merges has merge_ids"
                self._merges = self._pairs_of(self._merge_ids)
                return self._merges
            if name == "_joinable":
                # Byte pairs that some token holds side by side: a word is cut
                # between any other two bytes (bpe.split_bytes).
                self._joinable = joinable_table(self._merges)
                return self._joinable
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def facts(self) -> EncoderFacts:
        """What this tokenizer's merges and spec decide about encoding, the same
        on every machine (computed on first use unless given)."""
        if self._facts is None:
            self._facts = self._computed_facts()
        return self._facts

    def _computed_facts(self, *, checked: int = 0) -> EncoderFacts:
        """The facts, computed; ``checked``: the first merges are known to
        encode to themselves (see ``fast.rank_equivalence_problem``)."""
        from . import fast

        problem = fast.spec_problem(self.spec)
        if problem is None:
            problem = fast.rank_equivalence_problem(self._merges, self._id_of, self._encode_bytes,
                                                    checked=checked)
        return EncoderFacts(problem)

    def _encode_bytes(self, data: bytes) -> list[int]:
        """One pre-token's bytes, merged by rank (no cutting, no cache)."""
        return merge_word(self._symbolize(data), self._ranks, self._merged_ids)

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

    @property
    def backend(self) -> str:
        """Which encoder runs ordinary text: ``tiktoken``, or ``python (why)``.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], fast=False).backend
        'python (fast=False)'
        """
        self._fast_encoder()
        return self._backend

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
        return self._encode(text, _ORDINARY, None, [])

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float = 0.0,
        seed: int | str | None = None,
    ) -> list[int]:
        """Encode text to ids, with tiktoken's rules for special tokens.

        Special tokens in ``allowed_special`` become their ids; any in
        ``disallowed_special`` (by default every special token not allowed)
        raises ``DisallowedSpecialError``; the rest are encoded as plain text.
        ``dropout`` > 0 skips each merge with that probability (BPE-dropout,
        for training-time regularisation; ``seed`` makes it repeatable).

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"<|e|>"}, [],
        ...                 special_tokens=["<|e|>"])
        >>> tok.encode("a<|e|>", allowed_special="all")
        [97, 256]
        """
        return self._encode(text, self._rules(allowed_special, disallowed_special, dropout, seed), None, [])

    def encode_batch(self, texts: Iterable[str], **options) -> list[list[int]]:
        """``encode`` each text; takes the same keyword options."""
        rules = self._rules(**options)
        return [self._encode(text, rules, None, []) for text in texts]

    def encode_with_offsets(self, text: str, **options) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of text and, for each, the (start, end) characters of text it
        covers. A token that holds part of a character covers that character.
        Takes the same keyword options as ``encode``. InvalidArgumentError where
        the tokens do not spell the text (a normalizer, markers, dropped spaces).

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
        >>> tok.encode_with_offsets("abé")
        ([256, 195, 169], [(0, 2), (2, 3), (2, 3)])
        """
        text = _fix_surrogates(text)
        ids = self._encode(text, self._rules(**options), None, [])
        if b"".join(map(self._vocab.__getitem__, ids)) != text.encode("utf-8"):
            raise InvalidArgumentError(
                f"the tokens of {self.name or 'this tokenizer'} do not spell the text byte for byte (a normalizer, "
                "word markers, an unknown token or a pre-tokenizer that drops characters change it), so they have "
                "no places in it; use encode", params=("text",))
        # The character each byte of the UTF-8 text belongs to.
        char_of_byte = []
        for i, ch in enumerate(text):
            char_of_byte.extend([i] * _utf8_length(ch))
        spans = []
        start = 0
        for token_id in ids:
            end = start + len(self._vocab[token_id])
            spans.append((char_of_byte[start], char_of_byte[end - 1] + 1))
            start = end
        return ids, spans

    def encode_iterable(self, chunks: Iterable[str], *, workers: int = 1, **options) -> Iterator[int]:
        """Encode a stream of text (e.g. an open file) lazily, in bounded memory.

        Chunks are re-cut at safe places, so no pre-token or special token is
        split across two chunks: the ids equal ``encode("".join(chunks))``.
        ``workers`` > 1 encodes pieces of the stream in that many threads
        (tiktoken path) or processes (pure-Python path), in order.
        Takes the same keyword options as ``encode``.
        """
        for ids in self.encode_chunks(chunks, workers=workers, **options):
            yield from ids

    def encode_chunks(self, chunks: Iterable[str], *, workers: int = 1, **options) -> Iterator[list[int]]:
        """Like ``encode_iterable``, but yields the ids of each safely cut piece
        of the stream as one list (faster to consume in bulk).

        At most ``2 * workers`` pieces are in flight, so memory stays bounded
        by the chunk size however long the stream.
        """
        new_list: Callable[[], list[int]] = list
        yield from self._encode_stream(chunks, self._rules(**options), workers, new_list)

    def _encode_stream(self, chunks: Iterable[str], rules: _Rules, workers: int,
                       container: Callable[[], IdsT]) -> Iterator[IdsT]:
        """The ids of each safely cut piece of a stream, in order, each in a
        new ``container()`` (a list, or a uint32 array for id files).

        Pieces are about PIECE_CHARS characters whatever the chunk size: that
        bounds the memory of one piece's ids and keeps every worker busy.
        With ``workers`` > 1 they go to threads where tiktoken's core runs (it
        releases the GIL), else to processes (their results come back as
        uint32 arrays: plain bytes between processes).
        """
        pieces = rechunk(_sliced(chunks, PIECE_CHARS), self._stream_cutter(rules.allowed | rules.disallowed))
        if workers <= 1:
            for index, piece in enumerate(pieces):
                yield self._encode(piece, rules, index, container())
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

        threads = self._fast_encoder() is not None and not rules.dropout
        if threads:
            pool: Executor = ThreadPoolExecutor(workers)
        else:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                       initargs=(self,))
        with pool:
            window: deque = deque()
            for index, piece in enumerate(pieces):
                if threads:
                    window.append(pool.submit(self._encode, piece, rules, index, container()))
                else:
                    window.append(pool.submit(_encode_in_worker, piece, rules, index))
                if len(window) >= 2 * workers:
                    yield _into(window.popleft().result(), container)
            while window:
                yield _into(window.popleft().result(), container)

    def encode_file(
        self,
        path: str | Path,
        out: str | Path,
        *,
        dtype: Literal["uint16", "uint32"] | None = None,
        workers: int = 1,
        errors: str = "strict",
        progress: Callable[[Progress], None] | None = None,
        **options,
    ) -> EncodedFile:
        """Encode a text file (``-`` is stdin; .gz/.xz/.bz2 are read as text)
        into a flat binary file of little-endian ids, the format training
        scripts memory-map (``numpy.memmap(out, dtype)``). Memory stays flat.

        ``dtype`` defaults to uint16 where every id fits, else uint32.
        ``progress`` gets a ``Progress`` (bytes read, ids written) after each piece.
        The file appears only once complete. Takes ``encode``'s keyword options.
        """
        from .files import atomic_path
        from .ingest import TextReader, open_source
        from .records import Progress

        dtype = dtype or ("uint16" if self.n_vocab <= 1 << 16 else "uint32")
        typecode = self._id_typecode(dtype, writing=True)
        out = Path(out)
        stream = open_source(path)  # its checks and messages, also where workers read the file
        n_tokens = 0
        rules = self._rules(**options)
        name = str(path)
        total = None if name == "-" or name.endswith((".gz", ".xz", ".bz2")) else os.path.getsize(name)
        reader = TextReader(stream, name, errors=errors, hashed=False)
        parts: Iterator[tuple[bytes | bytearray | memoryview, int, int]]
        if workers > 1 and total is not None and self._ranges_apply(rules):
            parts = self._encode_ranges(name, total, rules, workers, typecode, errors)
        else:
            parts = ((_pack(ids, typecode), len(ids), reader.size)
                     for ids in self._encode_stream(reader, rules, workers, _uint32_array))
        try:
            # Replaces an existing ``out`` by design (ids files are outputs of a run).
            with atomic_path(out, force=True) as temp, open(temp, "wb") as f:
                for data, n, done in parts:
                    n_tokens += n
                    f.write(data)
                    if progress is not None:
                        progress(Progress("encode", name, done, total, "bytes", tokens=n_tokens))
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        return EncodedFile(path=str(out), tokens=n_tokens, bytes=total if total is not None else reader.size,
                           dtype=dtype)

    def _ranges_apply(self, rules: _Rules) -> bool:
        """Whether worker processes may each read and encode their own ranges of a
        plain file: forked (Linux), no dropout (its seeds follow the stream's
        pieces), and a pre-tokenizer that lets a file be cut anywhere."""
        return (sys.platform == "linux" and not rules.dropout
                and self._stream_cutter(rules.allowed | rules.disallowed).cuts_words)

    def _encode_ranges(self, path: str, size: int, rules: _Rules, workers: int, typecode: str,
                       errors: str) -> Iterator[tuple[bytes | bytearray, int, int]]:
        """A plain file's ids, packed as ``typecode``, range by range in order:
        each worker process reads, decodes, encodes and packs a range between
        safe cuts; this process only writes. Yields (packed ids, ids, bytes done)."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from .ingest import IngestTuning
        from .ingest.scheduler import cut_points
        from .ingest.sources import check_errors

        check_errors(errors)
        cutter = self._stream_cutter(rules.allowed | rules.disallowed)
        points = cut_points(path, size, cutter, IngestTuning(chunk_bytes=RANGE_BYTES))
        self._fast_encoder()  # decided (and checked) once, here: the workers inherit it
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                 initargs=(self,)) as pool:
            window: deque = deque()
            for start, end in zip(points, points[1:]):
                window.append((pool.submit(_encode_range, path, start, end, errors, rules, typecode), end))
                if len(window) >= 2 * workers:
                    future, done = window.popleft()
                    yield (*future.result(), done)
            while window:
                future, done = window.popleft()
                yield (*future.result(), done)

    def _id_typecode(self, dtype: str, *, writing: bool) -> str:
        if dtype not in ID_DTYPES:
            raise InvalidArgumentError(f"unknown id dtype {dtype!r}; choose uint16 or uint32", params=("dtype",))
        if writing and dtype == "uint16" and self.n_vocab > 1 << 16:
            raise InvalidArgumentError(f"this vocabulary has ids up to {self.n_vocab - 1}, more than uint16 "
                                       "holds; use dtype='uint32'", params=("dtype",))
        return ID_DTYPES[dtype]

    def explain(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = "all") -> Explanation:
        """How ``text`` is encoded, pre-token by pre-token: the initial symbols,
        each merge applied (pair, rank, position), where characters unseen in
        training went, and the ids; ``.ids`` equals ``encode(text,
        allowed_special=allowed_special, disallowed_special=())``.

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
        >>> [(w.text, w.ids, [(s.rank, s.position) for s in w.steps]) for w in tok.explain("abc ab").words]
        [('abc', (256, 99), [(0, 0)]), (' ab', (32, 256), [(0, 1)])]
        """
        from .records import Explanation, WordExplanation

        rules = self._rules(allowed_special=allowed_special, disallowed_special=())
        words: list[WordExplanation] = []
        start = 0
        for m in self._specials_regex(rules.allowed).finditer(text) if rules.allowed else ():
            words += self._explain_segment(text[start:m.start()])
            token_id = self.special_tokens[m.group()]
            words.append(WordExplanation(m.group(), (token_id,), (token_id,), segmentation="special"))
            start = m.end()
        words += self._explain_segment(text[start:])
        mentioned = {i for w in words for i in (*w.symbols, *w.ids, *(s.token for s in w.steps))}
        return Explanation(self.name or "", text, tuple(words), {i: self._vocab[i] for i in sorted(mentioned)})

    def _explain_segment(self, text: str) -> Iterator[WordExplanation]:
        from .records import MergeStep, WordExplanation

        for word in self._pipeline.pretokenize(_fix_surrogates(text)) if text else ():
            symbols = self._initial_ids(word)
            if self._longest_match is not None:
                yield WordExplanation(word, tuple(symbols), tuple(self._longest_match.segment(symbols)),
                                      segmentation="longest-match")
                continue
            steps = tuple(MergeStep(rank, i, *self._pair_of(rank), tuple(ids))
                          for rank, i, ids in merge_steps(symbols, self._ranks, self._merged_ids))
            yield WordExplanation(word, tuple(symbols), steps[-1].ids if steps else tuple(symbols),
                                  steps=steps, unknown=tuple(self._unknown_chars(word)))

    # -- the compression curve (bpestore.analysis) ---------------------------
    def count_pretokens(self, chunks: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
        """The pre-tokens of a stream of text with their counts, and the special
        tokens in it with theirs (every special token recognised, as
        ``encode(..., allowed_special="all")`` does); encoding each pre-token
        (``merge_ranks``) gives the ids of the whole text."""
        words: Counter[str] = Counter()
        specials: Counter[str] = Counter()
        allowed = frozenset(self.special_tokens)
        regex = self._specials_regex(allowed)
        pretokenize = self._pipeline.pretokenize
        for piece in rechunk(_sliced(chunks, PIECE_CHARS), self._stream_cutter(allowed)):
            start = 0
            for m in regex.finditer(piece) if regex is not None else ():
                if m.start() > start:
                    words.update(pretokenize(_fix_surrogates(piece[start:m.start()])))
                specials[m.group()] += 1
                start = m.end()
            if start < len(piece):
                words.update(pretokenize(_fix_surrogates(piece[start:])))
        return words, specials

    def merge_ids(self) -> list[tuple[int, int, int]]:
        """The merges as ids, by rank: (left, right, the token made)."""
        return [self._pair_of(rank) for rank in range(len(self._merges))]

    def merge_ranks(self, word: str) -> tuple[list[int], list[int], list[int]]:
        """One pre-token's ids (as ``encode``), the rank of each merge applied on
        the way, in order, and for each the highest rank applied so far in the
        word: the merge is applied by a tokenizer keeping the
        first K merges exactly where K exceeds that number (merging applies the
        lowest rank present; with fewer merges it stops at the first one missing).

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"bc", 257: b"abc"},
        ...                 [(b"b", b"c"), (b"a", b"bc")])
        >>> tok.merge_ranks("abc")
        ([257], [0, 1], [0, 1])
        """
        if self.spec.segmentation != "merge":
            raise InvalidArgumentError(f"a curve along the merge ranks needs merge segmentation; this version "
                                       f"segments by {self.spec.segmentation}", params=("ref",))
        # The word whole (merging its pieces apart gives the same ids and, the
        # pieces being independent, the same merges under every prefix).
        symbols = self._word_symbols(word) if self._word_symbols is not None else self._symbolize(word.encode("utf-8"))
        ids, ranks = merge_ranks(symbols, self._ranks, self._merged_ids)
        needed = []
        highest = -1
        for rank in ranks:
            if rank > highest:
                highest = rank
            needed.append(highest)
        return ids, ranks, needed

    def _pair_of(self, rank: int) -> tuple[int, int, int]:
        """The ids a merge joins and makes."""
        left, right = self._merges[rank]
        return self._id_of[left], self._id_of[right], self._merged_ids[rank]

    def _unknown_chars(self, word: str) -> Iterator[UnknownChar]:
        """The characters of a pre-token that a ``chars`` alphabet lacks, and their ids."""
        if self.spec.byte_level:
            return
        from .records import UnknownChar

        for position, char in enumerate(word):
            data = char.encode("utf-8", "surrogatepass")
            if data in self._id_of:
                continue
            if self.spec.byte_fallback:
                yield UnknownChar(char, position, "bytes", tuple(self._id_of[bytes([b])] for b in data))
            elif self.spec.unk_token is not None:
                yield UnknownChar(char, position, "unk", (self._id_of[self.spec.unk_token.encode("utf-8")],))

    # -- encoding internals --------------------------------------------------
    def _rules(
        self,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float = 0.0,
        seed: int | str | None = None,
    ) -> _Rules:
        """Check an encode call's options once; the result is plain data."""
        if allowed_special == "all":
            allowed = frozenset(self.special_tokens)
        else:
            allowed = frozenset(allowed_special)
            unknown = allowed - set(self.special_tokens)
            if unknown:
                raise InvalidArgumentError(f"allowed_special names {sorted(unknown)[0]!r}, which is "
                                           "not a special token of this tokenizer", params=("allowed_special",))
        if disallowed_special == "all":
            disallowed = frozenset(self.special_tokens) - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if not 0.0 <= dropout <= 1.0:
            raise InvalidArgumentError(f"dropout is a probability between 0 and 1, not {dropout!r}",
                                       params=("dropout",))
        if dropout and self.spec.segmentation != "merge":
            raise InvalidArgumentError("dropout applies to merge segmentation only; this version "
                                       f"segments by {self.spec.segmentation}", params=("dropout",))
        return _Rules(allowed, disallowed, dropout, seed)

    def _stream_cutter(self, specials: frozenset[str]) -> TextPipeline:
        """The pipeline that cuts a stream for one call: it must not cut inside
        the special tokens the call recognises (allowed or disallowed), and must
        not treat the others, which it encodes as text, as boundaries."""
        cutter = self._cutters.get(specials)
        if cutter is None:
            cutter = self._cutters[specials] = TextPipeline(
                self.spec.replace(special_tokens=tuple(t for t in self.spec.special_tokens if t in specials)))
        return cutter

    def _specials_regex(self, tokens: frozenset[str]):
        regex = self._special_regex_cache.get(tokens)
        if regex is None and tokens:
            regex = self._special_regex_cache[tokens] = special_tokens_regex(tokens)
        return regex

    def _encode(self, text: str, rules: _Rules, index: int | None, out: IdsT) -> IdsT:
        """Encode one text under checked rules into ``out`` (a list, or a uint32
        array), and return it; ``index`` numbers the pieces of a stream
        (it seeds dropout per piece, whichever worker runs it).
        Lone surrogates become U+FFFD (as in tiktoken) where a segment is
        encoded; special tokens hold none, so matching them is unchanged."""
        if rules.disallowed:
            match = self._specials_regex(rules.disallowed).search(text)
            if match is not None:
                raise DisallowedSpecialError(match.group())
        dropout = rules.dropout
        rng = None
        if dropout:
            rng = random.Random(rules.seed if index is None else f"{rules.seed}:{index}")
        if not rules.allowed:
            if not dropout and type(out) is list and not out:
                fast = self._fast_for(text)
                found = fast.encode(text) if fast is not None else None
                if found is not None:
                    return cast(IdsT, found)  # tiktoken's own list: no copy of a long text's ids
            self._encode_segment(text, out, dropout, rng)
            return out
        start = 0
        for m in self._specials_regex(rules.allowed).finditer(text):
            self._encode_segment(text[start:m.start()], out, dropout, rng)
            out.append(self.special_tokens[m.group()])
            start = m.end()
        self._encode_segment(text[start:], out, dropout, rng)
        return out

    def _encode_segment(self, text: str, out: Ids, dropout: float = 0.0,
                        rng: random.Random | None = None) -> None:
        """Encode a stretch of text that holds no special token to be matched."""
        if not text:
            return
        if dropout:
            assert rng is not None
            for word in self._pipeline.pretokenize(_fix_surrogates(text)):
                out.extend(merge_word_dropout(self._initial_ids(word), self._ranks,
                                              self._merged_ids, dropout, rng))
            return
        fast = self._fast_for(text)
        if fast is not None and fast.encode_into(text, out):
            return
        cache = self._words
        for word in self._pipeline.pretokenize(_fix_surrogates(text)):
            ids = cache.get(word)
            if ids is None:
                if len(cache) >= WORD_CACHE_SIZE:
                    cache.clear()
                ids = cache[word] = tuple(self._encode_word(word))
            out.extend(ids)

    def _fast_for(self, text: str):
        """tiktoken's core where it may encode ``text``: a short text does not pay
        for deciding that (the tables the pure path needs are smaller)."""
        return self._fast_encoder() if self._fast_checked or len(text) >= FAST_CHECK_AFTER else None

    def _initial_ids(self, word: str) -> list[int]:
        """A pre-token's initial symbols: the spec's own, or its bytes."""
        if self._word_symbols is not None:
            return self._word_symbols(word)
        return self._symbolize(word.encode("utf-8"))

    def _symbolize(self, data: bytes) -> list[int]:
        """A word's (or token's) initial symbols: its bytes, as ids."""
        byte_ids = self._byte_ids
        return [byte_ids[b] for b in data]

    def _encode_word(self, word: str) -> list[int]:
        """One pre-token to ids: its bytes, cut where no token can span them
        (one symbol per byte makes the cut valid; bpe.split_bytes), each
        piece turned into symbols and segmented; pieces are cached. Specs
        with characters or word markers use their own symbols, whole."""
        if self._word_symbols is not None:
            ids = self._word_symbols(word)
            if self._longest_match is not None:
                return self._longest_match.segment(ids)
            return merge_word(ids, self._ranks, self._merged_ids) if len(ids) > 1 else ids
        data = word.encode("utf-8")
        if self._longest_match is not None:
            return self._longest_match.segment(self._symbolize(data))
        if len(data) <= SHORT_WORD and "_joinable" not in self.__dict__:
            # Cutting is exact either way: a short text's few short words spare building the table.
            return merge_word(self._symbolize(data), self._ranks, self._merged_ids)
        pieces = split_bytes(data, self._joinable)
        if len(pieces) == 1:
            return merge_word(self._symbolize(data), self._ranks, self._merged_ids)
        byte_ids = self._byte_ids
        cache = self._pieces
        out: list[int] = []
        for piece in pieces:
            if len(piece) == 1:
                out.append(byte_ids[piece[0]])
                continue
            piece_ids = cache.get(piece)
            if piece_ids is None:
                if len(cache) >= PIECE_CACHE_SIZE:
                    cache.clear()
                piece_ids = cache[piece] = tuple(merge_word(self._symbolize(piece), self._ranks, self._merged_ids))
            out += piece_ids
        return out

    def _fast_encoder(self):
        """tiktoken's core for this version, or None (the reason goes to backend)."""
        if not self._fast_checked:
            self._fast_checked = True
            self._fast, self._backend = self._build_fast_encoder()
        return self._fast

    def _build_fast_encoder(self):
        from . import fast

        if not self._use_fast:
            return None, "python (fast=False)"
        problem = fast.spec_problem(self.spec) or fast.tiktoken_problem() or self.facts.fast_problem
        if problem is not None:
            return None, f"python ({problem})"
        return fast.FastEncoder(self.spec, self._tiktoken_ranks()), "tiktoken"

    def _tiktoken_ranks(self) -> dict[bytes, int]:
        """Each byte's and each merged token's bytes, with its id: usually the
        ordinary tokens themselves, where every one is a byte or one merge's."""
        id_of = self._id_of
        made = self._merge_ids[2] if self._merge_ids is not None else None
        if len(id_of) == 256 + (len(made) if made is not None else len(self._merges)):
            return id_of
        ranks = {bytes([b]): self._byte_ids[b] for b in range(256)}
        tokens = map(self._vocab.__getitem__, made) if made is not None else (a + b for a, b in self._merges)
        ranks.update((token, id_of[token]) for token in tokens)
        return ranks

    # -- decoding ----------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids."""
        vocab = self._vocab
        try:
            return b"".join([vocab[i] for i in ids])
        except KeyError as exc:
            raise InvalidArgumentError(f"unknown token id {exc.args[0]} (the vocabulary has ids "
                                       f"0..{self.n_vocab - 1})", params=("ids",)) from None
        except TypeError:
            raise InvalidArgumentError("token ids must be integers", params=("ids",)) from None

    def decode(self, ids: Iterable[int], *, errors: str = "replace") -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD unless errors="strict"."""
        data = self.decode_bytes(ids)
        try:
            return unmark_spaces(data.decode("utf-8", errors=errors), self.spec)
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"the tokens do not decode to valid UTF-8 (byte {exc.start}); "
                                       "use errors='replace' to substitute U+FFFD", params=("errors",)) from None

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token."""
        return self.decode_bytes([token_id])

    def decode_with_offsets(self, ids: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ids and the character where each token starts, as tiktoken
        gives them (a token that starts inside a character starts at it).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode_with_offsets([104, 105])
        ('hi', [0, 1])
        """
        offsets = []
        n_chars = 0
        for token_id in ids:
            data = self.decode_single_token_bytes(token_id)
            offsets.append(max(0, n_chars - (0x80 <= data[0] < 0xC0)))
            n_chars += sum(1 for b in data if not 0x80 <= b < 0xC0)
        return self.decode(ids, errors="strict"), offsets

    def decode_file(self, path: str | Path, *, dtype: Literal["uint16", "uint32"] | None = None,
                    errors: str = "replace", block: int = 1 << 20) -> Iterator[str]:
        """Decode a flat id file written by ``encode_file``, streaming the text."""
        dtype = dtype or ("uint16" if self.n_vocab <= 1 << 16 else "uint32")
        typecode = self._id_typecode(dtype, writing=False)
        decoder = codecs.getincrementaldecoder("utf-8")(errors)
        done = 0
        try:
            with open(path, "rb") as f:
                while data := f.read(block * array(typecode).itemsize):
                    ids = array(typecode)
                    if len(data) % ids.itemsize:
                        raise InvalidArgumentError(
                            f"{path} is not a file of {dtype} ids (its size is not a multiple of "
                            f"{ids.itemsize}); pass the dtype it was written with", params=("dtype",))
                    ids.frombytes(data)
                    if sys.byteorder != "little":
                        ids.byteswap()
                    data = self.decode_bytes(ids)
                    yield decoder.decode(data)
                    done += len(data)
                yield decoder.decode(b"", True)
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"the tokens do not decode to valid UTF-8 (byte {done + exc.start}); "
                                       "use errors='replace' to substitute U+FFFD", params=("errors",)) from None
        except FileNotFoundError:
            raise NotFoundError(f"file not found: {path}", params=("path",)) from None


# -- worker processes ---------------------------------------------------------
_WORKER_TOKENIZER: Tokenizer | None = None


def _start_worker(tokenizer: Tokenizer) -> None:
    global _WORKER_TOKENIZER
    from .ingest.pool import die_with_parent

    die_with_parent()  # a killed parent leaves no encoding process behind
    _WORKER_TOKENIZER = tokenizer


def _encode_in_worker(piece: str, rules: _Rules, index: int) -> array[int]:
    assert _WORKER_TOKENIZER is not None, "started by _start_worker"
    return _WORKER_TOKENIZER._encode(piece, rules, index, _uint32_array())


def _encode_range(path: str, start: int, end: int, errors: str, rules: _Rules,
                  typecode: str) -> tuple[bytes | bytearray, int]:
    """Bytes ``start:end`` of a plain file (cut at a safe place) encoded and
    packed as ``typecode``: the packed ids and how many."""
    from .ingest.sources import decode, read_range

    assert _WORKER_TOKENIZER is not None, "started by _start_worker"
    text = decode(read_range(path, start, end), path, errors, start)
    ids = _WORKER_TOKENIZER._encode(text, rules, None, _uint32_array())
    return _pack(ids, typecode), len(ids)


def _pack(ids: array[int], typecode: str) -> bytes | bytearray:
    """uint32 ids as little-endian ``typecode`` (I, or H where every id fits in 16 bits)."""
    if sys.byteorder != "little":
        ids.byteswap()
    if typecode == "I":
        return ids.tobytes()
    # Keep the low two bytes of each four.
    data = memoryview(ids).cast("B")
    narrow = bytearray(len(ids) * 2)
    narrow[0::2], narrow[1::2] = data[0::4], data[1::4]
    return narrow


def _uint32_array() -> array[int]:
    return array("I")


def _into(ids: Ids, container: Callable[[], IdsT]) -> IdsT:
    """ids as the container asked for (a worker process sends arrays)."""
    return cast(IdsT, ids.tolist() if container is list and isinstance(ids, array) else ids)


def _rebuild(vocab, merges, special_tokens, spec, name, fast, facts) -> Tokenizer:
    return Tokenizer(vocab, merges, special_tokens, spec=spec, name=name, fast=fast, facts=facts)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside: building tables of 50,000 merges makes
    tuples and dicts that hold no cycles, and collecting while they grow cost
    as much again as building them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# -- text helpers ---------------------------------------------------------------
def _sliced(chunks: Iterable[str], size: int) -> Iterator[str]:
    """The chunks, each cut into slices of at most ``size`` characters."""
    for chunk in chunks:
        if len(chunk) <= size:
            yield chunk
        else:
            yield from (chunk[i:i + size] for i in range(0, len(chunk), size))


def _utf8_length(ch: str) -> int:
    cp = ord(ch)
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _fix_surrogates(text: str) -> str:
    """Replace lone surrogates with U+FFFD, as tiktoken does before encoding."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
