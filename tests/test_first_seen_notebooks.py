"""``tie_break="first-seen"`` reproduces the seed notebooks and minbpe merge for merge.

Each test ports the notebook's own learner (its dict filled in text order, its
``max(..., key=...get)`` / ``most_common(1)``: the first pair of highest count) and
compares every merge, its count and the example's tokens with bpestore's trainer fed
the words ``bpestore.counts.words_in_order`` counts (in the order the text first shows
them). Nothing of bpestore is used by the ports."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

import bpestore
from bpestore import alphabet
from bpestore.bpe import merge_word, pair_key
from bpestore.counts import words_in_order
from bpestore.spec import TokenizerSpec
from bpestore.trainer import BpeTrainer

from .notebook_ports import (
    END,
    apply_in_order,
    matrix_train,
    minbpe_train,
    raw_text_merges,
    sennrich_learn,
    textbook_learn,
    word_start_bpe,
)

SHARED = Path("/work/shared/corpora")


def ours(spec: TokenizerSpec, paths: list[Path], k: int, compiled: bool | None = None):
    """bpestore's first-seen merges as (left, right, count) text, and a function giving a word's tokens."""
    counts = words_in_order([str(p) for p in paths], spec)
    initial = alphabet.initial_vocab(spec, counts)
    t = BpeTrainer(alphabet.initial_words(spec, counts, initial), initial, tie_break="first-seen",
                   allow_merge=alphabet.merge_filter(spec), special_ids=alphabet.special_ids(spec), compiled=compiled)
    made = list(t.train(max_merges=k))
    ranks = {pair_key(m.left, m.right): m.rank for m in made}

    def tokens(word: str) -> list[str]:
        [(ids, _)] = list(alphabet.initial_words(spec, {word.encode(): 1}, initial))
        return [t.token_bytes[i].decode() for i in merge_word(list(ids), ranks, [m.token for m in made])]

    text = [(t.token_bytes[m.left].decode(), t.token_bytes[m.right].decode(), m.count) for m in made]
    return text, tokens


# -- seed 000: characters of the raw text, no space inside a merged token ----------------
@pytest.mark.parametrize("compiled", [False, None])
def test_seed000_raw_dracula(tmp_path, compiled):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:30_000]
    path = tmp_path / "dracula.txt"
    path.write_text(text, encoding="utf-8")
    expected, _ = raw_text_merges(text, 60)
    got, tokens = ours(TokenizerSpec(pretokenizer="none", alphabet="chars", no_inner_space=True), [path], 60, compiled)
    assert got == expected
    ties = sum(1 for i, m in enumerate(expected) if i and m[2] == expected[i - 1][2])
    assert ties > 5  # the example has ties for the rule to decide
    sentence = "the cat is sleeping."
    assert tokens(sentence) == apply_in_order(list(sentence), expected)


# -- seed 001: Sennrich et al., lowercase alphanumeric words, end-of-word <\w> --------------
def test_seed001_sennrich_end_of_word(tmp_path):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:60_000]
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    expected, _ = sennrich_learn(path, 150)
    spec = TokenizerSpec(normalizer="alphanumeric,lowercase", pretokenizer="whitespace", alphabet="chars",
                         end_of_word=END)
    got, tokens = ours(spec, [path], 150)
    assert got == expected
    assert sum(1 for i, m in enumerate(expected) if i and m[2] == expected[i - 1][2]) > 5
    for word in "i am tokenizing".split():
        assert tokens(word) == apply_in_order([*word, END], expected)


# -- seed 002: Jurafsky & Martin, whitespace words, end-of-word U+E000 ------------------------
def test_seed002_textbook_corpus(tmp_path):
    eow = "\ue000"
    text = "low " * 5 + "lowest " * 2 + "newer " * 6 + "wider " * 3 + "new " * 2
    path = tmp_path / "jm.txt"
    path.write_text(text, encoding="utf-8")
    expected = textbook_learn(text, 8, eow)
    # The book's merges: e r, er _, n e, ne w, l o, lo w, new er_, low _
    assert [(a + b) for a, b, _ in expected] == ["er", "er" + eow, "ne", "new", "lo", "low", "newer" + eow,
                                                "low" + eow]
    got, tokens = ours(TokenizerSpec(pretokenizer="whitespace", alphabet="chars", end_of_word=eow), [path], 8)
    assert got == expected
    assert tokens("lower") == ["low", "er" + eow]


# -- seed 004: word-start marker "_" ------------------------------------------------------
def test_seed004_word_start_marker(tmp_path):
    corpus = ["I", "like", "to", "watch", "good", "movies"]
    expected = word_start_bpe(corpus, 25)
    assert [(a, b) for a, b, _ in expected] == [("_", "I"), ("_", "l"), ("_l", "i"), ("_li", "k"), ("_lik", "e"),
                                                ("_", "t"), ("_t", "o"), ("_", "w")]  # as the notebook printed
    path = tmp_path / "words.txt"
    path.write_text(" ".join(corpus), encoding="utf-8")
    spec = TokenizerSpec(pretokenizer="whitespace", alphabet="chars", start_of_word="_", unk_token="<unk>")
    got, tokens = ours(spec, [path], 8)
    assert got == expected
    assert tokens("like") == ["_like"] and tokens("to") == ["_to"] and tokens("watch") == ["_w", *"atch"]


# -- minbpe: BasicTokenizer (no split) and RegexTokenizer (GPT-4 pattern) -----------------
@pytest.mark.parametrize("split", [False, True], ids=["basic", "regex"])
def test_minbpe_on_a_generated_text(tmp_path, split):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:8_000]
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    vocab, merges = bpestore.train_bpe(path, 356, pretokenizer="cl100k" if split else "none", tie_break="first-seen")
    assert (vocab, merges) == minbpe_train(text, 356, split)


@pytest.mark.skipif(not (SHARED / "taylorswift.txt").exists(), reason="../shared/corpora is not here")
@pytest.mark.parametrize("split", [False, True], ids=["basic", "regex"])
def test_minbpe_taylorswift_512(split):
    path = SHARED / "taylorswift.txt"
    text = path.read_text(encoding="utf-8")
    vocab, merges = bpestore.train_bpe(path, 512, pretokenizer="cl100k" if split else "none", tie_break="first-seen")
    assert (vocab, merges) == minbpe_train(text, 512, split)


# -- seed 003: lowercase, split on whitespace and ;:, , '.' dropped; ties by set order ----------
def test_seed003_up_to_ties_and_every_count(tmp_path):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:20_000].replace(".", "")
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    expected = matrix_train(text.splitlines(), 80)
    got, _ = ours(TokenizerSpec(normalizer="lowercase", pattern=r"[^\s;:,]+", alphabet="chars"), [path], 80)
    assert [count for _, _, count in got] == [count for _, count, _ in expected]
    first_tie = next((i for i, (_, _, tied) in enumerate(expected) if tied), len(expected))
    assert 0 < first_tie < len(expected)  # the example reaches a tie
    assert [(a, b) for a, b, _ in got[:first_tie]] == [pair for pair, _, _ in expected[:first_tie]]
