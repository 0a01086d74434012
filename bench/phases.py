"""Where a cold ingest and a cold training spend their time, by worker count (serial vs
parallel phases), and what that predicts for more cores (Amdahl).

    python -m bench phases --corpus english_100M --workers 1,2 [--runs 1] [--vocab-size 32000]
    python -m bench phases-synthetic --scale 0.3 --workers 1,2
    python -m bench phases-ingest[-x4] --corpus english_100M --workers 1,2,4,16  (ingest alone; x4: 400 MB)

Each run is a fresh process (``bench.child``) that wraps the functions of each phase
with a clock, then ingests the corpus into a fresh SQLite store with N workers and
trains ``--vocab-size`` on N threads (the compiled merge core's ``default_threads``):

* ingest, serial (the parent alone): importing bpestore and opening the store (of it: the
  open, i.e. the schema check), reading
  the corpus' spec and sources, cutting the file at safe places, starting and stopping
  the workers, merging the workers' counts in the parent, writing the counts (one
  transaction; of it: the count rows, i.e. sort, parameters and INSERT, and the rest: the
  corpus' rows, totals and the commit), the rest of the parent's own work (sending tasks,
  taking results); the whole-process table adds the time outside every phase (the
  interpreter's start, the child's imports, the exit);
  hashing the file in the parent, which overlaps the counting where there are workers;
* ingest, parallel: counting in the parent (1 worker, or the text before the workers
  start) and waiting for the workers' results;
* training: reading the counts from the cursor, loading them into the core + the first
  pair count, the merge loop (the checkpoints are written by a thread beside it), making
  the snapshot, waiting for the writer + the last checkpoint, and the rest (the version
  rows); its CPU, and how much of it the caller's thread spent (the serial path).

A phase whose time is ``s + p / N`` at N workers gives ``s`` and ``p`` from its times at
the two smallest N (the fit); the table projects every phase, and the whole, to
``--project`` workers (default 16). On a machine with fewer cores than N, the times at
N say only what the serial phases cost with that many processes. CPU: the parent's, and
the workers' (summed, from the reaped processes' rusage).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import resource
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import cases, ingestion, training_scale
from bench.common import DATA, Case, Params, markdown_table, measure
from bench.ingestion import TreeResult, run_tree

PROJECT = 16  # the worker count the fit projects to, unless --project says another
SPECIAL = "<|endoftext|>"
COUNT = "count (1 worker: in the parent; else waiting for the workers)"

# Phase names, in table order; "serial" / "parallel" / "overlaps" says which Amdahl part it is.
IMPORT = "import bpestore + open the store"
ROWS = "  of it: the count rows (sort, parameters, INSERT)"
INGEST_PHASES = [
    (IMPORT, "serial"),
    ("  of it: open the store (schema check)", "serial"),
    ("read the corpus' spec and sources", "serial"),
    ("cut the file at safe places", "serial"),
    ("start the workers", "serial"),
    (COUNT, "parallel"),
    ("hash the file in the parent", "overlaps"),
    ("merge counts in the parent", "serial"),
    ("stop the workers", "serial"),
    ("write the counts (one transaction)", "serial"),
    (ROWS, "serial"),
    ("  of it: the rest (corpus rows, totals, commit)", "serial"),
    ("the parent's other work", "serial"),
]
NESTED = {IMPORT: ("  of it: open the store (schema check)",),
          "write the counts (one transaction)": (ROWS, "  of it: the rest (corpus rows, totals, commit)")}
READ = "read the counts (the SQLite cursor)"
LOAD = "load the words into the core, count pairs"
TRAIN_PHASES = [
    (READ, "serial"),
    (LOAD, "mixed"),
    ("merge loop (checkpoints written beside it)", "mixed"),
    ("make the snapshot (check + pack)", "serial"),
    ("wait for the writer + last checkpoint", "serial"),
    ("the rest of Store.train", "serial"),
]


class Clock:
    """Seconds spent inside wrapped functions, per phase (nested calls counted once)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)  # the same phases in this thread's CPU seconds
        self.depth = threading.local()  # each thread's (the file's hash runs in a thread beside the counting)

    def timed(self, phase: str, func: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(self.depth, "n", 0):
                return func(*args, **kwargs)
            self.depth.n = 1
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start
                self.cpu[phase] += time.thread_time() - start_cpu
                self.depth.n = 0
        return wrapper

    def wrap(self, owner: Any, name: str, phase: str) -> None:
        """Time ``owner.name`` as ``phase`` (left alone where the name does not exist)."""
        func = getattr(owner, name, None)
        if func is not None:
            static = isinstance(inspect.getattr_static(owner, name), staticmethod)
            setattr(owner, name, staticmethod(self.timed(phase, func)) if static else self.timed(phase, func))

    def generator(self, phase: str, func: Callable[..., Iterator]) -> Callable[..., Iterator]:
        """Time a generator function's own steps, not its consumer's."""
        def wrapper(*args: Any, **kwargs: Any) -> Iterator:
            it = iter(func(*args, **kwargs))
            while True:
                start = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    self.seconds[phase] += time.perf_counter() - start
                    return
                self.seconds[phase] += time.perf_counter() - start
                yield item
        return wrapper


class _TimedHash:
    """A hashlib object whose updates are timed."""

    def __init__(self, clock: Clock, inner: Any) -> None:
        self._inner = inner
        self.update = clock.timed("hash the file in the parent", inner.update)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _counting_into(clock: Clock, func: Callable) -> Callable:
    """``func`` timed as ROWS, a phase nested in another (the clock counts nested calls once)."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            return func(*args, **kwargs)
        finally:
            clock.seconds[ROWS] += time.perf_counter() - start
            clock.cpu[ROWS] += time.thread_time() - start_cpu
    return wrapper


def _instrument_ingest(clock: Clock) -> None:
    from bpestore.ingest import pool, scheduler
    from bpestore.store import corpora, count_tables
    from bpestore.store.corpus_tables import CorpusReads

    clock.wrap(corpora, "corpus_spec", "read the corpus' spec and sources")
    clock.wrap(CorpusReads, "source_shas", "read the corpus' spec and sources")
    clock.wrap(scheduler, "cut_points", "cut the file at safe places")
    clock.wrap(scheduler, "merge_counts", "merge counts in the parent")
    clock.wrap(scheduler, "file_sha256", "hash the file in the parent")
    clock.wrap(corpora, "add_batch", "write the counts (one transaction)")
    count_tables.upsert_counts = _counting_into(clock, count_tables.upsert_counts)  # inside add_batch
    clock.wrap(pool.Pool, "count_here", COUNT)
    clock.wrap(pool.Pool, "take", COUNT)
    clock.wrap(pool.Pool, "close", "stop the workers")
    real_submit = pool.Pool.submit

    def submit(self: Any, task: Any) -> Any:
        if self.executor is not None:
            return real_submit(self, task)
        start = time.perf_counter()
        future = real_submit(self, task)
        if self.executor is not None:  # this call started them
            clock.seconds["start the workers"] += time.perf_counter() - start
        return future
    pool.Pool.submit = submit  # type: ignore[method-assign]
    shim = type("hashlib", (), {"sha256": staticmethod(lambda *a: _TimedHash(clock, hashlib.sha256(*a)))})
    scheduler.hashlib = shim  # type: ignore[attr-defined]


def _instrument_train(clock: Clock, threads: int) -> None:
    from bpestore import trainer
    from bpestore.store import count_tables, training

    trainer.default_threads = lambda: threads  # type: ignore[assignment]
    # The rows are read inside prepare: READ is taken off LOAD after the run.
    count_tables.count_rows = clock.generator(READ, count_tables.count_rows)  # type: ignore[assignment]
    clock.wrap(trainer.BpeTrainer, "prepare", LOAD)
    clock.wrap(trainer.BpeTrainer, "step", "merge loop (checkpoints written beside it)")
    clock.wrap(training.snapshot, "make", "make the snapshot (check + pack)")
    clock.wrap(training.CheckpointWriter, "save", "wait for the writer + last checkpoint")


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process and of its reaped children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _profiled(p: Params, train: bool) -> cases.Timed:
    """Import + open (timed here, reported as a phase), then the timed ingest (+ train)."""
    clock = Clock()
    start, start_cpu = time.perf_counter(), time.process_time()
    import bpestore

    imported, imported_cpu = time.perf_counter(), time.process_time()
    store = bpestore.open(Path(p.tmp) / "bench.db")
    opened, opened_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    open_only, open_only_cpu = time.perf_counter() - imported, time.process_time() - imported_cpu
    _instrument_ingest(clock)
    if train:
        _instrument_train(clock, p.workers)

    def run() -> dict:
        cpu0 = _cpu()
        begin = time.perf_counter()
        store.ingest("bench", [p.corpus], workers=p.workers, pretokenizer=p.pretokenizer or None)
        ingest_s = time.perf_counter() - begin
        cpu1 = _cpu()
        ingest = dict(clock.seconds)
        ingest_cpu = dict(clock.cpu)
        ingest_cpu["import bpestore + open the store"] = opened_cpu
        ingest_cpu["  of it: open the store (schema check)"] = open_only_cpu
        ingest["  of it: open the store (schema check)"] = open_only
        for whole, (part, *rest) in NESTED.items():  # a nested phase's rest: the whole less its part
            if rest:
                ingest[rest[0]] = max(0.0, ingest.get(whole, 0.0) - ingest.get(part, 0.0))
                ingest_cpu[rest[0]] = max(0.0, ingest_cpu.get(whole, 0.0) - ingest_cpu.get(part, 0.0))
        nested = {n for parts in NESTED.values() for n in parts}
        top_cpu = sum(v for k, v in clock.cpu.items() if k not in nested)
        ingest_cpu["the parent's other work"] = max(0.0, cpu1[0] - cpu0[0] - top_cpu)
        ingest["import bpestore + open the store"] = opened
        named = sum(v for k, v in ingest.items() if k != "import bpestore + open the store" and k not in nested)
        ingest["the parent's other work"] = max(0.0, ingest_s - named)
        out: dict[str, Any] = {"workers": p.workers, "ingest_s": ingest_s, "ingest": ingest, "ingest_cpu": ingest_cpu,
                               "ingest_cpu_parent": cpu1[0] - cpu0[0], "ingest_cpu_workers": cpu1[1] - cpu0[1],
                               "open_cpu": opened_cpu}
        if train:
            clock.seconds.clear()
            begin, main_cpu = time.perf_counter(), time.thread_time()
            store.train("en", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL])
            train_s, main_cpu = time.perf_counter() - begin, time.thread_time() - main_cpu
            phases = dict(clock.seconds)
            phases[LOAD] = max(0.0, phases.get(LOAD, 0.0) - phases.get(READ, 0.0))
            phases["the rest of Store.train"] = max(0.0, train_s - sum(phases.values()))
            # The caller's thread is training's serial path; the rest of the CPU: the
            # checkpoint writer's thread and the merge core's threads.
            out.update(train_s=train_s, train=phases, train_cpu=_cpu()[0] - cpu1[0], train_cpu_main=main_cpu)
        store.close()
        return out
    return run


def profiled_ingest(p: Params) -> cases.Timed:
    return _profiled(p, train=False)


def profiled_cold(p: Params) -> cases.Timed:
    return _profiled(p, train=True)


# -- aggregation -----------------------------------------------------------------------------
class Profiled(TreeResult):
    """A TreeResult that keeps each run's phases."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.details: list[dict] = []

    def add(self, report: dict) -> str:
        self.details.append(report.get("details") or {})
        return super().add(report)

    def phase(self, part: str, name: str) -> float:
        return statistics.median(d.get(part, {}).get(name, 0.0) for d in self.details)

    def value(self, key: str) -> float:
        return statistics.median(d.get(key, 0.0) for d in self.details)


def fit(t1: float, n1: int, t2: float, n2: int) -> tuple[float, float]:
    """``s``, ``p`` with ``s + p / n`` through (n1, t1) and (n2, t2), both at least 0."""
    p = max(0.0, (t1 - t2) / (1 / n1 - 1 / n2))
    return max(0.0, t1 - p / n1), p


def _table(results: list[Profiled], workers: tuple[int, ...], part: str, phases: list[tuple[str, str]],
           total_key: str, unit: str, project: int) -> str:
    n1, n2 = workers[0], workers[1] if len(workers) > 1 else workers[0]
    rows = []

    def cells(name: str, kind: str, times: list[float]) -> list[str]:
        row = [name, kind, *[f"{t:.3f}" for t in times]]
        if n1 != n2:
            s, p = fit(times[0], n1, times[1], n2)
            row += [f"{s:.3f}", f"{p:.3f}", f"{s + p / project:.3f}"]
        return row
    # Ingest: the parent's CPU seconds in each phase too (what a loaded machine disturbs least).
    cpu_part = "ingest_cpu" if part == "ingest" else None
    for name, kind in phases:
        row = cells(name, kind, [r.phase(part, name) for r in results])
        if cpu_part:
            row += [f"{r.phase(cpu_part, name):.3f}" for r in results]
        rows.append(row)
    totals = [r.value(total_key) for r in results]
    if part == "ingest":  # the user also pays the import + open
        totals = [t + r.phase(part, "import bpestore + open the store") for t, r in zip(totals, results)]
    last = cells(f"**whole {part}**" + (" (import + open included)" if part == "ingest" else ""), "", totals)
    if cpu_part:
        last += [f"{r.value('open_cpu') + r.value('ingest_cpu_parent'):.3f}" for r in results]
    rows.append(last)
    headers = ["phase", "kind", *[f"{n} {unit} (s)" for n in workers]]
    if n1 != n2:
        headers += ["fit: serial s (s)", "fit: parallel p (s)", f"projected at {project} (s)"]
    if cpu_part:
        headers += [f"parent CPU, {n} {unit} (s)" for n in workers]
    return markdown_table(headers, rows)


def _whole_processes(results: list[Profiled]) -> str:
    """Each case as a user pays it: a fresh process, wall and CPU (its tree), peak PSS."""
    def outside(r: Profiled) -> str:  # the interpreter's start, the child's imports, the exit
        if not r.label.startswith("phases"):
            return ""
        timed = r.value("ingest_s") + r.phase("ingest", IMPORT) + r.value("train_s")
        return f"{max(0.0, r.process_seconds - timed):.2f}"
    rows = [[r.label.replace("phases", "bpestore cold ingest" + (" + train" if "train" in r.details[0] else "")),
             f"{r.process_seconds:.2f}", f"{r.process_cpu_seconds:.2f}", f"{r.pss:.0f}",
             f"{r.process_seconds / results[-1].process_seconds:.2f}×", outside(r)] for r in results]
    return markdown_table(["case (fresh process)", "wall (s)", "CPU (s)", "peak PSS (MB)", "wall / HF's",
                           "outside the phases: start, exit (s)"], rows)


def _report(title: str, results: list[Profiled], workers: tuple[int, ...], runs: int, train: bool,
            project: int = PROJECT) -> str:
    everything, results = results, [r for r in results if r.label.startswith("phases")]
    nested = {n for parts in NESTED.values() for n in parts}
    serial = [sum(r.phase("ingest", n) for n, k in INGEST_PHASES if k == "serial" and n not in nested)
              for r in results]
    cpu = ", ".join(f"{n}: parent {r.value('ingest_cpu_parent'):.2f} s, workers {r.value('ingest_cpu_workers'):.2f} s"
                    for n, r in zip(workers, results))
    # CPU time is what a loaded machine disturbs least: at N >= 2 workers the parent's CPU
    # is the serial part (import + open added), the workers' the part that divides.
    amdahl = "; ".join(
        f"from {n} workers: {r.value('open_cpu'):.2f} + {r.value('ingest_cpu_parent'):.2f} + "
        f"{r.value('ingest_cpu_workers'):.2f} / {project} = "
        f"{r.value('open_cpu') + r.value('ingest_cpu_parent') + r.value('ingest_cpu_workers') / project:.2f} s"
        for n, r in zip(workers, results) if n > 1)
    mem = ", ".join(f"{n}: {r.pss:.0f} MB" for n, r in zip(workers, results))
    text = (f"### Phases: {title} (median of {runs})\n\n#### Ingest, fresh SQLite, by worker count\n\n"
            + _table(results, workers, "ingest", INGEST_PHASES, "ingest_s", "workers", project)
            + "\n\nSerial phases summed (import + open included): "
            + ", ".join(f"{n} workers {s:.2f} s" for n, s in zip(workers, serial))
            + f".\nCPU of the ingest: {cpu}.\nPeak PSS of the process tree: {mem}."
            + (f"\nProjected from CPU time, import + open + the parent's + the workers' / {project} (a quiet "
               f"machine with {project} cores): {amdahl}." if amdahl else ""))
    if train:
        cpu = ", ".join(f"{n}: {r.value('train_cpu'):.2f} s, {r.value('train_cpu_main'):.2f} s of it in the "
                        "caller's thread" for n, r in zip(workers, results))
        text += ("\n\n#### Training from the ingested counts, by thread count (the same N)\n\n"
                 + _table(results, workers, "train", TRAIN_PHASES, "train_s", "threads", project)
                 + f"\n\nCPU of the training (every thread): {cpu}.")
    return text + "\n\n#### Whole processes, side by side in the same rounds\n\n" + _whole_processes(everything)


def _measure(corpus: Path, runs: int, vocab_size: int, workers: tuple[int, ...], pretokenizer: str,
             train: bool) -> list[Profiled]:
    """bpestore's phases at each worker count, and beside them in the same rounds
    (interleaved) the peers' whole cold runs: gigabpe at each thread count, HF once."""
    func = profiled_cold if train else profiled_ingest
    todo = [Case(f"phases, {n} workers", func, Params(corpus=str(corpus), workers=n, vocab_size=vocab_size,
                                                      pretokenizer=pretokenizer)) for n in workers]
    if importlib.util.find_spec("gigabpe") is not None:
        todo += [Case(f"gigabpe, {n} threads", cases.gigabpe_train, Params(corpus=str(corpus), workers=n,
                                                                          vocab_size=vocab_size)) for n in workers]
    todo.append(Case("HF tokenizers", cases.hf_train, Params(corpus=str(corpus), vocab_size=vocab_size)))
    results = measure(todo, runs, run=run_tree, result_type=Profiled)
    out = DATA / f"phases-{corpus.stem}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({r.label: {"seconds": r.times, "pss_mb": r.tree_pss, "details": r.details}
                               for r in results}, indent=1))
    print(f"  every run's phases: {out}", file=sys.stderr, flush=True)
    return results


def phases(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2),
           project: int = PROJECT) -> str:
    """Cold ingest + train of ``corpus``, phase by phase, at each worker count."""
    vocab = 32_000 if vocab_size == 10_000 else vocab_size  # 10,000 is bench's default: the targets are for 32k
    results = _measure(corpus, runs, vocab, workers, "", train=True)
    size = corpus.stat().st_size / 1e6
    return _report(f"`{name}` ({size:.1f} MB), vocab {vocab:,}", results, workers, runs, train=True, project=project)


def phases_synthetic(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2),
                     project: int = PROJECT, scale: float = training_scale.SCALE) -> str:
    """The same on the synthetic many-distinct-words corpus at ``--scale`` (``corpus`` not used)."""
    vocab = training_scale.VOCAB if vocab_size == 10_000 else vocab_size
    text = training_scale.corpus_at(scale)
    results = _measure(text, runs, vocab, workers, "", train=True)
    size = text.stat().st_size / 1e6
    return _report(f"synthetic scale {scale:g} ({size:.0f} MB), vocab {vocab:,}", results, workers,
                   runs, train=True, project=project)


def phases_ingest(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2),
                  project: int = PROJECT, times: int = 1) -> str:
    """Cold ingest alone of ``corpus`` (``times`` times over), phase by phase, at each worker count."""
    text = ingestion._repeated(corpus, times)
    results = _measure(text, runs, vocab_size, workers, "", train=False)
    size = text.stat().st_size / 1e6
    label = f"`{name}`" + (f" x{times}" if times > 1 else "")
    return _report(f"{label} ({size:.1f} MB), ingest only", results, workers, runs, train=False, project=project)


def phases_ingest_x4(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2),
                     project: int = PROJECT) -> str:
    """The same on the corpus four times over (the 400 MB row)."""
    return phases_ingest(corpus, name, runs, vocab_size, workers, project, times=4)


SUITES = {"phases": phases, "phases-synthetic": phases_synthetic, "phases-ingest": phases_ingest,
          "phases-ingest-x4": phases_ingest_x4}
