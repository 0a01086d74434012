"""Statistics, token usage and comparisons from a corpus generation's word counts
(bpestore/usage.py, Store.corpus_stats / token_usage / compare, the CLI's stats --corpus,
vocab --corpus, usage and compare): each checked against encoding the corpus' text with
tiktoken, or with the reference encoder, and the unreachable tokens against their
definition by brute force."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import bpestore
from bpestore import Tokenizer
from bpestore.errors import InvalidArgumentError
from bpestore.usage import script_of
from tests.conftest import assert_error, corpus_path, tiktoken_pattern


def _words_of(enc, text: str) -> list[str]:
    import regex

    return regex.findall(tiktoken_pattern("gpt2"), text)


def test_corpus_stats_equal_encoding_the_text(store, sample_file, gpt2_files, tiktoken_gpt2):
    """GPT-2 on an ingested file: tokens, bytes, words, one-token words, ids used and every
    token's count equal tiktoken encoding the file (and its pre-tokens one by one)."""
    text = sample_file.read_text(encoding="utf-8")
    store.ingest("books", [sample_file], pretokenizer="gpt2")
    store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    [s] = store.corpus_stats(["gpt2"], ["books"])
    ids = tiktoken_gpt2.encode_ordinary(text)
    words = _words_of(tiktoken_gpt2, text)
    assert (s.ref, s.corpus) == ("gpt2@1", "books@1")
    assert s.tokens == len(ids) and s.bytes == len(text.encode("utf-8")) and s.words == len(words)
    assert s.distinct_words == len(set(words)) and s.used_ids == len(set(ids))
    assert s.one_token_words == sum(len(tiktoken_gpt2.encode_ordinary(w)) == 1 for w in words)
    usage = store.token_usage("gpt2", "books")
    counted = dict(usage.counts)
    assert sum(counted.values()) == usage.tokens == len(ids)
    assert {i: n for i, n in counted.items() if n} == dict(Counter(ids))
    emitted = set(ids)
    assert set(usage.never) == {i for i in counted if i not in emitted}
    assert set(usage.rare) == {i for i, n in Counter(ids).items() if n < 10}
    assert sum(row["tokens"] for row in usage.scripts.values()) == len(ids)
    assert sum(row["vocab"] for row in usage.scripts.values()) == len(counted) == 50256


def test_corpus_stats_cl100k(tmp_path):
    """cl100k (a rank file) on Russian text: the tokens tiktoken gives the text."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    ranks_path = corpus_path("cl100k_base.tiktoken")
    text = corpus_path("russian_1M.txt").read_text(encoding="utf-8")[:200_000]
    (tmp_path / "ru.txt").write_text(text, encoding="utf-8")
    enc = tiktoken.Encoding("cl", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=load_tiktoken_bpe(
        str(ranks_path)), special_tokens={})
    with bpestore.open(str(tmp_path / "s.db")) as store:
        store.ingest("ru", [tmp_path / "ru.txt"], pretokenizer="cl100k")
        store.import_tiktoken("cl100k", ranks_path, pattern="cl100k")
        [s] = store.corpus_stats(["cl100k"], ["ru@1"])
        ids = enc.encode_ordinary(text)
        assert s.tokens == len(ids) and s.bytes == len(text.encode("utf-8")) and s.used_ids == len(set(ids))


def test_corpus_stats_chars_end_of_word(store, sample_file):
    """A trained chars-alphabet version with an end-of-word marker: the counts give the
    reference encoder's tokens for the whole text, in versions x corpora order."""
    text = sample_file.read_text(encoding="utf-8")
    store.ingest("ws", [sample_file], pretokenizer="whitespace")
    store.train("eow", corpus="ws", vocab_size=400, alphabet="chars", end_of_word="</w>")
    store.train("eow", corpus="ws", vocab_size=300, alphabet="chars", end_of_word="</w>")
    ref = store.tokenizer("eow@1")
    slow = Tokenizer(ref.vocab, ref.merges, spec=ref.spec, fast=False)
    results = store.corpus_stats(["eow@1", "eow@2"], ["ws", "ws@1"])
    assert [(s.ref, s.corpus) for s in results] == [("eow@1", "ws@1")] * 2 + [("eow@2", "ws@1")] * 2
    assert results[0].tokens == len(slow.encode(text)) > results[2].tokens * 0 + len(text.split())
    assert results[0].one_token_words == sum(len(slow.encode(w)) == 1 for w in text.split())
    assert results[0].words == len(text.split())


def test_other_pretokenizer_refused_by_name(store, sample_file, gpt2_files):
    store.ingest("ws", [sample_file], pretokenizer="whitespace")
    store.import_gpt2("gpt2", vocab=gpt2_files[0], merges=gpt2_files[1])
    with pytest.raises(InvalidArgumentError, match="ws@1 was counted under pretokenizer 'whitespace' "
                                                   r"\(version: 'gpt2'\)"):
        store.corpus_stats(["gpt2"], ["ws"])
    with pytest.raises(InvalidArgumentError, match="whitespace"):
        store.compare("gpt2", "gpt2", ["ws"])


def _brute_encode(word: bytes, merges: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The notebooks' BPE on one pre-token: merge the adjacent pair of lowest rank until none is left."""
    rank = {pair: r for r, pair in enumerate(merges)}
    parts = [bytes([b]) for b in word]
    while len(parts) > 1:
        pairs = [(rank.get((a, b), len(rank)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        best, i = min(pairs)
        if best == len(rank):
            break
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def test_unreachable_tokens_by_brute_force():
    """A GPT-2-style version: 'abc' (made from 'a' + 'bc' while 'ab' merges first), 'x y'
    (the pattern cuts it) and the lone continuation bytes are unreachable; by the definition,
    encode(decode([t])) != [t], with the notebooks' BPE over the pattern's pre-tokens."""
    import regex

    merges = [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b"x", b" "), (b"x ", b"y"), (b"\xc3", b"\xa9")]
    vocab = {i: bytes([i]) for i in range(256)}
    for i, (left, right) in enumerate(merges):
        vocab[256 + i] = left + right
    tok = Tokenizer(vocab, merges)
    id_of = {v: k for k, v in vocab.items()}
    expected = []
    for i, data in sorted(vocab.items()):
        text = data.decode("utf-8", "replace")
        ids = [id_of[p] for w in regex.findall(tiktoken_pattern("gpt2"), text)
               for p in _brute_encode(w.encode(), merges)]
        if ids != [i]:
            expected.append(i)
    from bpestore.usage import unreachable

    found = unreachable(tok)
    assert found == expected
    assert {258, 260} <= set(found) and 256 not in found and 261 not in found and 0x80 in found


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
def test_unreachable_gpt2_cl100k_against_tiktoken(tmp_path, gpt2_files, tiktoken_gpt2, name):
    """Every ordinary token of GPT-2 and cl100k checked with tiktoken: encode(decode(t)) != [t]."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from bpestore.usage import unreachable

    with bpestore.open(str(tmp_path / "s.db")) as store:
        if name == "gpt2":
            store.import_gpt2(name, vocab=gpt2_files[0], merges=gpt2_files[1])
            enc = tiktoken_gpt2
        else:
            path = corpus_path("cl100k_base.tiktoken")
            store.import_tiktoken(name, path, pattern="cl100k")
            enc = tiktoken.Encoding("cl", pat_str=tiktoken_pattern("cl100k"),
                                    mergeable_ranks=load_tiktoken_bpe(str(path)), special_tokens={})
        found = unreachable(store.tokenizer(name))
    expected = [i for i in range(enc.n_vocab) if i not in enc.special_tokens_set and i < len(enc._mergeable_ranks)
                and enc.encode_ordinary(enc.decode([i])) != [i]]
    assert found == expected and len(found) > 100


def test_script_classes():
    """The classes, and the ASCII shortcut equal to the classes' patterns on every short ASCII string."""
    import itertools

    from bpestore.usage import _CLASSES

    spec = bpestore.TokenizerSpec(alphabet="chars", end_of_word="</w>")
    assert [script_of(t.encode(), spec) for t in ("при</w>", "</w>", "的</w>", "x=1")] == [
        "cyrillic", "whitespace", "cjk", "code"]

    def by_patterns(text: str) -> str:
        return next((name for name, pattern in _CLASSES if pattern.fullmatch(text)), "other")

    texts = (map("".join, itertools.product(" \t\n\x0b\x1c\x7f\x00a1Z9_.(;=", repeat=k)) for k in (1, 2, 3))
    assert [t for t in itertools.chain(*texts) if script_of(t.encode()) != by_patterns(t)] == []


def test_cli_stats_usage_compare(cli_run, sample_file, gpt2_files):
    cli_run("ingest", "books", str(sample_file))
    cli_run("import", "gpt2", "gpt2", "--vocab", str(gpt2_files[0]), "--merges", str(gpt2_files[1]))
    cli_run("train", "small", "--corpus", "books", "--vocab-size", "400", "--quiet")
    r = cli_run("stats", "gpt2", "small", "--corpus", "books")
    assert r.exit_code == 0 and "gpt2@1 on books@1" in r.output and "one-token words" in r.output
    rows = json.loads(cli_run("stats", "gpt2", "--corpus", "books@1", "--json").output)
    assert rows[0]["tokens"] == sum(t["uses"] for t in json.loads(
        cli_run("vocab", "gpt2", "--corpus", "books", "--json").output))
    top = cli_run("vocab", "gpt2", "--corpus", "books", "--order", "count", "--limit", "1", "--json")
    assert json.loads(top.output)[0]["uses"] == max(t["uses"] for t in json.loads(
        cli_run("vocab", "gpt2", "--corpus", "books", "--json").output))
    usage = json.loads(cli_run("usage", "small", "--json").output)  # its own training corpus
    assert usage["corpus"] == "books@1" and usage["never"] == [i for i, n in usage["counts"] if n == 0]
    assert "unreachable:" in cli_run("usage", "gpt2", "--corpus", "books").output
    [c] = json.loads(cli_run("compare", "small", "gpt2", "--corpus", "books", "--json").output)
    assert c["bytes_per_token_change"] == pytest.approx(c["b"]["bytes_per_token"] - c["a"]["bytes_per_token"])
    assert c["moved"] and all(m["change"] == m["b"] - m["a"] for m in c["moved"])
    assert "bytes per token" in cli_run("compare", "small", "gpt2", "--corpus", "books").output
    assert_error(cli_run("stats", "gpt2"), "give --file PATH or --corpus C")
    assert_error(cli_run("vocab", "gpt2", "--order", "count"), "--order count counts tokens on a corpus")
    assert_error(cli_run("stats", "gpt2", "--corpus", "nope"), "no corpus named 'nope'")
