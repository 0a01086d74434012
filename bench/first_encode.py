"""first-encode: what a user pays for the first encode in a fresh process.

Each case is a fresh ``python -c`` process that times itself from before its first import
to the ids (reading the text is not timed): bpestore opening a store that holds the
encoding (imported from the shared rank file into a temporary SQLite store, not timed),
``store.tokenizer(name)`` and ``encode_ordinary`` (the tables it builds for the text
included); tiktoken's ``load_tiktoken_bpe`` + ``Encoding`` + ``encode_ordinary``; gigatoken's
``Tokenizer.from_tiktoken(rank_file)`` + ``as_tiktoken().encode_ordinary``. cl100k and o200k,
on the first 40,000 characters of japanese_1M and of english_medium, and 400,000 of japanese_1M
(enough long words that bpestore builds its backtracking tables within the encode). Cases run
``--runs`` times in rotated order; the table shows medians of wall and CPU time and the
ratios (tiktoken's time / bpestore's: above 1, bpestore is faster); every peer's ids are
checked equal to tiktoken's.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import CORPORA, DATA, REPO, markdown_table, prepare_corpus

ENCODINGS = ("cl100k", "o200k")
TEXTS = (("japanese_1M", 40_000), ("english_medium", 40_000), ("japanese_1M", 400_000))

_HEAD = """
import hashlib, json, sys, time
from array import array
text = open(sys.argv[2], encoding="utf-8").read()
start, cpu = time.perf_counter(), time.process_time()
"""
_TAIL = """
end, cpu_end = time.perf_counter(), time.process_time()
digest = hashlib.sha256(array("q", ids).tobytes()).hexdigest()[:12]
print(json.dumps({"seconds": end - start, "cpu": cpu_end - cpu, "digest": f"{len(ids)}:{digest}"}))
"""
SCRIPTS = {
    "bpestore, from a store": """
import bpestore
ids = bpestore.open(sys.argv[3]).tokenizer(sys.argv[1]).encode_ordinary(text)
""",
    "tiktoken, from ranks": """
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext import openai_public
from unittest import mock
ranks = load_tiktoken_bpe(sys.argv[4])
with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: ranks):
    spec = {"cl100k": openai_public.cl100k_base, "o200k": openai_public.o200k_base}[sys.argv[1]]()
ids = tiktoken.Encoding(name=sys.argv[1], pat_str=spec["pat_str"], mergeable_ranks=ranks,
                        special_tokens={}).encode_ordinary(text)
""",
    "gigatoken, from ranks": """
import gigatoken
ids = gigatoken.Tokenizer.from_tiktoken(sys.argv[4]).as_tiktoken().encode_ordinary(text)
""",
}


def _peers() -> list[str]:
    from importlib.util import find_spec

    return [who for who in SCRIPTS if find_spec(who.split(",")[0]) is not None]


def text_file(folder: Path, corpus: str, chars: int) -> Path:
    """The first ``chars`` characters of a shared corpus, in a file of their own."""
    path = folder / f"{corpus}_{chars}.txt"
    with open(prepare_corpus(corpus), encoding="utf-8") as whole:
        path.write_text(whole.read(chars), encoding="utf-8")
    return path


def make_store(folder: Path) -> Path:
    """A SQLite store holding cl100k and o200k, imported from the shared rank files."""
    import bpestore

    db = folder / "first_encode.db"
    store = bpestore.open(str(db))
    for name in ENCODINGS:
        store.import_tiktoken(name, CORPORA / f"{name}_base.tiktoken", pattern=name)
    return db


def run_fresh(who: str, encoding: str, text: Path, db: Path) -> dict:
    """One fresh process of a case: its own timing (imports included, interpreter start not)."""
    ranks = CORPORA / f"{encoding}_base.tiktoken"
    done = subprocess.run([sys.executable, "-c", _HEAD + SCRIPTS[who] + _TAIL, encoding, str(text), str(db),
                           str(ranks)], cwd=REPO, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def first_encode(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """bpestore from a store vs tiktoken and gigatoken from the rank file, fresh processes."""
    peers = _peers()
    rows = []
    DATA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        folder = Path(tmp)
        db = make_store(folder)
        for corpus_name, chars in TEXTS:
            text = text_file(folder, corpus_name, chars)
            for encoding in ENCODINGS:
                found: dict[str, list[dict]] = {who: [] for who in peers}
                for round_ in range(runs):
                    for k in range(len(peers)):  # rotated order
                        who = peers[(k + round_) % len(peers)]
                        found[who].append(run_fresh(who, encoding, text, db))
                rows += _rows(encoding, f"{corpus_name}, {chars:,} characters", found)
    return (f"### First encode in a fresh process: imports + load + first encode of a text "
            f"(median of {runs}; interpreter start not included)\n\n"
            + markdown_table(["encoding", "text", "process", "wall (s)", "tiktoken's / this", "CPU (s)",
                              "tiktoken's CPU / this", "same ids as tiktoken"], rows))


def _rows(encoding: str, text: str, found: dict[str, list[dict]]) -> list[list[str]]:
    base = "tiktoken, from ranks"
    wall = {who: statistics.median(r["seconds"] for r in runs) for who, runs in found.items()}
    cpu = {who: statistics.median(r["cpu"] for r in runs) for who, runs in found.items()}
    digest = found[base][0]["digest"] if base in found else None
    rows = []
    for who, runs in found.items():
        same = {r["digest"] for r in runs} == {digest}
        rows.append([encoding, text, who, f"{wall[who]:.3f}",
                     f"{wall[base] / wall[who]:.2f}×" if base in wall else "-", f"{cpu[who]:.3f}",
                     f"{cpu[base] / cpu[who]:.2f}×" if base in cpu else "-",
                     "yes" if same else f"**no** ({runs[0]['digest']})"])
    return rows


SUITES = {"first-encode": first_encode}
