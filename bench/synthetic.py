"""A seeded, deterministic synthetic corpus for training at scale.

At scale 1: 30,000,000 words drawn from a random 5,000,000-word lexicon with
Zipf(1.15) frequencies, which makes a ~270 MB text with ~2.5 M distinct words
(many more distinct words than any natural corpus of that size has: what makes
the merge loop work hard).

* The lexicon: random lowercase words, lengths 1..16 (mean ~7.9 letters),
  letters drawn with English letter frequencies (so that pairs repeat as in text).
* The draws: rank k >= 1 with probability proportional to k^-1.15 over all
  positive integers (exact for k <= lexicon size, the tail beyond it drawn from
  its continuous Pareto limit), wrapped around the lexicon (k mod size: the
  tail spreads over the whole lexicon), then mapped through a seeded random
  permutation of the lexicon (the rank shuffle: a word's frequency does not
  depend on where the generator made it).
* Words are separated by spaces, 16 to a line.

``--scale S`` multiplies both the word count and the lexicon size (0.01 for CI).
Only ``random.Random(seed)`` is used, so the bytes depend only on the seed and
the scale (``python -m bench.synthetic OUT --scale 0.01`` prints the sha256).

    python -m bench.synthetic bench/.data/synthetic.txt [--scale 1] [--seed SEED]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import sys
from bisect import bisect
from dataclasses import dataclass
from pathlib import Path

WORDS = 30_000_000
LEXICON = 5_000_000
EXPONENT = 1.15
WORDS_PER_LINE = 16
# English letter frequencies (per mille), a..z.
LETTER_WEIGHTS = (82, 15, 28, 43, 127, 22, 20, 61, 70, 2, 8, 40, 24, 67, 75, 19, 1, 60, 63, 91, 28, 10, 24, 2, 20, 1)
# Word lengths 1..16, weights: mean ~7.9 letters.
LENGTH_WEIGHTS = (2, 6, 10, 12, 13, 13, 12, 11, 10, 9, 8, 6, 5, 4, 3, 2)
_BATCH = 1 << 16


@dataclass(frozen=True)
class Synthetic:
    """What was written: words, distinct words among them, bytes, and the text's sha256."""

    path: Path
    words: int
    distinct: int
    bytes: int
    sha256: str


def sizes(scale: float) -> tuple[int, int]:
    """(words drawn, lexicon size) at ``scale``."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, not {scale}")
    return max(1, round(WORDS * scale)), max(1, round(LEXICON * scale))


def lexicon(rng: random.Random, size: int) -> list[bytes]:
    """``size`` random words (not necessarily distinct), in generation order."""
    letters = [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
    lengths = rng.choices(range(1, len(LENGTH_WEIGHTS) + 1), LENGTH_WEIGHTS, k=size)
    stream = iter(rng.choices(letters, LETTER_WEIGHTS, k=sum(lengths)))
    return [b"".join(itertools.islice(stream, n)) for n in lengths]


def rank_sampler(rng: random.Random, size: int, exponent: float = EXPONENT):
    """A function ``draw(k)`` returning k lexicon indices, Zipf(exponent) ranks wrapped mod ``size``."""
    # Cumulative weights of ranks 1..size, then the tail's total mass as one more bucket.
    cumulative = list(itertools.accumulate(k ** -exponent for k in range(1, size + 1)))
    head = cumulative[-1]
    tail = size ** (1 - exponent) / (exponent - 1)  # integral of x^-a from size to infinity
    cumulative.append(head + tail)
    total = cumulative[-1]
    random_ = rng.random
    power = -1 / (exponent - 1)

    def draw(count: int) -> list[int]:
        out = []
        for _ in range(count):
            i = bisect(cumulative, random_() * total)
            if i >= size:  # the tail: a Pareto draw beyond the lexicon, wrapped
                i = int(size * (1.0 - random_()) ** power) % size
            out.append(i)
        return out

    return draw


def generate(path: str | Path, scale: float = 1.0, seed: int = 0) -> Synthetic:
    """Write the synthetic corpus at ``scale`` to ``path``; returns what was written."""
    n_words, n_lexicon = sizes(scale)
    rng = random.Random(seed)
    words = lexicon(rng, n_lexicon)
    rng.shuffle(words)  # the rank shuffle
    draw = rank_sampler(rng, n_lexicon)
    seen = bytearray(n_lexicon)
    digest = hashlib.sha256()
    written = 0
    path = Path(path)
    partial = path.with_name(path.name + ".part")
    with open(partial, "wb") as f:
        done = 0
        while done < n_words:
            batch = draw(min(_BATCH, n_words - done))
            for i in batch:
                seen[i] = 1
            drawn = [words[i] for i in batch]
            lines = [b" ".join(drawn[j:j + WORDS_PER_LINE]) + b"\n" for j in range(0, len(drawn), WORDS_PER_LINE)]
            chunk = b"".join(lines)
            f.write(chunk)
            digest.update(chunk)
            written += len(chunk)
            done += len(batch)
    partial.replace(path)
    distinct = len({words[i] for i in range(n_lexicon) if seen[i]})
    return Synthetic(path, n_words, distinct, written, digest.hexdigest())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.synthetic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies words and lexicon (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    s = generate(args.out, args.scale, args.seed)
    print(f"{s.path}: {s.words:,} words, {s.distinct:,} distinct, {s.bytes:,} bytes, sha256 {s.sha256}",
          file=sys.stdout)


if __name__ == "__main__":
    main()
