"""The compiled merge core (bpestore/_mergecore.c) gives exactly the pure-Python trainer's merges.

The pure trainer is the reference (itself checked against HF tokenizers, the CS336
reference merges and a naive recount in test_trainer.py); here every setting the
tests train with is run on both cores and the merge lists compared."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys

import pytest

import bpestore
from bpestore import alphabet, trainer
from bpestore.spec import TokenizerSpec
from bpestore.text import TextPipeline
from bpestore.trainer import BpeTrainer

from .conftest import read_corpus

EOT = "<|endoftext|>"


@pytest.fixture(autouse=True)
def compiled_core():
    if trainer.COMPILED_CORE is None:
        pytest.skip(f"the compiled merge core is not built here: {trainer.CORE_STATUS}")


def both(make, **train):
    """(merges, token bytes) of the trainer ``make(compiled)`` on each core; asserts they agree."""
    results = []
    for compiled in (True, False):
        t = make(compiled)
        merges = [(m.left, m.right, m.token, m.count) for m in t.train(**train)]
        results.append((merges, t.token_bytes))
    assert results[0] == results[1]
    assert results[0][0], "the test should train something"
    return results[0]


@pytest.fixture(scope="module")
def shakespeare_counts():
    return TextPipeline(TokenizerSpec(special_tokens=(EOT,))).count_words(read_corpus("tinyshakespeare.txt"))


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_both_tie_breaks_on_tinyshakespeare(shakespeare_counts, tie_break):
    spec = TokenizerSpec(special_tokens=(EOT,), tie_break=tie_break)

    def make(compiled):
        return BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), alphabet.initial_vocab(spec),
                          tie_break=tie_break, hf_order=alphabet.hf_order(spec) if tie_break == "hf" else None,
                          special_ids=alphabet.special_ids(spec), compiled=compiled)

    both(make, vocab_size=3000)


@pytest.mark.parametrize("seed", range(6))
def test_random_words_with_overlaps_min_frequency_and_length(seed):
    # Small alphabets and long words: adjacent and overlapping occurrences ("aaaa", "abab"),
    # repeated merges of a token with itself, counts beyond 2^32.
    rng = random.Random(seed)
    words = [([rng.choice((0, 1, 1, 2)) for _ in range(rng.randint(1, 60))],
              rng.choice((1, 2, 3, 1 << 40))) for _ in range(300)]
    initial = [bytes([i]) for i in range(256)]
    for settings in ({}, {"min_frequency": 3}, {"max_token_length": 5}):
        both(lambda compiled, s=settings: BpeTrainer(words, initial, compiled=compiled, **s), max_merges=120)
    both(lambda compiled: BpeTrainer(words, initial, tie_break="hf", hf_order=list(range(256)),
                                     compiled=compiled), max_merges=120)


def test_one_long_word_and_existing_tokens():
    rng = random.Random(3)
    long = [rng.choice((97, 98)) for _ in range(20_000)]
    # b"ab" exists already (id 257): merging (a, b) reuses it.
    initial = [bytes([i]) for i in range(256)] + [b"<s>", b"ab"]
    both(lambda compiled: BpeTrainer([(long, 3), ([97, 98, 99], 5), ([257, 99], 2)], initial, special_ids=[256],
                                     compiled=compiled), max_merges=60)


def test_replay_then_continue(shakespeare_counts):
    spec = TokenizerSpec()

    def make(compiled):
        return BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), alphabet.initial_vocab(spec),
                          compiled=compiled)

    full, _ = both(make, vocab_size=1500)
    for stop in (1, 400):
        for compiled in (True, False):
            t = make(compiled)
            t.replay([(left, right) for left, right, _, _ in full[:stop]])
            rest = [(m.left, m.right, m.token, m.count) for m in t.train(vocab_size=1500)]
            assert [m[:3] for m in full[stop:]] == [m[:3] for m in rest], (stop, compiled)


SETTINGS = [
    {"vocab_size": 1200},
    {"vocab_size": 1200, "tie_break": "hf", "special_tokens": [EOT]},
    {"merges": 400, "min_frequency": 5},
    {"merges": 400, "max_token_length": 4},
    {"merges": 300, "alphabet": "chars", "no_inner_space": True},
    {"merges": 300, "alphabet": "chars", "end_of_word": "</w>"},
    {"merges": 300, "alphabet": "chars", "start_of_word": "_", "unk_token": "<unk>"},
    {"merges": 300, "alphabet": "chars", "byte_fallback": True},
]


def _merges(store, ref):
    return [(m.left, m.right, m.token) for m in store.merges(ref, limit=100_000)]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_store_training_every_spec_on_both_cores(tmp_path, monkeypatch, settings):
    pristine = tmp_path / "pristine.db"
    text = tmp_path / "shakes.txt"
    text.write_text(read_corpus("tinyshakespeare.txt")[:300_000], encoding="utf-8")
    with bpestore.open(pristine) as s:
        s.ingest("shakes", [str(text)], special_tokens=[EOT], workers=1)
    results = []
    for core in ("compiled", "pure"):
        db = tmp_path / f"{core}.db"
        shutil.copy(pristine, db)
        monkeypatch.setattr(trainer, "COMPILED_CORE", trainer.COMPILED_CORE if core == "compiled" else None)
        with bpestore.open(db) as s:
            s.train("t", corpus="shakes", **settings)
            # An extension on the same corpus, and a stopped run resumed.
            s.train("t", corpus="shakes", parent="t@1",
                    **{k: v for k, v in settings.items() if k in ("min_frequency", "max_token_length")},
                    **({"merges": settings["merges"] + 100} if "merges" in settings else
                       {"vocab_size": settings["vocab_size"] + 100}))
            results.append((_merges(s, "t@1"), _merges(s, "t@2")))
        bpestore.Store.tokenizer_cache.clear()
    assert results[0] == results[1]
    assert len(results[0][1]) > len(results[0][0]) > 0


def test_version_says_which_core():
    out = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[1] == "merge core: compiled (C)"
    env = {**__import__("os").environ, "BPESTORE_PURE": "1"}
    out = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True,
                         check=True, env=env)
    assert out.stdout.splitlines()[1] == "merge core: pure-Python (BPESTORE_PURE is set)"
