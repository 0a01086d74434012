"""Long-running incremental training, end to end (small): data keeps
arriving while versions train on the generations they pin; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess

import bpestore
from bpestore.trainer import train_word_counts

from .conftest import read_corpus
from .test_concurrency import ROOT, bpestore_cli


def cli_process(db: str, *args: str) -> subprocess.Popen:
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BPESTORE_DB", None)
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "--db", db, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_day1_day2_training_while_data_arrives(db_url, tmp_path):
    text = read_corpus("tinyshakespeare.txt")[:300_000]
    first = tmp_path / "day1.txt"
    first.write_text(text[:150_000], encoding="utf-8")
    day2 = []
    for i in range(4):  # the second half arrives in pieces: several generations
        piece = tmp_path / f"day2_{i}.txt"
        piece.write_text(text[150_000 + i * 37_500:150_000 + (i + 1) * 37_500], encoding="utf-8")
        day2.append(str(piece))

    # Day 1: the first half, and en@1.
    assert bpestore_cli(db_url, "ingest", "en", str(first), "-q").returncode == 0
    assert bpestore_cli(db_url, "train", "en", "--corpus", "en", "--vocab-size", "500", "-q").returncode == 0
    with bpestore.open(db_url) as store:
        day1_counts = store.word_counts("en@1")

    # Day 2: en@2 trains on generation 1 in one process while another ingests the second half.
    training = cli_process(db_url, "train", "en", "--corpus", "en@1", "--vocab-size", "700",
                           "--checkpoint-every", "10", "-q")
    for piece in day2:
        ingested = bpestore_cli(db_url, "ingest", "en", piece, "-q")
        assert ingested.returncode == 0, ingested.stderr
    _, stderr = training.communicate(timeout=300)
    assert training.returncode == 0, stderr

    # Then an extension of en@1 on the newest generation, and a plain retrain on it.
    extended = bpestore_cli(db_url, "train", "en", "--from", "en@1", "--corpus", "en", "--vocab-size", "600",
                            "--json")
    assert extended.returncode == 0, extended.stderr
    retrained = bpestore_cli(db_url, "train", "en", "--corpus", "en", "--vocab-size", "500", "--json")
    assert retrained.returncode == 0, retrained.stderr
    for ref in ("en@1", "en@2", "en@3", "en@4"):
        verified = bpestore_cli(db_url, "verify", ref)
        assert verified.returncode == 0, (ref, verified.stdout, verified.stderr)

    with bpestore.open(db_url) as store:
        log = store.corpus_log("en")
        assert [g.generation for g in log] == [1, 2, 3, 4, 5]
        assert [g.kept for g in log] == [True, False, False, False, True]
        newest = store.word_counts("en")
        assert store.word_counts("en@1") == day1_counts
        versions = {v.ref: v for v in store.versions("en")}
        assert {ref: v.corpus_generation for ref, v in versions.items()} == {
            "en@1": 1, "en@2": 1, "en@3": 5, "en@4": 5}
        assert json.loads(extended.stdout)["parent"] == "en@1"
        # en@2 is exactly the uninterrupted run on generation 1's counts...
        _, expected = train_word_counts(day1_counts, vocab_size=700)
        assert store.tokenizer("en@2").merges == expected
        # ...and the retrain is the run on the newest counts, the whole 300 kB.
        _, expected = train_word_counts(newest, vocab_size=500)
        assert store.tokenizer("en@4").merges == expected
        assert sum(newest.values()) == log[-1].n_words
