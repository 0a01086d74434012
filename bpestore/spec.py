"""TokenizerSpec: everything that decides how text becomes tokens, as data.

A spec is stored (as JSON) with every corpus and every version, so a stored
version says exactly how it tokenizes. Two specs with the same JSON tokenize
identically.

>>> spec = TokenizerSpec(normalizer="nfkc,lowercase", special_tokens=("<|endoftext|>",))
>>> TokenizerSpec.from_json(spec.to_json()) == spec
True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import DamagedDataError, InvalidArgumentError

NORMALIZERS = ("none", "nfc", "nfd", "nfkc", "nfkd", "lowercase", "alphanumeric", "collapse-spaces", "precompiled",
               "strip-right", "squeeze-spaces")
PRETOKENIZERS = ("gpt2", "cl100k", "o200k", "whitespace", "punctuation", "none", "regex", "metaspace")
ALPHABETS = ("bytes", "chars")
TIE_BREAKS = ("lexicographic", "hf", "first-seen")
ERROR_POLICIES = ("strict", "replace", "skip")  # what reading text does with invalid UTF-8
# How a word is cut into tokens: BPE merges by rank, or greedy longest vocabulary match.
# "piece": any two adjacent symbols whose concatenation is a merged token merge, the
# token made first going first (SentencePiece's BPE, whose scores are the ranks).
SEGMENTATIONS = ("merge", "longest-match", "piece")
# Where the unknown token, the special tokens and the byte-fallback tokens go.
LAYOUTS = ("bpestore", "sentencepiece")
DUMMY_PREFIXES = ("never", "always", "unless-space", "first")

# The fields that decide which words a corpus holds: words counted under
# different values of these must never be mixed in one corpus.
CORPUS_FIELDS = ("normalizer", "pretokenizer", "pattern", "special_tokens", "space_marker", "dummy_prefix",
                 "charsmap", "space_suffix", "user_symbols")


def check_special_tokens(tokens: Sequence[str]) -> None:
    """Refuse special tokens for a new corpus or training that are empty, repeated, or
    overlap (one inside another: which one a text holds would depend on a rule, not the text)."""
    if any(not tok for tok in tokens):
        raise InvalidArgumentError("a special token cannot be empty", params=("special_tokens",))
    if len(set(tokens)) != len(tokens):
        raise InvalidArgumentError("a special token is given twice", params=("special_tokens",))
    for short in tokens:
        for long in tokens:
            if short != long and short in long:
                raise InvalidArgumentError(f"special tokens {short!r} and {long!r} overlap (one is part of the "
                                           "other); give special tokens none of which holds another",
                                           params=("special_tokens",))


def template_pieces(template: str) -> list[tuple[str, int]]:
    """A template in tokenizers' notation as (piece, type id): ``$A``, ``$B`` or a token.

    >>> template_pieces("<s>:0 $A:0 </s>:1")
    [('<s>', 0), ('$A', 0), ('</s>', 1)]
    """
    pieces = []
    for part in template.split():
        piece, colon, type_id = part.rpartition(":")
        if not colon or not type_id.isdigit() or not piece:
            piece, type_id = part, "0"
        pieces.append(("$A" if piece == "$" else piece, int(type_id)))
    return pieces


@dataclass(frozen=True)
class TokenizerSpec:
    """Normalization, pre-tokenization, alphabet, markers, specials, tie-break.

    * ``normalizer``: comma-separated steps applied in order: ``nfc``, ``nfd``,
      ``nfkc``, ``nfkd``, ``lowercase``, ``alphanumeric`` (keep only letters,
      digits and whitespace), ``precompiled`` (the spec's ``charsmap`` applied as
      Hugging Face's ``Precompiled`` normalizer does: per grapheme, see
      ``bpestore.charsmap``), ``strip-right`` (whitespace at the end goes: Hugging
      Face's ``Strip(left=False, right=True)``), ``squeeze-spaces`` (runs of spaces
      become one); ``none`` for no change.
    * ``pretokenizer``: ``gpt2``, ``cl100k``, ``o200k``, ``whitespace``,
      ``punctuation``, ``none`` (a whole segment is one word), or ``regex``
      with ``pattern``.
    * ``alphabet``: ``bytes`` (the 256 byte values) or ``chars`` (the
      characters seen in training; others become ``unk_token`` or, with
      ``byte_fallback``, their bytes).
    * ``end_of_word`` / ``start_of_word``: a marker symbol appended /
      prepended to every word (``"</w>"``, ``"\ue000"``, ``"▁"``, ``"_"``).
    * ``no_inner_space``: a merged token may hold a space only at its ends.
    * ``space_marker``: spaces become this character inside the text
      (SentencePiece's ``▁``) after normalization; decoding turns it back
      into spaces. ``dummy_prefix``: a space in front of each non-empty text
      between special tokens: ``always`` (SentencePiece's add_dummy_prefix),
      ``unless-space`` (not where the text starts with a space or the marker:
      Hugging Face's Metaspace and ByteLevel), ``first`` (as ``unless-space``,
      but only where the text starts: not after a special token, as Metaspace's
      ``prepend_scheme: "first"``); with a marker, decoding drops one space at the start.
      Pre-tokenizer ``metaspace`` cuts before each marker. Normalizer step
      ``collapse-spaces`` strips spaces at both ends and collapses runs of
      spaces (SentencePiece's remove_extra_whitespaces). At ingest, with a
      space marker each line is a text of its own (as ``spm_train`` reads).
    * ``layout``: ``bpestore`` (bytes, special tokens, markers, characters)
      or ``sentencepiece`` (the unknown token at 0, the special tokens, then
      with ``byte_fallback`` 256 byte tokens apart from the characters).
    * ``fuse_unk``: a run of unseen characters is one unknown token (as in
      SentencePiece and Hugging Face's ``fuse_unk``), not one each.
    * ``drop_unseen``: with ``alphabet='chars'``, no ``unk_token`` and no
      ``byte_fallback``, a character not in the vocabulary is left out (as
      Hugging Face ``tokenizers``' BPE does; imported tokenizer.json files have
      it); without it, encoding such a character is an error.
    * ``end_of_word_suffix``: glued to the last character of each word, which
      is then one symbol (``w</w>``: Hugging Face's ``end_of_word_suffix``,
      subword-nmt's ``</w>``); with ``alphabet='chars'``.
    * ``charsmap``: a SentencePiece precompiled character map as
      ``NAME:BASE64`` (``nmt_nfkc``, ``nfkc_cf``, ...), applied as SentencePiece
      does before its spaces are marked (see ``bpestore.charsmap``); with a
      space_marker and no normalizer step but ``collapse-spaces``; or, with the
      normalizer step ``precompiled``, the map that step applies.
    * ``space_suffix``: SentencePiece's ``treat_whitespace_as_suffix``: the
      dummy space goes after the text (``dummy_prefix='always'``) and
      ``metaspace`` cuts after each marker.
    * ``user_symbols``: SentencePiece's ``user_defined_symbols``: each is a
      token of its own wherever the normalized text holds it (the longest
      first), never split or merged with its neighbours, and left as written
      by a ``charsmap``; unlike special tokens they are ordinary text (no
      ``allowed_special`` needed) and the spaces around them are normalized
      as one text.
    * ``template``: Hugging Face's ``TemplateProcessing``: the single-text
      template and, where given, the pair template, each in tokenizers' own
      notation (``"<s>:0 $A:0"``, ``"<s>:0 $A:0 <s>:1 $B:1"``): what
      ``Tokenizer.encode(text, add_special_tokens=True)`` puts around a text's
      ids (``bpestore.text.apply_template``). Each token it names is one of the
      version's special tokens.
    """

    normalizer: str = "none"
    pretokenizer: str = "gpt2"
    pattern: str | None = None
    alphabet: str = "bytes"
    end_of_word: str | None = None
    start_of_word: str | None = None
    special_tokens: tuple[str, ...] = ()
    unk_token: str | None = None
    byte_fallback: bool = False
    no_inner_space: bool = False
    tie_break: str = "lexicographic"
    segmentation: str = "merge"
    space_marker: str | None = None
    dummy_prefix: str = "never"
    layout: str = "bpestore"
    fuse_unk: bool = False
    end_of_word_suffix: str | None = None
    drop_unseen: bool = False
    charsmap: str | None = None
    space_suffix: bool = False
    user_symbols: tuple[str, ...] = ()
    template: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "special_tokens", tuple(self.special_tokens))
        object.__setattr__(self, "user_symbols", tuple(self.user_symbols))
        object.__setattr__(self, "template", tuple(self.template))
        if self.pattern is not None and self.pretokenizer not in ("regex", "gpt2"):
            raise InvalidArgumentError("a custom pattern goes with pretokenizer='regex', not "
                                       f"{self.pretokenizer!r}", params=("pattern", "pretokenizer"))
        if self.pattern is not None:
            object.__setattr__(self, "pretokenizer", "regex")
        if self.pretokenizer == "regex" and not self.pattern:
            raise InvalidArgumentError("pretokenizer='regex' needs pattern=REGEX",
                                       params=("pretokenizer", "pattern"))
        if self.pattern is not None:
            import regex  # only a custom pattern needs it here

            try:
                regex.compile(self.pattern)
            except regex.error as exc:
                raise InvalidArgumentError(f"pattern {self.pattern!r} is not a valid regex: {exc}",
                                           params=("pattern",)) from None
        if self.pretokenizer not in PRETOKENIZERS:
            raise InvalidArgumentError(f"unknown pre-tokenizer {self.pretokenizer!r}; "
                                       f"choose one of {', '.join(PRETOKENIZERS)}", params=("pretokenizer",))
        for name in self.normalizer_steps:
            if name not in NORMALIZERS:
                raise InvalidArgumentError(f"normalizer={self.normalizer!r} has an unknown step {name!r}; choose "
                                           f"from {', '.join(NORMALIZERS)} (comma-separated)", params=("normalizer",))
        if self.alphabet not in ALPHABETS:
            raise InvalidArgumentError(f"unknown alphabet {self.alphabet!r}; choose bytes or chars",
                                       params=("alphabet",))
        for name, marker in (("unk_token", self.unk_token), ("end_of_word", self.end_of_word),
                             ("start_of_word", self.start_of_word)):
            if marker is not None and not marker:
                raise InvalidArgumentError(f"{name} cannot be empty; leave it out instead", params=(name,))
        self._check_sentencepiece_options()
        if self.alphabet == "bytes" and (self.unk_token is not None or self.byte_fallback):
            raise InvalidArgumentError("unk_token and byte_fallback go with alphabet='chars': "
                                       "a byte-level vocabulary has no unseen characters",
                                       params=("unk_token", "byte_fallback", "alphabet"))
        if self.unk_token is not None and self.byte_fallback and self.layout != "sentencepiece":
            raise InvalidArgumentError("give unk_token or byte_fallback, not both: unseen "
                                       "characters become either the unknown token or their bytes",
                                       params=("unk_token", "byte_fallback"))
        if self.tie_break not in TIE_BREAKS:
            raise InvalidArgumentError(f"unknown tie-break {self.tie_break!r}; choose one of {', '.join(TIE_BREAKS)}",
                                       params=("tie_break",))
        if self.segmentation not in SEGMENTATIONS:
            raise InvalidArgumentError(f"unknown segmentation {self.segmentation!r}; "
                                       "choose merge or longest-match", params=("segmentation",))
        if len(set(self.special_tokens)) != len(self.special_tokens):
            raise InvalidArgumentError("a special token is given twice", params=("special_tokens",))
        if any(not tok for tok in self.special_tokens):
            raise InvalidArgumentError("a special token cannot be empty", params=("special_tokens",))

    def _check_sentencepiece_options(self) -> None:
        if self.space_marker is not None and len(self.space_marker) != 1:
            raise InvalidArgumentError(f"space_marker is one character, not {self.space_marker!r}",
                                       params=("space_marker",))
        if self.dummy_prefix not in DUMMY_PREFIXES:
            raise InvalidArgumentError(f"unknown dummy_prefix {self.dummy_prefix!r}; choose "
                                       f"{', '.join(DUMMY_PREFIXES)}", params=("dummy_prefix",))
        if self.space_marker is None and (self.pretokenizer == "metaspace" or self.dummy_prefix == "first"):
            raise InvalidArgumentError("pretokenizer='metaspace' and dummy_prefix='first' go with a space_marker",
                                       params=("space_marker",))
        if self.layout not in LAYOUTS:
            raise InvalidArgumentError(f"unknown layout {self.layout!r}; choose {', '.join(LAYOUTS)}",
                                       params=("layout",))
        if self.end_of_word_suffix is not None and (self.alphabet != "chars" or not self.end_of_word_suffix
                                                    or self.byte_fallback or self.end_of_word is not None):
            raise InvalidArgumentError("end_of_word_suffix goes with alphabet='chars', without byte_fallback or "
                                       "an end_of_word marker, and cannot be empty", params=("end_of_word_suffix",))
        if self.drop_unseen and (self.alphabet != "chars" or self.unk_token is not None or self.byte_fallback):
            raise InvalidArgumentError("drop_unseen goes with alphabet='chars', without unk_token or byte_fallback",
                                       params=("drop_unseen",))
        if self.charsmap is not None:
            self._check_charsmap()
        elif "precompiled" in self.normalizer_steps:
            raise InvalidArgumentError("normalizer step precompiled goes with a charsmap", params=("normalizer",))
        if self.space_suffix and (self.space_marker is None or self.dummy_prefix == "unless-space"):
            raise InvalidArgumentError("space_suffix goes with a space_marker and dummy_prefix always or never",
                                       params=("space_suffix",))
        if any(not symbol for symbol in self.user_symbols) or len(set(self.user_symbols)) != len(self.user_symbols):
            raise InvalidArgumentError("user_symbols cannot be empty or given twice", params=("user_symbols",))
        if self.template:
            self._check_template()
        if self.fuse_unk and self.unk_token is None:
            raise InvalidArgumentError("fuse_unk goes with an unk_token", params=("fuse_unk",))
        if self.layout == "sentencepiece" and (self.alphabet != "chars" or self.unk_token is None):
            raise InvalidArgumentError("layout='sentencepiece' goes with alphabet='chars' and an unk_token",
                                       params=("layout",))

    def _check_template(self) -> None:
        if len(self.template) > 2:
            raise InvalidArgumentError("template is the single-text template and at most a pair template",
                                       params=("template",))
        for at, template in enumerate(self.template):
            pieces = template_pieces(template)
            sequences = sorted(piece for piece, _ in pieces if piece in ("$A", "$B"))
            if sequences != (["$A"] if at == 0 else ["$A", "$B"]):
                raise InvalidArgumentError(f"template {template!r} must hold " +
                                           ("$A once" if at == 0 else "$A and $B once each"), params=("template",))

    def _check_charsmap(self) -> None:
        from .charsmap import charsmap_of

        if "precompiled" not in self.normalizer_steps and (
                self.space_marker is None or any(step != "collapse-spaces" for step in self.normalizer_steps)):
            raise InvalidArgumentError("charsmap goes with a space_marker and no normalizer step but "
                                       "collapse-spaces", params=("charsmap",))
        try:
            charsmap_of(self.charsmap or "")
        except (ValueError, DamagedDataError) as exc:
            raise InvalidArgumentError(f"charsmap is not NAME:BASE64 of a precompiled character map: {exc}",
                                       params=("charsmap",)) from None

    @property
    def normalizer_steps(self) -> tuple[str, ...]:
        """The normalizer as a sequence of steps, e.g. ('nfkc', 'lowercase')."""
        steps = tuple(s.strip() for s in self.normalizer.split(",") if s.strip())
        return tuple(s for s in steps if s != "none")

    @property
    def byte_level(self) -> bool:
        return self.alphabet == "bytes"

    def corpus_key(self) -> dict[str, Any]:
        """The part of the spec that decides a corpus' words."""
        d = self.to_dict()
        return {k: d[k] for k in CORPUS_FIELDS if k in d}  # later fields only where set: old corpora's keys stay

    def replace(self, **changes: Any) -> TokenizerSpec:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["special_tokens"] = list(self.special_tokens)
        d["user_symbols"] = list(self.user_symbols)
        d["template"] = list(self.template)
        # Defaults of the later fields are left out: older specs' JSON (and fingerprints) stay as they were.
        for name, default in (("segmentation", "merge"), ("space_marker", None), ("dummy_prefix", "never"),
                              ("layout", "bpestore"), ("fuse_unk", False), ("end_of_word_suffix", None),
                              ("drop_unseen", False), ("charsmap", None), ("space_suffix", False),
                              ("user_symbols", []), ("template", [])):
            if d[name] == default:
                del d[name]
        return d

    def to_json(self) -> str:
        """Canonical JSON: sorted keys, no spaces; equal specs give equal strings."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False)

    def display_json(self) -> str:
        """``to_json`` for people: a charsmap as its name and size, not its bytes."""
        d = self.to_dict()
        if self.charsmap is not None:
            from .charsmap import decode_charsmap

            name, blob = decode_charsmap(self.charsmap)
            d["charsmap"] = f"{name} ({len(blob):,} bytes)"
        return json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenizerSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidArgumentError(f"unknown spec field(s): {', '.join(sorted(unknown))}")
        data = dict(data)
        for name in ("special_tokens", "user_symbols", "template"):
            if name in data:
                data[name] = tuple(data[name])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> TokenizerSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"a tokenizer spec is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidArgumentError("a tokenizer spec must be a JSON object")
        return cls.from_dict(data)


class MergeIds(Protocol):
    """A merge as ids (``records.Merge`` is one): what a fingerprint covers."""

    @property
    def left(self) -> int: ...
    @property
    def right(self) -> int: ...
    @property
    def token(self) -> int: ...


def fingerprint(spec: TokenizerSpec, corpus_digest: str | None, merge_list: Iterable[MergeIds]) -> str:
    """sha256 of the spec, the corpus digest and the merges: equal iff they tokenize alike."""
    return _fingerprint(spec, corpus_digest, "".join([f"{m.left},{m.right},{m.token};" for m in merge_list]))


def fingerprint_of_columns(spec: TokenizerSpec, corpus_digest: str | None, lefts: Iterable[int],
                           rights: Iterable[int], tokens: Iterable[int]) -> str:
    """``fingerprint`` of the merges given as columns of ids (no record per merge; array('I')
    columns: their text made by the compiled merge core, where built)."""
    from array import array

    from .native import load

    core = load("_mergecore")[0]
    if core is not None and all(isinstance(c, array) and c.typecode == "I" for c in (lefts, rights, tokens)):
        return _fingerprint(spec, corpus_digest, core.merges_text(lefts, rights, tokens))
    return _fingerprint(spec, corpus_digest, "".join(map("{},{},{};".format, lefts, rights, tokens)))


def _fingerprint(spec: TokenizerSpec, corpus_digest: str | None, merges_text: str | bytes) -> str:
    import hashlib  # (OpenSSL's load: only what writes a version pays it)

    h = hashlib.sha256(spec.to_json().encode())
    h.update((corpus_digest or "").encode())
    h.update(merges_text.encode() if isinstance(merges_text, str) else merges_text)
    return h.hexdigest()


@dataclass(frozen=True)
class EncoderFacts:
    """What a tokenizer's merges and spec decide about encoding, the same on
    every machine: computed once (``Tokenizer.facts``), and kept by a store for
    each complete version so that loading it computes nothing. (A record of
    ``bpestore.records``, defined here so that loading a tokenizer imports no
    other record.)

    ``rank_rule_problem``: why tiktoken's rank rule may not give the ids of these
    merges and spec (``encoder.rank_rule``); None: it gives them, so the compiled
    core's token-rank tables or tiktoken's core may encode (a store keeps it in the
    column ``version_facts.fast_problem``).
    """

    rank_rule_problem: str | None
