"""The records bpestore hands around: one type per concept, used everywhere.

``Merge`` (one training step), ``Source`` (one source of a corpus),
``CorpusInfo``, ``VersionInfo``, ``EncoderFacts`` (what a version's merges
decide about encoding) and ``Progress`` (where a long job stands, the
same shape for ingesting, training and encoding). Plain data: no SQL, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .record_json import PlainRecord, fields_of, readable_text
from .spec import EncoderFacts as EncoderFacts  # defined with the spec: loading a tokenizer needs no records
from .spec import TokenizerSpec

if TYPE_CHECKING:  # made when first asked for (__getattr__ below); named here for type checkers
    from .answers import CorpusStats as CorpusStats
    from .answers import CurvePoint as CurvePoint
    from .answers import EncodingStats as EncodingStats
    from .answers import Explanation as Explanation
    from .answers import LineageNode as LineageNode
    from .answers import MergeInfo as MergeInfo
    from .answers import MergeStep as MergeStep
    from .answers import Removed as Removed
    from .answers import TokenUsage as TokenUsage
    from .answers import UnknownChar as UnknownChar
    from .answers import VersionChart as VersionChart
    from .answers import VersionProgress as VersionProgress
    from .answers import WordExplanation as WordExplanation


@dataclass
class ForeignModel:
    """A tokenizer read from another library's file (tokenizer.json, a SentencePiece
    .model), in bpestore's terms: ids to token bytes, merges in rank order, the spec."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    spec: TokenizerSpec


@dataclass(frozen=True)
class Merge:
    """One merge: tokens ``left`` and ``right`` became ``token`` at ``rank``, when
    the pair occurred ``count`` times (0 for an imported merge)."""

    rank: int
    left: int
    right: int
    token: int
    count: int


@dataclass
class Source:
    """One source of a corpus: what it contributed, or that it was ``skipped``
    because its content (``sha256``) was counted before."""

    source: str
    sha256: str = ""
    size_bytes: int = 0
    n_words: int = 0
    n_distinct: int = 0
    skipped: bool = False
    corpus: str | None = None
    created_at: datetime | None = None
    generation: int | None = None  # the corpus generation it entered in

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in fields_of(self).items() if v is not None}


@dataclass(frozen=True)
class CountsInfo(PlainRecord):
    """A counts file (``bpestore count``): the spec its words were made with, the
    sources counted into it (sha256, size, name, words) and its totals."""

    path: str
    spec: TokenizerSpec
    sources: tuple[Source, ...]
    n_words: int
    n_distinct: int
    digest: str  # sha256 of its (word, count) rows, in word order
    ordered: bool = False  # its rows say where each word first occurred (read: the counts in that order)


@dataclass(frozen=True)
class CorpusInfo:
    """A corpus as of one of its generations (``C@N``; by default the newest):
    its spec and totals over the sources it had then.

    ``created_at``: when the corpus was created; ``generated_at``: when this
    generation was (None for a corpus without sources, generation 0).
    ``sources_added``: the sources that entered in this generation. ``kept``:
    its word counts are readable (the newest, or pinned by the versions in
    ``pinned_by``).
    """

    name: str
    spec: TokenizerSpec
    n_sources: int
    size_bytes: int
    n_words: int
    n_distinct: int
    created_at: datetime
    digest: str
    generation: int = 0
    sources_added: int = 0
    kept: bool = True
    pinned_by: tuple[str, ...] = ()
    generated_at: datetime | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.generation}"

    def to_dict(self) -> dict[str, Any]:
        return {**fields_of(self), "ref": self.ref}


@dataclass(frozen=True)
class VersionInfo:
    """A version as listed by ``versions``: where it came from and how far it got."""

    id: int
    name: str
    number: int
    status: str
    source: str
    vocab_size: int
    n_merges: int
    target_vocab_size: int | None
    target_merges: int | None
    corpus: str | None
    parent: str | None
    spec: TokenizerSpec
    min_frequency: int
    max_token_length: int | None
    corpus_digest: str | None
    fingerprint: str | None
    created_at: datetime
    updated_at: datetime
    aliases: tuple[str, ...] = ()
    corpus_generation: int | None = None  # the generation of ``corpus`` it was trained on
    # Copied from another store without the counts of ``corpus``, which stayed there
    # (``Store.copy``): it cannot be verified or resumed here.
    without_counts: bool = False
    # Trained on a weighted mixture of corpus generations: (C@N, weight) in order, the
    # first being ``corpus_ref``; () for one corpus generation.
    mixture: tuple[tuple[str, int], ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.number}"

    @property
    def corpus_ref(self) -> str | None:
        """``C@N``: the corpus generation it was trained on (``C`` when unknown)."""
        if self.corpus is None:
            return None
        return self.corpus if self.corpus_generation is None else f"{self.corpus}@{self.corpus_generation}"

    @property
    def inputs(self) -> str:
        """What it was trained on, as ``show`` says it: ``C@N``, or a mixture ``A@1*3 + B@2*1``; '-' for none."""
        if self.mixture:
            return " + ".join(f"{ref}*{weight}" for ref, weight in self.mixture)
        return self.corpus_ref or "-"

    def to_dict(self) -> dict[str, Any]:
        return {**fields_of(self, skip="id"), "ref": self.ref}


@dataclass(frozen=True)
class Copied:
    """What ``Store.copy`` did in the target store: ``ref`` is the version as the
    target names it; ``copied``: the versions written (parents first);
    ``present``: those already there with the same fingerprint; ``aliases``
    and ``corpora`` (``C@N``): what else was written; ``without_counts``: the
    versions written without the corpus generation they pin (they cannot be
    verified or resumed there)."""

    ref: str
    target: str
    copied: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    corpora: tuple[str, ...] = ()
    without_counts: tuple[str, ...] = ()

    @property
    def unchanged(self) -> bool:
        """Everything was there already: nothing was written."""
        return not (self.copied or self.aliases or self.corpora)

    def to_dict(self) -> dict[str, Any]:
        return {**fields_of(self), "unchanged": self.unchanged}


@dataclass(frozen=True)
class VerifyResult:
    """What ``verify`` found: whether retraining ``ref`` from its pinned corpus
    generation and settings gave its stored merges (same ``fingerprint``).

    ``first_difference``: None when equal, else ``{"rank", "stored",
    "retrained"}`` with each side's pair as text (None past its last merge).
    """

    ref: str
    ok: bool
    fingerprint: str | None
    retrained: str
    first_difference: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Progress:
    """Where a long job stands; what every ``progress=`` callback receives.

    ``done`` and ``total`` count ``unit`` over the whole job: bytes read
    (``job="ingest"``), merges made (``"train"``), bytes encoded (``"encode"``).
    ``name`` is what is being worked on now: a source, a version, a file.
    The other fields add what one job knows: the sources finished and in all
    (ingest), the newest merge and its bytes (train), the ids written (encode).

    >>> p = Progress("train", "en@1", done=10, total=40, unit="merges")
    >>> p.fraction
    0.25
    """

    job: str
    name: str
    done: int
    total: int | None
    unit: str
    sources_done: int = 0
    sources_total: int = 0
    merge: Merge | None = None
    token: bytes = b""
    tokens: int = 0

    @property
    def fraction(self) -> float | None:
        """How much of the job is done (0..1), when its size is known."""
        return min(1.0, self.done / self.total) if self.total else None


@dataclass(frozen=True)
class TokenInfo:
    """A token of a version as ``vocab`` lists it: its id, bytes and kind, and the
    merge that first made it (``rank``, and ``count``: how often the pair occurred
    then, 0 when imported; both None for bytes, characters, markers and specials)."""

    id: int
    data: bytes
    kind: str
    rank: int | None = None
    count: int | None = None

    @property
    def text(self) -> str:
        return readable_text(self.data)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "token": self.text, "bytes": len(self.data), "hex": self.data.hex(),
                "kind": self.kind, "rank": self.rank, "count": self.count}


# The records of answers (bpestore/answers.py), made when first asked for.
_ANSWERS = frozenset({"CorpusStats", "TokenUsage", "MergeInfo", "VersionProgress", "MergeStep", "UnknownChar",
                      "WordExplanation", "Explanation", "EncodingStats", "LineageNode", "Removed", "CurvePoint",
                      "VersionChart"})


def __getattr__(name: str) -> Any:
    if name in _ANSWERS:
        from . import answers

        return getattr(answers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
