"""How far the machine itself lets work scale: N processes at once, each doing the same
fixed work, aggregate throughput against one process.

    python -m bench.cpu_ceiling [--procs 1,2,4,8,16] [--runs 3]

Three kinds of work, so a thread-scaling figure can be read against what the cores allow:
``spin`` (a Python loop: the cores alone), ``gather`` (random reads over a 64 MB numpy
table: what many cache-missing cores get from the memory system), and ``encode``
(bpestore's cl100k encode of 1 MB of english_medium, 8 times, each process with its own tables:
the encoder with no GIL and nothing shared). Processes, not threads, so nothing here is
the GIL's doing. Each process waits at a barrier, then times its own work; the figure is
N x work / the slowest process's time.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable

from bench.common import markdown_table

GATHER_BYTES = 64 << 20
GATHER_READS = 20_000_000
SPIN_STEPS = 20_000_000
ENCODE_CHARS = 1_000_000
ENCODE_PASSES = 8


def _spin() -> Callable[[], None]:
    def run() -> None:
        x = 0
        for i in range(SPIN_STEPS):
            x ^= i
    return run


def _gather() -> Callable[[], None]:
    import numpy as np

    rng = np.random.default_rng(1)
    table = rng.integers(0, 1 << 30, GATHER_BYTES // 8, dtype=np.int64)
    index = rng.integers(0, len(table), GATHER_READS, dtype=np.int64)
    return lambda: int(table[index].sum())  # type: ignore[no-any-return]


def _encode() -> Callable[[], None]:
    from bench.encode_peers import build_bpestore, read_text

    tok = build_bpestore("cl100k")
    text = read_text("english_medium", False)[:ENCODE_CHARS]
    tok.encode_ordinary(text)

    def run() -> None:
        for _ in range(ENCODE_PASSES):
            tok.encode_ordinary(text)
    return run


WORK: dict[str, Callable[[], Callable[[], None]]] = {"spin": _spin, "gather": _gather, "encode": _encode}


def _child(kind: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    run = WORK[kind]()
    barrier.wait()
    start = time.perf_counter()
    run()
    results.put(time.perf_counter() - start)


def aggregate(kind: str, procs: int) -> float:
    """Work units per second of ``procs`` processes doing one unit each."""
    ctx = mp.get_context("fork")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    children = [ctx.Process(target=_child, args=(kind, barrier, results)) for _ in range(procs)]
    for child in children:
        child.start()
    slowest = max(results.get() for _ in children)
    for child in children:
        child.join()
    return procs / slowest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default=f"1,2,4,8,{mp.cpu_count()}")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(WORK))
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.procs.split(",")]
    rows = []
    for kind in args.kinds.split(","):
        speed = {n: statistics.median(aggregate(kind, n) for _ in range(args.runs)) for n in counts}
        rows.append([kind] + [f"{speed[n] / speed[counts[0]]:.2f}×" for n in counts])
    print(f"#### The machine's own scaling: {mp.cpu_count()} CPUs, processes at once, throughput × one "
          f"process (median of {args.runs})\n")
    print(markdown_table(["work"] + [f"{n} procs" for n in counts], rows))


if __name__ == "__main__":
    main()
