"""Shared machinery: corpus preparation, timed subprocess runs, Markdown tables."""

from __future__ import annotations

import json
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path(os.environ.get("BPESTORE_CORPORA", REPO.parent / "shared" / "corpora"))
DATA = REPO / "bench" / ".data"
GPT2_VOCAB = CORPORA / "gpt2_vocab.json"
GPT2_MERGES = CORPORA / "gpt2_merges.txt"
NONENGLISH = ("german_1M", "russian_1M", "japanese_1M", "chinese_1M", "hindi_1M")
MIXES = {"nonenglish_mix": NONENGLISH}


@dataclass(frozen=True)
class Params:
    """What a case function gets in its subprocess."""

    corpus: str = ""
    tmp: str = ""
    db: str = ""
    vocab_size: int = 0
    code: str = ""  # a checkout whose bpestore the case imports instead of this tree's (bench.generations)
    workers: int = 0  # worker processes or threads (bench ingest-workers, encode-workers)
    pretokenizer: str = ""  # a built-in pre-tokenizer (bench ingest-patterns)
    pure: bool = False  # the child runs with BPESTORE_PURE=1: bpestore's pure-Python paths, no compiled core


@dataclass(frozen=True)
class Case:
    """One thing to time: ``func(params)``, run in the child, returns the timed callable."""

    label: str
    func: Callable[[Params], Callable[[], Any]]
    params: Params = field(default_factory=Params)


@dataclass
class Result:
    """Median wall time and peak RSS of a case over its runs; ``process``: the whole
    process's wall and CPU seconds (interpreter start, imports and set-up included:
    what a user pays)."""

    label: str
    times: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    digest: str = ""
    process_times: list[float] = field(default_factory=list)
    process_cpu: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)

    @property
    def peak_mb(self) -> float:
        return max(self.rss_mb)

    @property
    def process_seconds(self) -> float:
        return statistics.median(self.process_times) if self.process_times else float("nan")

    @property
    def process_cpu_seconds(self) -> float:
        return statistics.median(self.process_cpu) if self.process_cpu else float("nan")

    def add(self, report: dict) -> str:
        """Record one run's report; returns its line for the log."""
        if "process_s" in report:
            self.process_times.append(report["process_s"])
            self.process_cpu.append(report["process_cpu_s"])
        self.times.append(report["seconds"])
        self.rss_mb.append(report["maxrss_kb"] / 1024)
        self.digest = report["digest"]
        return f"{report['seconds']:.2f} s, {report['maxrss_kb'] / 1024:.0f} MB"


def _source(name: str) -> Path:
    """The shared file for a corpus name: NAME, NAME.txt or NAME.txt.xz."""
    for candidate in (name, f"{name}.txt", f"{name}.txt.xz"):
        path = CORPORA / candidate
        if path.is_file():
            return path
    known = sorted(p.name.split(".txt")[0] for p in CORPORA.glob("*.txt*"))
    raise SystemExit(f"Error: no corpus {name!r} in {CORPORA} (known: {', '.join(known)}, "
                     f"{', '.join(MIXES)})")


def prepare_corpus(name: str) -> Path:
    """A plain UTF-8 copy of corpus ``name`` under bench/.data (decompressed, or mixed);
    ``NAME:20M`` is its first 20 MB, cut after a line end."""
    DATA.mkdir(parents=True, exist_ok=True)
    if ":" in name:
        whole, size = name.split(":", 1)
        out = DATA / f"{whole}-{size}.txt"
        if not out.exists():
            limit = int(float(size.rstrip("MB")) * 1_000_000)
            with open(prepare_corpus(whole), "rb") as f:
                data = f.read(limit)
            out.with_suffix(".part").write_bytes(data[:data.rfind(b"\n") + 1])
            out.with_suffix(".part").rename(out)
        return out
    parts = [_source(n) for n in MIXES.get(name, (name,))]
    if len(parts) == 1 and not parts[0].name.endswith(".xz"):
        return parts[0]
    out = DATA / f"{name}.txt"
    if not out.exists():
        partial = out.with_suffix(".part")
        with open(partial, "wb") as dst:
            for i, src in enumerate(parts):
                if i:
                    dst.write(b"\n")
                opener = lzma.open if src.name.endswith(".xz") else open
                with opener(src, "rb") as f:
                    shutil.copyfileobj(f, dst, 1 << 20)
        partial.rename(out)
    return out


def child_command(case: Case, tmp: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run a case in bench.child."""
    func = f"{case.func.__module__}:{case.func.__qualname__}"
    params = json.dumps({"func": func, **asdict(case.params), "tmp": tmp})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    # Bytecode cached as an installed package has it: a source tree with no .pyc files
    # would compile every module in every measured process.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if case.params.pure:
        env["BPESTORE_PURE"] = "1"
    return [sys.executable, "-m", "bench.child", params], env


def run_once(case: Case) -> dict:
    """Run a case in a fresh interpreter with a fresh temp dir; returns its report."""
    import resource
    import time

    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        argv, env = child_command(case, tmp)
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        elapsed, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"Error: {case.label} failed:\n{proc.stderr}")
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": elapsed, "process_cpu_s": cpu}


def measure(cases: list[Case], runs: int, *, run: Callable[[Case], dict] = run_once,
            result_type: type[Result] = Result) -> list[Result]:
    """Run the cases ``runs`` times, interleaved so noise hits peers alike."""
    results = [result_type(c.label) for c in cases]
    for i in range(runs):
        for case, result in zip(cases, results):
            line = result.add(run(case))
            print(f"  run {i + 1}/{runs} {case.label}: {line}", file=sys.stderr, flush=True)
    return results


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub Markdown table, numbers right-aligned."""
    align = ["---:" if rows and rows[0][i][:1].isdigit() else "---" for i in range(len(headers))]
    lines = [headers, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)
