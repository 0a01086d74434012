"""The encoding engine under ``Tokenizer``: one version's rules for special tokens,
its backends and the cutter of its streams, in one object with a public API
(``streams`` and ``explain`` use it; ``Tokenizer`` is a facade over it).

Ordinary text goes to a backend with the reference encoder's ids: the compiled
encode core (``core_backend``) wherever it is built and the segmentation is merge,
else, where the version allows it, tiktoken's Rust core (``tiktoken_backend``);
the reference encoder (``reference``) runs where neither may, and for dropout.
``Engine.accelerated`` chooses, once; ``Engine.backend`` says which one runs.
"""

from __future__ import annotations

import os
import random
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from functools import cached_property
from typing import Literal, NamedTuple, Protocol, TypeAlias, TypeVar

from ..bpe import derive_merges
from ..errors import InvalidArgumentError
from ..spec import EncoderFacts, TokenizerSpec
from ..text import TextPipeline, fix_surrogates, special_tokens_regex
from . import core_backend
from .rank_rule import rank_rule_problem, spec_problem
from .reference import MergeIds, PythonEncoder, pairs_of

FAST_CHECK_AFTER = 10_000  # characters of one text that make tiktoken's backend worth choosing

PlainCall: TypeAlias = "Callable[[str, bool], list[int] | bytearray | None]"
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
    """A backend that encodes ordinary text with the reference encoder's ids, or
    declines a text (None, False) that the reference encoder then encodes."""

    def encode(self, text: str) -> list[int] | None: ...

    def encode_into(self, text: str, out: list[int] | array[int], first: bool = True) -> bool: ...


class Engine:
    """One version's encoder: its vocabulary, special tokens and spec, the reference
    encoder, and the accelerated backend chosen once."""

    def __init__(self, vocab: dict[int, bytes], merges: Sequence[tuple[bytes, bytes]] | None,
                 special_tokens: dict[str, int], spec: TokenizerSpec, *, name: str | None = None,
                 fast: bool = True, facts: EncoderFacts | None = None, merge_ids: MergeIds | None = None,
                 ranks: Sequence[bytes | None] | None = None) -> None:
        """As ``Tokenizer``'s arguments, the special tokens given as text -> id."""
        self.vocab = vocab
        self.special_tokens = special_tokens
        self.spec = spec
        self.name = name
        self.use_fast = fast
        self.known_facts = facts
        self.ranks = ranks
        if merges is None and merge_ids is None and ranks is None:
            raise InvalidArgumentError("give the merges (or their ids as merge_ids)", params=("merges",))
        if merges is None and facts is None and ranks is None:
            merges = pairs_of(vocab, merge_ids)  # type: ignore[arg-type]  # not None: checked above
        self.reference = PythonEncoder(vocab, list(special_tokens.values()), spec,
                                       merges if merges is not None or ranks is None else self._derived_merges,
                                       merge_ids if facts is not None else None)
        if facts is None and ranks is None:
            self.reference.table  # noqa: B018  # checks the merges against the vocabulary now
        self._cutters: dict[frozenset[str], TextPipeline] = {}
        self._special_regexes: dict[frozenset[str], object] = {}
        self._starts: dict[frozenset[str], str] = {}

    def __reduce__(self):
        # Pickled (for worker processes started by spawn) without caches.
        return (_rebuild, (self.vocab, self.reference.merges if self.ranks is None else None, self.special_tokens,
                           self.spec, self.name, self.use_fast, self.known_facts, self.ranks))

    def _derived_merges(self) -> list[tuple[bytes, bytes]]:
        """A rank file's merges, derived when first needed."""
        assert self.ranks is not None
        return derive_merges({token: rank for rank, token in enumerate(self.ranks) if token is not None})

    @property
    def facts(self) -> EncoderFacts:
        """What the merges and spec decide about encoding (computed on first use unless given)."""
        if self.known_facts is None:
            reference = self.reference
            self.known_facts = EncoderFacts(rank_rule_problem(
                self.spec, self.vocab, self.special_tokens.values(), reference.merges, id_of=reference.index.id_of))
        return self.known_facts

    # -- the backend: which encoder runs ordinary text ------------------------------
    @cached_property
    def accelerated(self) -> tuple[Accelerated | None, str]:
        """The first accelerated backend this version allows, and its name; or
        None and ``python (why not)``. Chosen once."""
        if not self.use_fast:
            return None, "python (fast=False)"
        core_problem = core_backend.core_problem(self.spec)
        if core_problem is None:
            return core_backend.build(self.spec, self.reference, self.known_facts, self.ranks), "compiled (C)"
        # start-up: tiktoken's backend (its thread pool, ~4 ms) only where the compiled core cannot encode
        from . import tiktoken_backend

        problem = spec_problem(self.spec) or tiktoken_backend.tiktoken_problem() or self.facts.rank_rule_problem
        if problem is not None:  # the core's reason where it is built, else tiktoken's
            return None, f"python ({problem if core_backend.CORE is None else core_problem})"
        reference = self.reference
        made = reference.merge_ids[2] if reference.merge_ids is not None else reference.table.merged_ids
        ranks = core_backend.rank_tokens(self.vocab, reference.special_ids, made)
        return tiktoken_backend.TiktokenEncoder(self.spec, {t: i for i, t in enumerate(ranks) if t}), "tiktoken"

    @property
    def backend(self) -> str:
        """Which encoder runs ordinary text: ``compiled (C)``, ``tiktoken`` or ``python (why)``."""
        return self.accelerated[1]

    def accelerated_for(self, text: str) -> Accelerated | None:
        """The accelerated backend where it may encode ``text``: a short text does not pay
        for choosing tiktoken's (the reference's tables are smaller); the core's it does."""
        if ("accelerated" in self.__dict__ or len(text) >= FAST_CHECK_AFTER  # chosen, or worth choosing
                or (self.use_fast and core_backend.core_problem(self.spec) is None)):
            return self.accelerated[0]
        return None

    # -- special tokens and streams ------------------------------------------------
    def rules(self, **options) -> Rules:
        """An encode call's options, checked once (``Rules.checked``); a call without
        options takes the defaults checked when first asked."""
        if not options:
            return self.default_rules
        return Rules.checked(self.special_tokens, self.spec.segmentation, **options)

    @cached_property
    def default_rules(self) -> Rules:
        """``encode``'s rules without options: every special token disallowed."""
        return Rules.checked(self.special_tokens, self.spec.segmentation)

    def specials_regex(self, tokens: frozenset[str]):
        """The regex that finds these special tokens (None for none)."""
        regex = self._special_regexes.get(tokens)
        if regex is None and tokens:
            regex = self._special_regexes[tokens] = special_tokens_regex(tokens)
        return regex

    def stream_cutter(self, specials: frozenset[str]) -> TextPipeline:
        """The pipeline that cuts a stream for one call: it must not cut inside
        the special tokens the call recognises (allowed or disallowed), and must
        not treat the others, which it encodes as text, as boundaries."""
        cutter = self._cutters.get(specials)
        if cutter is None:
            cutter = self._cutters[specials] = TextPipeline(
                self.spec.replace(special_tokens=tuple(t for t in self.spec.special_tokens if t in specials)))
        return cutter

    def special_start(self, tokens: frozenset[str]) -> str:
        """What all these special tokens start with (``<|`` for tiktoken's): a text
        without it holds none of them, found by a str ``in`` before any regex."""
        start = self._starts.get(tokens)
        if start is None:
            start = self._starts[tokens] = os.path.commonprefix(list(tokens))
        return start

    def refuse_disallowed(self, text: str, rules: Rules) -> None:
        """DisallowedSpecialError where text holds a special token the call disallows."""
        if rules.disallowed and self.special_start(rules.disallowed) in text:
            match = self.specials_regex(rules.disallowed).search(text)
            if match is not None:
                raise DisallowedSpecialError(match.group())

    def plain_call(self) -> PlainCall | None:
        """The backend's own call for ordinary text where it encodes it whole
        (``Tokenizer``'s fast path): ``call(text, as_bytes)`` gives a list (``as_bytes``:
        native uint32 bytes), or None where ``encode`` must; None where no compiled core runs."""
        fast = self.accelerated_for("")  # a short text's choice: it does not start tiktoken's
        return fast.plain_call() if isinstance(fast, core_backend.CoreEncoder) else None

    # -- encoding and decoding ---------------------------------------------------------
    def encode(self, text: str, rules: Rules, index: int | None, out: IdsT) -> IdsT:
        """Encode one text under checked rules into ``out`` (a list, or a uint32
        array), and return it; ``index`` numbers the pieces of a stream
        (it seeds dropout per piece, whichever worker runs it).
        Lone surrogates become U+FFFD (as in tiktoken) where a segment is
        encoded; special tokens hold none, so matching them is unchanged.
        A stream's piece after the first (``index`` > 0) does not start the text
        (dummy prefix ``first``), nor does a segment after a special token."""
        self.refuse_disallowed(text, rules)
        first = not index
        dropout = rules.dropout
        rng = random.Random(rules.seed if index is None else f"{rules.seed}:{index}") if dropout else None
        if not rules.allowed:
            if not dropout and type(out) is list and not out and first:
                fast = self.accelerated_for(text)
                found = fast.encode(text) if fast is not None else None
                if found is not None:
                    return found  # the backend's own list: no copy of a long text's ids
            self.encode_segment(text, out, dropout, rng, first)
            return out
        start = 0
        for m in self.specials_regex(rules.allowed).finditer(text):
            self.encode_segment(text[start:m.start()], out, dropout, rng, first)
            out.append(self.special_tokens[m.group()])
            start, first = m.end(), False
        self.encode_segment(text[start:], out, dropout, rng, first)
        return out

    def encode_packed(self, text: str, rules: Rules, index: int | None) -> bytearray:
        """``encode``'s ids as native uint32 bytes: straight from the compiled core where
        it encodes the whole text (no int objects made)."""
        if not rules.allowed and not rules.dropout:
            fast = self.accelerated_for(text)
            if isinstance(fast, core_backend.CoreEncoder):
                self.refuse_disallowed(text, rules)
                data = fast.encode_packed(text)
                if data is not None:
                    return data
        return bytearray(self.encode(text, rules, index, array("I")))

    def encode_segment(self, text: str, out: Ids, dropout: float = 0.0, rng: random.Random | None = None,
                       first: bool = True) -> None:
        """Encode a stretch of text that holds no special token to be matched
        (``first``: it starts the text): with dropout by the reference encoder,
        else by the accelerated backend unless it declines the text."""
        if not text:
            return
        if dropout:
            assert rng is not None
            self.reference.encode_dropout(text, out, dropout, rng, first)
            return
        fast = self.accelerated_for(text)
        if fast is None or not fast.encode_into(text, out, first):
            self.reference.encode_into(text, out, first)

    def encode_pretokens(self, words: Sequence[str], workers: int = 1) -> list[bytes]:
        """Each pre-token's ids (words as the spec's pipeline cuts them: normalized, marked)
        as ``array('I')`` bytes, as encoding a text holding it gives them: the compiled core's
        in one call (on ``workers`` threads) where it encodes, else (and for a word it declines)
        the reference encoder's."""
        fast = self.accelerated[0]
        each = fast.encode_each(words, workers) if isinstance(fast, core_backend.CoreEncoder) else [None] * len(words)
        encode_word = self.reference.encode_word
        return [bytes(ids) if ids is not None else array("I", encode_word(fix_surrogates(word))).tobytes()
                for word, ids in zip(words, each)]

    @property
    def n_vocab(self) -> int:
        return max(self.vocab) + 1 if self.vocab else 0

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids."""
        vocab = self.vocab
        try:
            return b"".join([vocab[i] for i in ids])
        except KeyError as exc:
            raise InvalidArgumentError(f"unknown token id {exc.args[0]} (the vocabulary has ids "
                                       f"0..{self.n_vocab - 1})", params=("ids",)) from None
        except TypeError:
            raise InvalidArgumentError("token ids must be integers", params=("ids",)) from None


def _rebuild(vocab, merges, special_tokens, spec, name, fast, facts, ranks) -> Engine:
    return Engine(vocab, merges, special_tokens, spec, name=name, fast=fast, facts=facts, ranks=ranks)
