"""The seed notebooks' and minbpe's own learners, ported line by line (nothing of bpestore).

Each picks the first pair of highest count in a dict filled in text order (``max(d,
key=d.get)`` / ``most_common(1)``): ``tie_break="first-seen"``. The learners return
their merges as ``(left, right, count)``; ``first_tie`` (where given) is the first step
whose best count was tied, up to which every tie rule agrees."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import regex

END = "<\\w>"  # notebook 001's end-of-word marker, spelled as it is there
# minbpe's GPT-4 split pattern
GPT4 = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)"
        r"|\s+")

Merges = list[tuple[str, str, int]]


def merge_pair(symbols, pair: tuple[str, str]) -> tuple[str, ...]:
    """Every occurrence of ``pair`` merged, left to right (the seeds' _merge / replace_pair)."""
    out, i = [], 0
    while i < len(symbols):
        if i < len(symbols) - 1 and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def apply_in_order(symbols, merges: Merges) -> list[str]:
    """A word's symbols with the merges applied in rank order."""
    for a, b, _ in merges:
        symbols = merge_pair(symbols, (a, b))
    return list(symbols)


def _tied(counts: dict, best) -> bool:
    return list(counts.values()).count(counts[best]) > 1


# -- notebook 000: characters of the raw text, no space inside a merged token ------------
def raw_text_merges(text: str, k: int) -> tuple[Merges, int | None]:
    """fit(): the most frequent viable pair over the whole character stream."""
    corpus, merges, first_tie = list(text), [], None
    for step in range(k):
        freq: dict = {}
        for pair in zip(corpus, corpus[1:]):
            if " " not in "".join(pair)[1:-1]:  # _is_pair_viable
                freq[pair] = freq.get(pair, 0) + 1
        best = max(freq, key=freq.get)
        if first_tie is None and _tied(freq, best):
            first_tie = step
        merges.append((*best, freq[best]))
        corpus = merge_pair(corpus, best)
    return merges, first_tie


# -- notebook 001: Sennrich et al., lowercase alphanumeric words, end-of-word <\w> --------------
def sennrich_word(word: str) -> tuple[str, ...]:
    word = "".join(ch for ch in word if ch.isalnum())
    return tuple(word.lower()) + (END,)


def sennrich_learn(paths: Path | list[Path], n: int) -> tuple[Merges, int | None]:
    """The vocabulary of the files' lines read in order, then n merges."""
    vocab: dict = defaultdict(int)
    for path in [paths] if isinstance(paths, Path) else paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                for item in line.split():
                    vocab[sennrich_word(item)] += 1
    merges, first_tie = [], None
    for step in range(n):
        pairs: dict = defaultdict(int)
        for word, freq in vocab.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += freq
        best = max(pairs, key=pairs.get)
        if first_tie is None and _tied(pairs, best):
            first_tie = step
        merges.append((*best, pairs[best]))
        vocab = {merge_pair(word, best): freq for word, freq in vocab.items()}
    return merges, first_tie


# -- notebook 002: Jurafsky & Martin, whitespace words, an end-of-word marker ----------------
def textbook_learn(text: str, k: int, eow: str) -> Merges:
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
            info["tokens"] = list(merge_pair(info["tokens"], best))
    return merges


# -- notebook 004: word-start marker "_" ------------------------------------------------------
def word_start_bpe(corpus: list[str], vocab_size: int) -> Merges:
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


# -- minbpe: BasicTokenizer (no split) and RegexTokenizer (GPT-4 pattern) -----------------
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
    fills a dict in the order minbpe's ``get_stats`` loop does: the same dict, faster.
    Returns (vocab, merges) as bytes, as ``bpestore.train_bpe`` does."""
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


# -- notebook 003: lowercase, split on whitespace and ;:, , '.' dropped; ties by set order ----------
def matrix_train(lines: list[str], num_tokens: int):
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
            copy[tuple(merge_pair(list(tup), (idx2token[row], idx2token[col])))] = val
        token_freq = copy
    return out
