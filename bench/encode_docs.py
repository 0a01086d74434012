"""encode-peers, documents seen once: what users run. bpestore's versions loaded from a
store (``bpestore.open(db).tokenizer``), each document encoded once by every peer (a
different text warms each one up first), 2 kB / 20 kB / 1 MB documents of each language.
Peers in one process, single thread: gigatoken (list: ``as_tiktoken().encode_ordinary``;
array: ``encode``, beside bpestore's ``encode_array``, a load of its own so that its word cache
has not seen the document either), quicktok-v1 and tiktoken. Ids are
checked equal to tiktoken's on every document. Figures are CPU-time ratios: documents are
taken in groups of about 200 kB, each group encoded by every peer in rotated order (each peer
given fresh copies of the documents, as read from a file), and the ratio is the median over
groups of the peer's CPU time over bpestore's.
Then encode_batch (GPT-2) on 10,000 2 kB documents beside HF tokenizers' and gigatoken's batch, at
each thread count (a child process per count: rayon's pools are sized once per process).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import CORPORA, DATA, REPO, markdown_table, prepare_corpus

TEXTS = {"english": "english_100M", "code": "code_python_5M", "German": "german_1M", "Russian": "russian_1M",
         "Japanese": "japanese_1M", "Chinese": "chinese_1M", "Hindi": "hindi_1M"}
SIZES = {"2 kB": 2_000, "20 kB": 20_000, "1 MB": 1_000_000}
GROUP_BYTES = 200_000  # a group of documents every peer encodes in turn
TEXT_BYTES = 2_000_000  # at most this much of each text is timed (--quick: a quarter)
WARM_UP = "taylorswift.txt"  # a different text that warms every peer up


def store_path() -> Path:
    """A store holding gpt2, cl100k and o200k imported from the shared files (kept under
    bench/.data between runs; importing is not timed)."""
    from bench.encode_peers import fresh_store

    db = DATA / "encode_docs" / "fresh.db"
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        fresh_store(db.parent)
    return db


def documents(text: str, size: int, budget: int) -> list[str]:
    """text cut into documents of about ``size`` UTF-8 bytes (at line ends where one is
    near), at most ``budget`` bytes in all."""
    docs: list[str] = []
    at = total = 0
    while at < len(text) and total < budget:
        end = at + size
        while end < len(text) and len(text[at:end].encode("utf-8")) > size:  # CJK: 3 bytes a character
            end = at + (end - at) * 2 // 3
        cut = text.rfind("\n", at + (end - at) // 2, end)
        end = cut + 1 if cut > 0 and end < len(text) else min(end, len(text))
        docs.append(text[at:end])
        total += len(text[at:end].encode("utf-8"))
        at = end
    return docs


def groups(docs: list[str]) -> list[list[str]]:
    found: list[list[str]] = [[]]
    size = 0
    for doc in docs:
        if size >= GROUP_BYTES:
            found.append([])
            size = 0
        found[-1].append(doc)
        size += len(doc.encode("utf-8"))
    if len(found) > 1 and size < GROUP_BYTES // 2:  # a short end (a text's last, cut document) joins the group before
        found[-2] += found.pop()
    return found


def peers(encoding: str, db: Path) -> dict[str, Callable[[str], object]]:
    """Each peer's encode of one document (bpestore's from the store first)."""
    import bpestore
    from bench.encode_peers import build_tiktoken, shared_ranks

    store = bpestore.open(str(db))
    tok = store.tokenizer(f"{encoding}@1")
    store.tokenizer_cache.clear()  # the array's own load: its own word cache, each document new to it too
    found: dict[str, Callable[[str], object]] = {"bpestore list": tok.encode_ordinary,
                                                 "bpestore array": store.tokenizer(f"{encoding}@1").encode_array}
    if encoding != "gpt2":
        import gigatoken
        import quicktok

        giga = gigatoken.Tokenizer.from_tiktoken(CORPORA / f"{encoding}_base.tiktoken")
        found["gigatoken list"] = giga.as_tiktoken().encode_ordinary
        found["gigatoken array"] = giga.encode
        found["quicktok-v1"] = quicktok.get_encoding(f"{encoding}_base").encode_ordinary
    found["tiktoken"] = build_tiktoken(encoding, shared_ranks(encoding)).encode_ordinary
    return found


def cell(found: dict[str, Callable[[str], object]], docs: list[str]) -> dict[str, float]:
    """Each peer's median over groups of its CPU time over bpestore's (list to list, array
    to array): each document encoded once by every peer, the order rotated per group, the
    ids compared with tiktoken's after the group's timed runs."""
    names = list(found)
    ratios: dict[str, list[float]] = {name: [] for name in names}
    for k, group in enumerate(groups(docs)):
        spent, made = {}, {}
        for name in names[k % len(names):] + names[:k % len(names)]:
            encode = found[name]
            # A copy of its own, as text read from a file: str keeps the UTF-8 form a peer asked
            # for (PyUnicode_AsUTF8), which would spare each peer after the first that work.
            fresh = [doc.encode("utf-8").decode("utf-8") for doc in group]
            start = time.process_time()
            made[name] = [encode(doc) for doc in fresh]
            spent[name] = time.process_time() - start
        for name in names:  # checked after the timed runs: no peer sees a document twice
            ids = [x.tolist() if hasattr(x, "tolist") else list(x) for x in made[name]]  # type: ignore[attr-defined]
            assert ids == made["tiktoken"], f"{name} differs from tiktoken"
            base = spent["bpestore array" if name.endswith("array") else "bpestore list"]
            ratios[name].append(spent[name] / base if base else float("nan"))
    return {name: statistics.median(values) for name, values in ratios.items()}


def seen_once(quick: bool = False) -> str:
    """The tables: per encoding, each language and size, bpestore's speed × each peer."""
    db = store_path()
    budget = TEXT_BYTES // 4 if quick else TEXT_BYTES
    texts = {label: prepare_corpus(name).read_text(encoding="utf-8")[:3 * budget] for label, name in TEXTS.items()}
    warm = (CORPORA / WARM_UP).read_text(encoding="utf-8")
    sections = []
    for encoding in ("cl100k", "o200k", "gpt2"):
        found = peers(encoding, db)
        for encode in found.values():
            encode(warm)
        labels = ["english", "code"] if encoding == "gpt2" else list(TEXTS)
        others = [name for name in found if not name.startswith("bpestore")]
        rows = []
        for label in labels:
            text = texts[label]
            for k, (size_label, size) in enumerate(SIZES.items()):  # each size its own third: seen once
                docs = documents(text[k * len(text) // 3:(k + 1) * len(text) // 3], size, budget)
                if len(docs) < 2 and size_label == "1 MB":
                    docs = documents(text[2 * len(text) // 3:], size // 4, budget)  # a short third: quarters
                    size_label = f"{size // 4_000} kB"
                ratios = cell(found, docs)
                rows.append([label, size_label, str(len(docs)), *(f"{ratios[name]:.2f}" for name in others)])
                print(f"  {encoding} {label} {size_label}: " + ", ".join(f"{n} {ratios[n]:.2f}" for n in others),
                      flush=True)
        sections.append(f"#### {encoding}, a version loaded from a store, each document encoded once: bpestore's "
                        "speed × each peer (CPU-time ratio, median over groups of ~200 kB; arrays vs bpestore's "
                        "encode_array, lists vs encode_ordinary)\n\n"
                        + markdown_table(["text", "documents of", "documents", *others], rows))
    return "\n\n".join(sections)


BATCH_CHILD = """
import json, sys, time
from pathlib import Path
threads, db, encoding = int(sys.argv[1]), sys.argv[2], sys.argv[3]
docs = json.loads(Path(sys.argv[4]).read_text())
import bpestore, gigatoken
from tokenizers import Tokenizer
tok = bpestore.open(db).tokenizer(encoding + "@1")
giga = gigatoken.Tokenizer.from_tiktoken(sys.argv[5])
hf = Tokenizer.from_file(sys.argv[6])
peers = {"bpestore": lambda d: tok.encode_batch(d, workers=threads),
         "bpestore array": lambda d: tok.encode_batch_array(d, workers=threads),
         "HF tokenizers": lambda d: [e.ids for e in hf.encode_batch(d, add_special_tokens=False)],
         "gigatoken": lambda d: giga.encode_batch_list(d)}
expected = tok.encode_batch(docs[:200])
for name, encode in peers.items():
    assert [list(ids) for ids in encode(docs[:200])] == expected, name
    encode(docs[-200:])  # warm-up on other documents
times = {name: [] for name in peers}
for k in range(5):
    for name in list(peers)[k % 4:] + list(peers)[:k % 4]:
        start = time.perf_counter()
        peers[name](docs)
        times[name].append(time.perf_counter() - start)
print(json.dumps({name: sorted(t)[2] for name, t in times.items()}))
"""


def batch_rows(threads: tuple[int, ...], quick: bool = False) -> str:
    """encode_batch of 10,000 2 kB english documents (GPT-2: HF tokenizers is exact on it, from
    the shared vocab and merges; gigatoken from the same ranks as a rank file), wall time at
    each thread count."""
    import base64
    import tempfile

    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers.models import BPE
    from tokenizers.pre_tokenizers import ByteLevel

    from bench.encode_peers import shared_ranks

    db = store_path()
    text = prepare_corpus("english_100M").read_text(encoding="utf-8")[:25_000_000]
    docs = documents(text, 2_000, 20_000_000)[:2_500 if quick else 10_000]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        hf = HFTokenizer(BPE.from_file(str(CORPORA / "gpt2_vocab.json"), str(CORPORA / "gpt2_merges.txt")))
        hf.pre_tokenizer = ByteLevel(add_prefix_space=False)
        hf_path = Path(folder) / "gpt2.json"
        hf.save(str(hf_path))
        rank_file = Path(folder) / "r50k_base.tiktoken"  # gigatoken takes the pattern from the name
        rank_file.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in shared_ranks("gpt2").items()))
        docs_path = Path(folder) / "docs.json"
        docs_path.write_text(json.dumps(docs))
        for n in threads:
            env = {**os.environ, "RAYON_NUM_THREADS": str(n), "RAYON_RS_NUM_THREADS": str(n),
                   "TOKENIZERS_PARALLELISM": "true" if n > 1 else "false"}
            out = subprocess.run([sys.executable, "-c", BATCH_CHILD, str(n), str(db), "gpt2", str(docs_path),
                                  str(rank_file), str(hf_path)], cwd=REPO, env=env, capture_output=True, text=True)
            if out.returncode:
                raise RuntimeError(f"the batch child failed: {out.stderr[-2000:]}")
            secs = json.loads(out.stdout)
            mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
            ours = secs["bpestore"]
            rows.append([str(n), *(f"{mb / secs[name]:.1f}" for name in secs),
                         f"{secs['HF tokenizers'] / ours:.2f}×", f"{secs['gigatoken'] / ours:.2f}×"])
    return (f"#### encode_batch, GPT-2 from a store, {len(docs):,} english documents of 2 kB: MB/s (wall, "
            "median of 5 rotated rounds; a child process per thread count)\n\n"
            + markdown_table(["threads", "bpestore", "bpestore array", "HF tokenizers", "gigatoken list",
                              "bpestore × HF", "bpestore × gigatoken"], rows))
