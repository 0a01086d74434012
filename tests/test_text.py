"""Normalizers, pre-tokenizers and safe stream cutting."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import regex

from bpestore import BpestoreError, TokenizerSpec
from bpestore.ingest import TextReader, count_sources
from bpestore.text import PATTERNS, TextPipeline, rechunk

from .conftest import corpus_path, read_corpus

EOT = "<|endoftext|>"


@pytest.mark.parametrize("pretokenizer, text, words", [
    ("gpt2", "Hello world! It's 2024.  Ok\n\n",
     ["Hello", " world", "!", " It", "'s", " 2024", ".", " ", " Ok", "\n\n"]),
    ("cl100k", "Hello world 12345 It's", ["Hello", " world", " ", "123", "45", " It", "'s"]),
    ("o200k", "HelloWorld don't", ["Hello", "World", " don't"]),
    ("whitespace", " a  b\tc ", ["a", "b", "c"]),
    ("punctuation", "a,b; c.", ["a", ",", "b", ";", "c", "."]),
    ("none", "a b", ["a b"]),
])
def test_pretokenizers(pretokenizer, text, words):
    assert list(TextPipeline(TokenizerSpec(pretokenizer=pretokenizer)).words(text)) == words


@pytest.mark.parametrize("pretokenizer, text, words", [
    ("gpt2", "a  b\n\n c", ["a", " ", " b", "\n\n", " c"]),
    ("cl100k", "a\n\nb  12345", ["a", "\n\n", "b", " ", " ", "123", "45"]),
    ("o200k", "I'M OK.\n\n", ["I'M", " OK", ".\n\n"]),
    ("punctuation", "Déjà-vu, 3.14!", ["Déjà", "-", "vu", ",", "3", ".", "14", "!"]),
    ("whitespace", "a\u3000b\u00a0c", ["a", "b", "c"]),
])
def test_more_pretokenizer_cases(pretokenizer, text, words):
    assert list(TextPipeline(TokenizerSpec(pretokenizer=pretokenizer)).words(text)) == words


@pytest.mark.parametrize("normalizer, text, expected", [
    ("none", "Ｃafe\u0301", "Ｃafe\u0301"),
    ("nfc", "e\u0301", "\u00e9"),
    ("nfd", "\u00e9", "e\u0301"),
    ("nfkc", "\ufb01 \uff23 \u00b2", "fi C 2"),
    ("nfkd", "\ufb01\u00e9", "fie\u0301"),
    ("lowercase", "ÀB ΣΑΣ", "àb σας"),  # the final sigma
    ("alphanumeric", "don't stop-me, 2x!\n", "dont stopme 2x\n"),
    ("nfkc,lowercase", "ＡＢＣ", "abc"),
    ("alphanumeric,lowercase", "Ab-C D!", "abc d"),
])
def test_normalizers(normalizer, text, expected):
    pipe = TextPipeline(TokenizerSpec(normalizer=normalizer, pretokenizer="none"))
    assert list(pipe.words(text)) == [expected]


def test_custom_pattern_and_normalizers():
    pipe = TextPipeline(TokenizerSpec(pattern=r"\w+", normalizer="nfkc,lowercase"))
    assert list(pipe.words("ＡＢＣ Déjà-Vu")) == ["abc", "déjà", "vu"]
    assert TokenizerSpec(pattern=r"\w+").pretokenizer == "regex"


def test_specials_split_before_normalization():
    pipe = TextPipeline(TokenizerSpec(normalizer="lowercase", special_tokens=("<|EOT|>",)))
    assert list(pipe.segments("A<|EOT|>B")) == [("A", False), ("<|EOT|>", True), ("B", False)]
    assert list(pipe.words("A<|EOT|>B")) == ["a", "b"]


def test_spec_json_round_trip_and_validation():
    spec = TokenizerSpec(normalizer="nfc", pretokenizer="cl100k", special_tokens=("<s>", "</s>"),
                         tie_break="hf")
    assert TokenizerSpec.from_json(spec.to_json()) == spec
    every = TokenizerSpec(normalizer="nfkc,lowercase,alphanumeric", pattern=r"[^\s;:,.]+",
                          alphabet="chars", end_of_word="\ue000", start_of_word="\u2581",
                          special_tokens=("<|endoftext|>",), unk_token="<unk>", no_inner_space=True,
                          tie_break="hf")
    assert TokenizerSpec.from_json(every.to_json()) == every
    assert json.loads(every.to_json())["end_of_word"] == "\ue000"
    assert TokenizerSpec.from_json('{"pretokenizer": "whitespace"}') == TokenizerSpec(
        pretokenizer="whitespace")  # fields left out take their defaults
    for bad in [{"pretokenizer": "nope"}, {"normalizer": "upper"}, {"tie_break": "random"},
                {"special_tokens": ("a", "a")}, {"pretokenizer": "regex"}]:
        with pytest.raises(BpestoreError):
            TokenizerSpec(**bad)
    with pytest.raises(BpestoreError, match="unknown spec field"):
        TokenizerSpec.from_json('{"colour": "blue"}')


@pytest.mark.parametrize("pretokenizer", ["gpt2", "cl100k", "o200k", "whitespace", "punctuation"])
@pytest.mark.parametrize("name", ["taylorswift.txt", "japanese_1M.txt", "hindi_1M.txt", "russian_1M.txt"])
def test_rechunked_counts_equal_whole_text_counts(pretokenizer, name):
    text = read_corpus(name)[:150_000]
    text = text[:50_000] + EOT + text[50_000:100_000] + EOT + EOT + text[100_000:]
    pipe = TextPipeline(TokenizerSpec(pretokenizer=pretokenizer, special_tokens=(EOT,)))
    whole = pipe.count_words(text)
    rng = random.Random(3)
    chunks, i = [], 0
    while i < len(text):
        n = rng.choice([1, 7, 64, 1000, 20_000])
        chunks.append(text[i:i + n])
        i += n
    pieces = list(rechunk(chunks, pipe))
    assert "".join(pieces) == text
    assert len(pieces) > 3  # it really streams
    streamed = Counter()
    for piece in pieces:
        pipe.count_words(piece, streamed)
    assert streamed == whole


def test_safe_cut_never_inside_a_special_token():
    pipe = TextPipeline(TokenizerSpec(special_tokens=("<|a b|>", "<|a b|> c")))
    text = "xx yy <|a b|> c zz"
    for cut in range(len(text) + 1):
        pieces = list(rechunk([text[:cut], text[cut:]], pipe))
        assert [w for p in pieces for w in pipe.words(p)] == list(pipe.words(text))
        assert [s for p in pieces for s, special in pipe.segments(p) if special] == ["<|a b|> c"]


def test_reader_reports_offset_across_chunks(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes("é".encode() * 10 + b"\xc3")  # a truncated 2-byte sequence at the end
    with open(path, "rb") as f:
        with pytest.raises(BpestoreError, match="at byte 20"):
            list(TextReader(f, "x.txt", chunk_bytes=3))


@pytest.mark.parametrize("suffix, opener", [(".gz", "gzip"), (".xz", "lzma"), (".bz2", "bz2")])
def test_compressed_sources_count_like_plain(tmp_path, suffix, opener):
    import importlib

    data = corpus_path("tinyshakespeare.txt").read_bytes()
    plain = tmp_path / "s.txt"
    plain.write_bytes(data)
    packed = tmp_path / f"s.txt{suffix}"
    with importlib.import_module(opener).open(packed, "wb") as f:
        f.write(data)
    [a], [b] = (list(count_sources([str(p)], TokenizerSpec(), workers=1)) for p in (plain, packed))
    assert (a.counts, a.sources[0].size_bytes, a.sources[0].sha256) == (b.counts, b.sources[0].size_bytes,
                                                                  b.sources[0].sha256)
    assert a.sources[0].size_bytes == len(data)
    assert a.counts == Counter(w.encode() for w in regex.findall(PATTERNS["gpt2"], data.decode()))


@pytest.mark.parametrize("pretokenizer", ["gpt2", "cl100k", "o200k", "whitespace", "punctuation"])
def test_cut_anywhere_splits_without_changing_words(pretokenizer):
    """Wherever a window sits in the text, cutting there keeps the words (and specials)."""
    specials = ("<|endoftext|>", "<|a b|>", "<|a b|> c")
    pipe = TextPipeline(TokenizerSpec(pretokenizer=pretokenizer, special_tokens=specials))
    rng = random.Random(11)
    vocab = ["word", " x", "é", "日本語", " ", "\n", "  ", "3", ".", "<|a b|>", " c", "<|endoftext|>",
             "It's", "\r\n", "\t"]
    text = "".join(rng.choice(vocab) for _ in range(4000))
    whole = list(pipe.words(text))
    found = 0
    for _ in range(400):
        start = rng.randrange(len(text))
        window = text[start:start + rng.choice([20, 60, 300])]
        cut = pipe.cut_anywhere(window)
        if cut:
            found += 1
            at = start + cut
            assert list(pipe.words(text[:at])) + list(pipe.words(text[at:])) == whole
            assert [s for s, special in pipe.segments(text[:at]) if special] + \
                [s for s, special in pipe.segments(text[at:]) if special] == \
                [s for s, special in pipe.segments(text) if special]
    assert found > 100
    assert TextPipeline(TokenizerSpec(pretokenizer="none")).cut_anywhere("a b c d e") == 0


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_patterns_split_like_tiktokens_published_ones(name):
    import regex

    from .conftest import tiktoken_pattern

    ours, theirs = regex.compile(PATTERNS[name]), regex.compile(tiktoken_pattern(name))
    texts = [read_corpus("taylorswift.txt")[:30000], read_corpus("code_python_5M.txt.xz")[:30000],
             "a\n  ", "end with spaces   ", "x.\n\n  y\t\t\n", "I'M don't 12345 ,,, \u00e9\u0301 \r\n \n"]
    for text in texts:
        assert ours.findall(text) == theirs.findall(text)
