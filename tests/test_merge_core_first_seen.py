"""``tie_break="first-seen"`` on both merge cores against a naive recount.

The reference is minbpe's loop over distinct words in the order the text first shows
them: each step rebuilds the pair counts in a dict filled in text order and takes
``max(stats, key=stats.get)`` (the first pair of highest count), then merges it
everywhere; nothing of bpestore's trainer is used."""

from __future__ import annotations

import random

import pytest

from bpestore import trainer
from bpestore.trainer import BpeTrainer

BYTES = [bytes([i]) for i in range(256)]


def naive_first_seen(words: list[tuple[list[int], int]], n_merges: int) -> list[tuple[int, int, int, int]]:
    """(left, right, token, count) of each merge, a token's id reused when two merges spell it alike."""
    symbols, counts = [list(w) for w, _ in words], [c for _, c in words]
    vocab = list(BYTES)
    merges = []
    for _ in range(n_merges):
        stats: dict[tuple[int, int], int] = {}
        for word, count in zip(symbols, counts):
            for pair in zip(word, word[1:]):
                stats[pair] = stats.get(pair, 0) + count
        if not stats:
            break
        pair = max(stats, key=stats.get)  # type: ignore[arg-type]
        data = vocab[pair[0]] + vocab[pair[1]]
        token = vocab.index(data) if data in vocab else len(vocab)
        if token == len(vocab):
            vocab.append(data)
        merges.append((pair[0], pair[1], token, stats[pair]))
        for k, word in enumerate(symbols):
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    out.append(token)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            symbols[k] = out
    return merges


def random_words(seed: int) -> list[tuple[list[int], int]]:
    rng = random.Random(seed)
    letters = b"abcde"[:rng.randint(2, 5)]
    words: dict[bytes, int] = {}
    for _ in range(rng.randint(1, 80)):
        word = bytes(rng.choice(letters) for _ in range(rng.randint(1, 14)))
        words.setdefault(word, rng.randint(1, 6))
    return [(list(w), c) for w, c in words.items()]


def trained(words, compiled: bool, merges: int, **options) -> list[tuple[int, int, int, int]]:
    t = BpeTrainer(words, BYTES, tie_break="first-seen", compiled=compiled, **options)
    return [(m.left, m.right, m.token, m.count) for m in t.train(max_merges=merges)]


@pytest.mark.parametrize("seed", range(60))
def test_random_words_equal_the_naive_recount_on_both_cores(seed, monkeypatch):
    """Every merge, its count and its token, ties everywhere (few letters, small counts);
    the compiled core also at 3 threads with every merge split."""
    words = random_words(seed)
    expected = naive_first_seen(words, 60)
    assert trained(words, False, 60) == expected
    if trainer.COMPILED_CORE is None:
        pytest.skip(f"the compiled merge core is not built here: {trainer.CORE_STATUS}")
    assert trained(words, True, 60) == expected
    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 1)
    assert trained(words, True, 60, threads=3) == expected


@pytest.mark.parametrize("seed", range(12))
def test_replay_then_continue_is_the_uninterrupted_run(seed):
    """Resume and extend: stored merges replayed, then training on, gives the same merges."""
    words = random_words(100 + seed)
    full = naive_first_seen(words, 50)
    stop = len(full) // 2
    for compiled in (False, True) if trainer.COMPILED_CORE is not None else (False,):
        t = BpeTrainer(words, BYTES, tie_break="first-seen", compiled=compiled)
        t.replay([m[:2] for m in full[:stop]], [m[3] for m in full[:stop]])
        rest = [(m.left, m.right, m.token, m.count) for m in t.train(max_merges=50)]
        assert rest == full[stop:], compiled


def test_the_first_place_in_a_word_after_merges():
    """The docstring's example: words ``ab`` then ``cab`` (equal counts). ``(a, b)``
    (first word) beats ``(c, a)``; then ``(c, ab)`` is the only pair left."""
    words = [(list(b"ab"), 1), (list(b"cab"), 1)]
    for compiled in (False, True) if trainer.COMPILED_CORE is not None else (False,):
        got = trained(words, compiled, 5)
        assert [(BYTES[m[0]] if m[0] < 256 else m[0], m[3]) for m in got] == [(b"a", 2), (b"c", 1)]
        assert got == naive_first_seen(words, 5)
