"""`bpestore plot`, each a fresh process as a user runs it,
GPT-2 (imported from the shared files into bench/.data/queries.db) on the corpus:

* ``encode --file --out`` (one encoding of the file) and ``stats`` (the
  measure: no more than one encoding per version) beside ``plot --json`` (the
  curve, merge counts and lengths) and ``plot --out chart.png`` (drawn too);
* the same for a character-alphabet version (2,000 tokens, trained on the corpus into
  bench/.data/charts.db once), which the pure-Python encoder runs and whose chart
  comes from its distinct pre-tokens;
* the peer: tiktoken building one Encoding per point from the first K ranks and
  encoding the whole file with each, the way a curve is made without bpestore;
  its token counts must equal ``plot``'s, point by point (checked).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DATA, REPO, markdown_table
from bench.queries import _store

POINTS = 10

PEER = """
import json, sys, time
import tiktoken
from tiktoken_ext import openai_public
from bpestore.analysis import curve_ranks
from bpestore.formats.gpt2 import str_to_token
started = time.perf_counter()
vocab, corpus, points = sys.argv[1], sys.argv[2], int(sys.argv[3])
encoder = json.load(open(vocab, encoding="utf-8"))
ranks = {str_to_token(s): i for s, i in encoder.items() if s != "<|endoftext|>"}
text = open(corpus, encoding="utf-8").read()
tokens = []
for k in curve_ranks(len(ranks) - 256, points):
    enc = tiktoken.Encoding(name=f"gpt2_{k}", pat_str=openai_public.r50k_pat_str,
                            mergeable_ranks={b: r for b, r in ranks.items() if r < 256 + k},
                            special_tokens={"<|endoftext|>": 50256})
    tokens.append(len(enc.encode(text, allowed_special="all")))
print(json.dumps(tokens))
print(f"inner {time.perf_counter() - started:.3f}", file=sys.stderr)
"""


def _chars_store(path: Path, corpus: Path) -> Path:
    """bench/.data/charts-CORPUS.db with chars@1: 2,000 tokens over the characters of the corpus."""
    if path.exists():
        return path
    import bpestore

    partial = path.with_suffix(".part")
    partial.unlink(missing_ok=True)
    store = bpestore.open(partial)
    store.ingest("corpus", [corpus])
    store.train("chars", corpus="corpus", vocab_size=2000, alphabet="chars", unk_token="<unk>")
    store.close()
    partial.rename(path)
    return path


def _run(argv: list[str]) -> tuple[float, float, str]:
    """Wall-clock and CPU (user + system) seconds of one run, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True).stdout
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def plot(corpus: Path, corpus_name: str, runs: int, vocab_size: int) -> str:
    db = _store(DATA / "queries.db")
    cli = [sys.executable, str(REPO / "cli.py"), "--db", str(db)]
    chars_cli = [sys.executable, str(REPO / "cli.py"), "--db", str(_chars_store(DATA / f"charts-{corpus_name}.db",
                                                                               corpus))]
    vocab_json = REPO.parent / "shared" / "corpora" / "gpt2_vocab.json"
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            f"`bpestore encode gpt2 --file {corpus_name} --out ids.bin`":
                cli + ["encode", "gpt2", "--file", str(corpus), "--out", str(Path(tmp) / "ids.bin"), "--quiet"],
            f"`bpestore stats gpt2 --file {corpus_name}`": cli + ["stats", "gpt2", "--file", str(corpus)],
            f"`bpestore plot gpt2 --file {corpus_name} --json --points {POINTS}`":
                cli + ["plot", "gpt2", "--file", str(corpus), "--json", "--points", str(POINTS)],
            f"`bpestore plot gpt2 --file {corpus_name} --out chart.png` (50 points)":
                cli + ["plot", "gpt2", "--file", str(corpus), "--out", str(Path(tmp) / "chart.png")],
            f"`bpestore stats chars --file {corpus_name}` (2,000 characters and merges)":
                chars_cli + ["stats", "chars", "--file", str(corpus)],
            f"`bpestore plot chars --file {corpus_name} --json --points {POINTS}`":
                chars_cli + ["plot", "chars", "--file", str(corpus), "--json", "--points", str(POINTS)],
            f"peer: tiktoken, one Encoding of the first K ranks per point, {POINTS} points":
                [sys.executable, "-c", PEER, str(vocab_json), str(corpus), str(POINTS)],
        }
        found: dict[str, list[tuple[float, float, str]]] = {name: [] for name in cases}
        for _ in range(runs):  # interleaved, so that the machine's load falls on every case alike
            for name, argv in cases.items():
                found[name].append(_run(argv))
        for name, runs_of in found.items():
            print(f"{name}: wall " + " ".join(f"{w:.3f}" for w, _, _ in runs_of) + ", cpu "
                  + " ".join(f"{c:.3f}" for _, c, _ in runs_of), file=sys.stderr, flush=True)
    names = list(cases)
    ours = [p["tokens"] for p in json.loads(found[names[2]][0][2])[0]["curve"]]
    peer = json.loads(found[names[-1]][0][2])
    if ours != peer:
        raise SystemExit(f"the curves differ: bpestore {ours}, tiktoken {peer}")
    wall = {name: statistics.median(w for w, _, _ in r) for name, r in found.items()}
    cpu = {name: statistics.median(c for _, c, _ in r) for name, r in found.items()}
    encode = names[0]
    rows = [[name, f"{wall[name]:.3f}", f"{cpu[name]:.3f}",
             f"{wall[name] / wall[encode]:.2f}x encode's wall, {cpu[name] / cpu[encode]:.2f}x its CPU"]
            for name in names]
    rows[0][3] = ""
    rows[-1][3] += f"; token counts equal plot's at all {len(ours)} points"
    stats_chars, plot_chars = names[4], names[5]
    rows[5][3] = (f"{wall[plot_chars] / wall[stats_chars]:.2f}x stats chars' wall, "
                  f"{cpu[plot_chars] / cpu[stats_chars]:.2f}x its CPU")
    return (f"## bpestore plot (fresh processes, medians of {runs})\n\n"
            + markdown_table(["command", "wall (s)", "CPU (s)", "note"], rows))


SUITES = {"plot": plot}
