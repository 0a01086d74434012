"""Start-up: what a fresh process costs, as a user runs bpestore.

``startup``: the command line on a store holding GPT-2 (imported from the
shared vocab.json + merges.txt): ``--help``, ``versions``, ``show``, ``token
gpt2 " the"``, ``encode gpt2 "short text"``, ``decode gpt2 ...``, each a
fresh process timed from outside (interpreter start included), beside the
floor (``python -c "import sqlalchemy"``) and, unless ``--baseline none``,
the same commands run by ``BASELINE`` (main before this work). The targets
are judged on the times scaled to the quiet floor (0.30 s), since on a
loaded machine every process is slower alike.

``first-encode-gpt2 --corpus C``: a fresh process that loads GPT-2 and encodes C
once, the imports included: ``bpestore.open(db).tokenizer("gpt2")`` +
``encode_ordinary``, beside tiktoken loading the same ranks from a tiktoken
file (``load_tiktoken_bpe``), building its ``Encoding`` and encoding. Each
script times itself from before its first import to the ids (reading the
text is not timed); the ratio is throughput over tiktoken's, and the ids
must be equal.

Every case runs ``--runs`` times, interleaved; the tables show medians.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

from bench import cases
from bench.common import DATA, GPT2_MERGES, GPT2_VOCAB, REPO, Case, Params, Result, markdown_table, measure

BASELINE = "d23181f"  # main before the start-up work
SPECIAL = "<|endoftext|>"

CLI = "import sys; from bpestore.cli import main; sys.argv[0] = 'bpestore'; main()"
COMMANDS = {  # row -> arguments after --db DB
    "`bpestore --help`": ["--help"],
    "`versions`": ["versions"],
    "`show gpt2`": ["show", "gpt2"],
    '`token gpt2 " the"`': ["token", "gpt2", " the"],
    '`encode gpt2 "short text"`': ["encode", "gpt2", "short text"],
    "`decode gpt2 1212 318 257 1332`": ["decode", "gpt2", "1212", "318", "257", "1332"],
}
TARGETS = {"`bpestore --help`": 0.15}  # seconds; the others: 0.45
QUIET_FLOOR = 0.30  # s: the interpreter + `import sqlalchemy` on the quiet machine the targets were set on

# Each script prints one JSON line: the seconds from before its imports to the ids, those
# after its imports (and opening the store, as a user waits for it), and the ids' digest.
BPESTORE_SCRIPT = """
import hashlib, json, sys, time
from array import array
text = open(sys.argv[2], encoding="utf-8").read()
start = time.perf_counter()
import bpestore
store = bpestore.open(sys.argv[1])
loading = time.perf_counter()
ids = store.tokenizer("gpt2").encode_ordinary(text)
end = time.perf_counter()
digest = hashlib.sha256(array("q", ids).tobytes()).hexdigest()[:12]
print(json.dumps({"seconds": end - start, "after_imports": end - loading, "digest": f"{len(ids)}:{digest}"}))
"""
TIKTOKEN_SCRIPT = """
import hashlib, json, sys, time
from array import array
text = open(sys.argv[2], encoding="utf-8").read()
start = time.perf_counter()
import tiktoken
from tiktoken.load import load_tiktoken_bpe
loading = time.perf_counter()
ranks = load_tiktoken_bpe(sys.argv[1])
enc = tiktoken.Encoding(name="gpt2", pat_str=sys.argv[3], mergeable_ranks=ranks,
                        special_tokens={"<|endoftext|>": len(ranks)})
ids = enc.encode_ordinary(text)
end = time.perf_counter()
digest = hashlib.sha256(array("q", ids).tobytes()).hexdigest()[:12]
print(json.dumps({"seconds": end - start, "after_imports": end - loading, "digest": f"{len(ids)}:{digest}"}))
"""


def baseline_checkout(path: str | None) -> Path | None:
    """``path`` (``none``: no baseline), or BASELINE's bpestore/ and migrations/ extracted once."""
    if path == "none":
        return None
    root = Path(path).resolve() if path else DATA / f"baseline-{BASELINE}"
    if not path and not (root / "bpestore" / "__init__.py").exists():
        root.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", BASELINE, "bpestore", "migrations"], cwd=REPO,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    if not (root / "bpestore" / "__init__.py").exists():
        raise SystemExit(f"Error: no bpestore package in the baseline checkout {root}")
    return root


def _env(code: str) -> dict[str, str]:
    """The environment of a child that imports bpestore from ``code`` (a checkout),
    with bytecode caches as an installed package has them (pip compiles them):
    where PYTHONDONTWRITEBYTECODE is set, every run compiled bpestore's sources
    again (about 45 ms of CPU a command here)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _gpt2_store(folder: Path, code: Path) -> str:
    """A store holding GPT-2, written by the bpestore of ``code`` (untimed)."""
    db = folder / f"gpt2-{code.name}.db"
    script = ("import sys, bpestore; bpestore.open(sys.argv[1]).import_gpt2("
              "'gpt2', vocab=sys.argv[2], merges=sys.argv[3])")
    subprocess.run([sys.executable, "-c", script, str(db), str(GPT2_VOCAB), str(GPT2_MERGES)],
                   cwd=folder, env=_env(str(code)), check=True)
    return str(db)


# -- runners: the case's func gives the command line; these time it ------------------------------
def _run_outside(case: Case) -> dict:
    """Wall time of the whole process, interpreter start included, and its CPU time
    (user + system: what other processes on a loaded machine disturb least)."""
    argv = case.func(case.params)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=case.params.tmp, env=_env(case.params.code), capture_output=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"Error: {case.label} failed:\n{proc.stderr.decode(errors='replace')}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {"seconds": seconds, "maxrss_kb": 0, "digest": "", "cpu": cpu}


class CpuResult(Result):
    """A Result that also keeps each run's CPU seconds."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.cpus: list[float] = []

    def add(self, report: dict) -> str:
        self.cpus.append(report["cpu"])
        return super().add(report) + f" ({report['cpu']:.3f} s CPU)"

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpus)


class Timings(Result):
    """A Result that also keeps the seconds after the imports of each run."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.after: list[float] = []

    def add(self, report: dict) -> str:
        self.after.append(report["after_imports"])
        return super().add(report) + f" ({report['after_imports']:.2f} s after the imports)"

    @property
    def after_imports(self) -> float:
        return statistics.median(self.after)


def _run_inside(case: Case) -> dict:
    """The seconds the script measured itself, and its ids' digest."""
    proc = subprocess.run(case.func(case.params), cwd=case.params.tmp, env=_env(case.params.code),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"Error: {case.label} failed:\n{proc.stderr}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "maxrss_kb": 0}


def _command(args: list[str]):
    def argv(p: Params) -> list[str]:
        return [sys.executable, "-c", CLI, "--db", p.db, *args]
    return argv


def _floor(p: Params) -> list[str]:
    return [sys.executable, "-c", "import sqlalchemy"]


def startup(corpus: Path, name: str, runs: int, vocab_size: int, baseline: str | None = None) -> str:
    """The CLI rows, beside the floor and the baseline's."""
    old = baseline_checkout(baseline)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        folder = Path(tmp)
        ours = Params(db=_gpt2_store(folder, REPO), tmp=tmp, code=str(REPO))
        theirs = Params(db=_gpt2_store(folder, old), tmp=tmp, code=str(old)) if old else None
        todo = [Case("floor: python -c 'import sqlalchemy'", _floor, ours)]
        for row, args in COMMANDS.items():
            todo.append(Case(row, _command(args), ours))
            if theirs:
                todo.append(Case(f"{row} ({BASELINE})", _command(args), theirs))
        results = {r.label: r for r in measure(todo, runs, run=_run_outside, result_type=CpuResult)}
    floor = results[todo[0].label].seconds
    floor_cpu = cast(CpuResult, results[todo[0].label]).cpu
    tag = BASELINE if old is None or baseline is None else old.name
    rows = []
    for row in COMMANDS:
        ours_s = results[row].seconds
        ours_cpu = cast(CpuResult, results[row]).cpu
        target = TARGETS.get(row, 0.45)
        # On a loaded machine every process is slower alike: the time scaled to the quiet floor.
        scaled = ours_s * QUIET_FLOOR / floor
        cells = [row, f"{ours_s:.3f}", f"{ours_s / floor:.2f}×", f"{scaled:.2f}", f"≤ {target:.2f} s: "
                 + ("met" if scaled <= target else "**not met**"), f"{ours_cpu:.3f}",
                 f"{ours_cpu * QUIET_FLOOR / floor_cpu:.2f}"]
        if theirs:
            before = results[f"{row} ({BASELINE})"]
            before_cpu = cast(CpuResult, before).cpu
            cells += [f"{before.seconds:.3f}", f"{ours_s / before.seconds:.2f}×", f"{before_cpu:.3f}",
                      f"{ours_cpu / before_cpu:.2f}×"]
        rows.append(cells)
    headers = ["fresh process", "bpestore (s)", "/ floor", f"at a {QUIET_FLOOR:.2f} s floor (s)", "target",
               "CPU (s)", f"CPU at a {QUIET_FLOOR:.2f} s floor (s)"]
    if theirs:
        headers += [f"{tag} (s)", f"bpestore / {tag}", f"{tag} CPU (s)", f"CPU / {tag}'s"]
    return (f"### Start-up, GPT-2 in the store (median of {runs}; floor: `python -c 'import sqlalchemy'` "
            f"{floor:.3f} s, {floor_cpu:.3f} s CPU)\n\n" + markdown_table(headers, rows))


def first_encode(corpus: Path, name: str, runs: int, vocab_size: int, baseline: str | None = None) -> str:
    """A fresh process's load + first encode, beside tiktoken's (and the baseline's)."""
    from bpestore.text import PATTERNS

    old = baseline_checkout(baseline)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        folder = Path(tmp)
        ranks_file = folder / "gpt2.tiktoken"
        ranks = cases.tiktoken_gpt2()._mergeable_ranks
        ranks_file.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n"
                                      for token, rank in sorted(ranks.items(), key=lambda item: item[1])))

        def script(text_of: str, *args: str):
            return lambda p: [sys.executable, "-c", text_of, *args]

        todo = [Case("tiktoken: load ranks + Encoding + encode_ordinary",
                     script(TIKTOKEN_SCRIPT, str(ranks_file), str(corpus), PATTERNS["gpt2"]),
                     Params(tmp=tmp, code=str(REPO))),
                Case("bpestore: open + tokenizer('gpt2') + encode_ordinary",
                     script(BPESTORE_SCRIPT, _gpt2_store(folder, REPO), str(corpus)),
                     Params(tmp=tmp, code=str(REPO)))]
        if old:
            todo.append(Case(f"bpestore {BASELINE}: the same",
                             script(BPESTORE_SCRIPT, _gpt2_store(folder, old), str(corpus)),
                             Params(tmp=tmp, code=str(old))))
        results = measure(todo, runs, run=_run_inside, result_type=Timings)
    base = results[0]
    size = corpus.stat().st_size
    rows = [[r.label, f"{r.seconds:.3f}", f"{base.seconds / r.seconds:.2f}×", f"{r.after_imports:.3f}",
             f"{base.after_imports / r.after_imports:.2f}×",
             "yes" if r.digest == base.digest else f"**no** ({r.digest})"] for r in results]
    return (f"### Fresh process: load GPT-2 + first encode of `{name}` ({size / 1e6:.1f} MB) (median of {runs})"
            "\n\nAfter the imports: bpestore from `store.tokenizer` (the store open), tiktoken from loading "
            "its rank file.\n\n" + markdown_table(
                ["process", "imports included (s)", "throughput / tiktoken's", "after the imports (s)",
                 "throughput / tiktoken's", "same ids as tiktoken"], rows))


SUITES = {"startup": startup, "first-encode-gpt2": first_encode}
