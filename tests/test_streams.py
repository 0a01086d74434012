"""Sources that are streams though named like files: a FIFO, a process substitution
(``<(cmd)`` = /dev/fd/N), a device such as /dev/zero. Each is read once, in pieces,
like standard input (never whole: their size on disk is 0), or refused with one
Error: line."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import bpestore

ROOT = Path(__file__).resolve().parents[1]
TEXT = "the quick brown fox jumps over the lazy dog, déjà vu 日本語\n" * 2000


def _bash(command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``command`` in bash (for ``<(...)``), bpestore as ``$BPESTORE``, under a 1 GB address-space limit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BPESTORE": f"{shlex.quote(sys.executable)} -m bpestore"}
    env.pop("BPESTORE_DB", None)
    try:
        return subprocess.run(["bash", "-c", f"ulimit -v 1048576; {command}"], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout}s: {command}")


@pytest.fixture
def text_file(tmp_path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_process_substitution_and_fifo_are_counted_like_the_file(tmp_path, text_file):
    db = tmp_path / "s.db"
    with bpestore.open(db) as store:
        store.ingest("file", [text_file], workers=1)
    result = _bash(f"$BPESTORE --db {db} ingest subst <(cat {text_file}) -q")
    assert result.returncode == 0, result.stderr
    fifo = tmp_path / "f.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text(TEXT, encoding="utf-8"))
    writer.start()
    result = _bash(f"$BPESTORE --db {db} ingest fifo {fifo} --workers 2 -q")
    writer.join(30)
    assert result.returncode == 0, result.stderr
    with bpestore.open(db) as store:
        expected = store.word_counts("file")
        assert expected and store.word_counts("subst") == expected == store.word_counts("fifo")
        assert store.corpus("subst").size_bytes == len(TEXT.encode())


def test_a_device_of_size_0_is_streamed_not_read_whole(tmp_path):
    db = tmp_path / "s.db"
    result = _bash(f"$BPESTORE --db {db} ingest zero /dev/zero -q")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and "NUL byte at byte 0" in lines[0], result.stderr


def test_encode_out_of_a_process_substitution(tmp_path, text_file):
    db = tmp_path / "s.db"
    with bpestore.open(db) as store:
        store.ingest("c", [text_file], workers=1)
        store.train("t", corpus="c", vocab_size=300)
        expected = store.tokenizer("t@1").encode(TEXT)
    for workers in (1, 2):
        out = tmp_path / f"ids{workers}.bin"
        result = _bash(f"$BPESTORE --db {db} encode t@1 --file <(cat {text_file}) --out {out} "
                       f"--workers {workers}")
        assert result.returncode == 0, result.stderr
        from array import array

        ids = array("H")
        ids.frombytes(out.read_bytes())
        assert ids.tolist() == expected


def test_stats_of_one_stream_for_two_versions_is_refused(tmp_path, text_file):
    db = tmp_path / "s.db"
    with bpestore.open(db) as store:
        store.ingest("c", [text_file], workers=1)
        store.train("t", corpus="c", vocab_size=280)
        store.train("u", corpus="c", vocab_size=290)
    result = _bash(f"$BPESTORE --db {db} stats t@1 u@1 --file <(cat {text_file})")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "a stream reads once" in lines[0], result.stderr
    result = _bash(f"$BPESTORE --db {db} stats t@1 --file <(cat {text_file}) --json")
    assert result.returncode == 0, result.stderr
