"""The measured work, one function per (tool, task), run inside ``bench.child``.

Each function takes ``Params``, does its untimed set-up (imports, opening a
store, reading the text) and returns a zero-argument callable: the timed part.
``prepare_*`` helpers build the databases some cases start from (untimed).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import GPT2_MERGES, GPT2_VOCAB, Params

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


def bpestore_retrain(p: Params) -> Timed:
    """A new version trained on counts already in the store (a copy of ``p.db``)."""
    import bpestore

    db = Path(p.tmp) / "bench.db"
    shutil.copyfile(p.db, db)
    store = bpestore.open(db)
    return lambda: store.train("en", corpus="bench", vocab_size=p.vocab_size,
                               special_tokens=[SPECIAL])


def prepare_trained_db(db: Path, corpus: str, vocab_size: int) -> None:
    """A store holding corpus ``bench`` and version ``en@1`` (start of ``bpestore_retrain``)."""
    import bpestore

    with bpestore.open(db) as store:
        store.ingest("bench", [corpus])
        store.train("en", corpus="bench", vocab_size=vocab_size, special_tokens=[SPECIAL])


def prepare_gpt2_db(db: Path) -> None:
    """A store holding GPT-2 imported as ``gpt2@1``."""
    import bpestore

    with bpestore.open(db) as store:
        store.import_gpt2("gpt2", vocab=GPT2_VOCAB, merges=GPT2_MERGES)


def _bpestore_gpt2(p: Params) -> Tokenizer:
    import bpestore

    return bpestore.open(p.db).tokenizer("gpt2")


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
def tiktoken_encode(p: Params) -> Timed:
    """GPT-2 built offline from the shared vocab.json (ids are tiktoken's ranks)."""
    import json

    import tiktoken

    from bpestore.formats.gpt2 import str_to_token
    from bpestore.text import PATTERNS

    vocab = json.loads(GPT2_VOCAB.read_text(encoding="utf-8"))
    ranks = {str_to_token(s): i for s, i in vocab.items() if s != SPECIAL}
    enc = tiktoken.Encoding(name="gpt2", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                            special_tokens={SPECIAL: vocab[SPECIAL]})
    text = Path(p.corpus).read_text(encoding="utf-8")
    return lambda: enc.encode_ordinary(text)
