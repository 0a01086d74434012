"""Tokenizer: encode and decode with a version's merges, held in memory.

The encoder takes a vocabulary and merges; where they came from (a store, GPT-2
files, ``train_bpe``) is not its business. ``Tokenizer`` applies the rules for
special tokens and hands the text between them to a backend: the reference
encoder (``reference``: normalize, pre-tokenize, merge each pre-token by
rank or cut it by longest match, over tables built once), or an accelerated one
with identical ids: the compiled encode core (``bpestore.encodecore``) wherever
it is built and the segmentation is merge, else, where a version allows it,
tiktoken's Rust core (``bpestore.fast``). ``Tokenizer._accelerated`` chooses it,
once; ``Tokenizer.backend`` says which one runs.

Streams and id files are in ``streams``; ``explain`` and the curve's
helpers in ``explain``.
"""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol, TypeAlias

from .. import encodecore
from ..errors import InvalidArgumentError
from ..spec import EncoderFacts, TokenizerSpec
from ..text import TextPipeline, fix_surrogates, special_tokens_regex, unmark_spaces
from .reference import MergeIds, PythonEncoder, pairs_of, tiktoken_ranks

if TYPE_CHECKING:  # streams are imported where used: encoding a text does without them
    from ..records import Explanation, Progress
    from .streams import EncodedFile, IdsT

FAST_CHECK_AFTER = 10_000  # characters of one text that make the accelerated backend worth choosing

# Token ids: a list, or a uint32 array (id files, worker results).
Ids: TypeAlias = "list[int] | array[int]"


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


class Rules(NamedTuple):
    """How one encode call treats special tokens and dropout (plain data, so
    it travels to worker processes)."""

    allowed: frozenset[str]
    disallowed: frozenset[str]
    dropout: float = 0.0
    seed: int | str | None = None

    @classmethod
    def checked(
        cls,
        special_tokens: Collection[str],
        segmentation: str,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        dropout: float = 0.0,
        seed: int | str | None = None,
    ) -> Rules:
        """An encode call's options checked against a tokenizer's special tokens and segmentation."""
        if allowed_special == "all":
            allowed = frozenset(special_tokens)
        else:
            allowed = frozenset(allowed_special)
            unknown = allowed - set(special_tokens)
            if unknown:
                raise InvalidArgumentError(f"allowed_special names {sorted(unknown)[0]!r}, which is "
                                           "not a special token of this tokenizer", params=("allowed_special",))
        if disallowed_special == "all":
            disallowed = frozenset(special_tokens) - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if not 0.0 <= dropout <= 1.0:
            raise InvalidArgumentError(f"dropout is a probability between 0 and 1, not {dropout!r}",
                                       params=("dropout",))
        if dropout and segmentation != "merge":
            raise InvalidArgumentError("dropout applies to merge segmentation only; this version "
                                       f"segments by {segmentation}", params=("dropout",))
        return cls(allowed, disallowed, dropout, seed)


ORDINARY = Rules(frozenset(), frozenset())


class Accelerated(Protocol):
    """A backend that encodes ordinary text with the pure-Python path's ids, or
    declines a text (None, False) that the pure-Python path then encodes."""

    def encode(self, text: str) -> list[int] | None: ...

    def encode_into(self, text: str, out: list[int] | array[int]) -> bool: ...


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
        merge_ids: MergeIds | None = None,
        ranks: Sequence[bytes | None] | None = None,
    ) -> None:
        """``vocab`` maps ids to bytes; ``merges`` are byte pairs in rank order;
        ``special_tokens`` are in ``vocab`` as their UTF-8 bytes (a dict, text ->
        id, where a special token's bytes also name an ordinary token).
        ``fast=False`` keeps to the reference encoder. ``facts``: this
        tokenizer's ``facts`` computed before (a store's, checked when the
        version completed): nothing is checked again, and the reference
        encoder's tables are built when first needed, from ``merge_ids`` where
        given (each merge's left, right and made ids); then ``merges`` may be None.
        ``ranks``: each rank's token (a rank file's, ``tiktoken_ranks.load_tokenizer``):
        the core encodes by tiktoken's rule on them; merges may be None (derived where needed)."""
        special_ids = dict(special_tokens) if isinstance(special_tokens, dict) else {}
        special_tokens = list(special_tokens)
        if spec is None:
            spec = TokenizerSpec(special_tokens=tuple(special_tokens))
        elif special_tokens and tuple(special_tokens) != spec.special_tokens:
            spec = spec.replace(special_tokens=tuple(special_tokens))
        self.spec = spec
        self.name = name
        self._vocab = dict(vocab)
        if merges is None and merge_ids is None and ranks is None:
            raise InvalidArgumentError("give the merges (or their ids as merge_ids)", params=("merges",))
        if merges is None and facts is None and ranks is None:
            merges = pairs_of(self._vocab, merge_ids)  # type: ignore[arg-type]  # not None: checked above
        for text in spec.special_tokens:
            if text not in special_ids:
                found = [i for i, b in sorted(self._vocab.items()) if b == text.encode("utf-8")]
                if not found:
                    raise InvalidArgumentError(f"special token {text!r} is not in the vocabulary",
                                               params=("special_tokens",))
                special_ids[text] = found[0]
        self.special_tokens: dict[str, int] = special_ids
        self._facts = facts
        self._ranks = ranks
        self._python = PythonEncoder(self._vocab, list(special_ids.values()), spec,
                                     merges if merges is not None or ranks is None else derived(ranks),
                                     merge_ids if facts is not None else None)
        if facts is None and ranks is None:
            self._python.table  # noqa: B018  # checks the merges against the vocabulary now
        self._cutters: dict[frozenset[str], TextPipeline] = {}  # for cutting streams
        self._special_regex_cache: dict[frozenset[str], object] = {}
        self._use_fast = fast

    def __reduce__(self):
        # Pickled (for worker processes started by spawn) without caches.
        return (_rebuild, (self._vocab, self._python.merges if self._ranks is None else None, self.special_tokens,
                           self.spec, self.name, self._use_fast, self._facts, self._ranks))

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
        from .. import fast

        problem = fast.spec_problem(self.spec)
        if problem is None:
            python = self._python
            problem = fast.rank_equivalence_problem(python.merges, python.index.id_of, python.encode_bytes,
                                                    checked=checked)
        return EncoderFacts(problem)

    # -- the backend: which encoder runs ordinary text ------------------------------
    @cached_property
    def _accelerated(self) -> tuple[Accelerated | None, str]:
        """The first accelerated backend this version allows, and its name; or
        None and ``python (why not)``. Chosen once."""
        from .. import fast

        if not self._use_fast:
            return None, "python (fast=False)"
        if encodecore.core_problem(self.spec) is None:
            if self._ranks is not None:
                return encodecore.for_ranks(self.spec, self._ranks, self._python.pipeline.pretokenize), "compiled (C)"
            return encodecore.for_version(self.spec, self._python, self._facts), "compiled (C)"
        problem = fast.spec_problem(self.spec) or fast.tiktoken_problem() or self.facts.fast_problem
        if problem is not None:
            return None, f"python ({problem})"
        python = self._python
        made = python.merge_ids[2] if python.merge_ids is not None else None
        ranks = tiktoken_ranks(self._vocab, python.index, made, lambda: python.merges)
        return fast.FastEncoder(self.spec, ranks), "tiktoken"

    def _fast_encoder(self) -> Accelerated | None:
        """The accelerated backend, or None (the reason goes to ``backend``)."""
        return self._accelerated[0]

    def _fast_for(self, text: str) -> Accelerated | None:
        """The accelerated backend where it may encode ``text``: a short text does not
        pay for choosing tiktoken's (the pure path's tables are smaller), the core's are not."""
        if ("_accelerated" in self.__dict__ or len(text) >= FAST_CHECK_AFTER  # chosen, or worth choosing
                or (self._use_fast and encodecore.core_problem(self.spec) is None)):
            return self._accelerated[0]
        return None

    # -- what it is --------------------------------------------------------
    @property
    def vocab(self) -> dict[int, bytes]:
        """Every token id and its bytes."""
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges as byte pairs, in rank order."""
        return list(self._python.merges)

    @property
    def n_vocab(self) -> int:
        return max(self._vocab) + 1 if self._vocab else 0

    @property
    def backend(self) -> str:
        """Which encoder runs ordinary text: ``compiled (C)``, ``tiktoken`` or ``python (why)``.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], fast=False).backend
        'python (fast=False)'
        """
        return self._accelerated[1]

    def token_id(self, data: bytes | str) -> int | None:
        """The id of a token given as bytes or text (special tokens included), or None."""
        if isinstance(data, str):
            if data in self.special_tokens:
                return self.special_tokens[data]
            data = data.encode("utf-8")
        return self._python.index.id_of.get(data)

    def __repr__(self) -> str:
        return f"<Tokenizer {self.name or ''} vocab={len(self._vocab)} merges={len(self._python.merges)}>"

    # -- encoding ----------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special tokens as ordinary text.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_ordinary("hi")
        [104, 105]
        """
        return self._encode(text, ORDINARY, None, [])

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
        rules = self._rules(allowed_special=allowed_special, disallowed_special=disallowed_special, dropout=dropout,
                            seed=seed)
        return self._encode(text, rules, None, [])

    def encode_batch(self, texts: Iterable[str], *, workers: int = 1, **options) -> list[list[int]]:
        """``encode`` each text; takes the same keyword options. ``workers`` > 1: that many
        texts at once on threads where the compiled core encodes (one copy of its tables)."""
        from .streams import encode_batch

        return encode_batch(self, texts, self._rules(**options), workers)

    def encode_with_offsets(self, text: str, **options) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of text and, for each, the (start, end) characters of text it
        covers. A token that holds part of a character covers that character.
        Takes the same keyword options as ``encode``. InvalidArgumentError where
        the tokens do not spell the text (a normalizer, markers, dropped spaces).

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
        >>> tok.encode_with_offsets("abé")
        ([256, 195, 169], [(0, 2), (2, 3), (2, 3)])
        """
        from .explain import char_spans

        text = fix_surrogates(text)
        ids = self._encode(text, self._rules(**options), None, [])
        return ids, char_spans(self, text, ids)

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
        from .streams import encode_stream

        new_list: Callable[[], list[int]] = list
        yield from encode_stream(self, chunks, self._rules(**options), workers, new_list)

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
        from .streams import encode_file

        return encode_file(self, path, out, self._rules(**options), dtype=dtype, workers=workers,
                           errors=errors, progress=progress)

    def decode_file(self, path: str | Path, *, dtype: Literal["uint16", "uint32"] | None = None,
                    errors: str = "replace", block: int = 1 << 20) -> Iterator[str]:
        """Decode a flat id file written by ``encode_file``, streaming the text."""
        from .streams import decode_file

        return decode_file(self, path, dtype=dtype, errors=errors, block=block)

    # -- explain, and the compression curve (bpestore.analysis) ----------------------
    def explain(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = "all") -> Explanation:
        """How ``text`` is encoded, pre-token by pre-token (``explain.explain``)."""
        from . import explain

        return explain.explain(self, text, allowed_special)

    def count_pretokens(self, chunks: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
        """The pre-tokens of a stream of text and the special tokens in it, with
        their counts (``explain.count_pretokens``)."""
        from . import explain

        return explain.count_pretokens(self, chunks)

    def merge_ids(self) -> list[tuple[int, int, int]]:
        """The merges as ids, by rank: (left, right, the token made)."""
        from .explain import pair_of

        return [pair_of(self, rank) for rank in range(len(self._python.merges))]

    def merge_ranks(self, word: str) -> tuple[list[int], list[int], list[int]]:
        """One pre-token's ids, the rank of each merge applied, and the highest
        rank applied so far at each (``explain.merge_ranks``)."""
        from . import explain

        return explain.merge_ranks(self, word)

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
        from .explain import char_starts

        text = self.decode(ids, errors="strict")
        return text, char_starts([self.decode_single_token_bytes(i) for i in ids])

    # -- encoding internals --------------------------------------------------
    def _rules(self, **options) -> Rules:
        """Check an encode call's options once (``Rules.checked``)."""
        return Rules.checked(self.special_tokens, self.spec.segmentation, **options)

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

    def _encode(self, text: str, rules: Rules, index: int | None, out: IdsT) -> IdsT:
        """Encode one text under checked rules into ``out`` (a list, or a uint32
        array), and return it; ``index`` numbers the pieces of a stream
        (it seeds dropout per piece, whichever worker runs it).
        Lone surrogates become U+FFFD (as in tiktoken) where a segment is
        encoded; special tokens hold none, so matching them is unchanged."""
        refuse_disallowed(self, text, rules)
        dropout = rules.dropout
        rng = None
        if dropout:
            rng = random.Random(rules.seed if index is None else f"{rules.seed}:{index}")
        if not rules.allowed:
            if not dropout and type(out) is list and not out:
                fast = self._fast_for(text)
                found = fast.encode(text) if fast is not None else None
                if found is not None:
                    return found  # tiktoken's own list: no copy of a long text's ids
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
        """Encode a stretch of text that holds no special token to be matched:
        with dropout by the reference encoder, else by the accelerated backend
        unless it declines the text."""
        if not text:
            return
        if dropout:
            assert rng is not None
            self._python.encode_dropout(text, out, dropout, rng)
            return
        fast = self._fast_for(text)
        if fast is None or not fast.encode_into(text, out):
            self._python.encode_into(text, out)


def refuse_disallowed(tok: Tokenizer, text: str, rules: Rules) -> None:
    """DisallowedSpecialError where text holds a special token the call disallows."""
    if rules.disallowed:
        match = tok._specials_regex(rules.disallowed).search(text)
        if match is not None:
            raise DisallowedSpecialError(match.group())


def derived(ranks: Sequence[bytes | None]) -> Callable[[], list[tuple[bytes, bytes]]]:
    """The merges of a rank file's tokens, derived when asked (``tiktoken_ranks.derive_merges``)."""
    def derive() -> list[tuple[bytes, bytes]]:
        from ..formats.tiktoken_ranks import derive_merges

        return derive_merges({token: rank for rank, token in enumerate(ranks) if token is not None})
    return derive


def _rebuild(vocab, merges, special_tokens, spec, name, fast, facts, ranks=None) -> Tokenizer:
    return Tokenizer(vocab, merges, special_tokens, spec=spec, name=name, fast=fast, facts=facts, ranks=ranks)

