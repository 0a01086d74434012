"""``tie_break="first-seen"`` reproduces the seed notebooks and minbpe merge for merge.

Each test ports the notebook's own learner (its dict filled in text order, its
``max(..., key=...get)`` / ``most_common(1)``: the first pair of highest count) and
compares every merge, its count and the example's tokens with bpestore's trainer fed
the words ``bpestore.counts.words_in_order`` counts (in the order the text first shows
them). Nothing of bpestore is used by the ports."""

from __future__ import annotations

import lzma
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import regex

import bpestore
from bpestore import alphabet
from bpestore.bpe import merge_word, pair_key
from bpestore.counts import words_in_order
from bpestore.spec import TokenizerSpec
from bpestore.trainer import BpeTrainer

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


def replace_pair(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i < len(symbols) - 1 and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def apply_in_order(symbols, merges):
    for a, b, _ in merges:
        symbols = replace_pair(symbols, (a, b))
    return symbols


# -- seed 000: characters of the raw text, no space inside a merged token ----------------
def seed000_fit(text: str, k: int):
    corpus, merges = list(text), []
    for _ in range(k):
        freq: dict = {}
        for pair in zip(corpus, corpus[1:]):
            if " " not in "".join(pair)[1:-1]:  # _is_pair_viable
                freq[pair] = freq.get(pair, 0) + 1
        best = max(freq, key=freq.get)
        merges.append((*best, freq[best]))
        corpus = replace_pair(corpus, best)
    return merges


@pytest.mark.parametrize("compiled", [False, None])
def test_seed000_raw_dracula(tmp_path, compiled):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:30_000]
    path = tmp_path / "dracula.txt"
    path.write_text(text, encoding="utf-8")
    expected = seed000_fit(text, 60)
    got, tokens = ours(TokenizerSpec(pretokenizer="none", alphabet="chars", no_inner_space=True), [path], 60, compiled)
    assert got == expected
    ties = sum(1 for i, m in enumerate(expected) if i and m[2] == expected[i - 1][2])
    assert ties > 5  # the example has ties for the rule to decide
    sentence = "the cat is sleeping."
    assert tokens(sentence) == apply_in_order(list(sentence), expected)


# -- seed 001: Sennrich et al., lowercase alphanumeric words, end-of-word <\w> --------------
END = "<\\w>"


def seed001_learn(path: Path, n: int):
    vocab: dict = defaultdict(int)
    for line in path.open(encoding="utf-8"):
        for item in line.split():
            word = "".join(ch for ch in item if ch.isalnum()).lower()
            vocab[tuple(word) + (END,)] += 1
    merges = []
    for _ in range(n):
        pairs: dict = defaultdict(int)
        for word, freq in vocab.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += freq
        best = max(pairs, key=pairs.get)
        merges.append((*best, pairs[best]))
        vocab = {tuple(replace_pair(list(word), best)): freq for word, freq in vocab.items()}
    return merges


def test_seed001_sennrich_end_of_word(tmp_path):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:60_000]
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    expected = seed001_learn(path, 150)
    spec = TokenizerSpec(normalizer="alphanumeric,lowercase", pretokenizer="whitespace", alphabet="chars",
                         end_of_word=END)
    got, tokens = ours(spec, [path], 150)
    assert got == expected
    assert sum(1 for i, m in enumerate(expected) if i and m[2] == expected[i - 1][2]) > 5
    for word in "i am tokenizing".split():
        assert tokens(word) == apply_in_order([*word, END], expected)


# -- seed 002: Jurafsky & Martin, whitespace words, end-of-word U+E000 ------------------------
def seed002_learn(text: str, k: int, eow: str):
    D: dict = {}
    for word in text.split():
        info = D.setdefault(word, {"tokens": list(word) + [eow], "frequency": 0})
        info["frequency"] += 1
    merges = []
    for _ in range(k):
        pair_counts: Counter = Counter()
        for info in D.values():
            tokens = info["tokens"]
            for i in range(len(tokens) - 1):
                pair_counts[(tokens[i], tokens[i + 1])] += info["frequency"]
        if not pair_counts:
            break
        best = pair_counts.most_common(1)[0][0]
        merges.append((*best, pair_counts[best]))
        for info in D.values():
            info["tokens"] = replace_pair(info["tokens"], best)
    return merges


def test_seed002_textbook_corpus(tmp_path):
    eow = "\ue000"
    text = "low " * 5 + "lowest " * 2 + "newer " * 6 + "wider " * 3 + "new " * 2
    path = tmp_path / "jm.txt"
    path.write_text(text, encoding="utf-8")
    expected = seed002_learn(text, 8, eow)
    # The book's merges: e r, er _, n e, ne w, l o, lo w, new er_, low _
    assert [(a + b) for a, b, _ in expected] == ["er", "er" + eow, "ne", "new", "lo", "low", "newer" + eow,
                                                "low" + eow]
    got, tokens = ours(TokenizerSpec(pretokenizer="whitespace", alphabet="chars", end_of_word=eow), [path], 8)
    assert got == expected
    assert tokens("lower") == ["low", "er" + eow]


# -- seed 004: word-start marker "_" ------------------------------------------------------
def seed004_bpe(corpus: list[str], vocab_size: int):
    vocabulary: dict = defaultdict(int)
    charset: set = set()
    for word in corpus:
        vocabulary[" ".join("_" + word)] += 1
        charset.update("_" + word)
    merges, tokens = [], set(charset)
    while len(tokens) < vocab_size:
        pair_counts: dict = defaultdict(int)
        for tokenized, count in vocabulary.items():
            parts = tokenized.split()
            for i in range(len(parts) - 1):
                pair_counts[(parts[i], parts[i + 1])] += count
        if not pair_counts:
            break
        best = max(pair_counts, key=pair_counts.get)
        merges.append((*best, pair_counts[best]))
        pattern = regex.compile(r"(?<!\S)" + regex.escape(" ".join(best)) + r"(?!\S)")
        new: dict = defaultdict(int)
        for tokenized, count in vocabulary.items():
            new[pattern.sub("".join(best), tokenized)] += count
        vocabulary = new
        tokens.add("".join(best))
    return merges


def test_seed004_word_start_marker(tmp_path):
    corpus = ["I", "like", "to", "watch", "good", "movies"]
    expected = seed004_bpe(corpus, 25)
    assert [(a, b) for a, b, _ in expected] == [("_", "I"), ("_", "l"), ("_l", "i"), ("_li", "k"), ("_lik", "e"),
                                                ("_", "t"), ("_t", "o"), ("_", "w")]  # as the notebook printed
    path = tmp_path / "words.txt"
    path.write_text(" ".join(corpus), encoding="utf-8")
    spec = TokenizerSpec(pretokenizer="whitespace", alphabet="chars", start_of_word="_", unk_token="<unk>")
    got, tokens = ours(spec, [path], 8)
    assert got == expected
    assert tokens("like") == ["_like"] and tokens("to") == ["_to"] and tokens("watch") == ["_w", *"atch"]


# -- minbpe: BasicTokenizer (no split) and RegexTokenizer (GPT-4 pattern) -----------------
GPT4 = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)"
        r"|\s+")


def minbpe_merge(ids, pair, idx):
    out, i = [], 0
    while i < len(ids):
        if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
            out.append(idx)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def minbpe_train(text: str, vocab_size: int, split: bool):
    """minbpe's train (Basic: the whole text; Regex: each chunk), get_stats into one dict
    filled in text order. Each distinct chunk is counted once times its count (its first
    occurrence is where its pairs would first enter the dict), and ``Counter(zip(...))``
    fills a dict in the order minbpe's ``get_stats`` loop does: the same dict, faster."""
    chunks = Counter(regex.findall(GPT4, text) if split else [text])
    ids = [list(ch.encode("utf-8")) for ch in chunks]
    vocab = {i: bytes([i]) for i in range(256)}
    merges = []
    for idx in range(256, vocab_size):
        stats: Counter = Counter()
        for chunk_ids, n in zip(ids, chunks.values()):
            for pair, c in Counter(zip(chunk_ids, chunk_ids[1:])).items():
                stats[pair] += c * n
        pair = max(stats, key=stats.get)  # type: ignore[arg-type]
        merges.append((vocab[pair[0]], vocab[pair[1]]))
        ids = [minbpe_merge(chunk_ids, pair, idx) if len(chunk_ids) > 1 else chunk_ids for chunk_ids in ids]
        vocab[idx] = vocab[pair[0]] + vocab[pair[1]]
    return vocab, merges


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
def seed003_train(lines: list[str], num_tokens: int):
    """The notebook's train: a pair matrix over token ids (characters numbered in the order a
    ``set`` gives them), argmax (the first maximal cell, row-major). Returns (pair, count, tied)."""
    import numpy as np

    pretoken_freq: Counter = Counter()
    vocab: set = set()
    for sent in lines:
        for chars in regex.split(r"[;:,\s]+", sent.lower().replace(".", "")):
            pretoken_freq.update([tuple(chars)])
            vocab.update(chars)
    token2idx = {char: idx for idx, char in enumerate(vocab)}
    idx2token = {v: k for k, v in token2idx.items()}
    token_freq, out = pretoken_freq, []
    for _ in range(num_tokens):
        pair_freq = np.zeros((len(token2idx), len(token2idx)))
        for key, value in token_freq.items():
            ids = [token2idx.get(k) for k in key]
            for i in range(1, len(ids)):
                pair_freq[ids[i - 1], ids[i]] += value
        row, col = np.unravel_index(pair_freq.argmax(), pair_freq.shape)
        best = pair_freq[row, col]
        out.append(((idx2token[row], idx2token[col]), int(best), int((pair_freq == best).sum()) > 1))
        new_token = idx2token[row] + idx2token[col]
        token2idx[new_token] = max(token2idx.values()) + 1
        idx2token[max(idx2token) + 1] = new_token
        copy: Counter = Counter()
        for tup, val in token_freq.items():
            copy[tuple(replace_pair(list(tup), (idx2token[row], idx2token[col])))] = val
        token_freq = copy
    return out


def test_seed003_up_to_ties_and_every_count(tmp_path):
    text = lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:20_000].replace(".", "")
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    expected = seed003_train(text.splitlines(), 80)
    got, _ = ours(TokenizerSpec(normalizer="lowercase", pattern=r"[^\s;:,]+", alphabet="chars"), [path], 80)
    assert [count for _, _, count in got] == [count for _, count, _ in expected]
    first_tie = next((i for i, (_, _, tied) in enumerate(expected) if tied), len(expected))
    assert 0 < first_tie < len(expected)  # the example reaches a tie
    assert [(a, b) for a, b, _ in got[:first_tie]] == [pair for pair, _, _ in expected[:first_tie]]
