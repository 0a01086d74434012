"""Load: concurrent ingests into one corpus, a training beside three
encoding processes, on SQLite and PostgreSQL: exact totals, no "database is locked"
reaching the user, and a bounded lock wait that names the lock when it gives up.
Also: a version being trained cannot be removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import regex

import bpestore

from .conftest import corpus_path, tiktoken_pattern

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    env.pop("BPESTORE_DB", None)
    return env


def cli(db: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpestore", "--db", db, *args], capture_output=True, text=True,
                          env=_env(**env), timeout=300)


def test_four_concurrent_ingests_into_one_corpus(db_url, tmp_path):
    """Each ingest has files of its own (small ones, counted in one batch) and files all four
    share: every shared file is counted once, however the batches interleave."""
    texts = [line for line in corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    assert len(texts) > 2000
    folder = tmp_path / "in"
    folder.mkdir()
    shared = []
    for i in range(6):
        path = folder / f"shared{i}.txt"
        path.write_text("\n\n".join(texts[i * 40:(i + 1) * 40]), encoding="utf-8")
        shared.append(str(path))
    own: list[list[str]] = []
    for k in range(4):
        paths = []
        for i in range(8):
            path = folder / f"own{k}-{i}.txt"
            start = 1000 + (k * 8 + i) * 30
            path.write_text("\n".join(texts[start:start + 30]), encoding="utf-8")
            paths.append(str(path))
        own.append(paths)
    big = folder / "big.txt"  # a large source too: a batch of its own, shared by all four
    big.write_text(corpus_path("german_1M.txt").read_text(encoding="utf-8") * 2, encoding="utf-8")
    bpestore.open(db_url).close()  # the schema first
    commands = [["ingest", "books", *own[k][:4], *shared[k % 2::2], str(big), *own[k][4:], "-q",
                 "--workers", "1"] for k in range(4)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda argv: cli(db_url, *argv), commands))
    for r in results:
        assert r.returncode == 0, r.stderr
        assert "locked" not in r.stderr and "Traceback" not in r.stderr
    pattern = regex.compile(tiktoken_pattern("gpt2"))
    every = sorted({*shared, str(big), *(p for paths in own for p in paths)})
    expected = Counter(w.encode() for p in every for w in pattern.findall(Path(p).read_text(encoding="utf-8")))
    with bpestore.open(db_url) as store:
        assert store.word_counts("books") == expected  # nothing counted twice, nothing lost
        info = store.corpus("books")
        assert info.n_sources == len(every)
        assert info.n_words == sum(expected.values())
        assert sorted(s.source for s in store.corpus_sources("books")) == every


ENCODER = """
import sys, time, bpestore
db, text, expected, seconds = sys.argv[1], sys.argv[2], [int(i) for i in sys.argv[3].split(",")], float(sys.argv[4])
store = bpestore.open(db)
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    assert store.tokenizer("en@1").encode(text) == expected
    tok = store.tokenizer("big@1")  # being trained: whatever merges it has so far, consistent
    assert tok.decode(tok.encode(text)) == text
    bpestore.Store.tokenizer_cache.clear()
    n += 1
print(n)
"""


def _wait_for_merges(db_url: str, ref: str, trainer: subprocess.Popen) -> None:
    """Returns once version ``ref`` has checkpointed merges or its training ended (60 s at most)."""
    deadline = time.monotonic() + 60
    while trainer.poll() is None:
        with bpestore.open(db_url) as store:
            if any(v.ref == ref and v.n_merges > 0 for v in store.versions()):
                return
        assert time.monotonic() < deadline, f"{ref} had no merges checkpointed within 60 s"
        time.sleep(0.02)


def test_training_beside_three_encoders(db_url, tmp_path):
    text_path = tmp_path / "t.txt"
    text_path.write_text(corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8"), encoding="utf-8")
    with bpestore.open(db_url) as store:
        store.ingest("c", [text_path], workers=1)
        store.train("en", corpus="c", vocab_size=400)
        sample = "First Citizen: Before we proceed any further, hear me speak."
        expected = store.tokenizer("en@1").encode(sample)
    trainer = subprocess.Popen([sys.executable, "-m", "bpestore", "--db", db_url, "train", "big", "--corpus", "c",
                                "--vocab-size", "1500", "--checkpoint-every", "20", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    _wait_for_merges(db_url, "big@1", trainer)  # the encoders start while the training is under way
    encoders = [subprocess.Popen([sys.executable, "-c", ENCODER, db_url, sample, ",".join(map(str, expected)), "6"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
                for _ in range(3)]
    rounds = []
    for process in [*encoders, trainer]:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert "locked" not in err
        rounds.append(out)
    assert all(int(n) > 0 for n in rounds[:3]), rounds  # each encoder loaded and encoded, over and over
    verified = cli(db_url, "verify", "big@1")  # the merges equal a training alone
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with bpestore.open(db_url) as store:
        assert store.version("big@1").status == "complete" and store.version("big@1").vocab_size == 1500


def _hold_write_lock(db_url: str):
    """A connection holding what an ingest into corpus c must wait for; returns (engine, connection)."""
    from sqlalchemy import create_engine, text

    if db_url.startswith("postgresql"):
        engine = create_engine(db_url)
        conn = engine.connect()
        conn.execute(text("SELECT id FROM corpora WHERE name = 'c' FOR UPDATE"))
    else:
        engine = create_engine(f"sqlite:///{db_url}", connect_args={"isolation_level": None})
        conn = engine.connect()
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    return engine, conn


def test_a_lock_held_too_long_is_an_error_naming_it(db_url, tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("one two three\n")
    second.write_text("four five six\n")
    with bpestore.open(db_url) as store:
        store.ingest("c", [first], workers=1)
        before = store.word_counts("c")
    engine, conn = _hold_write_lock(db_url)
    try:
        started = time.monotonic()
        result = cli(db_url, "ingest", "c", str(second), "-q", BPESTORE_LOCK_WAIT_SECONDS="1.5")
        waited = time.monotonic() - started
    finally:
        conn.rollback()
        conn.close()
        engine.dispose()
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: gave up after 1.5 s waiting for"), result.stderr
    assert ("SQLite database's write lock" in lines[0]) if "://" not in db_url else ("corpora" in lines[0])
    assert waited < 60
    with bpestore.open(db_url) as store:
        assert store.word_counts("c") == before
    assert cli(db_url, "ingest", "c", str(second), "-q").returncode == 0  # and it goes through once free


def test_a_bad_lock_wait_setting_is_one_error_line(tmp_path):
    result = cli(str(tmp_path / "x.db"), "init", BPESTORE_LOCK_WAIT_SECONDS="soon")
    assert result.returncode != 0 and result.stderr.count("Error:") == 1 and "Traceback" not in result.stderr
    assert "BPESTORE_LOCK_WAIT_SECONDS" in result.stderr


def test_a_version_being_trained_is_not_removed(db_url, tmp_path):
    text_path = tmp_path / "t.txt"
    text_path.write_text(corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8"), encoding="utf-8")
    with bpestore.open(db_url) as store:
        store.ingest("c", [text_path], workers=1)
    trainer = subprocess.Popen([sys.executable, "-m", "bpestore", "--db", db_url, "train", "big", "--corpus", "c",
                                "--vocab-size", "8000", "--checkpoint-every", "10", "-q"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for_merges(db_url, "big@1", trainer)
        # Paused, the run keeps its locks but cannot finish before rm asks (the compiled
        # merge core trains this in well under a second).
        trainer.send_signal(signal.SIGSTOP)
        assert trainer.poll() is None, "the training ended before rm could be tried"
        removed = cli(db_url, "rm", "big@1", "--force")
        assert removed.returncode != 0, removed.stdout
        lines = removed.stderr.strip().splitlines()
        assert len(lines) == 1 and "being trained" in lines[0], removed.stderr
    finally:
        trainer.send_signal(signal.SIGCONT)
        out, err = trainer.communicate(timeout=300)
    assert trainer.returncode == 0, err
    assert cli(db_url, "verify", "big@1").returncode == 0
    assert cli(db_url, "rm", "big@1").returncode == 0  # once it is done, it can go
    with bpestore.open(db_url) as store:
        assert [v.ref for v in store.versions()] == []


@pytest.mark.parametrize("kind", ["sqlite"])
def test_a_second_run_of_one_version_is_refused_at_once(kind, tmp_path):
    text_path = tmp_path / "t.txt"
    text_path.write_text(corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8"), encoding="utf-8")
    db = str(tmp_path / "s.db")
    with bpestore.open(db) as store:
        store.ingest("c", [text_path], workers=1)
    from bpestore.store import locks

    with bpestore.open(db) as store:
        store.train("en", corpus="c", merges=5)
        version_id = store.version("en@1").id
    with locks.version_lock(f"sqlite:///{Path(db).resolve()}", version_id) as held:
        assert held
        removed = cli(db, "rm", "en@1")
        assert removed.returncode != 0 and "being trained" in removed.stderr
    assert cli(db, "rm", "en@1").returncode == 0
