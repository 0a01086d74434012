"""Queries over stored vocabularies, each a fresh `bpestore` process as a user runs it:

* ``vocab --grep`` on a version of 200,000 tokens (target: <= 0.5 s), beside
  ``versions`` (the start-up floor: interpreter, imports, opening the store);
* ``stats`` on the corpus against ``encode --file --out`` (target: no more than
  encoding the file once per version), GPT-2 imported from the shared files.

The 200,000-token version is made by ``letter_vocab`` and imported once into
bench/.data/queries.db.
"""

from __future__ import annotations

import resource
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import DATA, REPO, markdown_table

BIG = 200_000
GREP = "q.z$"


def letter_vocab(n_tokens: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A byte-level vocabulary of ``n_tokens``: the 256 bytes, then every string of
    2, 3, ... lowercase letters in order, each merged from its prefix and last letter.

    >>> vocab, merges = letter_vocab(259)
    >>> [vocab[i] for i in (256, 257, 258)], merges[2]
    ([b'aa', b'ab', b'ac'], (b'a', b'c'))
    """
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    letters = [c.encode() for c in string.ascii_lowercase]
    level = letters
    while len(vocab) < n_tokens:
        longer = []
        for stem in level:
            for letter in letters:
                if len(vocab) == n_tokens:
                    return vocab, merges
                merges.append((stem, letter))
                vocab[len(vocab)] = stem + letter
                longer.append(stem + letter)
        level = longer
    return vocab, merges


def _store(path: Path) -> Path:
    """bench/.data/queries.db with big@1 (BIG tokens) and gpt2@1 (the shared GPT-2 files)."""
    if path.exists():
        return path
    import bpestore

    partial = path.with_suffix(".part")
    partial.unlink(missing_ok=True)
    store = bpestore.open(partial)
    store.import_vocab("big", *letter_vocab(BIG))
    corpora = REPO.parent / "shared" / "corpora"
    store.import_gpt2("gpt2", vocab=corpora / "gpt2_vocab.json", merges=corpora / "gpt2_merges.txt")
    store.close()
    partial.rename(path)
    return path


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one run of a command. On a shared
    machine the CPU time is the steadier figure: waiting for a core does not count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def queries(corpus: Path, corpus_name: str, runs: int, vocab_size: int) -> str:
    db = _store(DATA / "queries.db")
    cli = [sys.executable, str(REPO / "cli.py"), "--db", str(db)]
    with tempfile.TemporaryDirectory() as tmp:
        cases = {
            "`bpestore versions` (start-up floor)": cli + ["versions"],
            f"`bpestore vocab big --grep '{GREP}'` ({BIG:,} tokens)": cli + ["vocab", "big", "--grep", GREP],
            f"`bpestore encode gpt2 --file {corpus_name} --out ids.bin`":
                cli + ["encode", "gpt2", "--file", str(corpus), "--out", str(Path(tmp) / "ids.bin"), "--quiet"],
            f"`bpestore stats gpt2 --file {corpus_name}`": cli + ["stats", "gpt2", "--file", str(corpus)],
        }
        found: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(runs):  # interleaved, so that the machine's load falls on every case alike
            for name, argv in cases.items():
                found[name].append(_run(argv))
        for name, runs_of in found.items():
            print(f"{name}: wall " + " ".join(f"{w:.3f}" for w, _ in runs_of) + ", cpu "
                  + " ".join(f"{c:.3f}" for _, c in runs_of), file=sys.stderr, flush=True)
    wall = {name: statistics.median(w for w, _ in r) for name, r in found.items()}
    cpu = {name: statistics.median(c for _, c in r) for name, r in found.items()}
    names = list(cases)
    rows = [[name, f"{wall[name]:.3f}", f"{cpu[name]:.3f}", ""] for name in names]
    rows[1][3] = (f"target <= 0.5 s; {cpu[names[1]] - cpu[names[0]]:.3f} s CPU over the start-up floor")
    rows[3][3] = f"{wall[names[3]] / wall[names[2]]:.2f}x encode's wall, {cpu[names[3]] / cpu[names[2]]:.2f}x its CPU"
    return (f"## Queries over stored vocabularies (fresh processes, medians of {runs})\n\n"
            + markdown_table(["command", "wall (s)", "CPU (s)", "note"], rows))


SUITES = {"queries": queries}
