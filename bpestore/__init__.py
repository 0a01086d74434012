"""bpestore: a byte-pair-encoding tokenizer whose state lives in a database.

>>> import bpestore
>>> store = bpestore.open("bpestore.db")                      # doctest: +SKIP
>>> store.ingest("books", ["a.txt"])                           # doctest: +SKIP
>>> store.train("en", corpus="books", vocab_size=32000)        # doctest: +SKIP
>>> tok = store.tokenizer("en@1")                              # doctest: +SKIP
"""

from __future__ import annotations

__version__ = "0.1.0"

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import (
    BpestoreError,
    ConflictError,
    DamagedDataError,
    DatabaseError,
    InvalidArgumentError,
    NotFoundError,
    ReadOnlyError,
    SourceError,
)
from .lazy import lazy_names

if TYPE_CHECKING:
    from .encoder import DisallowedSpecialError, Tokenizer
    from .records import CorpusInfo, Merge, Progress, Source, VerifyResult, VersionInfo
    from .spec import TokenizerSpec
    from .store import Store, TrainOptions
    from .trainer import BpeTrainer, train_word_counts  # noqa: F401

# The public names are imported when first used, so that `import bpestore` (and the
# command line's start-up) does not pay for SQLAlchemy, the encoder or the trainer.
_LAZY = {
    "DisallowedSpecialError": "encoder", "Tokenizer": "encoder",
    "CorpusInfo": "records", "Merge": "records", "Progress": "records", "Source": "records",
    "VerifyResult": "records", "VersionInfo": "records",
    "TokenizerSpec": "spec", "Store": "store", "TrainOptions": "store",
    "BpeTrainer": "trainer", "train_word_counts": "trainer",
}

__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = [
    "BpeTrainer", "BpestoreError", "ConflictError", "CorpusInfo", "DamagedDataError", "DatabaseError",
    "DisallowedSpecialError", "InvalidArgumentError", "Merge", "NotFoundError",
    "Progress", "ReadOnlyError", "Source", "SourceError", "Store", "Tokenizer", "TokenizerSpec",
    "TrainOptions", "VerifyResult", "VersionInfo", "open", "sample_path", "train_bpe",
]


def open(db: str | Path | None = None, *, read_only: bool = False) -> Store:  # noqa: A001 - the documented name
    """Open (creating or upgrading) a store: a SQLite path or a SQLAlchemy URL.

    Without ``db``: ``$BPESTORE_DB``, else ``./bpestore.db``. ``read_only=True``:
    an existing store, only read (every write raises ``ReadOnlyError``).
    """
    from .store import Store

    return Store(db, read_only=read_only)


def sample_path() -> Path:
    """The sample text shipped inside the package: Bram Stoker's *Dracula*
    (public domain, 845,427 bytes, xz-compressed; every reader of bpestore
    decompresses it). What ``bpestore ingest CORPUS --sample`` counts.

    >>> sample_path().name
    'dracula.txt.xz'
    """
    return Path(__file__).resolve().parent / "data" / "dracula.txt.xz"


def train_bpe(
    input_path: str | Path | Iterable[str | Path],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    pretokenizer: str = "gpt2",
    normalizer: str = "none",
    tie_break: str = "lexicographic",
    min_frequency: int = 1,
    max_token_length: int | None = None,
    errors: str = "strict",
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Train byte-level BPE on text files, without a database.

    Returns ``(vocab, merges)``: ids 0..255 are the bytes, then the special
    tokens, then one id per new token in merge order. ``tie_break``:
    ``"lexicographic"``, ``"hf"`` or ``"first-seen"`` (minbpe's rule: the files
    are then read in order in this process).

    >>> vocab, merges = train_bpe("corpus.txt", 500, ["<|endoftext|>"])  # doctest: +SKIP
    """
    from collections import Counter

    from .ingest import count_sources, expand_paths
    from .spec import TokenizerSpec
    from .trainer import train_word_counts

    if vocab_size < 256 + len(special_tokens):
        n = len(special_tokens)
        raise InvalidArgumentError(f"vocab_size must be at least {256 + n} "
                                   f"(256 bytes + {n} special token{'' if n == 1 else 's'})", params=("vocab_size",))
    paths = [input_path] if isinstance(input_path, (str, Path)) else list(input_path)
    spec = TokenizerSpec(pretokenizer=pretokenizer, normalizer=normalizer,
                         special_tokens=tuple(special_tokens), tie_break=tie_break)
    counts: Counter = Counter()
    if tie_break == "first-seen":  # the words in the order the text first shows them
        from .counts import words_in_order

        counts = words_in_order(expand_paths(paths), spec, errors=errors)
    else:
        for batch in count_sources(expand_paths(paths), spec, errors=errors, force=True):
            counts.update(batch.counts)
    return train_word_counts(counts, vocab_size=vocab_size, special_tokens=special_tokens,
                             tie_break=tie_break, min_frequency=min_frequency,
                             max_token_length=max_token_length)
