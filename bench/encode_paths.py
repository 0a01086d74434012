"""The encoder's targets: both bpestore paths, one and two workers, worst cases, memory.

Suites (``python -m bench NAME``):

- ``encoder --corpus C``: GPT-2 on C with tiktoken ``encode_ordinary`` (one
  thread), bpestore's pure-Python path and tiktoken-core path (``encode_ordinary``
  on the text in memory), both paths encoding the file with 1 and 2 workers
  (``encode_chunks`` over the file into a list of ids, and ``encode_file`` to
  an id file; reading and decoding included), and HF tokenizers (one string).
  The ratio is throughput over tiktoken's. The id-file rows carry no ids to
  compare (the tests check those files).
- ``encoder-worst``: 1 MB without a pre-token break (random letters, one
  letter, digits) and 10 MB of random letters, for tiktoken and both paths;
  then resident memory of ``encode_iterable`` over ``english_100M`` on both
  paths (``--corpus`` is ignored).

Each case is a fresh process (word caches start empty); set-up, including
the fast path's once-per-version check, is untimed.
"""

from __future__ import annotations

import random
from pathlib import Path

from bench import cases
from bench.common import Case, Params, Result, markdown_table, measure, prepare_corpus

WORST = {  # name -> text maker (deterministic)
    "random letters": lambda n: "".join(random.Random(0).choices("abcdefghijklmnopqrstuvwxyz", k=n)),
    "one repeated letter": lambda n: "a" * n,
    "digits": lambda n: "".join(random.Random(0).choices("0123456789", k=n)),
}


def _tokenizer(p: Params, fast: bool):
    """GPT-2 from the store, on the chosen path, decided (and checked) untimed."""
    import bpestore

    tok = bpestore.open(p.db).tokenizer("gpt2")
    if not fast:
        tok = bpestore.Tokenizer(tok.vocab, tok.merges, tok.special_tokens, spec=tok.spec, fast=False)
    expected = "tiktoken" if fast else "python (fast=False)"
    assert tok.backend == expected, tok.backend
    return tok


def _text(p: Params) -> str:
    if p.corpus.startswith("worst:"):
        _, kind, n = p.corpus.split(":")
        return WORST[kind](int(n))
    return Path(p.corpus).read_text(encoding="utf-8")


# -- cases (run in bench.child) ---------------------------------------------------
def pure_encode(p: Params):
    tok, text = _tokenizer(p, fast=False), _text(p)
    return lambda: tok.encode_ordinary(text)


def fast_encode(p: Params):
    tok, text = _tokenizer(p, fast=True), _text(p)
    return lambda: tok.encode_ordinary(text)


def tiktoken_encode(p: Params):
    enc, text = cases.tiktoken_gpt2(), _text(p)
    return lambda: enc.encode_ordinary(text)


def _file_case(p: Params, fast: bool, workers: int):
    from bpestore.ingest import TextReader, open_source

    tok = _tokenizer(p, fast)

    def run() -> list[int]:
        ids: list[int] = []
        with open_source(p.corpus) as stream:
            for part in tok.encode_chunks(TextReader(stream, p.corpus), workers=workers):
                ids += part
        return ids
    return run






def _id_file_case(p: Params, fast: bool, workers: int):
    """``encode_file`` to a uint16 id file: what ``bpestore encode --out`` runs."""
    tok = _tokenizer(p, fast)
    out = Path(p.tmp) / "ids.bin"
    return lambda: tok.encode_file(p.corpus, out, workers=workers) and None





def check_time(p: Params):
    """The fast path's once-per-version check (spec, ranks, Unicode) on GPT-2."""
    import bpestore

    tok = bpestore.open(p.db).tokenizer("gpt2")
    return lambda: tok.backend


def _hash_halves(threads: int):
    """Hash 2 x 200 MB with a GIL-free C loop, in 1 or 2 threads."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    data = b"x" * 200_000_000
    work = lambda _: hashlib.sha256(data).digest()  # noqa: E731
    if threads == 1:
        return lambda: [work(i) for i in range(2)]
    pool = ThreadPoolExecutor(2)
    return lambda: list(pool.map(work, range(2)))




def _stream_setup(p: Params, fast: bool):
    from bpestore.ingest import TextReader, open_source

    tok = _tokenizer(p, fast)
    tok.encode_ordinary("warm up the allocator " * 1000)

    def run() -> int:
        n = 0
        with open_source(p.corpus) as stream:
            for _ in tok.encode_iterable(TextReader(stream, p.corpus)):
                n += 1
        return n
    return tok, run






def _named(name: str, make, *args):
    """A case function (``bench.child`` finds it by module and name) that
    calls ``make(params, *args)``."""
    def case(p: Params):
        return make(p, *args)
    case.__name__ = case.__qualname__ = name
    return case


fast_file_1 = _named("fast_file_1", _file_case, True, 1)
fast_file_2 = _named("fast_file_2", _file_case, True, 2)
pure_file_1 = _named("pure_file_1", _file_case, False, 1)
pure_file_2 = _named("pure_file_2", _file_case, False, 2)
fast_id_file_1 = _named("fast_id_file_1", _id_file_case, True, 1)
fast_id_file_2 = _named("fast_id_file_2", _id_file_case, True, 2)
pure_id_file_2 = _named("pure_id_file_2", _id_file_case, False, 2)
hash_one_thread = _named("hash_one_thread", lambda p: _hash_halves(1))
hash_two_threads = _named("hash_two_threads", lambda p: _hash_halves(2))
fast_stream = _named("fast_stream", lambda p: _stream_setup(p, True)[1])
pure_stream = _named("pure_stream", lambda p: _stream_setup(p, False)[1])
fast_stream_setup_only = _named("fast_stream_setup_only", lambda p: _stream_setup(p, True) and (lambda: None))
pure_stream_setup_only = _named("pure_stream_setup_only", lambda p: _stream_setup(p, False) and (lambda: None))


# -- encode --file --out at N workers (encoding on many cores) ----------------
def bpestore_id_file_n(p: Params):
    """``Tokenizer.encode_file`` to a uint16 id file with ``p.workers`` workers (the
    tokenizer loaded and its path checked untimed)."""
    tok = _tokenizer(p, fast=True)
    out = Path(p.tmp) / "ids.bin"
    return lambda: tok.encode_file(p.corpus, out, workers=p.workers, allowed_special="all") and None


def bpestore_command_n(p: Params):
    """``bpestore encode gpt2 --file F --out ids.bin --workers N`` as a user runs it
    (interpreter start, imports, tokenizer load and check included)."""
    import subprocess
    import sys

    from bench.common import REPO

    argv = [sys.executable, str(REPO / "cli.py"), "--db", p.db, "encode", "gpt2", "--file", p.corpus,
            "--out", str(Path(p.tmp) / "ids.bin"), "--workers", str(p.workers), "--quiet"]
    return lambda: subprocess.run(argv, check=True) and None


def _documents(text: str, n: int) -> list[str]:
    """text cut at line ends into pieces of about n characters."""
    docs, start = [], 0
    while start < len(text):
        end = text.find("\n", start + n)
        end = len(text) if end < 0 else end + 1
        docs.append(text[start:end])
        start = end
    return docs


def tiktoken_batch_n(p: Params):
    """tiktoken ``encode_ordinary_batch(num_threads=N)`` of the text in memory, cut
    at line ends into 1M-character documents (reading and cutting untimed)."""
    enc = cases.tiktoken_gpt2()
    docs = _documents(Path(p.corpus).read_text(encoding="utf-8"), 1 << 20)
    return lambda: enc.encode_ordinary_batch(docs, num_threads=p.workers) and None


def tiktoken_id_file_n(p: Params):
    """The same id file with tiktoken as a user would write it: read the file,
    ``encode_ordinary_batch(num_threads=N)``, pack as uint16, write."""
    from array import array

    enc = cases.tiktoken_gpt2()
    out = Path(p.tmp) / "ids.bin"

    def run() -> None:
        docs = _documents(Path(p.corpus).read_text(encoding="utf-8"), 1 << 20)
        with open(out, "wb") as f:
            for ids in enc.encode_ordinary_batch(docs, num_threads=p.workers):
                f.write(array("H", ids).tobytes())
    return run


def encode_workers(corpus: Path, name: str, runs: int, vocab_size: int, workers: tuple[int, ...] = (1, 2)) -> str:
    """``encode --file --out`` at each worker count against tiktoken's batch on as many threads."""
    size = corpus.stat().st_size
    rows = []
    with cases.gpt2_db() as db:
        for n in workers:
            p = Params(corpus=str(corpus), db=db, workers=n)
            ours, batch, tk_file, command = measure([
                Case(f"bpestore encode_file, {n} workers", bpestore_id_file_n, p),
                Case(f"tiktoken encode_ordinary_batch, {n} threads", tiktoken_batch_n, p),
                Case(f"tiktoken id file, {n} threads", tiktoken_id_file_n, p),
                Case(f"bpestore encode command, {n} workers", bpestore_command_n, p)], runs)
            rows.append([str(n), f"{ours.seconds:.2f}", f"{batch.seconds:.2f}",
                         f"{batch.seconds / ours.seconds:.2f}×", f"{tk_file.seconds:.2f}",
                         f"{tk_file.seconds / ours.seconds:.2f}×", f"{command.seconds:.2f}",
                         f"{batch.seconds / command.seconds:.2f}×"])
    return (f"### `encode --file --out ids.bin --workers N`: `{name}` ({size / 1e6:.1f} MB), GPT-2, "
            f"vs tiktoken on N threads (medians of {runs}; ratios are throughput over tiktoken's)\n\n"
            + markdown_table(["N", "bpestore `encode_file` (s)", "tiktoken `encode_ordinary_batch` (s)",
                              "vs batch", "tiktoken read + batch + write uint16 (s)", "vs that",
                              "`bpestore encode` command, fresh process (s)", "command vs batch"], rows))


# -- suites ---------------------------------------------------------------------------
def _speed_row(result: Result, base: Result, size: int) -> list[str]:
    same = ("yes" if result.digest == base.digest else "(an id file; see the tests)" if not result.digest
            else f"**no** ({result.digest})")
    return [result.label, f"{size / 1e6 / result.seconds:.2f}", f"{result.seconds:.2f}",
            f"{base.seconds / result.seconds:.2f}×", f"{result.peak_mb:.0f}", same]


SPEED_HEADERS = ["encoder", "MB/s", "median (s)", "throughput / tiktoken's", "peak RSS (MB)",
                 "same ids as tiktoken"]


def encoder(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    with cases.gpt2_db() as db:
        p = Params(corpus=str(corpus), db=db)
        results = measure([
            Case("tiktoken `encode_ordinary`, one thread", tiktoken_encode, p),
            Case("bpestore, tiktoken-core path", fast_encode, p),
            Case("bpestore, pure-Python path", pure_encode, p),
            Case("bpestore, tiktoken-core path, file, 1 worker", fast_file_1, p),
            Case("bpestore, tiktoken-core path, file, 2 workers", fast_file_2, p),
            Case("bpestore, pure-Python path, file, 1 worker", pure_file_1, p),
            Case("bpestore, pure-Python path, file, 2 workers", pure_file_2, p),
            Case("bpestore, tiktoken-core path, id file (`encode --out`), 1 worker", fast_id_file_1, p),
            Case("bpestore, tiktoken-core path, id file (`encode --out`), 2 workers", fast_id_file_2, p),
            Case("bpestore, pure-Python path, id file (`encode --out`), 2 workers", pure_id_file_2, p),
            Case("HF tokenizers (one string)", cases.hf_encode, p),
            Case("(fast-path check, once per version and process)", check_time, p),
            Case("(GIL-free hashing, one thread)", hash_one_thread, p),
            Case("(GIL-free hashing, two threads)", hash_two_threads, p)], runs)
    size = corpus.stat().st_size
    base, check, one, two = results[0], results[-3], results[-2], results[-1]
    rows = [_speed_row(r, base, size) for r in results[:-3]]
    title = f"### Encoder paths, GPT-2, `{name}` ({size / 1e6:.1f} MB, {int(base.digest.split(':')[0]):,} tokens)"
    return (title + "\n\n" + markdown_table(SPEED_HEADERS, rows)
            + f"\n\nThe fast path's check (spec, rank equivalence over GPT-2's 50,000 merges, Unicode "
            f"tables) took {check.seconds:.2f} s (median), once per version per process, untimed above. "
            f"Cores free during the runs: GIL-free hashing in two threads ran "
            f"{one.seconds / two.seconds:.2f}× as fast as in one (2.00× on an idle 2-core machine); "
            f"two workers cannot gain more than that.")


def encoder_worst(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    sections = []
    with cases.gpt2_db() as db:
        rows = []
        inputs = [(kind, 1_000_000) for kind in WORST] + [("random letters", 10_000_000)]
        for kind, n in inputs:
            p = Params(corpus=f"worst:{kind}:{n}", db=db)
            tk, fast, pure = measure([Case(f"tiktoken, {kind}", tiktoken_encode, p),
                                      Case(f"bpestore fast, {kind}", fast_encode, p),
                                      Case(f"bpestore pure, {kind}", pure_encode, p)], runs)
            same = "yes" if tk.digest == fast.digest == pure.digest else "**no**"
            rows.append([f"{n / 1e6:.0f} MB of {kind}", f"{tk.seconds:.2f}",
                         f"{fast.seconds:.2f}", f"{fast.seconds / tk.seconds:.2f}×",
                         f"{pure.seconds:.2f}", f"{pure.seconds / tk.seconds:.2f}×", same])
        sections.append("### Worst cases: no pre-token break (GPT-2, one string)\n\n" + markdown_table(
            ["input", "tiktoken (s)", "bpestore fast (s)", "fast time / tiktoken's",
             "bpestore pure (s)", "pure time / tiktoken's", "same ids"], rows))
        big = prepare_corpus("english_100M")
        p = Params(corpus=str(big), db=db)
        rows = []
        for label, setup, stream in [("tiktoken-core path", fast_stream_setup_only, fast_stream),
                                     ("pure-Python path", pure_stream_setup_only, pure_stream)]:
            before, after = measure([Case(f"{label}: set-up only", setup, p),
                                     Case(f"{label}: encode_iterable over english_100M", stream, p)],
                                    runs)
            rows.append([label, f"{after.seconds:.1f}", f"{before.peak_mb:.0f}", f"{after.peak_mb:.0f}",
                         f"{after.peak_mb - before.peak_mb:.0f}"])
        sections.append(f"### Memory: `encode_iterable` over `english_100M` ({big.stat().st_size / 1e6:.0f} MB)\n\n"
                        + markdown_table(["path", "time (s)", "peak RSS, set-up only (MB)",
                                          "peak RSS, set-up + stream (MB)", "growth (MB)"], rows))
    return "\n\n".join(sections)
