"""Seeded synthetic text for training at scale: random lowercase words (lengths 1..16, letters
with English frequencies) drawn from a random lexicon with Zipf(1.15) frequencies, 16 to a line.
Many more distinct words than natural text of the same size has: what makes the merge loop work hard."""

from __future__ import annotations

import itertools
import random
import string

# English letter frequencies (per mille), a..z; word lengths 1..16 (mean ~7.9 letters).
LETTER_WEIGHTS = (82, 15, 28, 43, 127, 22, 20, 61, 70, 2, 8, 40, 24, 67, 75, 19, 1, 60, 63, 91, 28, 10, 24, 2, 20, 1)
LENGTH_WEIGHTS = (2, 6, 10, 12, 13, 13, 12, 11, 10, 9, 8, 6, 5, 4, 3, 2)


def zipf_text(n_words: int, n_lexicon: int, seed: int = 0) -> str:
    """``n_words`` words drawn from a lexicon of ``n_lexicon`` random words, the k-th in a shuffled
    order with weight k^-1.15; the same arguments give the same text."""
    rng = random.Random(seed)
    lengths = rng.choices(range(1, len(LENGTH_WEIGHTS) + 1), LENGTH_WEIGHTS, k=n_lexicon)
    letters = iter(rng.choices(string.ascii_lowercase, LETTER_WEIGHTS, k=sum(lengths)))
    lexicon = ["".join(itertools.islice(letters, n)) for n in lengths]
    cumulative = list(itertools.accumulate(k ** -1.15 for k in range(1, n_lexicon + 1)))
    words = rng.choices(lexicon, cum_weights=cumulative, k=n_words)
    return "".join(" ".join(words[i:i + 16]) + "\n" for i in range(0, n_words, 16))
