"""Ingestion at scale: the three ingestion targets, measured side by side.

* throughput: ``Store.ingest`` (GPT-2 pre-tokenization, 2 workers, fresh SQLite)
  against HF ``train([file])`` with a 300-token vocabulary; and the same end to
  end, the ``bpestore ingest`` command against HF as a script (interpreter start
  and imports included);
* memory: the peak of the same ingest for the text, and for it concatenated 2x
  and 4x (it should grow only with distinct words, not with the file);
* many sources: a directory of 10,000 small files against the same bytes as
  one file.

Memory is the whole process tree's (the ingest's worker processes included),
sampled from outside every 100 ms: the sum of RSS (which counts memory the
forked workers share with their parent once per process) and the sum of PSS
(which divides shared pages among their users). Times are the timed call only,
as in the other suites (``bench.child``). Each run's log line also says how
many cores other processes on the machine kept busy meanwhile: the noise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import cases
from bench.common import DATA, REPO, Case, Params, Result, child_command, markdown_table, measure

WORKERS = 2
N_FILES = 10_000


# -- the timed work (run inside bench.child) ---------------------------------------------
def bpestore_ingest_workers(p: Params) -> cases.Timed:
    """Store.ingest of a file or a directory, fresh SQLite, WORKERS processes."""
    import bpestore

    store = bpestore.open(Path(p.tmp) / "bench.db")
    return lambda: store.ingest("bench", [p.corpus], workers=WORKERS)


# The peer of the command line: the same HF training as cases.hf_ingest, as a script.
HF_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.train([sys.argv[1]], trainers.BpeTrainer(vocab_size=int(sys.argv[2]), show_progress=False,
          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
"""


def bpestore_command(p: Params) -> cases.Timed:
    """`bpestore ingest` as a user runs it: interpreter start, imports, store set-up included."""
    argv = [sys.executable, str(REPO / "cli.py"), "--db", str(Path(p.tmp) / "cli.db"), "ingest",
            "bench", p.corpus, "--workers", str(WORKERS), "--quiet"]
    return lambda: subprocess.run(argv, check=True)


def hf_script(p: Params) -> cases.Timed:
    """HF's training as a script: interpreter start and import included."""
    argv = [sys.executable, "-c", HF_SCRIPT, p.corpus, str(cases.INGEST_VOCAB)]
    return lambda: subprocess.run(argv, check=True)


# -- running with the process tree's memory ------------------------------------------------
def _tree_memory(process) -> tuple[float, float]:
    """RSS and PSS (MB) summed over a process and its descendants."""
    import psutil

    rss = pss = 0
    try:
        family = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0.0, 0.0
    for member in family:
        try:
            info = member.memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss / 1e6, pss / 1e6


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def run_tree(case: Case, prefix: tuple[str, ...] = ()) -> dict:
    """bench.common.run_once, with the peak memory of the whole process tree, and
    the CPU other processes on the machine used meanwhile (noise); ``prefix``: a
    command the child runs under (e.g. ``taskset -c 0,1``)."""
    import tempfile

    import psutil

    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        argv, env = child_command(case, tmp)
        argv = [*prefix, *argv]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy, started = _busy_seconds(), time.monotonic()
        child = psutil.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        peak_rss = peak_pss = 0.0
        while child.poll() is None:
            rss, pss = _tree_memory(child)
            peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
            time.sleep(0.02)  # also the resolution of process_s
        out, err = child.communicate()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        others = max(0.0, _busy_seconds() - busy - ours) / (time.monotonic() - started)
        if child.returncode != 0:
            raise SystemExit(f"Error: {case.label} failed:\n{err}")
        report = json.loads(out.strip().splitlines()[-1])
        return {**report, "tree_rss_mb": peak_rss, "tree_pss_mb": peak_pss, "others_cores": others,
                "process_s": time.monotonic() - started, "process_cpu_s": ours}


class TreeResult(Result):
    """A Result that also keeps the process tree's peak memory per run."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.tree_rss: list[float] = []
        self.tree_pss: list[float] = []

    def add(self, report: dict) -> str:
        line = super().add(report)
        self.tree_rss.append(report["tree_rss_mb"])
        self.tree_pss.append(report["tree_pss_mb"])
        return (f"{line}; tree RSS {report['tree_rss_mb']:.0f} MB, PSS {report['tree_pss_mb']:.0f} MB; "
                f"other processes used {report['others_cores']:.2f} cores meanwhile")

    @property
    def rss(self) -> float:
        return statistics.median(self.tree_rss)

    @property
    def pss(self) -> float:
        return statistics.median(self.tree_pss)


def measure_tree(cases_: list[Case], runs: int) -> list[TreeResult]:
    """``measure``, with the process tree's memory."""
    return measure(cases_, runs, run=run_tree, result_type=TreeResult)


# -- inputs ------------------------------------------------------------------------------
def _repeated(corpus: Path, times: int) -> Path:
    """corpus concatenated ``times`` times (made once under bench/.data)."""
    if times == 1:
        return corpus
    out = DATA / f"{corpus.stem}.x{times}.txt"
    if not out.exists() or out.stat().st_size != times * corpus.stat().st_size:
        data = corpus.read_bytes()
        with open(out, "wb") as f:
            for _ in range(times):
                f.write(data)
    return out


def _split(corpus: Path, n_files: int) -> Path:
    """A directory of ``n_files`` files that are the corpus cut at line ends, in order."""
    folder = DATA / f"{corpus.stem}.{n_files}-files"
    if not (folder / "done").exists():
        folder.mkdir(parents=True, exist_ok=True)
        data = corpus.read_bytes()
        step = len(data) // n_files
        start = 0
        for i in range(n_files):
            end = len(data) if i == n_files - 1 else data.find(b"\n", start + step) + 1 or len(data)
            (folder / f"{i // 100:03d}").mkdir(exist_ok=True)
            (folder / f"{i // 100:03d}" / f"{i:05d}.txt").write_bytes(data[start:end])
            start = end
        (folder / "done").write_text("")
    return folder


# -- the suite ---------------------------------------------------------------------------
def ingest_scale(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """Throughput vs HF, memory at 1x/2x/4x the text, 10,000 files vs one file."""
    size = corpus.stat().st_size
    one = Params(corpus=str(corpus))
    ours, hf = measure_tree([Case(f"bpestore ingest, {WORKERS} workers", bpestore_ingest_workers, one),
                             Case("HF train vocab 300", cases.hf_ingest, one)], runs)
    rows = [[f"ingest `{name}` ({size / 1e6:.1f} MB), {WORKERS} workers, fresh SQLite",
             f"HF `train([file])`, vocab {cases.INGEST_VOCAB}", f"{ours.seconds:.2f}",
             f"{hf.seconds:.2f}", f"{ours.seconds / hf.seconds:.2f}×", f"{ours.rss:.0f}",
             f"{ours.pss:.0f}", f"{hf.rss:.0f}"]]
    command, script = measure_tree([Case("bpestore ingest command", bpestore_command, one),
                                    Case("HF training script", hf_script, one)], runs)
    rows.append(["the same, end to end: `bpestore ingest` command", "HF as a `python -c` script",
                 f"{command.seconds:.2f}", f"{script.seconds:.2f}",
                 f"{command.seconds / script.seconds:.2f}×", f"{command.rss:.0f}",
                 f"{command.pss:.0f}", f"{script.rss:.0f}"])
    throughput = markdown_table(["work", "peer", "bpestore (s)", "peer (s)", "bpestore / peer",
                                 "bpestore tree RSS (MB)", "bpestore tree PSS (MB)",
                                 "peer RSS (MB)"], rows)

    grown = measure_tree([Case(f"bpestore ingest x{k}", bpestore_ingest_workers,
                               Params(corpus=str(_repeated(corpus, k)))) for k in (1, 2, 4)], runs)
    base = grown[0]
    memory = markdown_table(
        ["input", "time (s)", "tree RSS (MB)", "tree PSS (MB)", "PSS / 1x's"],
        [[f"`{name}` x{k} ({k * size / 1e6:.0f} MB)", f"{r.seconds:.2f}", f"{r.rss:.0f}",
          f"{r.pss:.0f}", f"{r.pss / base.pss:.2f}×"] for k, r in zip((1, 2, 4), grown)])

    folder = _split(corpus, N_FILES)
    many, single = measure_tree([
        Case(f"bpestore ingest of {N_FILES:,} files", bpestore_ingest_workers, Params(corpus=str(folder))),
        Case("bpestore ingest of one file", bpestore_ingest_workers, one)], runs)
    sources = markdown_table(
        ["work", "peer", "bpestore (s)", "peer (s)", "ratio"],
        [[f"a directory of {N_FILES:,} files (`{name}` cut at line ends, "
          f"{size / N_FILES / 1e3:.1f} kB each)", "the same bytes as one file",
          f"{many.seconds:.2f}", f"{single.seconds:.2f}", f"{many.seconds / single.seconds:.2f}×"]])
    return ("### Ingestion at scale\n\n" + throughput + "\n\n#### Memory as the input grows\n\n"
            + memory + "\n\n#### Many sources\n\n" + sources)


# -- ingest at N workers (memory that does not grow with cores) -----------------
def bpestore_ingest_n(p: Params) -> cases.Timed:
    """Store.ingest of a file, fresh SQLite, ``p.workers`` processes."""
    import bpestore

    store = bpestore.open(Path(p.tmp) / "bench.db")
    return lambda: store.ingest("bench", [p.corpus], workers=p.workers)


def hf_ingest_n(p: Params) -> cases.Timed:
    """HF's 300-token training (``cases.hf_ingest``) on ``p.workers`` threads (RAYON_NUM_THREADS)."""
    os.environ["RAYON_NUM_THREADS"] = str(p.workers)  # read when tokenizers starts its thread pool
    return cases.hf_ingest(p)


def ingest_workers(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2)) -> str:
    """Store.ingest at each worker count against HF on as many threads: time and the
    process tree's peak PSS (and RSS)."""
    size = corpus.stat().st_size
    one = Params(corpus=str(corpus))
    rows = []
    for n in workers:
        p = dataclasses.replace(one, workers=n)
        ours, hf = measure_tree([Case(f"bpestore ingest, {n} workers", bpestore_ingest_n, p),
                                 Case(f"HF train vocab 300, {n} threads", hf_ingest_n, p)], runs)
        rows.append([str(n), f"{ours.seconds:.2f}", f"{hf.seconds:.2f}", f"{ours.seconds / hf.seconds:.2f}×",
                     f"{ours.pss:.0f}", f"{hf.pss:.0f}", f"{ours.pss / hf.pss:.2f}×", f"{ours.rss:.0f}",
                     f"{hf.rss:.0f}"])
    return (f"### Ingest at N workers: `{name}` ({size / 1e6:.1f} MB), fresh SQLite, vs HF `train([file])` "
            f"vocab {cases.INGEST_VOCAB} on N threads (medians of {runs})\n\n" + markdown_table(
                ["N", "bpestore (s)", "HF (s)", "time / HF's", "bpestore tree PSS (MB)", "HF PSS (MB)",
                 "PSS / HF's", "bpestore tree RSS (MB)", "HF RSS (MB)"], rows))


# -- ingest with each built-in pattern: the counting core against regex and HF ------------
def bpestore_ingest_pattern(p: Params) -> cases.Timed:
    """Store.ingest with pre-tokenizer ``p.pretokenizer``, 2 workers, the counting core."""
    import bpestore

    store = bpestore.open(Path(p.tmp) / "bench.db")
    return lambda: store.ingest("bench", [p.corpus], pretokenizer=p.pretokenizer, workers=WORKERS)


def hf_ingest_pattern(p: Params) -> cases.Timed:
    """HF's 300-token training with the same regex: Split(isolated) + ByteLevel without its own."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from bpestore.text import PATTERNS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS[p.pretokenizer]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=cases.INGEST_VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    return lambda: tok.train([p.corpus], trainer)


def ingest_patterns(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """Store.ingest with each built-in pattern, counting core vs regex, beside HF's
    training of 300 tokens with the same regex."""
    size = corpus.stat().st_size
    rows = []
    for pattern in ("gpt2", "cl100k", "o200k"):
        p = Params(corpus=str(corpus), pretokenizer=pattern)
        regex = dataclasses.replace(p, pure=True)  # BPESTORE_PURE: counting through regex
        core, pure, hf = measure([Case(f"bpestore ingest {pattern}, counting core", bpestore_ingest_pattern, p),
                                  Case(f"bpestore ingest {pattern}, regex", bpestore_ingest_pattern, regex),
                                  Case(f"HF train vocab 300, {pattern} regex", hf_ingest_pattern, p)], runs)
        rows.append([pattern, f"{core.seconds:.2f}", f"{pure.seconds:.2f}", f"{hf.seconds:.2f}",
                     f"{core.seconds / pure.seconds:.2f}×", f"{core.seconds / hf.seconds:.2f}×"])
    return (f"### Ingest with each built-in pattern: `{name}` ({size / 1e6:.1f} MB), {WORKERS} workers, fresh "
            f"SQLite (medians of {runs})\n\n" + markdown_table(
                ["pattern", "counting core (s)", "regex (s)", f"HF vocab {cases.INGEST_VOCAB}, same regex (s)",
                 "core / regex", "core / HF"], rows))


# -- many sources: the same bytes as many files or one ----------------------------------------
def ingest_sources(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (2,),
                   splits: tuple[int, ...] = (2_000, 10)) -> str:
    """Store.ingest of the corpus cut into each of ``splits`` files (a directory) against the
    same bytes as one file, at each worker count, interleaved: wall (process tree) and PSS."""
    size = corpus.stat().st_size
    rows = []
    for n in workers:
        one = Params(corpus=str(corpus), workers=n)
        cases_ = [Case(f"one file, {n} workers", bpestore_ingest_n, one)]
        cases_ += [Case(f"{k:,} files, {n} workers", bpestore_ingest_n,
                        dataclasses.replace(one, corpus=str(_split(corpus, k)))) for k in splits]
        single, *many = measure_tree(cases_, runs)
        rows += [[f"{k:,} files of {size / k / 1e6:.3g} MB", str(n), f"{r.seconds:.2f}", f"{single.seconds:.2f}",
                  f"{r.seconds / single.seconds:.2f}×", f"{r.pss:.0f}", f"{single.pss:.0f}"]
                 for k, r in zip(splits, many)]
    return (f"### Many sources: `{name}` ({size / 1e6:.1f} MB) as many files vs one, fresh SQLite "
            f"(medians of {runs})\n\n" + markdown_table(
                ["sources", "workers", "many files (s)", "one file (s)", "ratio", "many: tree PSS (MB)",
                 "one: tree PSS (MB)"], rows))


SUITES = {"ingest-scale": ingest_scale, "ingest-workers": ingest_workers, "ingest-patterns": ingest_patterns,
          "ingest-sources": ingest_sources}
