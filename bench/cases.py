"""The measured work, one function per (tool, task), run inside ``bench.child``.

Each function takes ``Params``, does its untimed set-up (imports, opening a
store, reading the text) and returns a zero-argument callable: the timed part.
``prepare_*`` helpers build the databases some cases start from (untimed).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DATA, GPT2_MERGES, GPT2_VOCAB, Params

SPECIAL = "<|endoftext|>"
INGEST_VOCAB = 300  # HF "ingest": a trainer that does read + pre-tokenize + count, few merges

if TYPE_CHECKING:
    from bpestore import Store, Tokenizer

Timed = Callable[[], Any]


# -- bpestore -----------------------------------------------------------------
def _fresh_store(p: Params) -> Store:
    import bpestore

    return bpestore.open(Path(p.tmp) / "bench.db")


def bpestore_ingest(p: Params) -> Timed:
    store = _fresh_store(p)
    return lambda: store.ingest("bench", [p.corpus])


def bpestore_train_cold(p: Params) -> Timed:
    store = _fresh_store(p)

    def run() -> None:
        store.ingest("bench", [p.corpus])
        store.train("en", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL])
    return run


def _copied_store(p: Params, source: str) -> Store:
    """A private copy of a prepared database (untimed)."""
    import bpestore

    db = Path(p.tmp) / "bench.db"
    shutil.copyfile(source, db)
    return bpestore.open(db)


def bpestore_retrain(p: Params) -> Timed:
    """Train from counts already in the store, nothing to reuse: the merge phase."""
    store = _copied_store(p, p.db.replace("trained", "ingested"))
    return lambda: store.train("new", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL])


def bpestore_retrain_other(p: Params) -> Timed:
    """Retrain with other settings (the other tie-break) beside an existing version."""
    store = _copied_store(p, p.db)
    return lambda: store.train("new", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL],
                               tie_break="hf")


def bpestore_checkpoint_at_end(p: Params) -> Timed:
    """bpestore_retrain with every merge written in one batch at the end."""
    store = _copied_store(p, p.db.replace("trained", "ingested"))
    return lambda: store.train("new", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL],
                               checkpoint_every=10 ** 9, checkpoint_seconds=float("inf"))


def bpestore_smaller(p: Params) -> Timed:
    """A version at half the vocabulary of an equal run: a prefix of its merges."""
    store = _copied_store(p, p.db)
    return lambda: store.train("new", corpus="bench", vocab_size=p.vocab_size // 2, special_tokens=[SPECIAL])


def bpestore_larger(p: Params) -> Timed:
    """A version at 1.25x the vocabulary of an equal run: its merges, then more."""
    store = _copied_store(p, p.db)
    return lambda: store.train("new", corpus="bench", vocab_size=p.vocab_size * 5 // 4,
                               special_tokens=[SPECIAL])


def bpestore_resume(p: Params) -> Timed:
    """Resume ``cut@1``, stopped at half its merges."""
    store = _copied_store(p, p.db)
    return lambda: store.resume("cut@1")


class _Stop(Exception):
    pass


def prepare_trained_db(db: Path, corpus: str, vocab_size: int) -> None:
    """Two stores: ``ingested.db`` (corpus ``bench`` only) and ``db`` = that plus
    ``cut@1`` (stopped at half its merges) and ``en@1`` (complete)."""
    import bpestore

    ingested = db.with_name("ingested.db")
    with bpestore.open(ingested) as store:
        store.ingest("bench", [corpus])
    shutil.copyfile(ingested, db)
    half = (vocab_size - 257) // 2

    def stop_at_half(state) -> None:
        if state.done == half:
            raise _Stop
    with bpestore.open(db) as store:
        try:
            store.train("cut", corpus="bench", vocab_size=vocab_size, special_tokens=[SPECIAL],
                        progress=stop_at_half)
        except _Stop:
            pass
        store.train("en", corpus="bench", vocab_size=vocab_size, special_tokens=[SPECIAL])


def prepare_gpt2_db(db: Path) -> None:
    """A store holding GPT-2 imported as ``gpt2@1``."""
    import bpestore

    with bpestore.open(db) as store:
        store.import_gpt2("gpt2", vocab=GPT2_VOCAB, merges=GPT2_MERGES)


@contextmanager
def gpt2_db() -> Iterator[str]:
    """A temporary store holding GPT-2 (``prepare_gpt2_db``); yields its path."""
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp:
        db = Path(tmp) / "gpt2.db"
        prepare_gpt2_db(db)
        yield str(db)


def _bpestore_gpt2(p: Params) -> Tokenizer:
    import bpestore

    tok = bpestore.open(p.db).tokenizer("gpt2")
    _ = tok.backend  # the encoder path is chosen (a once-per-version check) before timing
    return tok


def bpestore_encode(p: Params) -> Timed:
    tok = _bpestore_gpt2(p)
    text = Path(p.corpus).read_text(encoding="utf-8")
    return lambda: tok.encode_ordinary(text)


def bpestore_encode_warm(p: Params) -> Timed:
    """Second pass over the same text: every word is in the word cache."""
    tok = _bpestore_gpt2(p)
    text = Path(p.corpus).read_text(encoding="utf-8")
    tok.encode_ordinary(text)
    return lambda: tok.encode_ordinary(text)


# -- Hugging Face tokenizers --------------------------------------------------
def _hf_train(corpus: str, vocab_size: int, special_tokens: list[str]) -> Timed:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    return lambda: tok.train([corpus], trainer)


# -- the other exact trainers: gigabpe (HF's merges), rustbpe, bpeasy ---------------
def gigabpe_train(p: Params) -> Timed:
    """gigabpe's whole cold run (read, count, train) on ``p.workers`` threads (0: all cores)."""
    import gigabpe

    return lambda: gigabpe.train_bpe([p.corpus], p.vocab_size, special_tokens=[SPECIAL], pretokenizer="bytelevel",
                                     threads=p.workers or None)


def rustbpe_train(p: Params) -> Timed:
    import rustbpe

    from bpestore.text import PATTERNS

    def run() -> None:
        with open(p.corpus, encoding="utf-8") as f:
            rustbpe.Tokenizer().train_from_iterator(f, p.vocab_size, pattern=PATTERNS["gpt2"])
    return run


def bpeasy_train(p: Params) -> Timed:
    import bpeasy

    from bpestore.text import PATTERNS

    def run() -> None:
        with open(p.corpus, encoding="utf-8") as f:
            bpeasy.train_bpe(f, PATTERNS["gpt2"], 128, p.vocab_size)
    return run


def hf_ingest(p: Params) -> Timed:
    return _hf_train(p.corpus, INGEST_VOCAB, [])


def hf_train(p: Params) -> Timed:
    return _hf_train(p.corpus, p.vocab_size, [SPECIAL])


def hf_encode(p: Params) -> Timed:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(GPT2_VOCAB), str(GPT2_MERGES)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = Path(p.corpus).read_text(encoding="utf-8")
    return lambda: tok.encode(text, add_special_tokens=False).ids


# -- tiktoken -----------------------------------------------------------------
def tiktoken_gpt2():
    """GPT-2 built offline from the shared vocab.json (ids are tiktoken's ranks)."""
    import json

    import tiktoken

    from bpestore.formats.gpt2 import str_to_token
    from bpestore.text import PATTERNS

    vocab = json.loads(GPT2_VOCAB.read_text(encoding="utf-8"))
    ranks = {str_to_token(s): i for s, i in vocab.items() if s != SPECIAL}
    return tiktoken.Encoding(name="gpt2", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                             special_tokens={SPECIAL: vocab[SPECIAL]})


def tiktoken_encode(p: Params) -> Timed:
    enc = tiktoken_gpt2()
    text = Path(p.corpus).read_text(encoding="utf-8")
    return lambda: enc.encode_ordinary(text)


# -- identical merge lists with --tie-break hf ---------------------------------
def _merge_digest_input(merges: list[tuple[bytes, bytes]]) -> list[int]:
    """A merge list as a list of ints (length-prefixed bytes), for the child's digest."""
    out: list[int] = []
    for pair in merges:
        for part in pair:
            out += [len(part), *part]
    return out


def bpestore_hf_tie_break(p: Params) -> Timed:
    """Cold ingest + train with the hf tie-break; returns the merge list."""
    store = _fresh_store(p)

    def run() -> list[int]:
        store.ingest("bench", [p.corpus])
        version = store.train("hf", corpus="bench", vocab_size=p.vocab_size, special_tokens=[SPECIAL],
                              tie_break="hf")
        return _merge_digest_input(store.tokenizer(version.ref).merges)
    return run


def hf_same_text(p: Params) -> Timed:
    """HF BpeTrainer fed the file in pieces cut where pre-tokenization cannot
    change (``train([file])`` would pre-tokenize each line on its own)."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from bpestore.formats.gpt2 import str_to_token
    from bpestore.ingest import TextReader
    from bpestore.spec import TokenizerSpec
    from bpestore.text import TextPipeline, rechunk

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=p.vocab_size, special_tokens=[SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    pipeline = TextPipeline(TokenizerSpec(special_tokens=(SPECIAL,)))

    def run() -> list[int]:
        with open(p.corpus, "rb") as f:
            tok.train_from_iterator(rechunk(TextReader(f, p.corpus), pipeline), trainer)
        merges = json.loads(tok.to_str())["model"]["merges"]
        return _merge_digest_input([tuple(str_to_token(t) for t in (m.split(" ") if isinstance(m, str) else m))
                                    for m in merges])
    return run
