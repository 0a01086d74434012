"""Weighted mixtures of corpora (``train --corpus A --corpus B --weight 3 --weight 1``):
their counts, their digest, and the check that their words were made alike."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from ..errors import InvalidArgumentError
from ..spec import TokenizerSpec
from . import count_tables
from .corpus_tables import CorpusReads
from .drivers import Transaction


def check_same_words(spec_of: Mapping[str, TokenizerSpec | None], first: str) -> None:
    """InvalidArgumentError where the corpora of a mixture cut words otherwise than the first."""
    want = spec_of[first].corpus_key()  # type: ignore[union-attr]
    for ref, spec in spec_of.items():
        have = spec.corpus_key()  # type: ignore[union-attr]
        differ = sorted(k for k in have.keys() | want.keys() if have.get(k) != want.get(k))
        if differ:
            raise InvalidArgumentError(
                f"the corpora of a mixture share their words' making: {ref} was ingested with "
                f"{', '.join(f'{k}={have.get(k)!r}' for k in differ)}, {first} with "
                f"{', '.join(f'{k}={want.get(k)!r}' for k in differ)}", params=("corpus", *differ))


def mixture_digest(corpora: CorpusReads, parts: Sequence[tuple[int, int, int]]) -> str:
    """A mixture's digest (what the fingerprint covers): its generations' digests and weights, in order."""
    h = hashlib.sha256(b"mixture")
    for corpus_id, generation, weight in parts:
        h.update(f";{corpora.generation_digest(corpus_id, generation)}*{weight}".encode())
    return h.hexdigest()


def mixture_counts(tx: Transaction, parts: Sequence[tuple[int, int, int]]) -> dict[bytes, int]:
    """The counts of a mixture: each generation's counts times its weight, added (weights 1:
    exactly the counts of one corpus holding all their texts)."""
    total: dict[bytes, int] = {}
    get = total.get
    for corpus_id, generation, weight in parts:
        for word, count in count_tables.count_rows(tx, corpus_id, generation):
            total[word] = get(word, 0) + count * weight
    return total
