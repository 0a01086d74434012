"""Benchmark bpestore against Hugging Face tokenizers and tiktoken.

ingest: Store.ingest into a fresh SQLite db vs HF training a 300-token vocab
(read + pre-tokenize + count). train: ingest + train, and retraining from the
stored counts, vs HF training. encode: GPT-2 encode_ordinary vs tiktoken and HF.
generations, incremental: corpus generations vs today's unversioned
store (--baseline) and HF (bench/generations.py says how).
ingest-workers, encode-workers: ingest and encode --out at each --workers count
vs HF / tiktoken on as many threads, with the process tree's PSS.
ingest-patterns: ingest with the gpt2, cl100k and o200k patterns, counting core vs regex vs HF.
startup, first-encode-gpt2: fresh processes as a user runs them (bench/startup.py).
first-encode: a fresh process's imports + load + first encode, cl100k/o200k from a store vs tiktoken and
gigatoken from the rank files, Japanese and english (bench/first_encode.py).
trained-encode: a 64k version trained on 20 MB of english_100M (cl100k pattern) beside imported cl100k,
documents seen once (bench/trained_encode.py).
queries: vocab --grep on 200,000 tokens, stats vs encode (bench/queries.py).
training-scale: ingest + train of the synthetic corpus (bench/synthetic.py, --scale) vs HF,
compiled vs pure-Python merge core (bench/training_scale.py); retrain, retrain-synthetic: training from
stored counts beside gigabpe's whole cold run (bench/training_scale.py).
plot: plot's curve vs encode, stats and tiktoken with a prefix of the ranks per point (bench/charts.py).
web: /api/encode of `bpestore serve` on 1,000 characters vs the inner call and peers (bench/web.py).
web-pages: first render of each page, a 10 kB playground update, the largest response, in Chromium (bench/web_pages.py).
phases, phases-synthetic: cold ingest + train phase by phase (serial / parallel) at each --workers count,
and the Amdahl projection to --project workers (bench/phases.py); phases-ingest, phases-ingest-x4: the
ingest alone (x4: the corpus four times over, the 400 MB row).
ingest-sources: the corpus as 2,000 files and as 10 files beside one file, at each --workers (bench/ingestion.py).
fixed-costs: the everyday commands in a fresh process, SQLite (and PostgreSQL: BPESTORE_BENCH_PG_URL).
dask-count: counting on a Dask LocalCluster + ingest --counts vs ingest --workers 2 (bench/dask_count.py).
encode-peers: bpestore's encoder beside tiktoken, quicktok-v1, bpe-openai, rs-bpe and HF in one process,
gpt2/cl100k/o200k, english, code and five languages; --threads scaling (bench/encode_peers.py).
Each case runs in a fresh process, --runs times; the table shows medians.
"""

from __future__ import annotations

import argparse
import inspect
import platform
import shlex
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

from bench.charts import SUITES as CHART_SUITES
from bench.common import MIXES, REPO, prepare_corpus
from bench.dask_count import SUITES as DASK_SUITES
from bench.encode_peers import SUITES as PEER_SUITES
from bench.first_encode import SUITES as FIRST_ENCODE_SUITES
from bench.fixed_costs import SUITES as FIXED_COST_SUITES
from bench.generations import BASELINE
from bench.generations import SUITES as GENERATION_SUITES
from bench.ingestion import SUITES as INGESTION_SUITES
from bench.phases import SUITES as PHASE_SUITES
from bench.queries import SUITES as QUERY_SUITES
from bench.startup import BASELINE as STARTUP_BASELINE
from bench.startup import SUITES as STARTUP_SUITES
from bench.suites import SUITES
from bench.trained_encode import SUITES as TRAINED_ENCODE_SUITES
from bench.training_scale import SUITES as TRAINING_SCALE_SUITES
from bench.web import SUITES as WEB_SUITES
from bench.web_pages import SUITES as WEB_PAGE_SUITES

SUITES = {**SUITES, **INGESTION_SUITES, **GENERATION_SUITES, **STARTUP_SUITES, **QUERY_SUITES,
          **CHART_SUITES, **WEB_SUITES, **WEB_PAGE_SUITES, **DASK_SUITES, **TRAINING_SCALE_SUITES, **PHASE_SUITES,
          **FIXED_COST_SUITES, **PEER_SUITES, **FIRST_ENCODE_SUITES,
          **TRAINED_ENCODE_SUITES}


def _versions() -> str:
    """Python, peers and the bpestore commit, for the record."""
    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "missing"
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip() or "?"
    return (f"Python {platform.python_version()}, tokenizers {v('tokenizers')}, "
            f"tiktoken {v('tiktoken')}, bpestore {commit}")


def _taken(suite, options: dict) -> dict:
    """The options a suite's function takes (as keyword parameters of the same names)."""
    accepted = inspect.signature(suite).parameters
    return {k: v for k, v in options.items() if k in accepted}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=[*SUITES, "all"])
    parser.add_argument("--corpus", default="english_medium",
                        help="a file of the shared corpora (NAME, NAME.txt or NAME.txt.xz) "
                             f"or a mix: {', '.join(MIXES)} (default: english_medium)")
    parser.add_argument("--runs", type=int, default=3, help="runs per case; the median is shown")
    parser.add_argument("--vocab-size", type=int, default=10_000,
                        help="vocabulary size for train (default: 10000)")
    parser.add_argument("--baseline", metavar="PATH",
                        help="generations, incremental: a checkout of today's unversioned store whose "
                             f"bpestore/ the baseline cases import (default: commit {BASELINE} extracted "
                             "under bench/.data); startup, first-encode: a checkout to compare with (default: "
                             f"commit {STARTUP_BASELINE}; 'none': no baseline rows); fixed-costs: a checkout "
                             "to run beside (no default)")
    parser.add_argument("--slices", type=int, default=10,
                        help="generations: how many slices the corpus is ingested in (default: 10)")
    parser.add_argument("--workers", default="1,2",
                        help="ingest-workers, encode-workers: the worker counts, comma-separated (default: 1,2)")
    parser.add_argument("--threads", default="1,2",
                        help="encode-peers: the thread counts, comma-separated (default: 1,2)")
    parser.add_argument("--quick", action="store_true",
                        help="encode-peers: the first 1.5 M characters of each text, no fresh-process rows")
    parser.add_argument("--scale", type=float, default=0.1,
                        help="training-scale: size of the synthetic corpus (1: 30 M words; default: 0.1)")
    parser.add_argument("--project", type=int, default=16,
                        help="phases suites: the worker count the fit projects to (default: 16)")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        workers = tuple(int(n) for n in args.workers.split(","))
    except ValueError:
        parser.error("--workers takes numbers separated by commas, e.g. 1,2,4")
    if not workers or min(workers) < 1:
        parser.error("--workers takes numbers of at least 1")
    try:
        threads = tuple(int(n) for n in args.threads.split(","))
    except ValueError:
        parser.error("--threads takes numbers separated by commas, e.g. 1,2,4")
    if not threads or min(threads) < 1:
        parser.error("--threads takes numbers of at least 1")
    print("$ python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv))
    print(_versions(), flush=True)
    corpus = prepare_corpus(args.corpus)
    names = list(SUITES) if args.what == "all" else [args.what]
    options = {"baseline": args.baseline, "slices": args.slices, "workers": workers, "threads": threads,
               "quick": args.quick, "scale": args.scale, "project": args.project}
    sections = [SUITES[n](corpus, args.corpus, args.runs, args.vocab_size, **_taken(SUITES[n], options))
                for n in names]
    print("\n" + "\n\n".join(sections))


if __name__ == "__main__":
    main()
