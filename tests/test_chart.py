"""The compression curve and the chart data (bpestore.analysis, Store.chart):
every point checked against an independent count: a tokenizer keeping only the
first K merges (trained afresh with K merges, built from the merge prefix, and
tiktoken with the prefix of the ranks) encoding the whole text."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import bpestore
from bpestore import InvalidArgumentError, NotFoundError, Tokenizer
from bpestore.analysis import TextCounts, chart_of_ids, curve_ranks, tree_merges, version_chart

from .conftest import assert_error, read_corpus, tiktoken_pattern

EOT = "<|endoftext|>"


@pytest.fixture
def held_out(sample_text, tmp_path):
    """Text the versions were not trained on, with special tokens and characters unseen in training."""
    text = sample_text[200_000:240_000] + f" Ünïcödé 東京{EOT}\n\n  tabs\there{EOT}" + sample_text[300_000:310_000]
    path = tmp_path / "held_out.txt"
    path.write_text(text, encoding="utf-8")
    return path, text


def prefix_tokenizer(tok: Tokenizer, k: int) -> Tokenizer:
    """A tokenizer keeping the first k merges of ``tok``: the tokens no later merge makes."""
    later = {left + right for left, right in tok.merges[k:]} - {left + right for left, right in tok.merges[:k]}
    vocab = {i: data for i, data in tok.vocab.items() if data not in later}
    return Tokenizer(vocab, tok.merges[:k], dict(tok.special_tokens), spec=tok.spec, fast=False)


SETTINGS = [
    {},
    {"alphabet": "chars", "unk_token": "<unk>"},
    {"alphabet": "chars", "byte_fallback": True, "end_of_word": "</w>"},
    {"start_of_word": "▁", "no_inner_space": True},
]


@pytest.mark.parametrize("settings", SETTINGS)
def test_curve_equals_encoding_with_a_prefix_of_the_merges(store, sample_file, held_out, settings):
    path, text = held_out
    store.ingest("books", [sample_file], special_tokens=[EOT])
    full = store.train("t", corpus="books", merges=300, **settings)
    chart = store.chart("t", path, points=7)
    tok = store.tokenizer("t")
    assert [p.merges for p in chart.curve] == [0, 50, 100, 150, 200, 250, 300]
    n_bytes = len(text.encode())
    for point in chart.curve:
        short = prefix_tokenizer(tok, point.merges)
        ids = short.encode(text, allowed_special="all")
        assert (point.tokens, point.vocab_size) == (len(ids), len(short.vocab)), point
        assert point.bytes_per_token == n_bytes / len(ids)
    # Trained afresh with K merges (training is deterministic, so its merges are the prefix): stats agrees.
    for k in (0, 100, 250):
        version = store.train("t", corpus="books", merges=k, **settings)
        [stats] = store.stats([version.ref], path)
        [point] = [p for p in chart.curve if p.merges == k]
        assert (point.tokens, point.vocab_size, point.bytes_per_token) == \
               (stats.tokens, stats.vocab_size, stats.bytes_per_token)
    [stats] = store.stats([full.ref], path)
    assert (chart.tokens, chart.bytes, chart.vocab_size) == (stats.tokens, stats.bytes, full.vocab_size)
    assert chart.curve[-1].tokens == chart.tokens


def test_merge_uses_counts_and_lengths(store, sample_file, held_out):
    path, text = held_out
    store.ingest("books", [sample_file], special_tokens=[EOT])
    store.train("en", corpus="books", merges=300)
    chart = store.chart("en", path, points=2)
    tok = store.tokenizer("en")
    # The pair count of each merge as training stored it.
    assert list(chart.merge_counts) == [m.count for m in store.merges("en")]
    assert chart.merge_counts[0] >= chart.merge_counts[-1] > 0
    # Uses by rank, from the explanation of the text (each step of each pre-token).
    uses = Counter(step.rank for word in tok.explain(text).words for step in word.steps)
    assert chart.merge_uses == tuple(uses.get(rank, 0) for rank in range(300))
    assert chart.curve[0].tokens - chart.curve[-1].tokens == sum(chart.merge_uses)
    # Lengths: of the vocabulary's tokens, and of the tokens of the encoded text.
    assert dict(chart.vocab_lengths) == Counter(len(b) for b in tok.vocab.values())
    ids = tok.encode(text, allowed_special="all")
    assert dict(chart.text_lengths) == Counter(len(tok.vocab[i]) for i in ids)
    assert chart.to_dict()["curve"][1]["tokens"] == len(ids)
    # A string instead of a file: the same counts.
    same = store.chart("en", text=text, points=2)
    assert same.file == "<text>" and same.curve == chart.curve and same.text_lengths == chart.text_lengths


def test_one_encoding_per_version_or_per_distinct_pretoken(store, sample_file, held_out, monkeypatch):
    path, text = held_out
    store.ingest("books", [sample_file], special_tokens=[EOT])
    store.train("a", corpus="books", merges=100)
    store.train("b", corpus="books", merges=200)
    store.train("c", corpus="books", merges=100, alphabet="chars", unk_token="<unk>")
    store.train("d", corpus="books", merges=200, alphabet="chars", unk_token="<unk>")
    encoded, counted, merged = [], [], []
    encode, count, merge = Tokenizer.encode_chunks, Tokenizer.count_pretokens, Tokenizer.merge_ranks
    monkeypatch.setattr(Tokenizer, "encode_chunks", lambda self, chunks, **k: encoded.append(self.name) or
                        encode(self, chunks, **k))
    monkeypatch.setattr(Tokenizer, "count_pretokens", lambda self, chunks: counted.append(self.name) or
                        count(self, chunks))
    monkeypatch.setattr(Tokenizer, "merge_ranks", lambda self, word: merged.append(word) or merge(self, word))
    a, b, c, d = store.charts(["a", "b", "c", "d"], path, points=51)
    # Byte-level: one encoding of the file per version, as stats.
    assert encoded == ["a@1", "b@1"]
    # Characters: the file's words counted once for both, each distinct word merged once per version.
    assert counted == ["c@1"]
    words = store.tokenizer("c").count_pretokens([text])[0]
    assert Counter(merged) == Counter({w: 2 for w in words})
    assert len(b.curve) == 51 and a.curve[-1] == b.curve[25] and c.curve[-1] == d.curve[25]  # prefixes


@pytest.mark.parametrize("settings", [{}, {"tie_break": "hf", "max_token_length": 5}])
def test_both_ways_to_the_chart_agree(store, sample_file, held_out, settings, monkeypatch):
    path, text = held_out
    store.ingest("books", [sample_file], special_tokens=[EOT])
    store.train("en", corpus="books", merges=300, **settings)
    assert tree_merges(store.tokenizer("en")) is not None
    by_ids = store.chart("en", path, points=30)
    import bpestore.analysis

    monkeypatch.setattr(bpestore.analysis, "tree_merges", lambda tok: None)
    by_words = store.chart("en", path, points=30)
    assert by_ids == by_words


def test_tree_merges_refuses_what_it_cannot_push_down():
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"ab", 257: b"abc"}
    assert tree_merges(Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])) == [(97, 98, 256), (256, 99, 257)]
    # A token made twice (b"abc" from "ab"+"c" and "a"+"bc"): not from its ids alone.
    vocab2 = {**vocab, 258: b"bc"}
    assert tree_merges(Tokenizer(vocab2, [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")])) is None
    # A merge using a token made later.
    assert tree_merges(Tokenizer(vocab2, [(b"a", b"bc"), (b"b", b"c")])) is None


def test_gpt2_prefixes_equal_tiktoken_with_the_prefix_of_its_ranks(gpt2_files, gpt2_tokenizer):
    tiktoken = pytest.importorskip("tiktoken")
    import json

    from bpestore.formats.gpt2 import str_to_token

    text = read_corpus("tinyshakespeare.txt")[:50_000] + " Ünïcödé 東京 <|endoftext|> 2026!!"
    words, specials = gpt2_tokenizer.count_pretokens([text])
    chart = version_chart(gpt2_tokenizer, TextCounts(len(text.encode()), words, specials), ref="gpt2",
                          file="t", points=11)
    merges = tree_merges(gpt2_tokenizer)
    assert merges is not None
    by_ids = chart_of_ids(gpt2_tokenizer, merges, len(text.encode()),
                          Counter(gpt2_tokenizer.encode(text, allowed_special="all")), ref="gpt2", file="t", points=11)
    assert by_ids == chart
    encoder = json.loads(gpt2_files[0].read_text(encoding="utf-8"))
    ranks = {str_to_token(s): i for s, i in encoder.items() if s != EOT}
    for point in chart.curve:
        enc = tiktoken.Encoding(name=f"gpt2_{point.merges}", pat_str=tiktoken_pattern("gpt2"),
                                mergeable_ranks={b: r for b, r in ranks.items() if r < 256 + point.merges},
                                special_tokens={EOT: 50256})
        assert point.tokens == len(enc.encode(text, allowed_special="all")), point.merges
        assert point.vocab_size == 256 + point.merges + 1  # the bytes, the merges so far, <|endoftext|>
    assert chart.merge_counts == (0,) * 50_000


def test_curve_ranks_and_mistakes(store, sample_file, held_out):
    path, _ = held_out
    assert curve_ranks(1744, 2) == [0, 1744] and len(curve_ranks(1744, 50)) == 50
    store.ingest("books", [sample_file])
    store.train("en", corpus="books", merges=20)
    assert len(store.chart("en", path, points=100).curve) == 21
    with pytest.raises(InvalidArgumentError, match="points must be between 2 and"):
        store.chart("en", path, points=1)
    with pytest.raises(NotFoundError, match="no tokenizer named 'nope'"):
        store.charts(["en", "nope"], path)
    with pytest.raises(InvalidArgumentError, match="give a file or a text"):
        store.chart("en", path, text="hi")
    with pytest.raises(InvalidArgumentError, match="give a file or a text"):
        store.chart("en")
    with pytest.raises(InvalidArgumentError, match="not -"):
        store.chart("en", "-")
    with pytest.raises(NotFoundError, match="file not found"):
        store.chart("en", path.parent / "absent.txt")
    tok = store.tokenizer("en")
    longest = Tokenizer(tok.vocab, tok.merges, spec=tok.spec.replace(segmentation="longest-match"))
    with pytest.raises(InvalidArgumentError, match="needs merge segmentation"):
        version_chart(longest, TextCounts(2, {"hi": 1}), ref="x", file="t")


# -- bpestore plot ------------------------------------------------------------------
@pytest.fixture
def cli_trained(cli_run, sample_file):
    assert cli_run("ingest", "books", str(sample_file)).exit_code == 0
    assert cli_run("train", "en", "--corpus", "books", "--vocab-size", "400").exit_code == 0
    assert cli_run("train", "ch", "--corpus", "books", "--vocab-size", "200", "--alphabet", "chars",
                   "--unk-token", "<unk>").exit_code == 0
    return cli_run


def svg_ids(path) -> list[str]:
    import xml.etree.ElementTree as ET

    root = ET.parse(path).getroot()  # a parse error fails the test
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return [e.get("id") for e in root.iter() if e.get("id")]


def test_plot_writes_a_png_and_an_svg_with_a_line_per_version(cli_trained, held_out, tmp_path):
    pytest.importorskip("matplotlib")
    path, text = held_out
    png, svg = tmp_path / "chart.png", tmp_path / "chart.svg"
    result = cli_trained("plot", "en", "ch@1", "--file", str(path), "--out", str(png), "--points", "20")
    assert result.exit_code == 0, result.output
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 2.5 * height > 500  # three panels side by side
    store = bpestore.open(cli_trained.db)
    charts = store.charts(["en", "ch"], path, points=20)
    assert result.stdout == (f"{png}: en@1, ch@1 on {path} ({charts[0].bytes_per_token:.3f}, "
                             f"{charts[1].bytes_per_token:.3f} bytes per token)\n")
    assert cli_trained("plot", "en", "ch", "--file", str(path), "--out", str(svg)).exit_code == 0
    ids = svg_ids(svg)
    assert sum(i.startswith("axes_") for i in ids) == 3  # three panels
    assert sorted(i for i in ids if i.split("-")[0] in ("curve", "counts", "lengths")) == \
           ["counts-0", "counts-1", "curve-0", "curve-1", "lengths-0", "lengths-1"]
    assert oct(svg.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_plot_json_needs_no_matplotlib(cli_trained, held_out, monkeypatch):
    import sys

    path, _ = held_out
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = cli_trained("plot", "en", "ch", "--file", str(path), "--json", "--points", "5")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    expected = bpestore.open(cli_trained.db).charts(["en", "ch"], path, points=5)
    assert data == [json.loads(json.dumps(c.to_dict())) for c in expected]
    assert [len(d["curve"]) for d in data] == [5, 5] and data[0]["curve"][-1]["tokens"] == data[0]["tokens"]


def test_plot_without_matplotlib_is_one_error_line(cli_trained, held_out, tmp_path, monkeypatch):
    import sys

    path, _ = held_out
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    out = tmp_path / "chart.png"
    assert_error(cli_trained("plot", "en", "--file", str(path), "--out", str(out)),
                 "plot needs matplotlib, which is not installed: pip install 'bpestore[plot]'")
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (("plot", "nope", "--file", "{file}", "--out", "{tmp}/c.png"), "no tokenizer named 'nope' (known: ch, en)"),
    (("plot", "en", "en@7", "--file", "{file}", "--out", "{tmp}/c.png"), "en has no version 7"),
    (("plot", "en", "--file", "{file}", "--out", "{tmp}/c.pdf"), "--out must name a .png or .svg file"),
    (("plot", "en", "--file", "{file}", "--out", "{tmp}/none/c.svg"), "folder not found"),
    (("plot", "en", "--file", "{tmp}/absent.txt", "--out", "{tmp}/c.png"), "file not found"),
    (("plot", "en", "--file", "{file}"), "give --out chart.png (or .svg), or --json"),
    (("plot", "en", "--file", "{file}", "--json", "--points", "1"), "--points"),
])
def test_plot_mistakes_are_one_error_line(cli_trained, held_out, tmp_path, args, message):
    pytest.importorskip("matplotlib")
    path, _ = held_out
    filled = [a.format(file=path, tmp=tmp_path) for a in args]
    assert_error(cli_trained(*filled), message)
    assert not any(p.suffix in (".png", ".svg", ".pdf") for p in tmp_path.rglob("*"))
