"""The three benchmarks: each measures bpestore and its peers side by side and
returns a Markdown section (title + table)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import cases, encode_paths
from bench.common import DATA, Case, Params, Result, markdown_table, measure


def _s(seconds: float) -> str:
    return f"{seconds:.2f}"


def _mb(result: Result) -> str:
    return f"{result.peak_mb:.0f}"


def _vs(ours: Result, peer: Result) -> list[str]:
    """Cells: bpestore s, peer s, ratio, the same for whole processes, bpestore RSS, peer RSS."""
    return [_s(ours.seconds), _s(peer.seconds), f"{ours.seconds / peer.seconds:.2f}×",
            f"{_s(ours.process_seconds)} / {_s(peer.process_seconds)} = "
            f"{ours.process_seconds / peer.process_seconds:.2f}×", _mb(ours), _mb(peer)]


VS_HEADERS = ["bpestore (s)", "peer (s)", "bpestore / peer",
              "whole process, imports included (s): bpestore / peer", "bpestore peak RSS (MB)",
              "peer peak RSS (MB)"]


def _installed(*modules: str) -> list[str]:
    from importlib.util import find_spec

    return [m for m in modules if find_spec(m) is not None]


def _size(corpus: Path) -> str:
    return f"{corpus.stat().st_size / 1e6:.1f} MB"


def ingest(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """Store.ingest into a fresh SQLite db vs HF read + pre-tokenize + count."""
    p = Params(corpus=str(corpus), vocab_size=32_000)
    peers = [Case("gigabpe train 32k (cold)", cases.gigabpe_train, p)] if _installed("gigabpe") else []
    ours, hf, *giga = measure([Case("bpestore ingest", cases.bpestore_ingest, p),
                               Case("HF train vocab 300", cases.hf_ingest, p), *peers], runs)
    rows = [[f"ingest `{name}` ({_size(corpus)})",
             f"HF `train([file])`, vocab {cases.INGEST_VOCAB}", *_vs(ours, hf)]]
    rows += [[f"ingest `{name}`", "gigabpe's whole cold training, vocab 32,000", *_vs(ours, g)] for g in giga]
    return "### Ingest\n\n" + markdown_table(["work", "peer", *VS_HEADERS], rows)


def train(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """Every training measure, beside HF's cold training."""
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        db = Path(tmp) / "trained.db"
        cases.prepare_trained_db(db, str(corpus), vocab_size)
        p = Params(corpus=str(corpus), db=str(db), vocab_size=vocab_size)
        cold, merge_phase, at_end, other, smaller, larger, resume, hf = measure([
            Case("bpestore ingest+train", cases.bpestore_train_cold, p),
            Case("bpestore retrain (merge phase)", cases.bpestore_retrain, p),
            Case("bpestore checkpoints at end only", cases.bpestore_checkpoint_at_end, p),
            Case("bpestore retrain, other tie-break", cases.bpestore_retrain_other, p),
            Case("bpestore smaller vocab", cases.bpestore_smaller, p),
            Case("bpestore larger vocab", cases.bpestore_larger, p),
            Case("bpestore resume from 50%", cases.bpestore_resume, p),
            Case("HF train", cases.hf_train, p)], runs)
        peers = {"gigabpe": cases.gigabpe_train, "rustbpe": cases.rustbpe_train, "bpeasy": cases.bpeasy_train}
        others = measure([Case(f"{m} train", peers[m], p) for m in _installed(*peers)], runs)
    hf_peer = f"HF `train([file])`, vocab {vocab_size:,}"
    rows = [
        [f"cold: ingest + train `{name}` ({_size(corpus)}), vocab {vocab_size:,}", hf_peer, *_vs(cold, hf)],
        ["retrain from stored counts, other tie-break (hf)", hf_peer, *_vs(other, hf)],
        [f"new version at vocab {vocab_size // 2:,} beside an equal run", hf_peer, *_vs(smaller, hf)],
        [f"new version at vocab {vocab_size * 5 // 4:,} beside an equal run", hf_peer, *_vs(larger, hf)],
        ["resume from 50% of the merges", "uninterrupted merge phase", *_vs(resume, merge_phase)],
        ["checkpoint every 1,000 merges (default)", "one checkpoint at the end", *_vs(merge_phase, at_end)],
    ]
    for peer in others:  # the other exact trainers, each a whole cold run on every core
        rows.insert(1, [f"cold: ingest + train `{name}`", f"{peer.label.split()[0]}, vocab {vocab_size:,}",
                        *_vs(cold, peer)])
        if peer.label.startswith("gigabpe"):
            rows.insert(2, ["retrain from stored counts, other tie-break (hf)", "gigabpe's cold run",
                            *_vs(other, peer)])
    return "### Train\n\n" + markdown_table(["work", "peer", *VS_HEADERS], rows)


def encode(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """GPT-2 encode of the whole text, one string, one thread of Python."""
    with cases.gpt2_db() as db:
        p = Params(corpus=str(corpus), db=db)
        results = measure([
            Case("tiktoken", cases.tiktoken_encode, p),
            Case("bpestore (cold word cache)", cases.bpestore_encode, p),
            Case("bpestore (warm word cache)", cases.bpestore_encode_warm, p),
            Case("HF tokenizers (one string)", cases.hf_encode, p)], runs)
    size = corpus.stat().st_size
    base = results[0]
    rows = [[r.label, f"{size / 1e6 / r.seconds:.2f}", _s(r.seconds),
             f"{r.seconds / base.seconds:.2f}×", _mb(r),
             "yes" if r.digest == base.digest else f"**no** ({r.digest})"] for r in results]
    title = f"### Encode GPT-2, `{name}` ({_size(corpus)}, {int(base.digest.split(':')[0]):,} tokens)"
    return title + "\n\n" + markdown_table(
        ["encoder", "MB/s", "median (s)", "time / tiktoken's", "peak RSS (MB)",
         "same ids as tiktoken"], rows)


def hf_merges(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """--tie-break hf against HF BpeTrainer fed the same text: the merge lists must be equal."""
    p = Params(corpus=str(corpus), vocab_size=vocab_size)
    ours, hf = measure([Case("bpestore ingest+train, hf tie-break", cases.bpestore_hf_tie_break, p),
                        Case("HF train_from_iterator", cases.hf_same_text, p)], runs)
    n_merges = vocab_size - 257
    same = "**yes**" if ours.digest == hf.digest else f"**no** ({ours.digest} vs {hf.digest})"
    rows = [[f"cold: ingest + train `{name}` ({_size(corpus)}), vocab {vocab_size:,}, `--tie-break hf`",
             "HF `train_from_iterator`, same text", *_vs(ours, hf)]]
    return (f"### Merge list of `--tie-break hf` vs Hugging Face\n\nIdentical merge lists "
            f"({n_merges:,} merges expected): {same}\n\n" + markdown_table(["work", "peer", *VS_HEADERS], rows))


SUITES: dict[str, Callable[[Path, str, int, int], str]] = {
    "ingest": ingest, "train": train, "encode": encode, "hf-merges": hf_merges,
    "encoder": encode_paths.encoder, "encoder-worst": encode_paths.encoder_worst,
    "encode-workers": encode_paths.encode_workers}
