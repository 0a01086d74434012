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
from .zipf import zipf_text

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


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf", "first-seen"])
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


@pytest.mark.parametrize("seed", range(4))
def test_ties_between_tokens_alike_in_their_first_eight_bytes(seed):
    # The lexicographic tie-break on tokens of 1 to 20 bytes that share long beginnings, are
    # beginnings of one another, and hold bytes 0 and 255 (the core orders most tokens by
    # their first 8 bytes, then by all of them): counts of 1 to 3, so most pairs tie.
    rng = random.Random(seed)
    stems = [bytes(rng.choice((0, 0, 97, 255)) for _ in range(rng.randint(6, 12))) for _ in range(6)]
    words = [(list(rng.choice(stems)[:rng.randint(1, 12)] + bytes(rng.choice((0, 97, 98, 255))
                                                                  for _ in range(rng.randint(0, 8)))),
              rng.choice((1, 2, 3))) for _ in range(400)]
    both(lambda compiled: BpeTrainer(words, [bytes([i]) for i in range(256)], compiled=compiled), max_merges=300)


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


# -- randomized: every knob of BpeTrainer, the C state against the pure-Python reference --------------
def _random_case(seed: int) -> tuple[list, list[bytes], dict]:
    """Random words over a small alphabet (overlaps, repeated tokens, merges whose bytes
    exist already), given as lists, tuples, bytes or ranges, some with count 0 or a
    single symbol, and random settings: tie-break (a random HF numbering), min_frequency,
    max_token_length, allow_merge, special tokens."""
    rng = random.Random(seed)
    letters = rng.sample(range(97, 123), rng.choice((2, 3, 4, 8)))
    words: list = []
    for _ in range(rng.randint(1, 400)):
        symbols = [rng.choice(letters) for _ in range(rng.choice((0, 1, 2, 3, 5, 8, 13, 40)))]
        count = rng.choice((0, 1, 1, 2, 3, 7, 1 << 33))
        kind = rng.randrange(4)
        words.append((bytes(symbols) if kind == 0 else tuple(symbols) if kind == 1 else symbols, count))
    # Initial tokens beyond the bytes: a special and strings merges will spell again.
    initial = [bytes([i]) for i in range(256)] + [b"<s>"]
    for _ in range(rng.randint(0, 4)):
        data = bytes(rng.choice(letters) for _ in range(rng.randint(2, 3)))
        if data not in initial:
            initial.append(data)
    words.append(([256, letters[0], 256], 5))  # the special never merges
    if len(initial) > 257:
        words.append(([len(initial) - 1, letters[0]], 4))  # an initial multi-byte token in a word
    settings: dict = {"special_ids": [256]}
    if rng.random() < 0.5:
        order = list(range(len(initial)))
        rng.shuffle(order)
        settings.update(tie_break="hf", hf_order=order)
    if rng.random() < 0.3:
        settings["min_frequency"] = rng.choice((2, 3, 10))
    if rng.random() < 0.3:
        settings["max_token_length"] = rng.choice((2, 3, 5))
    if rng.random() < 0.3:
        banned = rng.choice(letters)
        settings["allow_merge"] = lambda left, right: not (left.endswith(bytes([banned])) and len(right) > 1)
    return words, initial, settings


@pytest.mark.parametrize("seed", range(40))
def test_random_words_and_settings_on_both_cores(seed):
    words, initial, settings = _random_case(seed)
    stop = {"max_merges": 150} if seed % 2 else {"vocab_size": len(initial) + 100}
    results = []
    for compiled in (True, False):
        t = BpeTrainer(iter(words), initial, compiled=compiled, **settings)
        results.append(([(m.rank, m.left, m.right, m.token, m.count) for m in t.train(**stop)], t.token_bytes))
    assert results[0] == results[1]


def test_random_cases_reuse_existing_tokens():
    """The randomized cases do hit merges whose bytes exist already (the token keeps its id)."""
    reused = 0
    for seed in range(40):
        words, initial, settings = _random_case(seed)
        t = BpeTrainer(words, initial, compiled=True, **settings)
        merges = list(t.train(max_merges=150))
        reused += sum(1 for m in merges if m.token < len(initial) or
                      any(n.token == m.token for n in merges[:m.rank]))
    assert reused > 0


@pytest.mark.parametrize("seed", range(24))
def test_random_replay_then_continue_and_train_in_steps(seed):
    words, initial, settings = _random_case(seed)
    full = [(m.left, m.right, m.token, m.count)
            for m in BpeTrainer(words, initial, compiled=False, **settings).train(max_merges=120)]
    stop = len(full) // 2
    for compiled in (True, False):
        t = BpeTrainer(words, initial, compiled=compiled, **settings)
        t.replay([m[:2] for m in full[:stop]], [m[3] for m in full[:stop]], parallel_min_words=50)
        rest = list(t.train(max_merges=stop + 10)) + list(t.train(max_merges=120))
        assert [(m.left, m.right, m.token, m.count) for m in rest] == full[stop:], compiled


def test_cs336_reference_merges_on_the_compiled_state():
    from .conftest import corpus_path, reference_merges

    spec = TokenizerSpec(special_tokens=(EOT,))
    counts = TextPipeline(spec).count_words(corpus_path("corpus.en").read_text(encoding="utf-8"))
    t = BpeTrainer(alphabet.initial_words(spec, counts), alphabet.initial_vocab(spec),
                   special_ids=alphabet.special_ids(spec), compiled=True)
    merges = [(t.token_bytes[m.left], t.token_bytes[m.right]) for m in t.train(vocab_size=500)]
    assert merges == reference_merges()


def test_state_in_c_holds_no_python_words(shakespeare_counts):
    spec = TokenizerSpec()
    t = BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), alphabet.initial_vocab(spec), compiled=True)
    next(t.train(max_merges=1))
    assert t.words == [] and t._state is not None
    stats = t._state.stats()
    assert stats["words"] == sum(1 for w in shakespeare_counts if len(w) > 1)
    assert stats["tokens"] == 257 and stats["pairs"] > 0
    first = t.merges[0]
    assert t._state.count((first.left << 32) | first.right) == 0  # merged: gone


def test_bad_words_raise_cleanly():
    initial = [bytes([i]) for i in range(256)]
    with pytest.raises(IndexError):
        list(BpeTrainer([([1, 999], 1)], initial, compiled=True).train(max_merges=1))
    with pytest.raises((TypeError, ValueError)):
        list(BpeTrainer([([1, 2], 1, 3)], initial, compiled=True).train(max_merges=1))
    core = trainer.COMPILED_CORE.Trainer(initial)
    with pytest.raises(RuntimeError):
        core.run(1, 300, 1)  # before build()
    core.build()
    with pytest.raises(RuntimeError):
        core.add_words([([1, 2], 1)])  # after build()
    with pytest.raises(IndexError):
        trainer.COMPILED_CORE.Trainer(initial, ordinary=[256])  # not a token


_MEMORY_SCRIPT = """
import resource, sys
from bpestore import trainer
core = trainer.COMPILED_CORE.Trainer([bytes([i]) for i in range(256)])
word = bytes(range(97, 123)) * 400_000  # 10.4 MB
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
with open("/proc/self/statm") as f:
    used = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + 100 * 2**20, hard))
try:
    core.add_words((word, 1) for _ in range(1000))  # 40 MB of symbols per word in C
except MemoryError:
    print("MemoryError")
"""


def test_allocation_failure_is_memory_error():
    out = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "MemoryError"


def _growth_over_30_runs(once, measure) -> int:
    """What ``measure()`` grows by over 30 calls of ``once()``, after 3 to warm up."""
    for _ in range(3):
        once()
    before = measure()
    for _ in range(30):
        once()
    return measure() - before


def test_memory_stays_flat_over_many_trainings(shakespeare_counts):
    spec = TokenizerSpec()
    words = list(alphabet.initial_words(spec, shakespeare_counts))

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    def once() -> None:
        # One thread: threads allocating make their malloc arenas' RSS wobble by megabytes
        # (not leaks); the test below counts the bytes in use with threads instead.
        t = BpeTrainer(words, alphabet.initial_vocab(spec), compiled=True, threads=1)
        for _ in t.train(vocab_size=1500):
            pass

    # One training allocates ~2.6 MB in C (its heap alone ~0.4 MB): 30 leaks of any part show.
    assert _growth_over_30_runs(once, rss) < 2 * 2**20


def test_memory_in_use_stays_flat_with_threads(shakespeare_counts, monkeypatch):
    """With 3 threads and nearly every merge split, the bytes malloc holds in use (all
    arenas, glibc's mallinfo2) do not grow over 30 trainings: nothing the workers
    allocate (events, local pair tables, their words) is left behind."""
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc's mallinfo2 (2.33+)")
    libc.mallinfo2.restype = MallInfo2

    def in_use() -> int:
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd  # small blocks in use + mmapped ones

    spec = TokenizerSpec()
    words = list(alphabet.initial_words(spec, shakespeare_counts))
    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 64)

    def once() -> None:
        t = BpeTrainer(words, alphabet.initial_vocab(spec), compiled=True, threads=3)
        for _ in t.train(vocab_size=1500):
            pass
        assert t._state.stats()["split_merges"] > 0 and t._state.stats()["split_build"]

    # A training holds ~2.6 MB in C: 30 leaks of any part of it show.
    assert _growth_over_30_runs(once, in_use) < 512 * 2**10


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf", "first-seen"])
def test_synthetic_corpus_at_small_scale_on_both_cores(tmp_path, tie_break):
    """Synthetic Zipf text like the scale benchmark's: ~24,000 distinct words, most merges
    deep in the loop (vocab 4,000)."""
    spec = TokenizerSpec(tie_break=tie_break)
    counts = TextPipeline(spec).count_words(zipf_text(300_000, 50_000))
    assert len(counts) > 20_000

    def make(compiled):
        return BpeTrainer(alphabet.initial_words(spec, counts), alphabet.initial_vocab(spec), tie_break=tie_break,
                          hf_order=alphabet.hf_order(spec) if tie_break == "hf" else None, compiled=compiled)

    merges, _ = both(make, vocab_size=4000)
    assert len(merges) == 4000 - 256


# -- replay in C: the stored merges applied to each word as it comes in (resume, extend) ---------------
def _random_table(rng: random.Random, n_tokens: int, letters: list[int]) -> list[tuple[int, int, int]]:
    """A random merge table as (left, right, made): pairs listed twice (the first rank
    counts), made ids that reuse existing tokens (as merges spelling a token's bytes
    again do), pairs of the made ids, ranks that do not follow the making order."""
    pool = list(letters)
    table = []
    for _ in range(rng.randint(0, 40)):
        left, right = rng.choice(pool), rng.choice(pool)
        made = rng.choice((rng.randrange(n_tokens), rng.choice(pool), rng.randrange(257, n_tokens)))
        table.append((left, right, made))
        pool.append(made)
        if table and rng.random() < 0.15:
            table.append(rng.choice(table)[:2] + (rng.randrange(n_tokens),))  # a pair again
    return table


@pytest.mark.parametrize("seed", range(30))
def test_per_word_replay_in_c_is_merge_word(seed):
    """The core's per-word BPE (short words: the rank array; long ones: the heap) gives
    bpe.merge_word's ids and merge_steps' (a naive, independent loop), stage after stage."""
    from bpestore.bpe import merge_steps, merge_word

    rng = random.Random(seed)
    letters = rng.sample(range(97, 123), rng.choice((1, 2, 3, 5)))
    initial = [bytes([i]) for i in range(256)] + [b"<s>"] + [f"t{i}".encode() for i in range(40)]
    core = trainer.COMPILED_CORE.Trainer(initial)
    stages = [_random_table(rng, len(initial), letters) for _ in range(rng.choice((1, 1, 2, 3)))]
    tables = []
    for stage in stages:
        core.replay(stage)
        ranks: dict[int, int] = {}
        for rank, (left, right, _) in enumerate(stage):
            ranks.setdefault((left << 32) | right, rank)
        tables.append((ranks, [made for _, _, made in stage]))
    checked = 0
    for _ in range(200):
        word = [rng.choice(letters) for _ in range(rng.choice((0, 1, 2, 3, 7, 20, 47, 48, 49, 60, 300)))]
        expected = list(word)
        for ranks, made in tables:
            steps = merge_steps(expected, ranks, made)
            naive = steps[-1][2] if steps else expected
            expected = merge_word(list(expected), ranks, made)
            assert expected == naive
        assert core.replayed(word) == expected, (word, stages)
        checked += expected != word
    assert checked or not any(stages)


def test_per_word_replay_ties_and_reused_ids():
    core = trainer.COMPILED_CORE.Trainer([bytes([i]) for i in range(256)] + [b"aa"])
    core.replay([(97, 97, 256), (256, 97, 98), (97, 97, 99)])  # (a, a) again: keeps rank 0
    assert core.replayed([97, 97, 97]) == [98]  # "a a a" -> "aa a" (leftmost) -> b
    assert core.replayed([97] * 4) == [256, 256]
    assert core.replayed([97] * 100) == [256] * 50  # the long-word path
    assert core.replayed([97] * 101) == [256] * 49 + [98]
    with pytest.raises(IndexError):
        core.replay([(97, 97, 999)])
    with pytest.raises((TypeError, ValueError)):
        core.replay([(97, 97)])


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf", "first-seen"])
def test_replay_both_tie_breaks_specials_and_two_stages(shakespeare_counts, tie_break):
    """Resumed from several points (and replayed in two stages, as an extension of an
    extension), both cores merge on exactly as the uninterrupted run, counts included."""
    spec = TokenizerSpec(special_tokens=(EOT,), tie_break=tie_break)

    def make(compiled):
        return BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), alphabet.initial_vocab(spec),
                          tie_break=tie_break, hf_order=alphabet.hf_order(spec) if tie_break == "hf" else None,
                          special_ids=alphabet.special_ids(spec), compiled=compiled)

    full, _ = both(make, vocab_size=1500)
    for cuts in ((1,), (600,), (len(full) - 1,), (300, 900)):
        for compiled in (True, False):
            t = make(compiled)
            start = 0
            for cut in cuts:
                t.replay([m[:2] for m in full[start:cut]], [m[3] for m in full[:cut]])  # counts by rank
                start = cut
            assert t.words == [] if compiled else t.words
            rest = [(m.left, m.right, m.token, m.count) for m in t.train(vocab_size=1500)]
            assert rest == full[cuts[-1]:], (cuts, compiled)
            assert [(m.left, m.right, m.token, m.count) for m in t.merges] == full


@pytest.mark.parametrize("seed", range(12))
def test_random_replay_words_the_parent_never_saw(seed):
    """An extension on new words: the parent's merges, trained on some words, replayed on
    others (new letters too), then trained on: the compiled core as the pure one."""
    words, initial, settings = _random_case(seed)
    rng = random.Random(1000 + seed)
    parent = [(m.left, m.right, m.count)
              for m in BpeTrainer(words[: len(words) // 2], initial, compiled=False, **settings).train(max_merges=60)]
    more = [([rng.choice((97, 98, 99, 100, 120)) for _ in range(rng.choice((2, 5, 60)))], rng.randint(1, 9))
            for _ in range(100)]
    results = []
    for compiled in (True, False):
        t = BpeTrainer(words + more, initial, compiled=compiled, **settings)
        t.replay([m[:2] for m in parent], [m[2] for m in parent])
        results.append(([(m.rank, m.left, m.right, m.token, m.count) for m in t.train(max_merges=140)],
                        t.token_bytes))
    assert results[0] == results[1]


def _corpus_parts(tmp_path):
    """Two files: Shakespeare, then Dracula (words Shakespeare never used)."""
    import lzma

    with lzma.open(bpestore.sample_path(), "rt", encoding="utf-8") as f:
        dracula = f.read()[:120_000]
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(read_corpus("tinyshakespeare.txt")[:120_000], encoding="utf-8")
    b.write_text(dracula, encoding="utf-8")
    return a, b


@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_store_resume_and_extend_on_both_cores(db_url, tmp_path, monkeypatch, tie_break):
    """On SQLite and PostgreSQL: a stopped training resumed, and a version extended on a
    new corpus generation (words the parent never saw), itself stopped and resumed: the
    compiled core (replay in C from the cursor) stores the pure core's merges, and the
    resumed run the uninterrupted one's."""
    from .conftest import stop_at

    a, b = _corpus_parts(tmp_path)
    compiled_core = trainer.COMPILED_CORE
    cores = {"compiled": compiled_core, "pure": None, "whole": compiled_core}
    with bpestore.open(db_url) as s:
        # A corpus per run: no run may copy another's merges (an equal run's are reused).
        for name in cores:
            s.ingest(f"c{name}", [str(a)], special_tokens=[EOT], workers=1)
        s.train("twhole", corpus="cwhole", vocab_size=900, tie_break=tie_break)  # uninterrupted, compiled
        results: dict[str, list] = {}
        for core in ("compiled", "pure"):
            monkeypatch.setattr(trainer, "COMPILED_CORE", cores[core])
            with pytest.raises(KeyboardInterrupt):
                s.train(f"t{core}", corpus=f"c{core}", vocab_size=900, tie_break=tie_break, checkpoint_every=50,
                        progress=stop_at(300))
            s.resume(f"t{core}@1")
            results[core] = [_merges(s, f"t{core}@1")]
        assert results["compiled"] == results["pure"] == [_merges(s, "twhole@1")]
        for name in cores:
            s.ingest(f"c{name}", [str(b)])  # generation 2: Dracula's words
        for core in ("compiled", "pure"):
            monkeypatch.setattr(trainer, "COMPILED_CORE", cores[core])
            with pytest.raises(KeyboardInterrupt):
                s.train(f"t{core}", corpus=f"c{core}", vocab_size=1400, parent=f"t{core}@1", checkpoint_every=50,
                        progress=stop_at(len(results[core][0]) + 200))  # 200 of its own merges
            s.resume(f"t{core}@2")
            results[core].append(_merges(s, f"t{core}@2"))
        monkeypatch.setattr(trainer, "COMPILED_CORE", compiled_core)
        s.train("twhole", corpus="cwhole", vocab_size=1400, parent="twhole@1")  # uninterrupted extension
        assert results["compiled"] == results["pure"]
        assert results["compiled"][1] == _merges(s, "twhole@2")
        parent = results["compiled"][0]
        assert len(results["compiled"][1]) > len(parent) and results["compiled"][1][:len(parent)] == parent
        assert s.version("tcompiled@2").corpus_generation == 2
        # The extension merged strings only the new words hold.
        shakespeare = a.read_bytes()
        assert any(left + right not in shakespeare for left, right in s.tokenizer("tcompiled@2").merges[len(parent):])


# -- threads: the initial count and large merges split over workers ------------------------------------
THREAD_COUNTS = (1, 2, 3, 8)



@pytest.mark.parametrize("tie_break", ["lexicographic", "hf", "first-seen"])
def test_thread_counts_give_the_pure_merges(shakespeare_counts, monkeypatch, tie_break):
    """At 1, 2, 3 and 8 threads, with slices so small that nearly every merge (and the
    initial count) is split, the compiled core makes the pure trainer's merges, counts included."""
    spec = TokenizerSpec(special_tokens=(EOT,), tie_break=tie_break)
    settings = dict(tie_break=tie_break, hf_order=alphabet.hf_order(spec) if tie_break == "hf" else None,
                    special_ids=alphabet.special_ids(spec))
    initial = alphabet.initial_vocab(spec)
    pure = BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), initial, compiled=False, **settings)
    expected = [(m.left, m.right, m.token, m.count) for m in pure.train(vocab_size=2000)]
    for threads in THREAD_COUNTS:
        for parallel_min in (1, 7, 10**6):
            monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", parallel_min)
            t = BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), initial, compiled=True,
                           threads=threads, **settings)
            got = [(m.left, m.right, m.token, m.count) for m in t.train(vocab_size=2000)]
            assert got == expected, (threads, parallel_min)
            assert t.token_bytes == pure.token_bytes
            stats = t._state.stats()
            split = threads > 1 and parallel_min < 10**6
            assert stats["threads"] == threads and stats["split_build"] == split
            assert (stats["split_merges"] > 100) == split, stats


@pytest.mark.parametrize("seed", range(16))
def test_thread_counts_on_random_cases(seed, monkeypatch):
    """The randomized cases (overlaps, reused ids, so words listed twice in a bucket;
    min_frequency, max_token_length, allow_merge, both tie-breaks), split into slices
    of 1 to 3 words: every thread count gives the pure merges; replay too."""
    words, initial, settings = _random_case(seed)
    pure = BpeTrainer(words, initial, compiled=False, **settings)
    expected = [(m.rank, m.left, m.right, m.token, m.count) for m in pure.train(max_merges=150)]
    for threads in THREAD_COUNTS:
        monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 1 + seed % 3)
        t = BpeTrainer(iter(words), initial, compiled=True, threads=threads, **settings)
        assert [(m.rank, m.left, m.right, m.token, m.count) for m in t.train(max_merges=150)] == expected, threads
        half = len(expected) // 2
        r = BpeTrainer(iter(words), initial, compiled=True, threads=threads, **settings)
        r.replay([m[1:3] for m in expected[:half]], [m[4] for m in expected[:half]])
        assert [(m.rank, m.left, m.right, m.token, m.count) for m in r.train(max_merges=150)] == expected[half:]


def test_split_merge_of_a_bucket_listing_words_twice(monkeypatch):
    """A merge that reuses an id ("ab" exists: (a, b) makes it again) indexes words again
    under pairs that listed them already ((c, ab): [w0, w1, w0, w1, ...]). Split over
    threads, such a bucket is merged with each word once, as one thread does it."""
    initial = [bytes([i]) for i in range(256)] + [b"ab"]
    words = [([99, 256, 99, 97, 98, 97, 98, x], 1 + x % 3) for x in range(100, 140)]
    pure = BpeTrainer(words, initial, compiled=False)
    expected = [(m.left, m.right, m.token, m.count) for m in pure.train(max_merges=20)]
    assert expected[0][:3] == (97, 98, 256) and expected[1][:3] == (99, 256, 257)
    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 1)
    for threads in THREAD_COUNTS:
        t = BpeTrainer(words, initial, compiled=True, threads=threads)
        assert [(m.left, m.right, m.token, m.count) for m in t.train(max_merges=20)] == expected, threads
        assert (t._state.stats()["deduplicated"] > 0) == (threads > 1)


def test_thread_count_setting_cannot_change_results(monkeypatch):
    """The setting is keyword-only, defaults to the cores this process may use, is checked,
    and any value (1 to beyond the cores) gives the same merges and pair counts."""
    assert trainer.default_threads() >= 1
    words = [(w, c) for w, c in _synthetic_counts().items()]
    initial = [bytes([i]) for i in range(256)]
    assert BpeTrainer(words, initial, compiled=True).threads == min(trainer.default_threads(), 256)
    with pytest.raises(TypeError):
        BpeTrainer(words, initial, None, None, None, 1, None, None, (), True, 2)  # type: ignore[misc]
    for bad in (0, -1, 1.5):
        with pytest.raises(bpestore.InvalidArgumentError):
            BpeTrainer(words, initial, compiled=True, threads=bad)
    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 64)
    runs = []
    for threads in (1, 2, 5, 16, 64):
        t = BpeTrainer(words, initial, compiled=True, threads=threads)
        merges = [(m.left, m.right, m.token, m.count) for m in t.train(vocab_size=1500)]
        stats = t._state.stats()
        probe = [t._state.count((m[0] << 32) | m[1]) for m in merges[:50]]
        runs.append((merges, stats["pairs"], stats["symbols"], probe))
    assert all(run == runs[0] for run in runs[1:])
    assert len(runs[0][0]) == 1500 - 256


def _synthetic_counts():
    """Word counts of synthetic Zipf text: 60,000 words from a lexicon of 10,000."""
    return TextPipeline(TokenizerSpec()).count_words(zipf_text(60_000, 10_000))


def test_threads_in_the_store(tmp_path, monkeypatch):
    """Store.train on the compiled core with slices of 16 words and 1 or 3 threads stores the pure merges."""
    text = tmp_path / "shakes.txt"
    text.write_text(read_corpus("tinyshakespeare.txt")[:200_000], encoding="utf-8")
    pristine = tmp_path / "pristine.db"
    with bpestore.open(pristine) as s:
        s.ingest("shakes", [str(text)], workers=1)
    monkeypatch.setattr(trainer, "PARALLEL_MIN_WORDS", 16)
    results = []
    for core, threads in (("pure", 1), ("compiled", 1), ("compiled", 3)):
        db = tmp_path / f"{core}{threads}.db"
        shutil.copy(pristine, db)
        monkeypatch.setattr(trainer, "COMPILED_CORE", trainer.COMPILED_CORE if core == "compiled" else None)
        monkeypatch.setattr(trainer, "default_threads", lambda threads=threads: threads)
        with bpestore.open(db) as s:
            s.train("t", corpus="shakes", vocab_size=1000)
            results.append(_merges(s, "t@1"))
        bpestore.Store.tokenizer_cache.clear()
    assert results[0] == results[1] == results[2] and len(results[0]) == 1000 - 256


def test_a_batch_of_merges_is_one_call_of_the_core(shakespeare_counts):
    """step(n) makes up to n merges in one call of the compiled core, the same as one at a
    time (records and columns); `seconds` ends a batch after its first merge; an allow_merge
    that raises stops the step with its error, and a core left ahead of its caller refuses
    to go on."""
    spec = TokenizerSpec()

    def make(**settings):
        return BpeTrainer(alphabet.initial_words(spec, shakespeare_counts), alphabet.initial_vocab(spec),
                          compiled=True, **settings)

    full = make()
    ones = list(full.train(max_merges=500))
    batch = make()
    assert batch.step(300) == 300 and batch.step(10**6, max_merges=500) == 200
    assert batch.step(5, max_merges=500) == 0
    assert batch.merges == ones
    assert [list(c) for c in batch.merge_columns()] == [[getattr(m, f) for m in ones]
                                                        for f in ("left", "right", "token", "count")]
    assert make().step(10**6, seconds=0) == 1

    asked: list[tuple[bytes, bytes]] = []

    def allow(left: bytes, right: bytes) -> bool:
        asked.append((left, right))
        if len(asked) == 5:
            raise KeyError("stop")
        return True
    t = make(allow_merge=allow)
    with pytest.raises(KeyError, match="stop"):
        t.step(100)
    assert asked[:4] == [(full.token_bytes[m.left], full.token_bytes[m.right]) for m in ones[:4]]
    with pytest.raises(RuntimeError, match="unusable"):
        t.step(1)


def test_merges_text_of_the_core_equals_the_reference():
    from array import array

    from bpestore import spec as spec_module
    from bpestore.native import load

    core = load("_mergecore")[0]
    if core is None:
        pytest.skip("the merge core is not built")
    columns = [array("I", [0, 9, 10, 4294967295, 123456]), array("I", [1, 99, 100, 0, 7]),
               array("I", [256, 257, 65536, 1000000000, 3])]
    assert core.merges_text(*columns) == "".join(map("{},{},{};".format, *columns)).encode()
    assert core.merges_text(array("I"), array("I"), array("I")) == b""
    with pytest.raises(ValueError):
        core.merges_text(array("I", [1]), array("I"), array("I"))
    with pytest.raises(TypeError):
        core.merges_text(array("H", [1]), array("H", [1]), array("H", [1]))
    spec = spec_module.TokenizerSpec()
    assert spec_module.fingerprint_of_columns(spec, "d", *columns) == \
        spec_module.fingerprint_of_columns(spec, "d", *map(list, columns))


def test_tokens_from_are_the_merged_tokens_bytes():
    """The core's ``tokens_from``: each new token's bytes, its left's and its right's (the
    compiled trainer's token_bytes come from it), equal to the pure trainer's."""
    from bpestore.native import load

    if load("_mergecore")[0] is None:
        pytest.skip("the merge core is not built")
    words = {b"hello": 5, b"world": 3, b"held": 2, b"low": 7, b"lower": 4}
    initial = [bytes([b]) for b in range(256)]
    compiled = BpeTrainer(words.items(), initial)
    compiled.prepare()
    assert compiled._state is not None and compiled._state.tokens_from(256) == []
    while compiled.step(3, vocab_size=275):
        pass
    lefts, rights, made, _ = compiled.merge_columns()
    tokens = compiled.token_bytes
    assert len(tokens) > 260 and all(tokens[t] == tokens[a] + tokens[b] for a, b, t in zip(lefts, rights, made))
    assert compiled._state.tokens_from(260) == tokens[260:] and compiled._state.tokens_from(10 ** 6) == []
    pure = BpeTrainer(words.items(), initial, compiled=False)
    while pure.step(3, vocab_size=275):
        pass
    assert pure.token_bytes == tokens
