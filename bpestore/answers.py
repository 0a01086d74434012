"""The records of answers about versions and corpora: statistics, token usage, merges
listed, progress, explanations, the versions' tree, charts. Plain data, as
``bpestore.records`` (which hands them out too); apart from it so that ingesting and
training, which build none, do not pay for making their classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .record_json import PlainRecord, fields_of, readable_text

if TYPE_CHECKING:
    from .records import VersionInfo


class _Ratios:
    """The ratios of an encoding's totals, shared by ``EncodingStats`` and ``CorpusStats``."""

    bytes: int
    words: int
    tokens: int
    unknown: int | None
    used_ids: int
    vocab_size: int

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    @property
    def tokens_per_word(self) -> float:
        return self.tokens / self.words if self.words else 0.0

    @property
    def unknown_share(self) -> float | None:
        return None if self.unknown is None else self.unknown / self.tokens if self.tokens else 0.0

    @property
    def vocab_use(self) -> float:
        """The share of the version's ids that occur."""
        return self.used_ids / self.vocab_size if self.vocab_size else 0.0

    def _ratios(self) -> dict[str, Any]:
        return {"bytes_per_token": self.bytes_per_token, "tokens_per_word": self.tokens_per_word,
                "unknown_share": self.unknown_share, "vocab_use": self.vocab_use}


@dataclass(frozen=True)
class CorpusStats(_Ratios):
    """How a version encodes a corpus generation (``corpus_stats``), from its word counts:
    ``bytes`` (UTF-8) and ``words`` (pre-tokens) of its words, ``distinct_words``,
    ``tokens``, ``one_token_words`` (words encoded as one token, counted each time),
    ``unknown`` tokens (as ``EncodingStats``), ``used_ids`` distinct ids of ``vocab_size``."""

    ref: str
    corpus: str
    bytes: int
    words: int
    distinct_words: int
    tokens: int
    one_token_words: int
    unknown: int | None
    used_ids: int
    vocab_size: int

    @property
    def one_token_share(self) -> float:
        return self.one_token_words / self.words if self.words else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**fields_of(self), **self._ratios(), "one_token_share": self.one_token_share}


@dataclass(frozen=True)
class TokenUsage(PlainRecord):
    """Each ordinary token's count on a corpus generation (``token_usage``): ``counts``
    (id, count) by id, summing to ``tokens``; the ids ``never`` emitted, ``unreachable``
    (``encode(decode([t])) != [t]``) and ``rare`` (emitted fewer than ``rare_below``
    times); ``scripts``: class -> {"vocab": tokens of the vocabulary, "tokens": their
    count} (``usage.script_of``); ``stats``: the corpus' statistics."""

    ref: str
    corpus: str
    tokens: int
    counts: tuple[tuple[int, int], ...]
    never: tuple[int, ...]
    unreachable: tuple[int, ...]
    rare: tuple[int, ...]
    rare_below: int
    scripts: dict[str, dict[str, int]]
    stats: CorpusStats


@dataclass(frozen=True)
class MergeInfo:
    """A merge of a version as ``merges`` lists it: ``Merge``'s fields and the
    bytes of the pair (the token made is ``left_bytes + right_bytes``)."""

    rank: int
    left: int
    right: int
    token: int
    count: int
    left_bytes: bytes
    right_bytes: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "left": self.left, "right": self.right, "token": self.token,
                "count": self.count, "pair": [readable_text(self.left_bytes), readable_text(self.right_bytes)],
                "text": readable_text(self.left_bytes + self.right_bytes)}


@dataclass(frozen=True)
class VersionProgress:
    """How far a version's training got, read from its checkpointed merge rows:
    ``merges`` written of ``target_merges`` (None: up to ``target_vocab_size``),
    ``rate`` merges per second from creation to the last checkpoint, the last merges;
    ``running``: whether a process holds its training lock now (False: the run stopped,
    killed or not; None: complete, or not knowable on this database)."""

    version: VersionInfo
    merges: int
    target_merges: int | None
    rate: float | None
    seconds_since_checkpoint: float
    last_merges: tuple[MergeInfo, ...]
    running: bool | None = None

    @property
    def fraction(self) -> float | None:
        """The share of the target reached (1.0 once complete)."""
        if self.version.status == "complete":
            return 1.0
        if not self.target_merges:
            return None
        return min(1.0, self.merges / self.target_merges)

    def to_dict(self) -> dict[str, Any]:
        v = self.version
        return {"ref": v.ref, "status": v.status, "merges": self.merges, "target_merges": self.target_merges,
                "vocab_size": v.vocab_size, "target_vocab_size": v.target_vocab_size,
                "fraction": self.fraction, "rate": self.rate,
                "seconds_since_checkpoint": round(self.seconds_since_checkpoint, 3), "running": self.running,
                "created_at": v.created_at.isoformat(), "updated_at": v.updated_at.isoformat(),
                "last_merges": [m.to_dict() for m in self.last_merges]}


@dataclass(frozen=True)
class MergeStep(PlainRecord):
    """One merge applied inside one pre-token: the pair at ``position`` (ids
    ``left``, ``right``) became ``token`` by the merge of ``rank``; ``ids`` are
    the pre-token's ids after it."""

    rank: int
    position: int
    left: int
    right: int
    token: int
    ids: tuple[int, ...]


@dataclass(frozen=True)
class UnknownChar(PlainRecord):
    """A character a ``chars`` version never saw in training, and where it went:
    ``to="unk"`` (the unknown token) or ``"bytes"`` (byte fallback), as ``ids``.
    ``position`` is its index in the pre-token."""

    char: str
    position: int
    to: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class WordExplanation:
    """How one pre-token (or special token) became ids: its initial symbols, the
    merges applied one by one (``segmentation="merge"``), or the tokens of a
    greedy longest match (``"longest-match"``), and the final ``ids``.
    ``segmentation="special"``: a special token, one id."""

    text: str
    symbols: tuple[int, ...]
    ids: tuple[int, ...]
    segmentation: str = "merge"
    steps: tuple[MergeStep, ...] = ()
    unknown: tuple[UnknownChar, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "segmentation": self.segmentation, "symbols": list(self.symbols),
                "steps": [s.to_dict() for s in self.steps], "unknown": [u.to_dict() for u in self.unknown],
                "ids": list(self.ids)}


@dataclass(frozen=True)
class Explanation:
    """What ``explain`` found: every pre-token of ``text`` step by step; ``ids``
    (all the words' ids in order) equal what ``encode`` gives."""

    ref: str
    text: str
    words: tuple[WordExplanation, ...]
    tokens: dict[int, bytes]  # the bytes of every id the explanation mentions

    @property
    def ids(self) -> list[int]:
        return [i for word in self.words for i in word.ids]

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "text": self.text, "ids": self.ids, "words": [w.to_dict() for w in self.words],
                "tokens": {str(i): readable_text(data) for i, data in sorted(self.tokens.items())}}


@dataclass(frozen=True)
class EncodingStats(_Ratios):
    """How a version encodes one file (``stats``): ``bytes`` of UTF-8 text,
    ``words`` (runs of non-space characters, the same for every version),
    ``tokens``; ``unknown`` tokens (the unknown token, or bytes standing for an
    unseen character under byte fallback; None for byte-level versions, which
    have neither); ``used_ids`` distinct ids out of ``vocab_size``."""

    ref: str
    file: str
    bytes: int
    words: int
    tokens: int
    unknown: int | None
    used_ids: int
    vocab_size: int

    def to_dict(self) -> dict[str, Any]:
        return {**fields_of(self), **self._ratios()}


@dataclass(frozen=True)
class LineageNode:
    """A version in the tree ``lineage`` draws: the version (its parent, corpus
    generation and aliases are in ``VersionInfo``) and the versions extending it."""

    version: VersionInfo
    children: tuple[LineageNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self.version.to_dict(), "children": [c.to_dict() for c in self.children]}


@dataclass(frozen=True)
class Removed(PlainRecord):
    """What ``remove`` deleted: versions (with their merges and tokens) and aliases, as refs."""

    versions: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class CurvePoint:
    """One point of a compression curve: a tokenizer keeping the first ``merges``
    merges of a version (``vocab_size`` tokens) encodes the file in ``tokens``."""

    merges: int
    vocab_size: int
    tokens: int
    bytes_per_token: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class VersionChart:
    """What ``chart`` draws of one version on one text (``file``; ``"<text>"``
    for a string): its ``bytes`` (UTF-8) and ``tokens``; ``curve``, bytes per
    token as the vocabulary grows along the merge ranks (the last point is the
    whole version); ``merge_counts``, each merge's pair count when it was made
    (by rank; 0 for imported merges); ``merge_uses``, how often each merge is
    applied encoding the text (by rank); ``vocab_lengths``, how many of the
    version's tokens are N bytes long, and ``text_lengths``, how many tokens of
    the encoded text are (pairs ``(N, how many)``, by N; special tokens
    included)."""

    ref: str
    file: str
    bytes: int
    tokens: int
    vocab_size: int
    curve: tuple[CurvePoint, ...]
    merge_counts: tuple[int, ...]
    merge_uses: tuple[int, ...]
    vocab_lengths: tuple[tuple[int, int], ...]
    text_lengths: tuple[tuple[int, int], ...]

    @property
    def bytes_per_token(self) -> float:
        return self.bytes / self.tokens if self.tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "file": self.file, "bytes": self.bytes, "tokens": self.tokens,
                "vocab_size": self.vocab_size, "bytes_per_token": self.bytes_per_token,
                "curve": [p.to_dict() for p in self.curve],
                "merge_counts": list(self.merge_counts), "merge_uses": list(self.merge_uses),
                "vocab_lengths": [list(p) for p in self.vocab_lengths],
                "text_lengths": [list(p) for p in self.text_lengths]}
