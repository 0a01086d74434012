"""The compiled cores of this checkout against those of another, in one process, interleaved.

    python -m bench.core_ab BASELINE_CHECKOUT [--rounds 7] [--no-train]

BASELINE_CHECKOUT: a checkout with its cores built in place. Both builds' ``.so`` files are
loaded side by side; each encodes cl100k and o200k (tables from the rank files) on five
texts, in turn (each round in the other order), then each trains 10,000 merges on 4 MB.
Prints the median of the rounds' ratios (this checkout / the baseline: above 1 is faster).
"""

from __future__ import annotations

import argparse
import importlib.util
import lzma
import statistics
import time
from pathlib import Path
from types import ModuleType

from bpestore import trainer
from bpestore.formats.tiktoken_ranks import read_ranks
from bpestore.spec import TokenizerSpec
from bpestore.text import TextPipeline, char_class

from .common import CORPORA, REPO

TEXTS = ("japanese_1M", "hindi_1M", "russian_1M")


def load(checkout: Path, name: str) -> ModuleType:
    path = next((checkout / "bpestore").glob(f"{name}.*.so"))
    spec = importlib.util.spec_from_file_location(f"core_ab_{abs(hash(str(checkout)))}.{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def texts() -> dict[str, str]:
    found = {name: (CORPORA / f"{name}.txt").read_text(encoding="utf-8") for name in TEXTS}
    with lzma.open(CORPORA / "english_100M.txt.xz", "rt", encoding="utf-8") as f:
        found["english_4M"] = f.read(4_000_000)
    with lzma.open(CORPORA / "code_python_5M.txt.xz", "rt", encoding="utf-8") as f:
        found["code_3M"] = f.read(3_000_000)
    return found


def interleaved(rounds: int, run: dict[str, object]) -> tuple[float, float, float]:
    """Seconds of each side (median) and the median of the rounds' speed ratios (new / base)."""
    secs: dict[str, list[float]] = {"base": [], "new": []}
    for r in range(rounds):
        for side in ("base", "new") if r % 2 == 0 else ("new", "base"):
            start = time.perf_counter()
            run[side]()  # type: ignore[operator]
            secs[side].append(time.perf_counter() - start)
    ratio = statistics.median(b / n for b, n in zip(secs["base"], secs["new"]))
    return statistics.median(secs["base"]), statistics.median(secs["new"]), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-train", action="store_true")
    args = parser.parse_args()
    sides = {"base": args.baseline, "new": REPO}
    encode_cores = {side: load(path, "_encodecore") for side, path in sides.items()}
    corpus = texts()
    for encoding, pattern in (("cl100k", 1), ("o200k", 2)):
        ranks = read_ranks(CORPORA / f"{encoding}_base.tiktoken")
        tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
        for data, rank in ranks.items():
            tokens[rank] = data
        encoders = {side: core.Encoder(tokens, None, None, mode=1, pattern=pattern, classify=char_class)
                    for side, core in encode_cores.items()}
        for name, text in corpus.items():
            assert encoders["base"].encode(text) == encoders["new"].encode(text), f"ids differ on {name}"
            mb = len(text.encode()) / 1e6
            runs = {side: (lambda e=e, t=text: e.encode(t)) for side, e in encoders.items()}
            base, new, ratio = interleaved(args.rounds, runs)
            print(f"encode {encoding}/{name:12s} base {mb / base:6.1f} MB/s  new {mb / new:6.1f} MB/s  "
                  f"new/base {ratio:.3f}", flush=True)
    if args.no_train:
        return
    merge_cores = {side: load(path, "_mergecore") for side, path in sides.items()}
    text = "".join(corpus[name][:1_000_000] for name in ("english_4M", "russian_1M", "hindi_1M", "japanese_1M"))
    words = [(list(w.encode() if isinstance(w, str) else w), c)
             for w, c in TextPipeline(TokenizerSpec()).count_words(text).items()]
    initial = [bytes([b]) for b in range(256)]
    for threads in (1, 2):
        def train(core: ModuleType, threads: int = threads) -> None:
            trainer.COMPILED_CORE = core
            list(trainer.BpeTrainer(words, initial, compiled=True, threads=threads).train(max_merges=10_000))
        base, new, ratio = interleaved(args.rounds, {s: (lambda c=c: train(c)) for s, c in merge_cores.items()})
        print(f"train 10,000 merges, {threads} thread(s): base {base:.3f} s  new {new:.3f} s  "
              f"speed new/base {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
