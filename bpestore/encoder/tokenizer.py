"""Tokenizer: encode and decode with a version's merges, held in memory.

The encoder takes a vocabulary and merges; where they came from (a store, GPT-2
files, ``train_bpe``) is not its business. ``Tokenizer`` is a facade: the rules
for special tokens, the backend chosen once and the stream cutter are its
``engine``'s (``engine.Engine``); streams and id files are in ``streams``;
``explain`` and the curve's helpers in ``explain``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidArgumentError
from ..spec import EncoderFacts, TokenizerSpec
from ..text import apply_template, fix_surrogates, unmark_spaces
from . import explain, streams
from .engine import ORDINARY, DisallowedSpecialError, Engine, PlainCall
from .reference import MergeIds

if TYPE_CHECKING:
    from ..records import Explanation, Progress

__all__ = ["DisallowedSpecialError", "Tokenizer"]

# encode's defaults: a call passing these very objects takes the fast path (``_plain``).
_NO_SPECIALS: AbstractSet[str] = frozenset()
_ALL: Literal["all"] = "all"
_NO_DROPOUT = 0.0


def _declined(text: str, as_bytes: bool) -> None:
    """The fast path where no compiled core encodes: every text to ``Engine.encode``."""
    return None


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
        vocab = dict(vocab)
        for text in spec.special_tokens:
            if text not in special_ids:
                found = [i for i, b in sorted(vocab.items()) if b == text.encode("utf-8")]
                if not found:
                    raise InvalidArgumentError(f"special token {text!r} is not in the vocabulary",
                                               params=("special_tokens",))
                special_ids[text] = found[0]
        self.engine = Engine(vocab, merges, special_ids, spec, name=name, fast=fast, facts=facts,
                             merge_ids=merge_ids, ranks=ranks)
        self.spec = spec
        self.name = name
        self.special_tokens: dict[str, int] = special_ids
        self._plain: PlainCall = self._bind_plain

    def _bind_plain(self, text: str, as_bytes: bool) -> list[int] | bytearray | None:
        """The fast path's first call: binds the backend's own call (``Engine.plain_call``)
        in its place, for calls without options, then makes it."""
        self._plain = self.engine.plain_call() or _declined
        return self._plain(text, as_bytes)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_plain"]  # the core's bound call: bound again after unpickling
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plain = self._bind_plain

    @property
    def facts(self) -> EncoderFacts:
        """What this tokenizer's merges and spec decide about encoding, the same
        on every machine (computed on first use unless given)."""
        return self.engine.facts

    # -- what it is --------------------------------------------------------
    @property
    def vocab(self) -> dict[int, bytes]:
        """Every token id and its bytes."""
        return dict(self.engine.vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges as byte pairs, in rank order."""
        return list(self.engine.reference.merges)

    @property
    def n_vocab(self) -> int:
        return self.engine.n_vocab

    @property
    def backend(self) -> str:
        """Which encoder runs ordinary text: ``compiled (C)``, ``tiktoken`` or ``python (why)``.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], fast=False).backend
        'python (fast=False)'
        """
        return self.engine.backend

    def token_id(self, data: bytes | str) -> int | None:
        """The id of a token given as bytes or text (special tokens included), or None."""
        if isinstance(data, str):
            if data in self.special_tokens:
                return self.special_tokens[data]
            data = data.encode("utf-8")
        return self.engine.reference.index.id_of.get(data)

    def __repr__(self) -> str:
        return f"<Tokenizer {self.name or ''} vocab={len(self.engine.vocab)} merges={len(self.merges)}>"

    # -- encoding ----------------------------------------------------------
    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special tokens as ordinary text.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_ordinary("hi")
        [104, 105]
        """
        ids = self._plain(text, False)
        return ids if ids is not None else self.engine.encode(text, ORDINARY, None, [])  # type: ignore[return-value]

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = _NO_SPECIALS,
        disallowed_special: Literal["all"] | Collection[str] = _ALL,
        dropout: float = _NO_DROPOUT,
        seed: int | str | None = None,
        add_special_tokens: bool = False,
    ) -> list[int]:
        """Encode text to ids, with tiktoken's rules for special tokens.

        Special tokens in ``allowed_special`` become their ids; any in
        ``disallowed_special`` (by default every special token not allowed)
        raises ``DisallowedSpecialError``; the rest are encoded as plain text.
        ``dropout`` > 0 skips each merge with that probability (BPE-dropout,
        for training-time regularisation; ``seed`` makes it repeatable).
        ``add_special_tokens``: the ids inside the spec's ``template`` (an imported
        tokenizer.json's TemplateProcessing: Llama's ``<s>``), as Hugging Face's
        ``encode(text)`` gives them; no change without a template.

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"<|e|>"}, [],
        ...                 special_tokens=["<|e|>"])
        >>> tok.encode("a<|e|>", allowed_special="all")
        [97, 256]
        """
        if (allowed_special is _NO_SPECIALS and disallowed_special is _ALL and dropout is _NO_DROPOUT
                and seed is None and add_special_tokens is False):
            self.engine.refuse_disallowed(text, self.engine.default_rules)
            ids = self._plain(text, False)
            return ids if ids is not None else self.engine.encode(text, ORDINARY, None, [])  # type: ignore[return-value]
        rules = self.engine.rules(allowed_special=allowed_special, disallowed_special=disallowed_special,
                                  dropout=dropout, seed=seed)
        ids = self.engine.encode(text, rules, None, [])
        if add_special_tokens and self.spec.template:
            return apply_template(self.spec.template[0], ids, self.special_tokens)
        return ids

    def encode_batch(self, texts: Iterable[str], *, workers: int = 1, **options) -> list[list[int]]:
        """``encode`` each text; takes the same keyword options. ``workers`` > 1: that many
        texts at once on threads where the compiled core encodes (one copy of its tables)."""
        add = options.pop("add_special_tokens", False) and self.spec.template
        found = streams.encode_batch(self.engine, texts, self.engine.rules(**options), workers)
        return [apply_template(self.spec.template[0], ids, self.special_tokens) for ids in found] if add else found

    def encode_array(self, text: str, **options) -> Any:
        """``encode``'s ids as a uint32 numpy array where numpy imports, else an ``array('I')``
        (taken straight from the compiled core's output: no int objects). ``encode``'s options."""
        if not options:
            self.engine.refuse_disallowed(text, self.engine.default_rules)
            data = self._plain(text, True)
            if data is None:
                data = self.engine.encode_packed(text, ORDINARY, None)
            return streams.id_array(data)  # type: ignore[arg-type]
        return streams.id_array(self.engine.encode_packed(text, self.engine.rules(**options), None))

    def encode_batch_array(self, texts: Iterable[str], *, workers: int = 1, **options) -> list[Any]:
        """``encode_batch`` with each text's ids as ``encode_array`` gives them."""
        found = streams.encode_batch(self.engine, texts, self.engine.rules(**options), workers, packed=True)
        return [streams.id_array(data) for data in found]

    def encode_with_offsets(self, text: str, **options) -> tuple[list[int], list[tuple[int, int]]]:
        """The ids of text and, for each, the (start, end) characters of text it
        covers. A token that holds part of a character covers that character.
        Takes the same keyword options as ``encode``. InvalidArgumentError where
        the tokens do not spell the text (a normalizer, markers, dropped spaces).

        >>> tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
        >>> tok.encode_with_offsets("abé")
        ([256, 195, 169], [(0, 2), (2, 3), (2, 3)])
        """
        text = fix_surrogates(text)
        ids = self.engine.encode(text, self.engine.rules(**options), None, [])
        return ids, explain.char_spans(self.engine, text, ids)

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
        yield from streams.encode_stream(self.engine, chunks, self.engine.rules(**options), workers, new_list)

    def encode_file(
        self,
        path: str | Path,
        out: str | Path,
        *,
        dtype: Literal["uint16", "uint32"] | None = None,
        workers: int = 1,
        errors: str = "strict",
        progress: Callable[[Progress], None] | None = None,
        force: bool = False,
        **options,
    ) -> streams.EncodedFile:
        """Encode a text file (``-`` is stdin; .gz/.xz/.bz2 are read as text)
        into a flat binary file of little-endian ids, the format training
        scripts memory-map (``numpy.memmap(out, dtype)``). Memory stays flat.

        ``dtype`` defaults to uint16 where every id fits, else uint32.
        ``progress`` gets a ``Progress`` (bytes read, ids written) after each piece.
        The file appears only once complete; an existing ``out`` is replaced only
        with ``force=True``. Takes ``encode``'s keyword options.
        """
        return streams.encode_file(self.engine, path, out, self.engine.rules(**options), dtype=dtype,
                                   workers=workers, errors=errors, progress=progress, force=force)

    def decode_file(self, path: str | Path, *, dtype: Literal["uint16", "uint32"] | None = None,
                    errors: str = "replace", block: int = 1 << 20) -> Iterator[str]:
        """Decode a flat id file written by ``encode_file``, streaming the text."""
        return streams.decode_file(self.engine, path, dtype=dtype, errors=errors, block=block)

    # -- explain, and the compression curve (bpestore.analysis) ----------------------
    def explain(self, text: str, *, allowed_special: Literal["all"] | AbstractSet[str] = "all") -> Explanation:
        """How ``text`` is encoded, pre-token by pre-token (``explain.explain``)."""
        return explain.explain(self.engine, text, allowed_special)

    def count_pretokens(self, chunks: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
        """The pre-tokens of a stream of text and the special tokens in it, with
        their counts (``explain.count_pretokens``)."""
        return explain.count_pretokens(self.engine, chunks)

    def merge_ids(self) -> list[tuple[int, int, int]]:
        """The merges as ids, by rank: (left, right, the token made)."""
        return [explain.pair_of(self.engine, rank) for rank in range(len(self.engine.reference.merges))]

    def merge_ranks(self, word: str) -> tuple[list[int], list[int], list[int]]:
        """One pre-token's ids, the rank of each merge applied, and the highest
        rank applied so far at each (``explain.merge_ranks``)."""
        return explain.merge_ranks(self.engine, word)

    # -- decoding ----------------------------------------------------------
    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids."""
        return self.engine.decode_bytes(ids)

    def decode(self, ids: Iterable[int], *, errors: str = "replace") -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD unless errors="strict"."""
        data = self.engine.decode_bytes(ids)
        try:
            return unmark_spaces(data.decode("utf-8", errors=errors), self.spec)
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(f"the tokens do not decode to valid UTF-8 (byte {exc.start}); "
                                       "use errors='replace' to substitute U+FFFD", params=("errors",)) from None

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token."""
        return self.engine.decode_bytes([token_id])

    def decode_with_offsets(self, ids: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ids and the character where each token starts, as tiktoken
        gives them (a token that starts inside a character starts at it).

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode_with_offsets([104, 105])
        ('hi', [0, 1])
        """
        text = self.decode(ids, errors="strict")
        return text, explain.char_starts([self.decode_single_token_bytes(i) for i in ids])

