"""Training from stored counts, by phase and by thread count (the merge loop at scale).

    python -m bench.train_threads phases [--scale 1] [--vocab-size 64000]
    python -m bench.train_threads ab [--scale 1 | --corpus english_100M] [--vocab-size 64000] [--runs 3]
                                     [--threads 1 2] [--code DIR ...]

The synthetic corpus of bench/synthetic.py at ``--scale`` is made and ingested once
(2 workers) into bench/.data/synthetic-SCALE.db.

* ``phases``: in one process, each phase alone (reading the rows from the cursor,
  symbolising them in Python, loading them into C, the initial pair count and index,
  the merge loop), then one whole ``Store.train`` with the time of ``prepare`` (the
  streamed read + symbolise + load + count) and of the checkpoint writes.
* ``ab``: one fresh process per ``Store.train`` on a copy of the ingested store, the
  cases interleaved run after run (each ``--code`` checkout, whose bpestore is imported
  instead of this tree's, then this tree at each ``--threads``); medians of the wall time,
  the CPU time and the CPU of the caller's thread (training's serial path: on a loaded
  machine the steadiest figure), and the sha256 of each run's merges (all must agree).

``--corpus NAME``: a shared corpus (ingested once, 2 workers) instead of the synthetic one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parent.parent
DATA = REPO / "bench" / ".data"


def ingested(scale: float) -> Path:
    """The synthetic corpus at ``scale``, ingested once (2 workers)."""
    from bench.training_scale import corpus_at

    return _ingested_once(DATA / f"synthetic-{scale:g}.db", corpus_at(scale))


def ingested_corpus(name: str) -> Path:
    """Shared corpus ``name``, ingested once (2 workers) as corpus ``syn``."""
    from bench.common import prepare_corpus

    return _ingested_once(DATA / f"{name}-ingested.db", prepare_corpus(name))


def _ingested_once(db: Path, source: Path) -> Path:
    """``db`` holding ``source`` as corpus ``syn``, made once (through a ``.part`` file)."""
    if not db.exists():
        import bpestore

        part = db.with_name(db.name + ".part")
        part.unlink(missing_ok=True)
        with bpestore.open(part) as store:
            store.ingest("syn", [str(source)], workers=2)
        part.replace(db)
    return db


def phases(db: Path, vocab: int) -> list[tuple[str, float]]:
    """Each phase's seconds, then a whole Store.train's."""
    import bpestore
    from bpestore import alphabet
    from bpestore import trainer as trainer_module
    from bpestore.store import count_tables, training
    from bpestore.store.corpus_tables import CorpusReads

    out: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        copy = Path(tmp) / "train.db"
        shutil.copyfile(db, copy)
        store = bpestore.open(copy)
        with training._collector_paused():
            with store.reading() as tx:
                corpus_id = CorpusReads(tx).corpus_id("syn")
                spec = CorpusReads(tx).spec("syn")
                assert spec is not None
                start = time.perf_counter()
                for _row in count_tables.count_rows(tx, corpus_id):
                    pass
                out.append(("read the rows from the cursor", time.perf_counter() - start))
                rows = list(count_tables.count_rows(tx, corpus_id))
            initial = alphabet.initial_vocab(spec)
            start = time.perf_counter()
            symbolizer = alphabet.symbolizer(spec, alphabet.ordinary_ids(initial, alphabet.special_ids(spec)))
            words = [(list(word), count) for word, count in rows] if symbolizer is None else list(
                alphabet.initial_words(spec, rows, initial))
            out.append(("symbolise in Python (a list of ids per word; not done any more for byte-level specs)",
                        time.perf_counter() - start))
            del words
            for threads in (1, trainer_module.default_threads()):
                t = trainer_module.BpeTrainer(rows, initial, special_ids=alphabet.special_ids(spec), threads=threads)
                state = t._core.Trainer(t.token_bytes, None, threads=threads,
                                        parallel_min=trainer_module.PARALLEL_MIN_WORDS,
                                        ordinary=list(t.id_of_bytes.values()))
                start = time.perf_counter()
                state.add_words(t._source)
                out.append((f"load the words (bytes) into C, {threads} thread(s)", time.perf_counter() - start))
                start = time.perf_counter()
                state.build()
                out.append((f"initial pair count + pair->words index + heap in C, {threads} thread(s)",
                            time.perf_counter() - start))
                t._state, t._stats_ready, t._source = state, True, ()
                start = time.perf_counter()
                n = t.step(1 << 30, vocab_size=vocab)  # the whole loop in one call of the core
                out.append((f"merge loop ({n:,} merges, no writes), {threads} thread(s)", time.perf_counter() - start))
                del t, state
            del rows
        saves = [0.0]
        prepared = [0.0]
        real_save, real_prepare = training.CheckpointWriter.save, trainer_module.BpeTrainer.prepare

        def save(writer, *args, **kwargs):
            begin = time.perf_counter()
            real_save(writer, *args, **kwargs)
            saves[0] += time.perf_counter() - begin

        def prepare(trainer):
            begin = time.perf_counter()
            real_prepare(trainer)
            prepared[0] += time.perf_counter() - begin

        training.CheckpointWriter.save, trainer_module.BpeTrainer.prepare = save, prepare
        try:
            start = time.perf_counter()
            store.train("syn", corpus="syn", vocab_size=vocab)
            total = time.perf_counter() - start
        finally:
            training.CheckpointWriter.save, trainer_module.BpeTrainer.prepare = real_save, real_prepare
        store.close()
    out.append((f"whole Store.train, {trainer_module.default_threads()} thread(s)", total))
    out.append(("  of which prepare (read + symbolise + load + count, streamed)", prepared[0]))
    out.append(("  of which waiting for the checkpoint writer + the last checkpoint", saves[0]))
    out.append(("  of which the rest (merge loop, snapshot, records)", total - prepared[0] - saves[0]))
    return out


def one(db: Path, vocab: int, threads: int) -> dict:
    """One Store.train on a copy of ``db``, in this process: seconds and the merges' sha256."""
    import bpestore
    from bpestore import trainer as trainer_module

    if hasattr(trainer_module, "default_threads"):
        trainer_module.default_threads = lambda: threads  # type: ignore[assignment]
    with tempfile.TemporaryDirectory(dir=db.parent) as tmp:
        copy = Path(tmp) / "train.db"
        shutil.copyfile(db, copy)
        store = bpestore.open(copy)
        start, cpu, caller = time.perf_counter(), time.process_time(), time.thread_time()
        version = store.train("syn", corpus="syn", vocab_size=vocab)
        seconds, cpu, caller = time.perf_counter() - start, time.process_time() - cpu, time.thread_time() - caller
        merges = [(m.left, m.right, m.token) for m in store.merges(version.ref, limit=1_000_000)]
        store.close()
    return {"seconds": seconds, "cpu": cpu, "caller_cpu": caller, "merges": len(merges),
            "sha256": hashlib.sha256(repr(merges).encode()).hexdigest(),
            "bpestore": str(Path(bpestore.__file__).parent)}


def ab(db: Path, vocab: int, runs: int, threads: list[int], codes: list[str]) -> list[tuple[str, list[dict], str]]:
    """Interleaved fresh-process runs; (case, each run's figures, merges' sha256) per case."""
    cases = [(f"{code} (as checked out)", code, 1) for code in codes]
    cases += [(f"this tree, {n} thread(s)", str(REPO), n) for n in threads]
    times: dict[str, list[dict]] = {name: [] for name, _, _ in cases}
    digests: dict[str, set[str]] = {name: set() for name, _, _ in cases}
    for run in range(runs):
        for name, code, n in cases:
            # The script alone (no bench package): the checkout's bpestore comes first on the path.
            env = {**os.environ, "PYTHONPATH": code}
            out = subprocess.run([sys.executable, str(HERE), "one", str(db), str(vocab), str(n)],
                                 env=env, cwd=code, capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            times[name].append(result)
            digests[name].add(result["sha256"])
            print(f"run {run + 1}: {name}: {result['seconds']:.2f} s, {result['merges']:,} merges, "
                  f"sha256 {result['sha256'][:12]} ({result['bpestore']})", file=sys.stderr, flush=True)
    return [(name, times[name], ",".join(sorted(d[:12] for d in digests[name]))) for name, _, _ in cases]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.train_threads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("phases", "ab"):
        p = sub.add_parser(name)
        p.add_argument("--scale", type=float, default=1.0)
        p.add_argument("--corpus", help="a shared corpus (e.g. english_100M) instead of the synthetic one")
        p.add_argument("--vocab-size", type=int, default=64_000)
        if name == "ab":
            p.add_argument("--runs", type=int, default=3)
            p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
            p.add_argument("--code", nargs="*", default=[], help="checkouts to compare (their bpestore built in place)")
    p = sub.add_parser("one")  # internal: one run, JSON on stdout
    p.add_argument("db", type=Path)
    p.add_argument("vocab", type=int)
    p.add_argument("threads", type=int)
    args = parser.parse_args(argv)
    if args.command == "one":
        print(json.dumps(one(args.db, args.vocab, args.threads)))
        return
    db = ingested_corpus(args.corpus) if args.corpus else ingested(args.scale)
    what = f"`{args.corpus}`" if args.corpus else f"synthetic scale {args.scale:g}"
    if args.command == "phases":
        rows = phases(db, args.vocab_size)
        print(f"| phase ({what}, vocab {args.vocab_size:,}) | seconds |\n|---|---:|")
        for what, seconds in rows:
            print(f"| {what} | {seconds:.2f} |")
        return
    results = ab(db, args.vocab_size, args.runs, args.threads, args.code)

    def median(runs: list[dict], key: str) -> float:
        return statistics.median(r.get(key, float("nan")) for r in runs)
    base = {key: median(results[0][1], key) for key in ("seconds", "cpu", "caller_cpu")}
    print(f"| Store.train from stored counts, {what}, vocab {args.vocab_size:,} | runs (s) | median (s) | "
          "CPU (s) | the caller's thread's CPU (s) | each vs the first row | merges sha256 |\n"
          "|---|---|---:|---:|---:|---|---|")
    for name, runs, digest in results:
        m = {key: median(runs, key) for key in base}
        seconds = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        ratios = " / ".join(f"{m[k] / base[k]:.2f}×" for k in base)
        print(f"| {name} | {seconds} | {m['seconds']:.2f} | {m['cpu']:.2f} | {m['caller_cpu']:.2f} | {ratios} | "
              f"{digest} |")


if __name__ == "__main__":
    main()
