"""Several processes on one database, as when machines share a store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import regex

import bpestore

from .conftest import tiktoken_pattern

ROOT = Path(__file__).resolve().parents[1]


def bpestore_cli(db: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BPESTORE_DB", None)
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), "--db", db, *args],
                          capture_output=True, text=True, env=env, timeout=120)


def run_all(db: str, commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda args: bpestore_cli(db, *args), commands))


def test_concurrent_writers_all_succeed(db_url, tmp_path):
    bpestore.open(db_url).close()  # schema first (as `bpestore init` would)
    sources = []
    for i in range(4):
        path = tmp_path / f"part{i}.txt"
        # Overlapping words, so the upserts touch the same rows.
        path.write_text(" ".join(f"w{(i * 7 + j) % 50}" for j in range(3000)), encoding="utf-8")
        sources.append(str(path))
    results = run_all(db_url, [["ingest", "books", s, "-q"] for s in sources])
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
    pattern = regex.compile(tiktoken_pattern("gpt2"))
    expected = Counter(w.encode() for s in sources for w in pattern.findall(Path(s).read_text()))
    store = bpestore.open(db_url)
    assert store.word_counts("books") == expected  # no update lost
    assert store.corpus("books").n_sources == 4
    store.close()
    results = run_all(db_url, [["train", "en", "--corpus", "books", "--vocab-size", str(270 + i), "-q"]
                               for i in range(3)])
    assert [r.returncode for r in results] == [0] * 3, [r.stderr for r in results]
    listing = json.loads(bpestore_cli(db_url, "versions", "en", "--json").stdout)
    assert sorted(v["number"] for v in listing) == [1, 2, 3]
    assert sorted(v["vocab_size"] for v in listing) == [270, 271, 272]
    results = run_all(db_url, [["alias", f"en@{1 + i % 3}", f"tag{i % 2}"] for i in range(4)])
    assert [r.returncode for r in results] == [0] * 4, [r.stderr for r in results]
