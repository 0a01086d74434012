"""A version loaded from the store beside the same ranks loaded from their rank file:
the encode core's tables and speed must be the same wherever a version comes from.

    python -m bench.store_tables [--encoding cl100k] [--corpus japanese_1M] [--rounds 10]

Both in one process, ids checked equal, encoded in turn (each round in the other
order); prints each round's CPU-time MB/s and the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import bpestore
from bpestore.formats.tiktoken_ranks import load_tokenizer

from .common import CORPORA


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="cl100k", choices=["cl100k", "o200k"])
    parser.add_argument("--corpus", default="japanese_1M")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    ranks = CORPORA / f"{args.encoding}_base.tiktoken"
    text = (CORPORA / f"{args.corpus}.txt").read_text(encoding="utf-8")
    size = len(text.encode()) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        store = bpestore.open(Path(tmp) / "s.db")
        store.import_tiktoken(args.encoding, ranks, pattern=args.encoding)
        stored = store.tokenizer(args.encoding)
        ranked = load_tokenizer(ranks, args.encoding)
        assert stored.encode_ordinary(text) == ranked.encode_ordinary(text), "the ids differ"
        speeds: dict[str, list[float]] = {"store": [], "rank file": []}
        for r in range(args.rounds):
            pair = [("store", stored), ("rank file", ranked)]
            for name, tok in pair if r % 2 == 0 else pair[::-1]:
                start = time.process_time()
                tok.encode_ordinary(text)
                speeds[name].append(size / (time.process_time() - start))
            print(f"round {r}: store {speeds['store'][-1]:.1f} MB/s, rank file {speeds['rank file'][-1]:.1f} MB/s")
        ratio = statistics.median(s / f for s, f in zip(speeds["store"], speeds["rank file"]))
        print(f"{args.encoding} {args.corpus}: store {statistics.median(speeds['store']):.1f} MB/s, rank file "
              f"{statistics.median(speeds['rank file']):.1f} MB/s, store / rank file {ratio:.3f} (median of rounds)")


if __name__ == "__main__":
    main()
