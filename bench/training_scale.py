"""Training at scale: the synthetic corpus of bench/synthetic.py, vocab 64,000.

* cold: ``Store.ingest`` (2 workers) + ``Store.train`` into a fresh SQLite store,
  against HF ``train([file])`` with the same vocabulary; time of the timed call and
  peak memory of the whole process tree (RSS and PSS, sampled every 100 ms);
* the merge phase alone (training from counts already stored), on the compiled
  merge core and on the pure-Python one (the reference).

    python -m bench training-scale [--scale 0.1] [--runs 3] [--vocab-size 64000]

``--scale`` sizes the synthetic corpus (1: 30 M words, ~2.3 M distinct); it is
generated once per scale under bench/.data. The retrain / prefix-copy rows for
english_100M are the ``train`` suite's: ``python -m bench train --corpus english_100M
--vocab-size 32000``.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from bench import cases, synthetic
from bench.common import DATA, Case, Params, markdown_table
from bench.ingestion import WORKERS, measure_tree

SCALE = 0.1  # the default of --scale
VOCAB = 64_000


def corpus_at(scale: float) -> Path:
    """The synthetic corpus at ``scale`` (random seed zero), made once under bench/.data."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"synthetic-{scale:g}.txt"
    if not path.exists():
        synthetic.generate(path, scale=scale, seed=0)
    return path


# -- the timed work (run inside bench.child) ---------------------------------------------
def bpestore_cold(p: Params) -> cases.Timed:
    """Ingest (2 workers) + train, fresh SQLite."""
    import bpestore

    store = bpestore.open(Path(p.tmp) / "bench.db")

    def run() -> None:
        store.ingest("syn", [p.corpus], workers=WORKERS)
        store.train("syn", corpus="syn", vocab_size=p.vocab_size)
    return run


def bpestore_ingest(p: Params) -> cases.Timed:
    """Ingest alone (2 workers), fresh SQLite: the store-side part of the cold row."""
    import bpestore

    store = bpestore.open(Path(p.tmp) / "bench.db")
    return lambda: store.ingest("syn", [p.corpus], workers=WORKERS)


def hf_cold(p: Params) -> cases.Timed:
    return cases._hf_train(p.corpus, p.vocab_size, [])


def bpestore_retrain(p: Params) -> cases.Timed:
    """Train from stored counts (the merge phase): the compiled merge core, or the pure-Python
    one where ``p.pure`` (BPESTORE_PURE in the child)."""
    import shutil

    import bpestore
    from bpestore.trainer import merge_core

    if not p.pure and not merge_core().startswith("compiled"):
        raise SystemExit(f"Error: the compiled merge core is not used: {merge_core()}")
    db = Path(p.tmp) / "bench.db"
    shutil.copyfile(p.db, db)
    store = bpestore.open(db)
    return lambda: store.train("syn", corpus="syn", vocab_size=p.vocab_size)


# -- the suite -----------------------------------------------------------------------------
def training_scale(corpus: Path, name: str, runs: int, vocab_size: int, scale: float = SCALE) -> str:
    """The synthetic corpus at ``scale`` (``corpus`` is not used)."""
    vocab = VOCAB if vocab_size == 10_000 else vocab_size  # 10,000 is bench's default: use the target's
    text = corpus_at(scale)
    size = f"{text.stat().st_size / 1e6:.0f} MB"
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        import bpestore

        ingested = Path(tmp) / "ingested.db"
        with bpestore.open(ingested) as store:
            store.ingest("syn", [str(text)], workers=WORKERS)
            distinct = store.corpus("syn").n_distinct
        p = Params(corpus=str(text), db=str(ingested), vocab_size=vocab)
        cold, hf, compiled, pure, ingest = measure_tree([
            Case("bpestore ingest+train", bpestore_cold, p),
            Case("HF train", hf_cold, p),
            Case("bpestore train (compiled core)", bpestore_retrain, p),
            Case("bpestore train (pure-Python core)", bpestore_retrain, replace(p, pure=True)),
            Case("bpestore ingest", bpestore_ingest, p)], runs)

    def row(work, peer, ours, theirs):
        return [work, peer, f"{ours.seconds:.1f}", f"{theirs.seconds:.1f}", f"{ours.seconds / theirs.seconds:.2f}×",
                f"{ours.rss:.0f}", f"{theirs.rss:.0f}", f"{ours.pss:.0f} / {theirs.pss:.0f}"]

    hf_peer = f"HF `train([file])`, vocab {vocab:,}"
    rows = [
        row(f"ingest ({WORKERS} workers) + train, synthetic scale {scale:g} ({size}, {distinct:,} distinct words), "
            f"vocab {vocab:,}", hf_peer, cold, hf),
        row(f"ingest alone ({WORKERS} workers), fresh SQLite", hf_peer, ingest, hf),
        row("train from stored counts, compiled merge core", hf_peer, compiled, hf),
        row("train from stored counts, compiled merge core", "same, pure-Python core", compiled, pure),
    ]
    return (f"### Training at scale (synthetic corpus, scale {scale:g}, medians of {runs})\n\n"
            + markdown_table(["work", "peer", "bpestore (s)", "peer (s)", "bpestore / peer",
                              "bpestore tree peak RSS (MB)", "peer tree peak RSS (MB)", "peak PSS (MB) ours / peer"],
                             rows))


def retrain(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """Training from stored counts (``cases.bpestore_retrain``: a new version, nothing to reuse, a fresh
    process per run) beside gigabpe's whole cold run on the same text, 2 threads, interleaved."""
    return _retrain(corpus, f"`{name}`", runs, 32_000 if vocab_size == 10_000 else vocab_size)


def retrain_synthetic(corpus: Path, name: str, runs: int, vocab_size: int, scale: float = SCALE) -> str:
    """``retrain`` on the synthetic corpus at ``--scale`` (``corpus`` not used), vocab 64,000."""
    return _retrain(corpus_at(scale), f"synthetic scale {scale:g}", runs,
                    VOCAB if vocab_size == 10_000 else vocab_size)


def _retrain(text: Path, what: str, runs: int, vocab: int) -> str:
    import bpestore

    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        with bpestore.open(Path(tmp) / "ingested.db") as store:
            store.ingest("bench", [str(text)])
        p = Params(corpus=str(text), db=str(Path(tmp) / "trained.db"), vocab_size=vocab, workers=WORKERS)
        ours, giga = measure_tree([Case("bpestore retrain", cases.bpestore_retrain, p),
                                   Case(f"gigabpe cold, {WORKERS} threads", cases.gigabpe_train, p)], runs)
    rows = [[r.label, f"{r.seconds:.2f}", f"{r.process_seconds:.2f}", f"{r.process_cpu_seconds:.2f}", f"{r.rss:.0f}",
             f"{r.process_seconds / giga.process_seconds:.2f}×", f"{r.rss / giga.rss:.2f}×"] for r in (ours, giga)]
    return (f"### Retrain from stored counts vs gigabpe's cold run: {what}, vocab {vocab:,} (medians of {runs})\n\n"
            + markdown_table(["case (fresh process)", "timed call (s)", "process wall (s)", "process CPU (s)",
                              "peak RSS (MB)", "wall / gigabpe's", "RSS / gigabpe's"], rows))


SUITES = {"training-scale": training_scale, "retrain": retrain, "retrain-synthetic": retrain_synthetic}
