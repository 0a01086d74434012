"""trained-encode: a version bpestore trained beside an imported one, documents seen once.

A byte-level version of ``VOCAB`` tokens with the cl100k pattern is trained on the first
``TRAIN_BYTES`` of english_100M in a temporary store, which also imports cl100k from the
shared rank file; both are loaded with ``store.tokenizer``, warmed up on another text, and
encode documents each seen once (as bench/encode_docs.py cuts and groups them: groups of
~200 kB, the order rotated per group). Held-out texts: english_medium (other books), code and
Japanese. The table shows each one's MB/s (CPU time) and the trained version's speed over
cl100k's (median over groups). Each version's ids are checked against tiktoken built from
its own ranks.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.common import CORPORA, DATA, markdown_table, prepare_corpus
from bench.encode_docs import WARM_UP, documents, groups

VOCAB = 64_000
TRAIN_BYTES = 20_000_000
TEXTS = {"english": "english_medium", "code": "code_python_5M", "Japanese": "japanese_1M"}
SIZES = {"2 kB": 2_000, "20 kB": 20_000}
BUDGET = 1_000_000  # bytes of each text and size timed


def train_store(folder: Path) -> Path:
    """A store holding ``en64k`` (trained here) and ``cl100k`` (imported)."""
    import bpestore

    whole = prepare_corpus("english_100M").read_text(encoding="utf-8")[:TRAIN_BYTES]
    source = folder / "train.txt"
    source.write_text(whole[:whole.rfind("\n") + 1], encoding="utf-8")
    db = folder / "trained.db"
    with bpestore.open(str(db)) as store:
        store.ingest("en", [source], pretokenizer="cl100k")
        store.train("en64k", corpus="en", vocab_size=VOCAB)
        store.import_tiktoken("cl100k", CORPORA / "cl100k_base.tiktoken", pattern="cl100k")
    return db


def tiktoken_of(tok) -> object:
    """tiktoken built from a loaded version's ranks (its ids): the independent check."""
    import tiktoken

    from bench.encode_peers import tiktoken_pattern

    specials = set(tok.special_ids) if hasattr(tok, "special_ids") else set()
    ranks = {token: i for i, token in tok.vocab.items() if i not in specials}
    return tiktoken.Encoding(name="check", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks,
                             special_tokens={})


def trained_encode(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    """The trained 64k version's encode speed beside imported cl100k's."""
    import bpestore

    DATA.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        db = train_store(Path(tmp))
        store = bpestore.open(str(db))
        toks = {"en64k": store.tokenizer("en64k"), "cl100k": store.tokenizer("cl100k")}
        rules = {label: tok.engine.accelerated[0].rule for label, tok in toks.items()}
        checks = {label: tiktoken_of(tok) for label, tok in toks.items()}
        warm = (CORPORA / WARM_UP).read_text(encoding="utf-8")
        for tok in toks.values():
            tok.encode_ordinary(warm)
        for label, corpus_name in TEXTS.items():
            text = prepare_corpus(corpus_name).read_text(encoding="utf-8")[:6 * BUDGET]
            for k, (size_label, size) in enumerate(SIZES.items()):
                docs = documents(text[k * len(text) // 2:(k + 1) * len(text) // 2], size, BUDGET)
                spent: dict[str, list[float]] = {who: [] for who in toks}
                ratios = []
                for g, group in enumerate(groups(docs)):
                    made = {}
                    for who in list(toks)[g % 2:] + list(toks)[:g % 2]:
                        start = time.process_time()
                        made[who] = [toks[who].encode_ordinary(doc) for doc in group]
                        spent[who].append(time.process_time() - start)
                    for who, ids in made.items():  # checked after the timed runs
                        assert ids == [checks[who].encode_ordinary(doc) for doc in group], who
                    ratios.append(spent["cl100k"][-1] / spent["en64k"][-1])
                mb = sum(len(d.encode("utf-8")) for d in docs) / 1e6
                rows.append([label, size_label, str(len(docs)), f"{mb / sum(spent['en64k']):.1f}",
                             f"{mb / sum(spent['cl100k']):.1f}", f"{statistics.median(ratios):.2f}×"])
    return (f"### A trained {VOCAB:,}-token version (cl100k pattern, {TRAIN_BYTES // 1_000_000} MB of english_100M) "
            f"beside imported cl100k, documents seen once (CPU time; core rule: en64k {rules['en64k']}, cl100k "
            f"{rules['cl100k']})\n\n" + markdown_table(
                ["text", "documents of", "documents", "en64k MB/s", "cl100k MB/s", "en64k speed × cl100k's"], rows))


SUITES = {"trained-encode": trained_encode}
