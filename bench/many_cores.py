"""The many-core rows (ingest and training on 16 cores), side by side with HF tokenizers, within a time budget.

    python -m bench.many_cores --out DIR [--corpus english_100M] [--runs 3] [--budget 290]

Run by bench/many_cores.sh on a machine lent once for a few minutes. Rows run in order of
priority; each gets as many runs (at most ``--runs``, medians shown) as the budget leaves
once every later row has time for one, judged from earlier 16-core figures scaled by
how long the rows so far took against their estimates; a row with no time left is skipped
and says so. After every row, DIR/many_cores.json (every run's figures and phases) and
DIR/summary.md (the table) are written again, so a run cut short still leaves both.

The timing is the suites' own: ``bench.common.measure`` over ``bench.child`` cases, the
process tree's peak PSS from ``bench.ingestion.run_tree``, the phases of ``bench.phases``,
the commands of ``bench.fixed_costs``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import cases, fixed_costs, ingestion, phases
from bench.common import DATA, Case, Params, measure, prepare_corpus
from bench.ingestion import measure_tree, run_tree
from bench.phases import Profiled

SPECIAL = "<|endoftext|>"
VOCAB = 32_000
ISSUE_MB = 100.0  # the corpus the per-row estimates are for
OVERHEAD_S = 0.8  # a case's process start, imports and untimed set-up


# -- cases not in the suites (run inside bench.child) ----------------------------------------
def hf_train_pattern(p: Params) -> cases.Timed:
    """HF training of ``p.vocab_size`` with built-in pattern ``p.pretokenizer`` (Split + ByteLevel),
    on ``p.workers`` threads (0: rayon's default, every core it may use)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    from bpestore.text import PATTERNS

    if p.workers:
        os.environ["RAYON_NUM_THREADS"] = str(p.workers)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PATTERNS[p.pretokenizer]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=p.vocab_size, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return lambda: tok.train([p.corpus], trainer)


def bpestore_day2(p: Params) -> cases.Timed:
    """Day 2: on a copy of the day-1 store (``p.db``: first half ingested, ``en`` trained),
    ingest the second half (``p.corpus``) and train ``en`` again on the newest generation."""
    import bpestore

    db = Path(p.tmp) / "day2.db"
    shutil.copyfile(p.db, db)
    store = bpestore.open(db)

    def run() -> None:
        store.ingest("bench", [p.corpus], workers=p.workers or None)
        store.train("en", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL])
    return run


# -- inputs ---------------------------------------------------------------------------------
def _halves(corpus: Path) -> tuple[Path, Path]:
    """The corpus cut in two at the line end nearest its middle (made once)."""
    first, second = DATA / f"{corpus.stem}.half1.txt", DATA / f"{corpus.stem}.half2.txt"
    if not second.exists():
        data = corpus.read_bytes()
        cut = data.find(b"\n", len(data) // 2) + 1 or len(data)
        first.write_bytes(data[:cut])
        second.write_bytes(data[cut:])
    return first, second


def _day1(first: Path, workers: int) -> Path:
    """A store with the first half ingested and ``en`` trained (untimed, made once)."""
    import bpestore

    db = DATA / f"{first.stem}.day1-{VOCAB}.db"
    if not db.exists():
        part = db.with_name(db.name + ".part")
        part.unlink(missing_ok=True)
        with bpestore.open(part) as store:
            store.ingest("bench", [str(first)], workers=workers)
            store.train("en", corpus="bench", vocab_size=VOCAB, special_tokens=[SPECIAL])
        part.replace(db)
    return db


# -- the rows -------------------------------------------------------------------------------
@dataclass
class Context:
    corpus: Path
    name: str
    workers: int  # the cores: every "all cores" case runs this many workers / threads
    record: dict[str, Any] = field(default_factory=dict)  # every row's figures, for the JSON


def _s(x: float) -> str:
    return f"{x:.2f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "-"


def _runs(results: list) -> dict:
    return {r.label: {"seconds": r.times, "pss_mb": getattr(r, "tree_pss", []),
                      "details": getattr(r, "details", [])} for r in results}


def row_by_workers(ctx: Context, runs: int) -> list[list[str]]:
    counts = tuple(sorted({1, 2, 4, ctx.workers}))
    results = phases._measure(ctx.corpus, runs, VOCAB, counts, "", train=False)
    ctx.record["ingest by workers"] = {"runs": _runs(results),
                                       "report": phases._report(ctx.name, results, counts, runs, train=False)}
    times = [r.seconds for r in results]
    serial = [sum(r.phase("ingest", n) for n, k in phases.INGEST_PHASES if k == "serial") for r in results]
    return [[f"ingest {ctx.name}, by workers {'/'.join(map(str, counts))}", "—",
             " / ".join(_s(t) for t in times), "—",
             f"{ctx.workers} workers = {times[0] / times[-1]:.2f}× one; serial phases at {ctx.workers}: "
             f"{serial[-1]:.2f} s (import + open included)"]]


def row_ingest_vs_hf(ctx: Context, runs: int) -> list[list[str]]:
    p = Params(corpus=str(ctx.corpus), workers=ctx.workers)
    ours, hf = measure_tree([Case(f"bpestore ingest, {ctx.workers} workers", ingestion.bpestore_ingest_n, p),
                             Case(f"HF train vocab 300, {ctx.workers} threads", ingestion.hf_ingest_n, p)], runs)
    ctx.record["ingest vs HF"] = _runs([ours, hf])
    return [[f"ingest {ctx.name}, {ctx.workers} workers (HF: 300-token training)", _s(hf.seconds), _s(ours.seconds),
             _ratio(ours.seconds, hf.seconds), ""],
            [f"peak PSS, ingest at {ctx.workers} workers", f"{hf.pss:.0f} MB", f"{ours.pss:.0f} MB",
             _ratio(ours.pss, hf.pss), f"summed RSS {ours.rss:.0f} MB (HF {hf.rss:.0f})"]]


def _cold(ctx: Context, runs: int, pattern: str, pinned: bool) -> list[list[str]]:
    workers = 2 if pinned else ctx.workers
    ours_p = Params(corpus=str(ctx.corpus), workers=workers, vocab_size=VOCAB, pretokenizer=pattern)
    hf_p = Params(corpus=str(ctx.corpus), workers=2 if pinned else 0, vocab_size=VOCAB, pretokenizer=pattern)
    hf_case = Case("HF train", cases.hf_train, hf_p) if pattern == "gpt2" and not pinned else \
        Case(f"HF train, {pattern} regex", hf_train_pattern, hf_p)
    run = functools.partial(run_tree, prefix=("taskset", "-c", "0,1")) if pinned else run_tree
    ours, hf = measure([Case(f"bpestore ingest + train, {pattern}", phases.profiled_cold, ours_p), hf_case], runs,
                       run=run, result_type=Profiled)
    where = "pinned to 2 cores (taskset -c 0,1; 2 workers, 2 threads)" if pinned else f"{ctx.workers} cores"
    key = f"cold {pattern}, {where}"
    ctx.record[key] = {"runs": _runs([ours, hf]),
                       "report": phases._report(key, [ours], (workers,), runs, train=True)}
    split = f"ingest {ours.value('ingest_s'):.2f}, train {ours.value('train_s'):.2f}"
    return [[f"cold ingest + train 32k, {pattern} pattern, {where}", _s(hf.seconds), _s(ours.seconds),
             _ratio(ours.seconds, hf.seconds), split]]


def row_cold_gpt2(ctx: Context, runs: int) -> list[list[str]]:
    return _cold(ctx, runs, "gpt2", pinned=False)


def row_cold_cl100k(ctx: Context, runs: int) -> list[list[str]]:
    return _cold(ctx, runs, "cl100k", pinned=False)


def row_cold_cl100k_pinned(ctx: Context, runs: int) -> list[list[str]]:
    return _cold(ctx, runs, "cl100k", pinned=True)


def _files_vs_one(ctx: Context, runs: int, n_files: int, files: str, key: str) -> list[list[str]]:
    """Ingest of the corpus cut into ``n_files`` files against the one file (``files`` names them)."""
    folder = ingestion._split(ctx.corpus, n_files)
    one = Params(corpus=str(ctx.corpus), workers=ctx.workers)
    cut, single = measure_tree([
        Case(f"bpestore ingest of {key}", ingestion.bpestore_ingest_n, Params(corpus=str(folder), workers=ctx.workers)),
        Case("bpestore ingest of one file", ingestion.bpestore_ingest_n, one)], runs)
    ctx.record[key] = _runs([cut, single])
    return [[f"{files} vs one file, {ctx.workers} workers", f"one file {_s(single.seconds)}",
             _s(cut.seconds), _ratio(cut.seconds, single.seconds), f"ratio: {key} / one file"]]


def row_ten_files(ctx: Context, runs: int) -> list[list[str]]:
    return _files_vs_one(ctx, runs, 10, f"ten {ctx.corpus.stat().st_size / 10e6:.0f} MB files", "ten files")


def row_many_files(ctx: Context, runs: int) -> list[list[str]]:
    return _files_vs_one(ctx, runs, ingestion.N_FILES, "10,000 small files", "10,000 files")


def row_400mb(ctx: Context, runs: int) -> list[list[str]]:
    big = ingestion._repeated(ctx.corpus, 4)
    p = Params(corpus=str(big), workers=ctx.workers)
    ours, hf = measure_tree([Case(f"bpestore ingest x4, {ctx.workers} workers", ingestion.bpestore_ingest_n, p),
                             Case(f"HF train vocab 300 x4, {ctx.workers} threads", ingestion.hf_ingest_n, p)], runs)
    ctx.record["x4"] = _runs([ours, hf])
    return [[f"{big.stat().st_size / 1e6:.0f} MB ({ctx.name} x4), {ctx.workers} workers", _s(hf.seconds),
             _s(ours.seconds), _ratio(ours.seconds, hf.seconds), f"PSS {ours.pss:.0f} MB (HF {hf.pss:.0f})"]]


def row_day2(ctx: Context, runs: int) -> list[list[str]]:
    first, second = _halves(ctx.corpus)
    day1 = _day1(first, ctx.workers)
    ours, hf = measure_tree([
        Case("bpestore day 2", bpestore_day2, Params(corpus=str(second), db=str(day1), workers=ctx.workers,
                                                      vocab_size=VOCAB)),
        Case("HF train cold, whole file", cases.hf_train, Params(corpus=str(ctx.corpus), vocab_size=VOCAB))], runs)
    ctx.record["day 2"] = _runs([ours, hf])
    return [["day 2 (ingest the 2nd half + retrain 32k) vs HF cold on the whole file", _s(hf.seconds),
             _s(ours.seconds), _ratio(ours.seconds, hf.seconds), ""]]


def row_fixed_costs(ctx: Context, runs: int) -> list[list[str]]:
    table = fixed_costs.fixed_costs(ctx.corpus, ctx.name, runs, VOCAB)
    ctx.record["fixed costs"] = table
    rows = []
    for line in table.splitlines()[4:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append([f"fresh process: {cells[0]}", "—", cells[1], "—", f"target {cells[3]}"])
    return rows


@dataclass(frozen=True)
class Row:
    name: str
    func: Callable[[Context, int], list[list[str]]]
    estimate: Callable[[float], float]  # seconds per run, given the corpus' MB / 100
    max_runs: int = 99


def _est(*seconds: float, fixed: float = 0.0) -> Callable[[float], float]:
    """A run's estimate: each case's seconds at 100 MB on 16 cores, scaled to the corpus, plus overhead."""
    return lambda scale: sum(s * scale for s in seconds) + OVERHEAD_S * len(seconds) + fixed


ROWS = [  # priority order; estimates from earlier 16-core figures
    Row("ingest vs HF, peak PSS", row_ingest_vs_hf, _est(2.9, 4.5)),
    Row("ingest by workers", row_by_workers, _est(4.5, 4.1, 3.2, 2.8)),
    Row("cold gpt2", row_cold_gpt2, _est(5.2, 6.1)),
    Row("cold cl100k pinned", row_cold_cl100k_pinned, _est(4.7, 17.1), max_runs=2),
    Row("cold cl100k", row_cold_cl100k, _est(4.1, 5.4)),
    Row("ten files", row_ten_files, _est(5.5, 2.9, fixed=1.0)),
    Row("fixed costs", row_fixed_costs, _est(*[0.5] * 9, fixed=2.0)),
    Row("day 2", row_day2, _est(4.5, 6.1, fixed=3.0)),
    Row("400 MB", row_400mb, _est(4.3, 14.1, fixed=1.0), max_runs=2),
    Row("10000 files", row_many_files, _est(3.6, 2.9, fixed=1.5)),
]


# -- the driver -------------------------------------------------------------------------------
def _write(out: Path, ctx: Context, table: list[list[str]], header: str) -> None:
    (out / "many_cores.json").write_text(json.dumps(ctx.record, indent=1, default=str))
    lines = [header, "", "| work | HF tokenizers | bpestore | ratio | notes |", "|---|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in table]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    reports = [v["report"] for v in ctx.record.values() if isinstance(v, dict) and "report" in v]
    (out / "phases.md").write_text("\n\n".join(reports) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.many_cores", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where many_cores.json and summary.md go")
    parser.add_argument("--corpus", default="english_100M")
    parser.add_argument("--runs", type=int, default=3, help="at most this many runs per row (medians)")
    parser.add_argument("--budget", type=float, default=290, help="seconds for all the rows")
    parser.add_argument("--only", help="comma-separated row names (default: all)")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    from bpestore.ingest import default_workers

    corpus = prepare_corpus(args.corpus)
    ctx = Context(corpus, args.corpus, default_workers())
    scale = corpus.stat().st_size / 1e6 / ISSUE_MB
    rows = [r for r in ROWS if not args.only or r.name in args.only.split(",")]
    header = (f"## Many cores: {ctx.workers} cores, `{args.corpus}` ({corpus.stat().st_size / 1e6:.0f} MB), "
              f"Python {sys.version.split()[0]}, medians of up to {args.runs}")
    table: list[list[str]] = []
    spent = estimated = 0.0  # of the rows done: the machine's speed against the estimates
    for i, row in enumerate(rows):
        speed = min(3.0, max(0.5, spent / estimated)) if estimated else 1.0
        one = row.estimate(scale) * speed
        later = sum(r.estimate(scale) * speed for r in rows[i + 1:])
        left = deadline - time.monotonic()
        if left - later >= one:  # one run for every later row, the rest for this one
            runs = min(args.runs, row.max_runs, int((left - later) // one))
        else:
            runs = 1 if left >= one else 0
        print(f"== {row.name}: {runs} run(s), ~{one:.0f} s each; {left:.0f} s left", file=sys.stderr, flush=True)
        if runs < 1:
            table.append([f"{row.name}: skipped (no time left)", "", "", "", ""])
            _write(args.out, ctx, table, header)
            continue
        start = time.monotonic()
        try:
            cells = row.func(ctx, runs)
        except (Exception, SystemExit) as exc:  # one row failing must not lose the others
            cells = [[f"{row.name}: **failed** ({str(exc).strip().splitlines()[-1][:120] if str(exc) else exc!r})",
                      "", "", "", ""]]
            ctx.record[f"{row.name} failure"] = str(exc)
        took = time.monotonic() - start
        spent, estimated = spent + took, estimated + one / speed * runs
        for c in cells:
            c[-1] = f"{c[-1]}{'; ' if c[-1] else ''}{runs} run(s)"
        table += cells
        ctx.record.setdefault("seconds per row", {})[row.name] = took
        _write(args.out, ctx, table, header)
    print((args.out / "summary.md").read_text())


if __name__ == "__main__":
    # The cases must be importable by name in bench.child: run this module's main
    # as bench.many_cores, not as __main__.
    from bench.many_cores import main as _main

    _main()
