"""Random rank tables and random texts fed to every compiled core, compared with a reference.

The tables are trained the way a version's are (the pure-Python trainer over the word
counts of a random corpus); the texts mix long words, CJK, emoji, digits, punctuation and
runs of whitespace. References: tiktoken's byte-pair merge for the token-rank rule and
``bpe.merge_word`` for the merge rule, each over the words of the ``regex`` module (whose
Unicode tables are the cores'; tiktoken's Rust regex may be of another Unicode version);
the pure-Python trainer for the merge core; the ``regex`` module (each pattern as its
authors spell it) and ``zlib`` for the count core. .ci/sanitize runs this file on cores
built with the address and UB sanitizers."""

from __future__ import annotations

import zlib
from array import array
from collections import Counter

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpestore import bpe, text, trainer
from bpestore.encoder import core_backend as encodecore
from bpestore.text import COUNT_CORE_PATTERNS, char_class
from bpestore.trainer import BpeTrainer

from .conftest import tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")
GPT2_ENCODER_PY = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PATTERNS = list(COUNT_CORE_PATTERNS)
BYTES = [bytes([b]) for b in range(256)]
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters where the patterns' alternatives meet, and scripts of several UTF-8 lengths.
pieces = st.one_of(
    st.text(st.sampled_from("abcab xyz'sre dll 0123 .,!?-_()'\"\n"), max_size=12),
    st.text(st.sampled_from("日本語の中文字、。かなカナ한국어"), max_size=8),
    st.text(st.sampled_from(" \t\n\r\u00a0\u3000"), min_size=1, max_size=20),  # whitespace runs
    st.text(st.sampled_from("éßñüÿ€😀🙂\u0301ab"), max_size=6),
    st.text(max_size=6),
    # long words: one letter or syllable many times, or a CJK run
    st.builds(lambda s, k: s * k, st.sampled_from(["a", "ab", "日本", "の", "xyz", "€", "😀", "7"]),
              st.integers(10, 400)),
)
texts = st.lists(pieces, max_size=12).map("".join)


@pytest.fixture(scope="module")
def references() -> dict[str, regex.Pattern]:
    return {"gpt2": regex.compile(GPT2_ENCODER_PY), "cl100k": regex.compile(tiktoken_pattern("cl100k")),
            "o200k": regex.compile(tiktoken_pattern("o200k"))}


def word_counts(corpus: str, reference: regex.Pattern) -> Counter[bytes]:
    return Counter(w.encode("utf-8") for w in reference.findall(corpus))


def trained(corpus: str, reference: regex.Pattern, merges: int) -> tuple[list[bytes], list[tuple[int, int, int]]]:
    """(token bytes by id, merges as (left, right, made)) trained on the corpus by the pure trainer."""
    words = [(list(w), c) for w, c in word_counts(corpus, reference).items()]
    t = BpeTrainer(words, BYTES, compiled=False)
    made = [(m.left, m.right, m.token) for m in t.train(max_merges=merges)]
    return list(t.token_bytes), made


@pytest.mark.skipif(encodecore.CORE is None, reason="the compiled encode core is not built here")
@pytest.mark.parametrize("pattern", PATTERNS)
@FUZZ
@given(corpus=texts, samples=st.lists(texts, min_size=1, max_size=4), merges=st.integers(0, 300))
def test_the_encode_core_gives_the_references_ids_in_both_modes(references, pattern, corpus, samples, merges):
    reference = references[pattern]
    tokens, made = trained(corpus + "".join(samples), reference, merges)
    ranks = {data: i for i, data in enumerate(tokens)}
    tik = tiktoken.Encoding(name=f"fuzz-{pattern}", pat_str=reference.pattern, mergeable_ranks=ranks,
                            special_tokens={})  # (its own regex unused: the words are the regex module's)
    merge_ranks = {bpe.pair_key(left, right): rank for rank, (left, right, _) in enumerate(made)}
    made_ids = [m for _, _, m in made]
    rank_core = encodecore.CORE.Encoder(tokens, None, None, mode=encodecore.MODE_RANKS,
                                        pattern=COUNT_CORE_PATTERNS[pattern], classify=char_class, backtrack_after=0)
    merge_core = encodecore.CORE.Encoder(tokens, tuple(zip(*made)) if made else ([], [], []), None,
                                         mode=encodecore.MODE_MERGE, pattern=COUNT_CORE_PATTERNS[pattern],
                                         classify=char_class, unique=True)
    expected_by_text = []
    for s in [corpus, *samples]:
        words = reference.findall(s)
        by_ranks = [i for w in words for i in tik._encode_single_piece(w.encode("utf-8"))]
        by_merges = [i for w in words for i in bpe.merge_word(list(w.encode("utf-8")), merge_ranks, made_ids)]
        assert rank_core.encode(s) == by_ranks, s
        assert rank_core.encode_words(words) == by_ranks, s
        assert merge_core.encode(s) == by_merges, s
        assert merge_core.encode_words(words) == by_merges, s
        assert array("I", merge_core.encode(s, True)).tolist() == by_merges
        expected_by_text.append((by_ranks, by_merges))
    batch = [corpus, *samples] * 3
    for workers in (1, 3):
        assert rank_core.encode_batch(batch, workers=workers) == [r for r, _ in expected_by_text] * 3
        assert merge_core.encode_batch(batch, workers=workers) == [m for _, m in expected_by_text] * 3


@pytest.mark.skipif(trainer.COMPILED_CORE is None, reason="the compiled merge core is not built here")
@FUZZ
@given(corpus=texts, merges=st.integers(1, 400), tie_break=st.sampled_from(["lexicographic", "hf"]),
       min_frequency=st.integers(1, 3), max_token_length=st.sampled_from([None, 2, 5]), threads=st.integers(1, 3))
def test_the_merge_core_trains_the_pure_trainers_merges(references, corpus, merges, tie_break, min_frequency,
                                                        max_token_length, threads):
    words = [(list(w), c) for w, c in word_counts(corpus, references["cl100k"]).items()]
    options = {"tie_break": tie_break, "hf_order": list(range(255, -1, -1)) if tie_break == "hf" else None,
               "min_frequency": min_frequency, "max_token_length": max_token_length}
    results = []
    for compiled in (True, False):
        t = BpeTrainer(words, BYTES, compiled=compiled, threads=threads if compiled else None, **options)
        results.append(([(m.left, m.right, m.token, m.count) for m in t.train(max_merges=merges)], t.token_bytes))
    assert results[0] == results[1]


@pytest.mark.skipif(text.COUNT_CORE is None, reason="the compiled counting core is not built here")
@pytest.mark.parametrize("pattern", PATTERNS)
@FUZZ
@given(samples=st.lists(texts, min_size=1, max_size=4), n_shards=st.integers(1, 5))
def test_the_count_core_counts_the_regex_words_and_shards_by_crc32(references, pattern, samples, n_shards):
    expected: Counter[bytes] = Counter()
    for s in samples:
        counts: dict[bytes, int] = {}
        assert text.COUNT_CORE.count(s, counts, char_class, COUNT_CORE_PATTERNS[pattern]) == len(
            references[pattern].findall(s))
        assert counts == word_counts(s, references[pattern])
        expected += word_counts(s, references[pattern])
    many: dict[bytes, int] = {}
    text.COUNT_CORE.count_many([samples], many, char_class, COUNT_CORE_PATTERNS[pattern])
    assert many == expected
    shards = text.COUNT_CORE.shard(dict(expected), n_shards)
    assert len(shards) == n_shards
    for i, packed in enumerate(shards):
        merged = text.COUNT_CORE.merge_shard([packed, packed])
        assert merged == {w: 2 * c for w, c in expected.items() if zlib.crc32(w) % n_shards == i}
