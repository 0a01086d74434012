"""Training at scale: a real kill, and resume equivalence on a larger corpus.

Sized by BPESTORE_SCALE: small by default (CI), ``full`` for english_medium at
vocab 5,000.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text

import bpestore
from bpestore.trainer import train_word_counts

from .conftest import read_corpus

EOT = "<|endoftext|>"
FULL = os.environ.get("BPESTORE_SCALE") == "full"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def medium_text() -> str:
    text = read_corpus("english_medium.txt.xz")
    return text if FULL else text[:1_500_000]


@pytest.fixture(scope="module")
def medium_store(tmp_path_factory, medium_text):
    """An ingested store kept pristine (each test trains in a copy), and the reference run."""
    folder = tmp_path_factory.mktemp("medium")
    path = folder / "corpus.txt"
    path.write_text(medium_text, encoding="utf-8")
    store = bpestore.open(folder / "ingest.db")
    store.ingest("medium", [path], special_tokens=[EOT])
    pristine = folder / "pristine.db"
    raw = store.engine.raw_connection()  # VACUUM cannot run inside a transaction
    try:
        raw.cursor().execute(f"VACUUM INTO '{pristine}'")
    finally:
        raw.close()
    vocab_size = 5000 if FULL else 1500
    reference = train_word_counts(store.word_counts("medium"), vocab_size=vocab_size, special_tokens=[EOT])
    store.close()
    return pristine, vocab_size, reference


def copy_of(pristine: Path, folder: Path) -> Path:
    target = folder / f"{len(list(folder.iterdir()))}.db"
    shutil.copyfile(pristine, target)
    return target


class Stop(Exception):
    pass


@pytest.mark.slow
def test_resume_at_many_points_equals_uninterrupted(medium_store, tmp_path):
    pristine, vocab_size, (vocab, merges) = medium_store
    n = len(merges)
    # Inside the first checkpoint batch, at batch edges, midway, right before the end.
    for stop in [3, 100, 101, n // 2, n - 1]:
        store = bpestore.open(copy_of(pristine, tmp_path))

        def progress(state, stop=stop):
            if state.done == stop:
                raise Stop
        with pytest.raises(Stop):
            store.train("cut", corpus="medium", vocab_size=vocab_size, checkpoint_every=100,
                        progress=progress)
        assert store.version("cut@1").n_merges == stop
        store.resume("cut@1")
        tok = store.tokenizer("cut@1")
        assert tok.merges == merges and tok.vocab == vocab, stop
        store.close()


KILLED_TRAINING = textwrap.dedent("""
    import sys, bpestore
    store = bpestore.open(sys.argv[1])
    def progress(state):
        print(state.done, flush=True)
    store.train("en", corpus="medium", vocab_size=int(sys.argv[2]), checkpoint_every=BATCH,
                checkpoint_seconds=3600, progress=progress)
""")
BATCH = 50


@pytest.mark.slow
def test_sigkill_mid_training_then_resume(medium_store, tmp_path):
    pristine, vocab_size, (vocab, merges) = medium_store
    db = copy_of(pristine, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = KILLED_TRAINING.replace("BATCH", str(BATCH))
    child = subprocess.Popen([sys.executable, "-c", script, str(db), str(vocab_size)],
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        for line in child.stdout:
            # Mid-batch, so a batch is being built when the kill lands.
            if int(line) >= len(merges) // 3 and int(line) % BATCH == BATCH // 2:
                break
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    killed = bpestore.open(db)
    with killed.engine.connect() as conn:
        assert conn.execute(text("PRAGMA integrity_check")).scalar() == "ok"
    partial = killed.version("en@1")
    assert partial.status == "training" and 0 < partial.n_merges < len(merges)
    # Whole batches only, each merge with the row of the token it made.
    assert partial.n_merges % BATCH == 0
    with killed.engine.connect() as conn:
        orphans = conn.execute(text("SELECT count(*) FROM merges m WHERE NOT EXISTS (SELECT 1 FROM tokens t "
                                    "WHERE t.version_id = m.version_id AND t.id = m.token_id)")).scalar()
    assert orphans == 0
    killed.resume("en@1")
    tok = killed.tokenizer("en@1")
    assert tok.merges == merges and tok.vocab == vocab
    killed.close()
