"""Corpus generations: what versioned word counts cost, and the
long-running incremental training they allow.

``generations``: the corpus cut at line ends into ``--slices`` (10) equal slices,
ingested one after the other (``WORKERS`` processes) into one fresh SQLite store,
three ways: (a) today's unversioned store, (b) the versioned store with nothing
pinned, (c) the versioned store with a version pinning every generation (after
each ingest, untimed, ``train(f"pin{i}", corpus="web", merges=1)`` pins the
newest). Reported: ingest times, the database size after the ingests, reading
the counts of several pinned generations (``word_counts("web@G")``) against
the newest (``word_counts("web")``), and ``compact("web")``: in (b), in (c),
and in (c) again once the versions pinning the generations not read are
deleted by hand (straight SQL: there is no ``rm`` yet).

``incremental``: two days of a user's work, end to end. Day 1: ingest the first
half, train ``en@1`` (``--vocab-size``, 32,000 in the record). Day 2: ingest the
second half while ``en@2`` (1.25x the vocabulary, on ``web@1``) trains in
another process; then ``en@3`` extends ``en@1`` on the newest generation, ``en@4``
is a plain retrain at ``--vocab-size`` on it, and ``verify`` checks ``en@1`` and
``en@2``. The timed row, day 2 = the second half's ingest + ``en@4``, is set
beside Hugging Face training cold on the whole file, beside the same two days
with ``en@2`` trained before the ingest (so the ingest has both cores), and
beside today's store doing what it can of them (day 1, day 2's ingest, the
extension and the retrain: it cannot train on a past generation).

Today's store, explicitly: the children of the (a) cases import ``bpestore``
from a checkout of ``BASELINE`` (main before generations), not from this
tree. ``--baseline PATH`` names a directory holding that commit's ``bpestore/``
and ``migrations/`` (e.g. ``git worktree add /tmp/bench-baseline 3c3ad42``);
without it the suite extracts them once with ``git archive 3c3ad42 bpestore
migrations`` into ``bench/.data/baseline-3c3ad42``. The case function puts the
path first on ``sys.path`` before its first ``import bpestore`` (the ``bench``
package stays this tree's) and fails if ``bpestore`` came from elsewhere.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import cases
from bench.common import DATA, REPO, Case, Params, markdown_table, measure
from bench.ingestion import WORKERS, TreeResult, _split, run_tree

BASELINE = "3c3ad42"
CORPUS = "web"
READS = 3  # reads of each generation's counts per run (interleaved; the median is kept)


# -- which bpestore a child runs ---------------------------------------------------------------
def baseline_checkout(path: str | None) -> Path:
    """The checkout of today's store the (a) cases import: ``path``, or BASELINE extracted once."""
    if path:
        root = Path(path).resolve()
    else:
        root = DATA / f"baseline-{BASELINE}"
        if not (root / "bpestore" / "__init__.py").exists():
            root.mkdir(parents=True, exist_ok=True)
            archive = subprocess.run(["git", "archive", BASELINE, "bpestore", "migrations"], cwd=REPO,
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    if not (root / "bpestore" / "__init__.py").exists():
        raise SystemExit(f"Error: no bpestore package in the baseline checkout {root}")
    return root


def _bpestore(p: Params) -> Any:
    """The bpestore module: the baseline checkout's if ``p.code`` names one, else this tree's."""
    if p.code:
        sys.path.insert(0, p.code)
    import bpestore

    if p.code and not Path(bpestore.__file__).resolve().is_relative_to(Path(p.code).resolve()):
        raise RuntimeError(f"bpestore came from {bpestore.__file__}, not from {p.code}")
    if not p.code and not hasattr(bpestore.Store, "corpus_log"):
        raise RuntimeError(f"the bpestore of {REPO} has no corpus generations (Store.corpus_log)")
    return bpestore


def _timed(func, *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = func(*args, **kwargs)
    return time.perf_counter() - start, value


def _files(folder: str) -> list[Path]:
    """The slices ``ingestion._split`` wrote, in order."""
    return sorted(Path(folder).glob("*/*.txt"))


def _db_bytes(db: Path) -> dict[str, int]:
    """The database's size once its WAL is checkpointed, and its word-count rows."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("word_counts", "word_count_history") if t in tables}
    wal = db.with_name(db.name + "-wal")
    return {"bytes": db.stat().st_size + (wal.stat().st_size if wal.exists() else 0), **rows}


# -- the timed work of "generations" (run inside bench.child) --------------------------------
def _ten_ingests(p: Params, pin: bool) -> cases.Timed:
    bpestore = _bpestore(p)
    db = Path(p.tmp) / "bench.db"
    slices = _files(p.corpus)

    def run() -> dict:
        store = bpestore.open(db)
        ingest_s = []
        for i, path in enumerate(slices, 1):
            seconds, _ = _timed(store.ingest, CORPUS, [path], workers=WORKERS)
            ingest_s.append(seconds)
            if pin:
                store.train(f"pin{i}", corpus=CORPUS, merges=1)
        store.close()
        details: dict[str, Any] = {"ingest_s": ingest_s, **_db_bytes(db)}
        store = bpestore.open(db)
        reads: dict[str, list[float]] = {}
        pinned = _pinned_refs(len(slices)) if pin else []
        for _ in range(READS):
            for ref in [CORPUS, *pinned]:
                seconds, counts = _timed(store.word_counts, ref)
                reads.setdefault(ref, []).append(seconds)
                details.setdefault("read_words", {})[ref] = len(counts)
                if not p.code:  # a versioned store: check the generation's counts add up to its log
                    info = store.corpus(ref)
                    if (len(counts), sum(counts.values())) != (info.n_distinct, info.n_words):
                        raise RuntimeError(f"{ref}: {len(counts)} words, {sum(counts.values())} in all; "
                                           f"its log says {info.n_distinct}, {info.n_words}")
        details["read_s"] = {ref: statistics.median(times) for ref, times in reads.items()}
        if not p.code:
            seconds, compacted = _timed(store.compact, CORPUS)
            details["compact"] = {**compacted, "seconds": seconds}
        store.close()
        if pin:  # the pins of the generations not read above go, as by hand (no `rm` yet), then compact
            kept = {int(ref.split("@")[1]) for ref in pinned}
            _remove_tokenizers(db, [f"pin{i}" for i in range(1, len(slices) + 1) if i not in kept])
            store = bpestore.open(db)
            seconds, compacted = _timed(store.compact, CORPUS)
            details["compact after removing pins"] = {**compacted, "seconds": seconds}
            store.close()
        return details
    return run


def _remove_tokenizers(db: Path, names: list[str]) -> None:
    """Delete tokenizers and, by cascade, their versions, straight in SQLite."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.executemany("DELETE FROM tokenizers WHERE name = ?", [(n,) for n in names])


def _pinned_refs(n: int) -> list[str]:
    """The pinned generations whose reads are timed: the first, some middle ones, the one before
    the newest (the newest is read as ``web``)."""
    return [f"{CORPUS}@{g}" for g in sorted({1, n // 3, 2 * n // 3, n - 1}) if 1 <= g < n]


def ingests_unversioned(p: Params) -> cases.Timed:
    """(a) and (b): the slices into one store, nothing pinned (``p.code`` picks the store)."""
    return _ten_ingests(p, pin=False)


def ingests_pinned(p: Params) -> cases.Timed:
    """(c): the slices into one store, a version pinning every generation."""
    return _ten_ingests(p, pin=True)


# -- the timed work of "incremental" (run inside bench.child) ---------------------------------
# en@2 on generation 1, in its own process, while the parent ingests the second half.
TRAIN_ON_GENERATION_1 = """
import json, sys, time
import bpestore
store = bpestore.open(sys.argv[1])
start = time.perf_counter()
info = store.train("en", corpus=sys.argv[2], vocab_size=int(sys.argv[3]))
print(json.dumps({"seconds": time.perf_counter() - start, "ref": f"{info.name}@{info.number}",
                  "generation": info.corpus_generation}))
"""


def two_days(p: Params) -> cases.Timed:
    """The two days of incremental training; today's store (``p.code``) does what it can:
    day 1, then day 2's ingest and retrain, and the extension of en@1."""
    return _two_days(p, alongside=True)


def two_days_en2_first(p: Params) -> cases.Timed:
    """``two_days`` with en@2 trained before the second half's ingest, not alongside it
    (the ingest then has both cores, as today's store's has)."""
    return _two_days(p, alongside=False)


def _two_days(p: Params, alongside: bool) -> cases.Timed:
    bpestore = _bpestore(p)
    db = Path(p.tmp) / "bench.db"
    first, second = _files(p.corpus)
    vocab, larger = p.vocab_size, p.vocab_size * 5 // 4

    def run() -> dict:
        store = bpestore.open(db)
        versioned = not p.code
        s: dict[str, float] = {}
        details: dict[str, Any] = {"s": s}
        s["day 1 ingest"], _ = _timed(store.ingest, CORPUS, [first], workers=WORKERS)
        s["day 1 train en@1"], _ = _timed(store.train, "en", corpus=CORPUS, vocab_size=vocab)
        if versioned:
            started = time.perf_counter()
            other = subprocess.Popen([sys.executable, "-c", TRAIN_ON_GENERATION_1, str(db), f"{CORPUS}@1",
                                      str(larger)], stdout=subprocess.PIPE, text=True)
        if versioned and not alongside:
            other.wait()
        s["day 2 ingest"], _ = _timed(store.ingest, CORPUS, [second], workers=WORKERS)
        if versioned:
            out, _ = other.communicate()
            if other.returncode:
                raise RuntimeError(f"training en@2 on {CORPUS}@1 failed (exit {other.returncode})")
            report = json.loads(out.strip().splitlines()[-1])
            s["en@2 in the other process"] = report["seconds"]
            if alongside:
                s["waiting for en@2 after the ingest"] = time.perf_counter() - started - s["day 2 ingest"]
            details["en@2"] = report
        s["extend en@1 on the newest"], ext = _timed(store.train, "en", corpus=CORPUS, parent="en@1",
                                                      vocab_size=larger)
        s["retrain on the newest"], retrain = _timed(store.train, "en", corpus=CORPUS, vocab_size=vocab)
        details["refs"] = [f"{v.name}@{v.number}" for v in (ext, retrain)]
        if versioned:
            details["generations"] = {f"{v.name}@{v.number}": v.corpus_generation for v in store.versions("en")}
            for ref in ("en@1", "en@2"):
                s[f"verify {ref}"], result = _timed(store.verify, ref)
                details[f"verify {ref}"] = result.ok
        s["day 2"] = s["day 2 ingest"] + s["retrain on the newest"]
        store.close()
        return details
    return run


# -- aggregation ---------------------------------------------------------------------------------
class Detailed(TreeResult):
    """A TreeResult that keeps each run's details (what the timed callable returned)."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.details: list[dict] = []

    def add(self, report: dict) -> str:
        details = report.get("details") or {}
        self.details.append(details)
        line = super().add(report)
        if "ingest_s" in details:
            return f"{line}; ingests {sum(details['ingest_s']):.2f} s"
        if "s" in details:
            return f"{line}; day 2 {details['s']['day 2']:.2f} s"
        return line

    def median(self, key) -> float:
        """The median over runs of ``key(details)``."""
        return statistics.median(key(d) for d in self.details)


def measure_detailed(suite: str, cases_: list[Case], runs: int) -> list[Detailed]:
    """``ingestion.measure_tree``, keeping what each run's timed callable returned (also
    written, every run's, to bench/.data/<suite>-<time>.json)."""
    results = measure(cases_, runs, run=run_tree, result_type=Detailed)
    out = DATA / f"{suite}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({r.label: {"seconds": r.times, "details": r.details} for r in results}, indent=1))
    print(f"  every run's figures: {out}", file=sys.stderr, flush=True)
    return results


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def generations(corpus: Path, name: str, runs: int, vocab_size: int, *, baseline: str | None = None,
                slices: int = 10) -> str:
    """Item 5: ten successive ingests, unversioned vs versioned (nothing pinned, all pinned)."""
    code = str(baseline_checkout(baseline))
    folder = str(_split(corpus, slices))
    today, unpinned, pinned = measure_detailed("generations", [
        Case(f"(a) today's store ({BASELINE})", ingests_unversioned, Params(corpus=folder, code=code)),
        Case("(b) generations, nothing pinned", ingests_unversioned, Params(corpus=folder)),
        Case("(c) generations, every one pinned", ingests_pinned, Params(corpus=folder))], runs)

    def total(r: Detailed) -> float:
        return r.median(lambda d: sum(d["ingest_s"]))

    def size(r: Detailed) -> float:
        return r.median(lambda d: d["bytes"])

    def history(r: Detailed) -> str:
        return f"{r.median(lambda d: d.get('word_count_history', 0)):,.0f}"

    rows = [[r.label, f"{total(r):.2f}", f"{r.median(lambda d: statistics.median(d['ingest_s'])):.2f}",
             f"{total(r) / total(today):.2f}×", _mb(size(r)), f"{size(r) / size(today):.2f}×",
             f"{r.median(lambda d: d['word_counts']):,.0f}", history(r),
             f"{r.median(lambda d: d['read_s'][CORPUS]):.3f}"] for r in (today, unpinned, pinned)]
    each = f"`{name}` in {slices} slices of {corpus.stat().st_size / slices / 1e6:.1f} MB"
    ingest_table = markdown_table(
        ["store", "ingests, total (s)", "per ingest, median (s)", "time / (a)", "database (MB)",
         "size / (a)", "word_counts rows", "history rows", "read newest (s)"], rows)

    newest = pinned.median(lambda d: d["read_s"][CORPUS])
    words = pinned.details[0]["read_words"]
    refs = [ref for ref in pinned.details[0]["read_s"] if ref != CORPUS]

    def read_row(ref: str) -> list[str]:
        seconds = pinned.median(lambda d: d["read_s"][ref])
        per_word = seconds / words[ref] / (newest / words[CORPUS])
        return [f"`{ref}` (pinned)", f"{words[ref]:,}", f"{seconds:.3f}", f"{newest:.3f}", f"{seconds / newest:.2f}×",
                f"{per_word:.2f}×"]
    read_table = markdown_table(["read `word_counts`", "words", "time (s)", f"newest `{CORPUS}` (s, "
                                 f"{words[CORPUS]:,} words)", "time / newest's", "per word / newest's"],
                                [read_row(ref) for ref in refs])

    def compact_row(label: str, r: Detailed, key: str) -> list[str]:
        return [label, f"{r.median(lambda d: d[key]['rows_freed']):,.0f}",
                _mb(r.median(lambda d: d[key]["bytes_freed"])), ", ".join(map(str, r.details[0][key]["kept"])) or "-",
                f"{r.median(lambda d: d[key]['seconds']):.3f}"]
    kept = ", ".join(ref.split("@")[1] for ref in refs)
    compact_rows = [compact_row(unpinned.label, unpinned, "compact"), compact_row(pinned.label, pinned, "compact"),
                    compact_row(f"(c), then the versions pinning all but {kept} and the newest removed",
                                pinned, "compact after removing pins")]
    compact_table = markdown_table(["store", "rows freed", "MB freed", "generations kept", "time (s)"],
                                   compact_rows)
    return (f"### Corpus generations: {each}, {WORKERS} workers, one SQLite store\n\n" + ingest_table
            + f"\n\n#### Reading a pinned generation vs the newest (store (c), median of {READS} reads a run)\n\n"
            + read_table + f"\n\n#### `compact(\"{CORPUS}\")` after the ingests\n\n" + compact_table)


def incremental(corpus: Path, name: str, runs: int, vocab_size: int, *, baseline: str | None = None,
                slices: int = 10) -> str:
    """Item 7: long-running incremental training over two days, vs HF cold and today's store."""
    code = str(baseline_checkout(baseline))
    halves = str(_split(corpus, 2))
    larger = vocab_size * 5 // 4
    ours, first, today, hf = measure_detailed("incremental", [
        Case("generations: two days", two_days, Params(corpus=halves, vocab_size=vocab_size)),
        Case("generations: two days, en@2 before the ingest", two_days_en2_first,
             Params(corpus=halves, vocab_size=vocab_size)),
        Case(f"today's store ({BASELINE}): two days", two_days,
             Params(corpus=halves, vocab_size=vocab_size, code=code)),
        Case(f"HF train vocab {vocab_size}", cases.hf_train, Params(corpus=str(corpus), vocab_size=vocab_size))],
        runs)
    steps = {
        "day 1 ingest": "day 1: ingest the first half",
        "day 1 train en@1": f"day 1: train `en@1`, vocab {vocab_size:,}",
        "day 2 ingest": "day 2: ingest the second half",
        "en@2 in the other process": f"`en@2`, vocab {larger:,} on `{CORPUS}@1`, in another process",
        "waiting for en@2 after the ingest": "waiting for `en@2` once the ingest is done",
        "extend en@1 on the newest": f"`train(\"en\", corpus=\"{CORPUS}\", parent=\"en@1\", vocab_size={larger})`",
        "retrain on the newest": f"plain retrain at {vocab_size:,} on the newest generation",
        "verify en@1": "`verify(\"en@1\")`",
        "verify en@2": "`verify(\"en@2\")`",
    }

    def cell(r: Detailed, key: str) -> str:
        return f"{r.median(lambda d: d['s'][key]):.2f}" if key in r.details[0]["s"] else "-"
    results = (ours, first, today)
    rows = [[label, *(cell(r, key) for r in results)] for key, label in steps.items()]
    day2 = [r.median(lambda d: d["s"]["day 2"]) for r in results]
    rows += [["**day 2 = second half's ingest + retrain**", *(f"**{t:.2f}**" for t in day2)],
             [f"HF `train([file])` cold on the whole file, vocab {vocab_size:,}", *[f"{hf.seconds:.2f}"] * 3],
             ["**day 2 / HF cold**", *(f"**{t / hf.seconds:.2f}×**" for t in day2)]]
    last = ours.details[-1]
    checks = (f"Versions: en@2 = {last.get('en@2', {}).get('ref')} on generation "
              f"{last.get('en@2', {}).get('generation')}; extension and retrain = {', '.join(last.get('refs', []))}; "
              f"pinned generations {last.get('generations')}; verify en@1 "
              f"{'passed' if all(d.get('verify en@1') for d in ours.details + first.details) else '**FAILED**'}, en@2 "
              f"{'passed' if all(d.get('verify en@2') for d in ours.details + first.details) else '**FAILED**'}"
              " in every run.")
    return (f"### Incremental training over two days: `{name}` ({corpus.stat().st_size / 1e6:.1f} MB) in two "
            f"halves, {WORKERS} workers\n\n"
            + markdown_table(["step", "generations, `en@2` alongside the ingest (s)",
                              "generations, `en@2` before the ingest (s)", f"today's store {BASELINE} (s)"], rows)
            + "\n\n" + checks)


SUITES = {"generations": generations, "incremental": incremental}
