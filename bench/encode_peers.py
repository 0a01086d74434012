"""encode-peers: bpestore's encoder beside every exact peer, one process, single thread.

Peers (where each has the encoding): tiktoken (built from the shared files), quicktok-v1
and bpe-openai (their own cl100k/o200k tables; bpe-openai also GPT-2), rs-bpe
(cl100k/o200k), Hugging Face tokenizers (GPT-2, from the shared vocab and merges) and
bpestore (a Tokenizer of the same files: the compiled encode core where built). Every
peer's ids are checked against tiktoken's before any timing; a peer that differs is
reported and not timed. Runs are interleaved (run 1 of every peer, then run 2, ...) and
the median of --runs is shown as MB/s of UTF-8 text, with the ratio to tiktoken and to
quicktok-v1. Then: --threads scaling (bpestore encode_batch over 50,000-character documents vs
tiktoken's encode_ordinary_batch), the tables' memory, and a fresh process's import +
load + first encode vs tiktoken's build-from-ranks + encode.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import CORPORA, REPO, markdown_table, prepare_corpus

TEXTS = ["english_medium", "code_python_5M", "german_1M", "russian_1M", "japanese_1M", "chinese_1M", "hindi_1M"]
LANGUAGES = TEXTS[2:]
ENCODINGS = ["gpt2", "cl100k", "o200k"]
QUICK_CHARS = 500_000  # --quick: this much of each text
THREAD_DOC_CHARS = 50_000  # threads: english_medium cut into documents of this size
Encode = Callable[[str], list[int]]


def tiktoken_pattern(name: str) -> str:
    from unittest import mock

    from tiktoken_ext import openai_public

    if name == "gpt2":
        return openai_public.r50k_pat_str
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {}):
        return {"cl100k": openai_public.cl100k_base, "o200k": openai_public.o200k_base}[name]()["pat_str"]


def shared_ranks(name: str) -> dict[bytes, int]:
    """The encoding's ranks from the shared files (GPT-2's vocabulary, or a rank file)."""
    if name == "gpt2":
        from bpestore.formats.gpt2 import str_to_token

        encoder = json.loads((CORPORA / "gpt2_vocab.json").read_text(encoding="utf-8"))
        return {str_to_token(s): i for s, i in encoder.items() if s != "<|endoftext|>"}
    from bpestore.formats.tiktoken_ranks import read_ranks

    return read_ranks(CORPORA / f"{name}_base.tiktoken")


def build_tiktoken(name: str, ranks: dict[bytes, int]):
    import tiktoken

    return tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks, special_tokens={})


def build_bpestore(name: str):
    """bpestore's Tokenizer of the shared files: GPT-2's vocabulary and merges, or a rank
    file (read in C, the core's tables built straight from its ranks)."""
    if name == "gpt2":
        from bpestore import Tokenizer
        from bpestore.formats.gpt2 import read_gpt2

        vocab, merges, specials = read_gpt2(CORPORA / "gpt2_vocab.json", CORPORA / "gpt2_merges.txt")
        return Tokenizer(vocab, merges, specials, name=name)
    from bpestore.formats.tiktoken_ranks import load_tokenizer

    return load_tokenizer(CORPORA / f"{name}_base.tiktoken", name, name=name)


def peers(name: str, ranks: dict[bytes, int]) -> dict[str, Encode]:
    """Each installed peer's encode_ordinary for one encoding (tiktoken first)."""
    found: dict[str, Encode] = {"tiktoken": build_tiktoken(name, ranks).encode_ordinary}
    if name != "gpt2":
        try:
            import quicktok

            found["quicktok-v1"] = quicktok.get_encoding(f"{name}_base").encode_ordinary
        except ImportError:
            pass
        try:
            from rs_bpe import openai

            rs = getattr(openai, f"{name}_base")()
            found["rs-bpe"] = rs.encode
        except ImportError:
            pass
        try:
            import bpe_openai  # ships cl100k and o200k (its gpt2 downloads)

            found["bpe-openai ²"] = in_pieces(bpe_openai.get_encoding(f"{name}_base").encode_ordinary, name)
        except ImportError:
            pass
    if name == "gpt2":
        try:
            from tokenizers import Tokenizer as HFTokenizer
            from tokenizers.models import BPE
            from tokenizers.pre_tokenizers import ByteLevel

            hf = HFTokenizer(BPE.from_file(str(CORPORA / "gpt2_vocab.json"), str(CORPORA / "gpt2_merges.txt")))
            hf.pre_tokenizer = ByteLevel(add_prefix_space=False)
            found["HF tokenizers"] = lambda text: hf.encode(text, add_special_tokens=False).ids
        except ImportError:
            pass
    tok = build_bpestore(name)
    found[f"bpestore ({tok.backend})"] = tok.encode_ordinary
    return found


def in_pieces(encode: Encode, pattern: str) -> Encode:
    """``encode`` applied to pieces of about 100,000 characters cut where the pattern
    cuts words anyway (bpe-openai refuses long inputs): the same ids as the whole text.
    The pieces of the last text are cut once, outside the timed calls."""
    from bpestore.spec import TokenizerSpec
    from bpestore.text import TextPipeline, rechunk

    pipeline = TextPipeline(TokenizerSpec(pretokenizer=pattern))
    cut: dict[int, list[str]] = {}

    def encode_pieces(text: str) -> list[int]:
        if id(text) not in cut:
            cut.clear()
            cut[id(text)] = list(rechunk((text[i:i + 100_000] for i in range(0, len(text), 100_000)), pipeline))
        return [i for piece in cut[id(text)] for i in encode(piece)]
    encode_pieces(" ")
    return encode_pieces


def read_text(name: str, quick: bool) -> str:
    text = prepare_corpus(name).read_text(encoding="utf-8")
    return text[:QUICK_CHARS] if quick else text


def speeds(found: dict[str, Encode], text: str, runs: int) -> tuple[dict[str, float | str], float]:
    """Median MB/s of each peer on text (interleaved runs), or why it was not timed."""
    expected = found["tiktoken"](text)
    exact = {}
    why: dict[str, str] = {}
    for peer, encode in found.items():
        try:
            same = list(encode(text)) == expected
        except Exception as exc:  # a peer's own limit (bpe-openai refuses long inputs)
            why[peer] = f"fails: {str(exc)[:40]}"
            continue
        if same:
            exact[peer] = encode
    times: dict[str, list[float]] = {peer: [] for peer in exact}
    for _ in range(runs):
        for peer, encode in exact.items():
            start = time.perf_counter()
            encode(text)
            times[peer].append(time.perf_counter() - start)
    mb = len(text.encode("utf-8")) / 1e6
    return ({peer: mb / statistics.median(times[peer]) if peer in times else why.get(peer, "ids differ")
             for peer in found}, mb)


def single_thread(runs: int, quick: bool) -> str:
    sections = []
    texts = {name: read_text(name, quick) for name in TEXTS}
    texts["5 languages"] = "\n".join(texts[name] for name in LANGUAGES)
    for encoding in ENCODINGS:
        found = peers(encoding, shared_ranks(encoding))
        names = list(found)
        rows = []
        for text_name in ["english_medium", "code_python_5M", "5 languages", *LANGUAGES]:
            result, mb = speeds(found, texts[text_name], runs)
            base = result["tiktoken"]
            quick_base = result.get("quicktok-v1")
            cells = []
            for peer in names:
                value = result[peer]
                if isinstance(value, str):
                    cells.append(value)
                    continue
                cell = f"{value:.1f} ({value / base:.2f}×"  # type: ignore[operator]
                if isinstance(quick_base, float):
                    cell += f", {value / quick_base:.2f}× qt"
                cells.append(cell + ")")
            rows.append([f"{text_name} ({mb:.1f} MB)", *cells])
            print(f"  {encoding} {text_name}: " + ", ".join(f"{p} {c}" for p, c in zip(names, cells)), flush=True)
        sections.append(f"#### {encoding}: MB/s (× tiktoken, × quicktok-v1), median of {runs}\n\n"
                        + markdown_table(["text", *names], rows))
    sections.append("² bpe-openai refuses long inputs: it encodes pieces of about 100,000 characters cut "
                    "where the pattern cuts words anyway (the same ids; the cutting is not timed).")
    return "\n\n".join(sections)


def thread_scaling(threads: tuple[int, ...], runs: int, quick: bool) -> str:
    """bpestore encode_batch(workers=N) and tiktoken encode_ordinary_batch(num_threads=N) on
    english_medium (--quick: its first 4 M characters) cut into documents of 50,000 characters.
    The scaling is the median over rounds of each round's time at the first count over its time
    at N: a peer's runs of a round are adjacent, in turn one way and the other (which comes first
    finds the caches as the other peer left them), so a machine whose speed drifts (a shared VM)
    cancels out."""
    tok = build_bpestore("cl100k")
    enc = build_tiktoken("cl100k", shared_ranks("cl100k"))
    text = read_text("english_medium", False)[:4_000_000 if quick else None]
    docs = [text[i:i + THREAD_DOC_CHARS] for i in range(0, len(text), THREAD_DOC_CHARS)]
    mb = len(text.encode("utf-8")) / 1e6
    expected = enc.encode_ordinary_batch(docs, num_threads=1)
    assert tok.encode_batch(docs, workers=2) == expected, "bpestore's batch ids differ from tiktoken's"
    encode: dict[str, Callable[[int], object]] = {
        "bpestore": lambda n: tok.encode_batch(docs, workers=n),
        "tiktoken": lambda n: enc.encode_ordinary_batch(docs, num_threads=n)}
    times: dict[str, list[float]] = {f"{who} {n}": [] for who in encode for n in threads}
    for round_ in range(runs):
        for who, run in encode.items():  # each peer's counts adjacent, first one way, then the other
            for n in threads if round_ % 2 == 0 else threads[::-1]:
                start = time.perf_counter()
                run(n)
                times[f"{who} {n}"].append(time.perf_counter() - start)

    def scaling(who: str, n: int) -> float:
        return statistics.median(one / many for one, many in zip(times[f"{who} {threads[0]}"], times[f"{who} {n}"]))

    rows = []
    for n in threads:
        ours, theirs = (mb / statistics.median(times[f"{who} {n}"]) for who in ("bpestore", "tiktoken"))
        rows.append([str(n), f"{ours:.1f}", f"{scaling('bpestore', n):.2f}×", f"{theirs:.1f}",
                     f"{scaling('tiktoken', n):.2f}×", f"{ours / theirs:.2f}×"])
    return (f"#### Threads: cl100k, english_medium ({mb:.1f} MB) in documents of {THREAD_DOC_CHARS:,} characters, "
            f"median of {runs} (scaling: median of the rounds' ratios)\n\n" + markdown_table(
                ["threads", "bpestore MB/s", f"× bpestore at {threads[0]}", "tiktoken MB/s",
                 f"× tiktoken at {threads[0]}", "bpestore × tiktoken"], rows))


FRESH = {
    "bpestore": """
import time, sys; t = time.perf_counter()
from bench.encode_peers import build_bpestore
tok = build_bpestore(sys.argv[1])
tok.encode_ordinary(open(sys.argv[2], encoding="utf-8").read())
print(time.perf_counter() - t)""",
    "bpestore, from a store": """
import time, sys; t = time.perf_counter()
import bpestore
tok = bpestore.open(sys.argv[3]).tokenizer(sys.argv[1])
tok.encode_ordinary(open(sys.argv[2], encoding="utf-8").read())
print(time.perf_counter() - t)""",
    "tiktoken": """
import time, sys; t = time.perf_counter()
from bench.encode_peers import build_tiktoken, shared_ranks
enc = build_tiktoken(sys.argv[1], shared_ranks(sys.argv[1]))
enc.encode_ordinary(open(sys.argv[2], encoding="utf-8").read())
print(time.perf_counter() - t)""",
}


def fresh_store(folder: Path) -> Path:
    """A store holding the three encodings, imported from the shared files (not timed)."""
    import bpestore

    db = folder / "fresh.db"
    store = bpestore.open(str(db))
    store.import_gpt2("gpt2", vocab=CORPORA / "gpt2_vocab.json", merges=CORPORA / "gpt2_merges.txt")
    for name in ENCODINGS[1:]:
        store.import_tiktoken(name, CORPORA / f"{name}_base.tiktoken", pattern=name)
    return db


def fresh_process(runs: int, quick: bool) -> str:
    """A fresh process: imports, the tables built from the shared files (or read from a
    store), one encode of english_medium."""
    import tempfile

    path = prepare_corpus("english_medium")
    if quick:
        short = path.with_name("english_medium_quick.txt")
        short.write_text(read_text("english_medium", True), encoding="utf-8")
        path = short
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        db = fresh_store(Path(folder))
        for encoding in ENCODINGS:
            times: dict[str, list[float]] = {who: [] for who in FRESH}
            for _ in range(runs):
                for who, code in FRESH.items():
                    start = time.perf_counter()
                    subprocess.run([sys.executable, "-c", code, encoding, str(path), str(db)], cwd=REPO, check=True,
                                   capture_output=True)
                    times[who].append(time.perf_counter() - start)
            ours, stored, theirs = (statistics.median(times[who]) for who in FRESH)
            rows.append([encoding, f"{ours:.2f}", f"{theirs / ours:.2f}×", f"{stored:.2f}", f"{theirs / stored:.2f}×",
                         f"{theirs:.2f}"])
    return (f"#### Fresh process: python start + imports + tables from the shared files (or a store) + one "
            f"encode of {path.name}, median of {runs}\n\n"
            + markdown_table(["encoding", "bpestore, files (s)", "× tiktoken", "bpestore, store (s)", "× tiktoken",
                              "tiktoken (s)"], rows))


def table_memory() -> str:
    """The RSS a process gains building each one's tables (after the ranks are read), the
    backtracking tables included (built once len(tokens) // 16 long words are merged: a
    Japanese text of 300,000 characters has enough; its word cache counts too)."""
    code = """
import gc, sys, psutil
from bench.encode_peers import build_bpestore, build_tiktoken, shared_ranks
ranks = shared_ranks(sys.argv[1]); gc.collect()
before = psutil.Process().memory_info().rss
made = build_bpestore(sys.argv[1]) if sys.argv[2] == "bpestore" else build_tiktoken(sys.argv[1], ranks)
made.encode_ordinary(open(sys.argv[3], encoding="utf-8").read()[:300_000])  # enough long words to build all
core = made.engine.accelerated[0] if hasattr(made, "engine") else None  # (tiktoken: none)
core_mb = core.table_bytes() / 1e6 if hasattr(core, "table_bytes") else 0
print((psutil.Process().memory_info().rss - before) / 1e6, core_mb)
"""
    rows = []
    for encoding in ENCODINGS:
        cells = {}
        for who in ("bpestore", "tiktoken"):
            out = subprocess.run([sys.executable, "-c", code, encoding, who, str(CORPORA / "japanese_1M.txt")],
                                 cwd=REPO, check=True,
                                 capture_output=True, text=True).stdout.split()
            cells[who] = (float(out[0]), float(out[1]))
        rows.append([encoding, f"{cells['bpestore'][0]:.0f}", f"{cells['bpestore'][1]:.1f}",
                     f"{cells['tiktoken'][0]:.0f}"])
    return ("#### Memory: RSS gained building the tables (MB)\n\n"
            + markdown_table(["encoding", "bpestore Tokenizer (all its tables)", "of which the core's",
                              "tiktoken Encoding"], rows))


def chars_versions(runs: int, quick: bool) -> str:
    """Versions the compiled core now encodes beside today's pure-Python path: a character
    alphabet with word markers and an unknown token, and byte-level word markers."""
    from bpestore import Tokenizer, alphabet
    from bpestore.spec import TokenizerSpec
    from bpestore.text import TextPipeline
    from bpestore.trainer import BpeTrainer

    training = prepare_corpus("tinyshakespeare").read_text(encoding="utf-8")[:300_000]
    text = read_text("english_medium", True)[:1_000_000 if quick else 3_000_000]
    mb = len(text.encode("utf-8")) / 1e6
    rows = []
    versions = [("chars, `</w>`, `<unk>`", TokenizerSpec(alphabet="chars", end_of_word="</w>", unk_token="<unk>")),
                ("chars, byte fallback, whitespace", TokenizerSpec(alphabet="chars", byte_fallback=True,
                                                                   pretokenizer="whitespace")),
                ("bytes, `</w>`", TokenizerSpec(end_of_word="</w>"))]
    for label, spec in versions:
        counts = TextPipeline(spec).count_words(training)
        vocab = alphabet.initial_vocab(spec, counts)
        trainer = BpeTrainer(alphabet.initial_words(spec, counts, vocab), vocab)
        for _ in trainer.train(vocab_size=2000):
            pass
        merges = [(trainer.token_bytes[m.left], trainer.token_bytes[m.right]) for m in trainer.merges]
        core = Tokenizer(dict(enumerate(trainer.token_bytes)), merges, spec=spec)
        pure = Tokenizer(dict(enumerate(trainer.token_bytes)), merges, spec=spec, fast=False)
        assert core.encode(text) == pure.encode(text), label
        times: dict[str, list[float]] = {"core": [], "pure": []}
        for _ in range(runs):
            for who, tok in (("core", core), ("pure", pure)):
                fresh = Tokenizer(tok.vocab, tok.merges, spec=spec, fast=who == "core")  # caches start empty
                start = time.perf_counter()
                fresh.encode(text)
                times[who].append(time.perf_counter() - start)
        ours, today = (mb / statistics.median(times[who]) for who in ("core", "pure"))
        rows.append([label, core.backend, f"{ours:.1f}", f"{today:.2f}", f"{ours / today:.1f}×"])
    return (f"#### Other versions: english_medium ({mb:.1f} MB), 2,000 tokens trained on tinyshakespeare, "
            f"median of {runs}\n\n" + markdown_table(
                ["version", "backend", "MB/s", "pure-Python (today) MB/s", "× today"], rows))


def long_words(size: int = 1_000_000) -> str:
    """One word of ``size`` characters (no pre-token break): bpestore vs tiktoken, cl100k, one run each."""
    tok = build_bpestore("cl100k")
    enc = build_tiktoken("cl100k", shared_ranks("cl100k"))
    words = {"letters a-z": "".join(chr(0x61 + (i * 7919) % 26) for i in range(size)), "`a` repeated": "a" * size,
             "CJK ideographs": "".join(chr(0x4E00 + (i * 7919) % 2000) for i in range(size // 3)),
             "digits and spaces": "12 " * (size // 3)}
    tok.encode_ordinary("tables built before timing")
    enc.encode_ordinary("tables built before timing")
    rows = []
    for label, text in words.items():
        start = time.perf_counter()
        ours = tok.encode_ordinary(text)
        middle = time.perf_counter()
        theirs = enc.encode_ordinary(text)
        end = time.perf_counter()
        mb = len(text.encode("utf-8")) / 1e6
        rows.append([f"{label} ({mb:.1f} MB)", f"{middle - start:.2f}", f"{end - middle:.2f}",
                     f"{(end - middle) / (middle - start):.2f}×", "yes" if ours == theirs else "NO"])
    return ("#### One long word (cl100k), one run each\n\n"
            + markdown_table(["text", "bpestore (s)", "tiktoken (s)", "bpestore speed × tiktoken", "same ids"], rows))


def encode_peers(corpus: Path, name: str, runs: int, vocab_size: int, *, threads: tuple[int, ...] = (1, 2),
                 quick: bool = False) -> str:
    runs = max(runs, 5) if not quick else runs
    title = "### encode-peers: exact encoders side by side" + (" (--quick: 500,000 characters a text)" if quick else "")
    from bench.encode_docs import batch_rows, seen_once

    parts = [title, seen_once(quick), batch_rows(threads, quick),
             single_thread(runs, quick), thread_scaling(threads, runs, quick), chars_versions(runs, quick)]
    if not quick:
        parts += [long_words(), fresh_process(runs, quick), table_memory()]
    return "\n\n".join(parts)


SUITES = {"encode-peers": encode_peers}
