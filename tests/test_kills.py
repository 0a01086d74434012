"""Faults: SIGKILL of ingest and of training at seeded random moments
(10 each with BPESTORE_SCALE=full, 3 otherwise), on SQLite and PostgreSQL: the database
is intact, no source is partly counted, the totals equal a clean run's and a resumed
training ends with exactly the merges of an uninterrupted one. And a full disk (a small
tmpfs, where the test may mount one): one Error: line, the database still opens and
holds nothing half-written."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import regex

import bpestore

from .conftest import corpus_path, tiktoken_pattern

ROOT = Path(__file__).resolve().parents[1]
MOMENTS = 10 if os.environ.get("BPESTORE_SCALE") == "full" else 3
VOCAB = 6000  # the training killed: german_1M to this vocabulary size


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BPESTORE_DB", None)
    return env


def cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user + system; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_after_cpu(process: subprocess.Popen, cpu: float) -> None:
    """SIGKILL ``process`` once it has used ``cpu`` seconds of CPU (if still running): a moment in
    its own work, however loaded the machine is (polled every 2 ms)."""
    while process.poll() is None:
        if cpu_seconds(process.pid) >= cpu:
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    process.wait(timeout=60)


# ``bpestore`` whose ingest starts its workers however little text there is (the CLI's own
# default waits for ~100 MB at 2 workers): the kills below land in a parent with workers.
PARALLEL = ("import functools, sys; from bpestore.ingest import IngestTuning; from bpestore.store import corpora; "
            "corpora.IngestTuning = functools.partial(IngestTuning, parallel_min_bytes=0); "
            "from bpestore.cli import main; main()")


def _program(args: list[str]) -> list[str]:
    return [sys.executable, *(["-c", PARALLEL] if args[0] == "ingest" else ["-m", "bpestore"])]


def _killed(db: str, args: list[str], cpu: float) -> int:
    """Start ``bpestore ARGS``, SIGKILL it once it has used ``cpu`` seconds of CPU; its return code."""
    process = subprocess.Popen([*_program(args), "--db", db, *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=_env())
    kill_after_cpu(process, cpu)
    return process.returncode


def _killed_when(db: str, args: list[str], ready: Callable[[bpestore.Store], bool]) -> int:
    """Start ``bpestore ARGS`` and SIGKILL it as soon as ``ready(store)`` holds (polled
    every 2 ms: the compiled core and the bulk upsert finish too fast for a delay to
    land inside the work reliably); its return code."""
    process = subprocess.Popen([*_program(args), "--db", db, *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=_env())
    with bpestore.open(db) as store:
        while process.poll() is None:
            try:
                if ready(store):
                    process.send_signal(signal.SIGKILL)
                    break
            except bpestore.NotFoundError:
                pass  # not created yet
            time.sleep(0.002)
    process.wait(timeout=60)
    return process.returncode


def _integrity(db: str) -> None:
    if "://" in db:
        return  # PostgreSQL: transactions are the server's business; the checks below still apply
    import sqlite3

    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.fixture
def sources(tmp_path) -> tuple[Path, dict[str, Counter]]:
    """A folder of small files and one large one, and each file's counts (regex over tiktoken's GPT-2 pattern)."""
    folder = tmp_path / "in"
    folder.mkdir()
    lines = corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    for i in range(40):
        (folder / f"s{i:02d}.txt").write_text("".join(lines[i * 200:(i + 1) * 200]), encoding="utf-8")
    (folder / "z_large.txt").write_text(corpus_path("german_1M.txt").read_text(encoding="utf-8") * 8,
                                        encoding="utf-8")
    pattern = regex.compile(tiktoken_pattern("gpt2"))
    counts = {str(p): Counter(w.encode() for w in pattern.findall(p.read_text(encoding="utf-8")))
              for p in sorted(folder.iterdir())}
    return folder, counts


@pytest.mark.slow
def test_sigkill_ingest_at_random_moments(db_url, sources):
    """Odd moments come once a seeded number of sources is recorded, even ones after a seeded amount of CPU time."""
    folder, counts = sources
    rng = random.Random(13)
    bpestore.open(db_url).close()
    killed = 0
    for moment in range(MOMENTS):
        corpus = f"c{moment}"
        ingest = ["ingest", corpus, str(folder), "--workers", "2", "-q"]
        if moment % 2:  # after a seeded number of sources is recorded (between or inside transactions)
            n = rng.randint(1, len(counts) - 1)
            code = _killed_when(db_url, ingest, lambda store, c=corpus, n=n: len(store.corpus_sources(c)) >= n)
        else:  # a moment in the ingest's own work
            code = _killed(db_url, ingest, rng.uniform(0.2, 1.5))
        killed += code == -signal.SIGKILL
        _integrity(db_url)
        with bpestore.open(db_url) as store:
            if any(c.name == corpus for c in store.corpora()):
                kept = [s.source for s in store.corpus_sources(corpus)]
                # Exactly the counts of the sources it recorded: none of them partly counted.
                assert store.word_counts(corpus) == sum((counts[s] for s in kept), Counter())
        again = subprocess.run([sys.executable, "-m", "bpestore", "--db", db_url, "ingest", corpus, str(folder),
                                "-q"], capture_output=True, text=True, env=_env(), timeout=300)
        assert again.returncode == 0, again.stderr
        with bpestore.open(db_url) as store:
            assert store.word_counts(corpus) == sum(counts.values(), Counter())
            assert store.corpus(corpus).n_sources == len(counts)
    assert killed > 0  # the moments did fall inside ingests


@pytest.mark.slow
def test_sigkill_training_at_random_moments(db_url, tmp_path):
    """Odd moments come after a seeded number of checkpointed merges, even ones after a
    seeded amount of CPU time. Each moment trains its own corpus (a line of its own added: no equal earlier run whose
    merges it could copy); the reference is the same training, uninterrupted, in another store."""
    base = corpus_path("german_1M.txt").read_text(encoding="utf-8")
    rng = random.Random(31)
    killed_midway = 0
    for moment in range(MOMENTS):
        text = tmp_path / f"t{moment}.txt"
        text.write_text(f"moment {moment} of {MOMENTS}\n" + base, encoding="utf-8")
        with bpestore.open(tmp_path / f"reference{moment}.db") as reference:
            reference.ingest("c", [text], workers=1)
            reference.train("clean", corpus="c", vocab_size=VOCAB)
            clean = reference.tokenizer("clean").merges
        corpus, name = f"c{moment}", f"k{moment}"
        with bpestore.open(db_url) as store:
            store.ingest(corpus, [text], workers=1)
        train = ["train", name, "--corpus", corpus, "--vocab-size", str(VOCAB), "--checkpoint-every", "10", "-q"]
        if moment % 2:  # a moment in the merge loop
            n = rng.randint(10, VOCAB - 500)
            _killed_when(db_url, train, lambda store, ref=f"{name}@1", n=n: store.version(ref).n_merges >= n)
        else:  # a moment in the training's own work: set-up, the loop, or sealing the version
            _killed(db_url, train, rng.uniform(0.2, 1.0))
        _integrity(db_url)
        with bpestore.open(db_url) as store:
            if not any(v.name == name for v in store.versions()):
                continue  # killed before the version was created: nothing of it is there
            (version,) = store.versions(name)
            stored = store.tokenizer(version.ref).merges
            assert stored == clean[:len(stored)]  # whatever is checkpointed is a prefix of the clean run
            if version.status != "complete":
                killed_midway += 1
                resumed = subprocess.run([sys.executable, "-m", "bpestore", "--db", db_url, "train", "--resume",
                                          version.ref, "-q"], capture_output=True, text=True, env=_env(), timeout=300)
                assert resumed.returncode == 0, resumed.stderr
            bpestore.Store.tokenizer_cache.clear()
            assert store.tokenizer(version.ref).merges == clean
    assert killed_midway > 0  # the moments did fall inside training


def test_a_full_disk_is_one_error_and_nothing_half_written(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        db = str(disk / "b.db")
        small = tmp_path / "small.txt"
        small.write_text(corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8")[:20_000], encoding="utf-8")
        big = tmp_path / "big.txt"  # its 200,000 distinct words do not fit in 3 MB
        rng = random.Random(7)
        big.write_text(" ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=12)) for _ in range(200_000)),
                       encoding="utf-8")
        with bpestore.open(db) as store:
            store.ingest("c", [small], workers=1)
            before = store.word_counts("c"), [s.sha256 for s in store.corpus_sources("c")]
        result = subprocess.run([sys.executable, "-m", "bpestore", "--db", db, "ingest", "c", str(big), "-q"],
                                capture_output=True, text=True, env=_env(), timeout=300)
        assert result.returncode != 0
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:") and "Traceback" not in result.stderr, result.stderr
        assert "full" in lines[0].lower() or "disk" in lines[0].lower(), lines[0]
        _integrity(db)
        with bpestore.open(db) as store:
            assert (store.word_counts("c"), [s.sha256 for s in store.corpus_sources("c")]) == before
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


# A child that runs one command and SIGKILLs itself at its Nth step on the file system
# (before the step with an even N, after it with an odd one): every seam of a write.
_SEAM_KILLER = r"""
import os, shutil, signal, sys
import bpestore.files as files

target = int(sys.argv[1])
seen = [0]

def seam(fn):
    def wrapped(*args, **kwargs):  # a seam before and after each call, nested calls too
        if seen[0] == target:
            os.kill(os.getpid(), signal.SIGKILL)
        seen[0] += 1
        result = fn(*args, **kwargs)
        if seen[0] == target:
            os.kill(os.getpid(), signal.SIGKILL)
        seen[0] += 1
        return result
    return wrapped

for module, name in ((os, "rename"), (os, "replace"), (os, "link"), (os, "unlink"), (os, "fsync"),
                     (os, "chmod"), (shutil, "rmtree"), (files, "_swap_folders")):
    if hasattr(module, name):
        setattr(module, name, seam(getattr(module, name)))
from bpestore.cli import main
sys.argv = ["bpestore", *sys.argv[2:]]
try:
    main()
finally:
    print(f"seams {seen[0]}", file=sys.stderr)
"""


def _killed_at_seam(args: list[str], seam: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SEAM_KILLER, str(seam), *args], capture_output=True,
                          text=True, env=_env(), timeout=120)


def _folder(path: Path, *, hidden: bool = False) -> dict[str, bytes]:
    """A folder's files and their bytes (``hidden``: with the dot files)."""
    if not path.exists():
        return {}
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if hidden or not p.name.startswith(".")}


def _export(db: str, ref: str, out: Path, *extra: str) -> list[str]:
    return ["--db", db, "export", ref, "--format", "gpt2", "--out", str(out), *extra]


def test_gpt2_export_killed_at_every_seam_is_wholly_old_or_wholly_new(tmp_path):
    """The two files of a gpt2 export are replaced together; a kill at any step of the
    file system work leaves the folder's old pair or the new one, and the next export
    clears what the killed one left."""
    db = str(tmp_path / "k.db")
    text = tmp_path / "t.txt"
    text.write_text("low lower lowest newer wider new " * 50 + "é ü 日本 " * 20, encoding="utf-8")
    with bpestore.open(db) as store:
        store.ingest("c", [text], special_tokens=["<|endoftext|>"], workers=1)
        store.train("a", corpus="c", vocab_size=280)
        store.train("b", corpus="c", vocab_size=300)
        store.export("a@1", format="gpt2", out=tmp_path / "old")
        store.export("b@1", format="gpt2", out=tmp_path / "new")
    old = {**_folder(tmp_path / "old"), "README": b"mine"}  # another file of the folder: kept
    new = {**_folder(tmp_path / "new"), "README": b"mine"}
    assert old != new
    out = tmp_path / "out"
    seam = 0
    while True:
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(tmp_path / "old", out)
        (out / "README").write_bytes(b"mine")
        result = _killed_at_seam(_export(db, "b@1", out, "--force"), seam)
        state = _folder(out)
        assert state in (old, new), (seam, result.stderr)
        if result.returncode != -signal.SIGKILL:
            assert result.returncode == 0 and state == new, result.stderr
            break
        seam += 1
    assert seam >= 8, result.stderr  # the steps were many, and a kill came at each
    for leftover in tmp_path.glob(".out.*"):
        os.utime(leftover, (time.time() - 3600, time.time() - 3600), follow_symlinks=False)
    again = subprocess.run([sys.executable, "-m", "bpestore", *_export(db, "b@1", out, "--force")],
                           env=_env(), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert _folder(out, hidden=True) == new
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []


def test_leftovers_of_a_killed_write_are_cleared_by_the_next(tmp_path):
    """A killed ``encode --out`` leaves ``.NAME.PID.*.part``; the next write of NAME
    removes those of processes no longer running (not a running one's, nor a fresh one)."""
    db = str(tmp_path / "k.db")
    text = tmp_path / "t.txt"
    text.write_text("low lower lowest newer wider new " * 30000, encoding="utf-8")
    with bpestore.open(db) as store:
        store.ingest("c", [text], workers=1)
        store.train("a", corpus="c", vocab_size=280)
    out = tmp_path / "ids.bin"
    slow = _killed_when(db, ["encode", "a@1", "--file", str(text), "--out", str(out)],
                        lambda store: any(tmp_path.glob(".ids.bin.*.part")))
    assert slow == -signal.SIGKILL and not out.exists()
    (dead,) = tmp_path.glob(".ids.bin.*.part")
    alive = tmp_path / f".ids.bin.{os.getpid()}.x.part"  # a writer still at work
    alive.write_bytes(b"")
    for leftover in (dead, alive):
        os.utime(leftover, (time.time() - 3600, time.time() - 3600))
    result = subprocess.run([sys.executable, "-m", "bpestore", "--db", db, "encode", "a@1", "--file", str(text),
                             "--out", str(out)], env=_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.exists() and not dead.exists() and alive.exists()
