"""Queries over stored vocabularies: vocab, merges, explain, stats, lineage, remove
(library on SQLite and PostgreSQL, and the command line). The text is the sample
shipped in the package, so these run without the shared corpora; references are
computed here from the Tokenizer's vocabulary and merges and from plain Python."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import time

import pytest

import bpestore
from bpestore import ConflictError, InvalidArgumentError, NotFoundError, Tokenizer
from bpestore.bpe import merge_steps, merge_word, pair_key
from bpestore.queries import pick_tokens, token_text
from bpestore.store import version_tables

from .conftest import assert_error

EOT = "<|endoftext|>"


@pytest.fixture
def trained(store, sample_file):
    store.ingest("books", [sample_file])
    store.train("en", corpus="books", vocab_size=400)
    return store


def first_made(tok: Tokenizer) -> dict[bytes, int]:
    """The rank of the first merge making each byte string (from the merge list alone)."""
    made: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(tok.merges):
        made.setdefault(left + right, rank)
    return made


# -- vocab -----------------------------------------------------------------------
def test_vocab_lists_every_token_with_the_merge_that_made_it(trained):
    tok = trained.tokenizer("en@1")
    listed = trained.vocab("en@1")
    assert [(t.id, t.data) for t in listed] == sorted(tok.vocab.items())
    made = first_made(tok)
    for t in listed:
        assert t.rank == made.get(t.data) if t.kind == "merge" else t.rank is None
        assert (t.count is None) == (t.rank is None) and (t.count is None or t.count >= 2)
    assert {t.kind for t in listed} == {"byte", "merge"}


@pytest.mark.parametrize("options", [
    {"grep": "^ th"}, {"grep": r"e\b|^[A-Z]"}, {"grep": "zzz"}, {"grep": r"\\x"}, {"prefix": " w"},
    {"prefix": " w", "grep": "h"}, {"longest": 5}, {"grep": "e", "longest": 3, "limit": 2}, {"limit": 7},
    {"prefix": "é"},
])
def test_vocab_filters_as_python_would(trained, options):
    vocab = trained.tokenizer("en@1").vocab
    wanted = sorted(vocab)
    if "prefix" in options:
        wanted = [i for i in wanted if vocab[i].startswith(options["prefix"].encode())]
    if "grep" in options:
        wanted = [i for i in wanted if re.search(options["grep"], vocab[i].decode("utf-8", "backslashreplace"))]
    if "longest" in options:
        wanted = sorted(wanted, key=lambda i: (-len(vocab[i]), i))[:options["longest"]]
    wanted = wanted[:options.get("limit")]
    assert [t.id for t in trained.vocab("en@1", **options)] == wanted
    assert [r[0] for r in pick_tokens(sorted(vocab.items()), **options)] == wanted


def test_vocab_mistakes(trained):
    with pytest.raises(InvalidArgumentError, match="grep is not a regular expression") as caught:
        trained.vocab("en@1", grep="(")
    assert caught.value.params == ("grep",)
    with pytest.raises(InvalidArgumentError, match="limit cannot be negative"):
        trained.vocab("en@1", limit=-1)
    with pytest.raises(NotFoundError, match="en has no version 7"):
        trained.vocab("en@7")


# -- merges ----------------------------------------------------------------------
def test_merges_page_through_the_merge_list(trained):
    tok = trained.tokenizer("en@1")
    every = trained.merges("en@1")
    assert [(m.left_bytes, m.right_bytes) for m in every] == tok.merges
    assert [m.rank for m in every] == list(range(len(tok.merges)))
    assert all(tok.vocab[m.token] == m.left_bytes + m.right_bytes for m in every)
    counts = [m.count for m in every]
    assert counts[0] >= counts[-1] >= 2
    page = trained.merges("en@1", start=10, limit=3)
    assert page == every[10:13]
    assert trained.merges("en@1", start=len(every)) == []
    with pytest.raises(InvalidArgumentError, match="start cannot be negative"):
        trained.merges("en@1", start=-1)


# -- explain ----------------------------------------------------------------------
def test_merge_steps_end_in_merge_word():
    rng = random.Random(5)
    for _ in range(300):
        n_symbols = rng.randint(2, 5)
        merged_ids, ranks = [], {}
        for rank in range(rng.randint(0, 12)):
            a, b = rng.randrange(n_symbols + rank), rng.randrange(n_symbols + rank)
            ranks.setdefault(pair_key(a, b), rank)
            merged_ids.append(n_symbols + rank)
        word = [rng.randrange(n_symbols) for _ in range(rng.randint(1, 60))]
        steps = merge_steps(word, ranks, merged_ids)
        assert (steps[-1][2] if steps else word) == merge_word(list(word), ranks, merged_ids)
        assert [r for r, _, _ in steps] == sorted(r for r, _, _ in steps)  # a made pair ranks after its parts


def check_explanation(tok: Tokenizer, text: str) -> None:
    explained = tok.explain(text)
    assert explained.ids == tok.encode(text, allowed_special="all")
    for word in explained.words:
        ids = list(word.symbols)
        for step in word.steps:  # each step merges the pair it names
            assert ids[step.position:step.position + 2] == [step.left, step.right]
            assert tok.vocab[step.token] == tok.vocab[step.left] + tok.vocab[step.right]
            ids[step.position:step.position + 2] = [step.token]
            assert tuple(ids) == step.ids
        assert tuple(ids) == word.ids or word.segmentation == "longest-match"


@pytest.mark.parametrize("settings", [
    {}, {"alphabet": "chars", "unk_token": "<unk>"}, {"alphabet": "chars", "byte_fallback": True},
    {"end_of_word": "</w>"}, {"alphabet": "chars", "start_of_word": "▁", "unk_token": "<unk>"},
])
def test_explain_ends_in_the_ids_encode_gives(store, sample_file, sample_text, settings):
    store.ingest("books", [sample_file], special_tokens=[EOT])
    store.train("t", corpus="books", merges=150, **settings)
    tok = store.tokenizer("t")
    check_explanation(tok, sample_text[100_000:130_000])  # long enough for encode's fast path
    check_explanation(tok, f"Ünïcödé 東京{EOT} and  spaces\n\n\tcafé ")


def test_explain_says_where_unseen_characters_went(store, sample_file):
    store.ingest("books", [sample_file])
    store.train("unk", corpus="books", merges=50, alphabet="chars", unk_token="<unk>")
    store.train("fb", corpus="books", merges=50, alphabet="chars", byte_fallback=True)
    [word] = store.explain("unk", "a東b").words
    [unseen] = word.unknown
    assert (unseen.char, unseen.position, unseen.to) == ("東", 1, "unk")
    assert store.tokenizer("unk").vocab[unseen.ids[0]] == b"<unk>" and unseen.ids[0] in word.ids
    [word] = store.explain("fb", "a東b").words
    [unseen] = word.unknown
    fb = store.tokenizer("fb")
    assert unseen.to == "bytes" and b"".join(fb.vocab[i] for i in unseen.ids) == "東".encode()
    assert store.explain("fb", "ab").words[0].unknown == ()


def test_explain_gpt2_and_longest_match(gpt2_tokenizer, tiktoken_gpt2):
    text = "Hello world, it's 2026!  Ünïcödé <|endoftext|> 東京"
    explained = gpt2_tokenizer.explain(text)
    assert explained.ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert [w.segmentation for w in explained.words].count("special") == 1
    lm = Tokenizer(gpt2_tokenizer.vocab, gpt2_tokenizer.merges, {EOT: 50256},
                   spec=gpt2_tokenizer.spec.replace(segmentation="longest-match"))
    check_explanation(lm, text)


# -- stats -------------------------------------------------------------------------
def test_stats_side_by_side_match_a_count_by_hand(store, sample_file, sample_text, tmp_path, monkeypatch):
    store.ingest("books", [sample_file])
    store.train("en", corpus="books", vocab_size=400)
    store.train("ch", corpus="books", vocab_size=150, alphabet="chars", unk_token="<unk>")
    text = sample_text[200_000:260_000] + " Ünïcödé 東京\n"
    path = tmp_path / "other.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    calls = []
    original = Tokenizer.encode_chunks
    monkeypatch.setattr(Tokenizer, "encode_chunks", lambda self, *a, **k: calls.append(self.name) or
                        original(self, *a, **k))
    en, ch = store.stats(["en", "ch@1"], path)
    assert calls == ["en@1", "ch@1"]  # one encoding pass per version
    for result in (en, ch):
        ids = store.tokenizer(result.ref).encode(text)
        assert (result.tokens, result.used_ids) == (len(ids), len(set(ids)))
        assert (result.bytes, result.words) == (len(text.encode()), len(text.split()))
        assert result.vocab_size == len(store.tokenizer(result.ref).vocab)
    assert en.unknown is None and en.unknown_share is None
    unk = store.tokenizer("ch").token_id("<unk>")
    assert ch.unknown == store.tokenizer("ch").encode(text).count(unk) >= 2
    assert en.bytes_per_token == pytest.approx(len(text.encode()) / en.tokens)
    with pytest.raises(NotFoundError, match="no tokenizer named 'nope'"):
        store.stats(["en", "nope"], path)
    assert calls == ["en@1", "ch@1"]  # refs are checked before any encoding


def test_stats_unknown_share_counts_fallback_bytes(store, sample_file, tmp_path):
    store.ingest("books", [sample_file])
    store.train("fb", corpus="books", merges=0, alphabet="chars", byte_fallback=True)
    path = tmp_path / "t.txt"
    path.write_text("a 東 b", encoding="utf-8")
    [result] = store.stats(["fb"], path)
    assert (result.tokens, result.unknown) == (7, 3)  # 'a', ' ', 3 bytes of 東, ' ', 'b'


# -- lineage and removal -----------------------------------------------------------------
@pytest.fixture
def family(trained, sample_file):
    """en@1 <- en@2 <- en@3, en@1 <- code@1; en@4 alone; en@prod -> en@2."""
    trained.train("en", corpus="books", vocab_size=420, parent="en@1")
    trained.train("en", corpus="books", vocab_size=440, parent="en@2")
    trained.train("code", corpus="books", vocab_size=410, parent="en@1")
    trained.train("en", corpus="books", vocab_size=300)
    trained.set_alias("en@2", "prod")
    return trained


def shape(node) -> tuple:
    return (node.version.ref, tuple(shape(c) for c in node.children))


def test_lineage_is_the_tree_of_versions(family):
    roots = family.lineage("en")
    assert [shape(r) for r in roots] == [("en@1", (("code@1", ()), ("en@2", (("en@3", ()),)))), ("en@4", ())]
    assert roots[0].children[1].version.aliases == ("prod",)
    assert roots[0].version.corpus_ref == "books@1"
    [code] = family.lineage("code")
    assert (shape(code), code.version.parent) == (("code@1", ()), "en@1")
    assert json.loads(json.dumps(roots[0].to_dict()))["children"][1]["aliases"] == ["prod"]
    with pytest.raises(NotFoundError, match="no tokenizer named 'x'"):
        family.lineage("x")


def all_refs(store) -> list[str]:
    return [v.ref for v in store.versions()]


def test_remove_refuses_a_version_in_use_and_force_takes_its_descendants(family):
    # The alias is named with the version it points at (an extension here, not en@1).
    with pytest.raises(ConflictError, match=r"en@1 is in use \(extended by en@2, code@1, en@3; en@prod points at en@2"):
        family.remove("en@1")
    assert len(all_refs(family)) == 5
    with pytest.raises(ConflictError, match="en@prod points at en@2"):
        family.remove("en@2")
    removed = family.remove("en@1", force=True)
    assert removed.versions == ("en@1", "en@2", "code@1", "en@3") and removed.aliases == ("en@prod",)
    assert all_refs(family) == ["en@4"]
    with pytest.raises(NotFoundError, match="no tokenizer named 'code'"):
        family.versions("code")
    family.remove("en@4")
    assert all_refs(family) == []


def test_remove_an_alias_or_a_leaf(family):
    assert family.remove("en@prod").aliases == ("en@prod",)
    assert family.version("en@2").aliases == ()
    assert family.remove("en@3").versions == ("en@3",)
    assert family.remove("en@2").versions == ("en@2",)
    assert all_refs(family) == ["code@1", "en@1", "en@4"]
    assert family.tokenizer("en@1").encode("the") == family.tokenizer("code@1").encode("the")
    with pytest.raises(InvalidArgumentError, match="name the version to remove as en@N"):
        family.remove("en")
    with pytest.raises(NotFoundError, match="en has no version or alias 'prod'"):
        family.remove("en@prod")


def test_remove_is_one_transaction(family, monkeypatch):
    original = version_tables.delete_versions

    def fail_halfway(conn, version_ids):
        original(conn, version_ids[2:])
        raise RuntimeError("disk gone")
    monkeypatch.setattr(version_tables, "delete_versions", fail_halfway)
    with pytest.raises(RuntimeError):
        family.remove("en@1", force=True)
    assert len(all_refs(family)) == 5 and family.version("en@prod").ref == "en@2"
    assert len(family.vocab("en@3")) == 440


# -- the command line ----------------------------------------------------------------
@pytest.fixture
def cli_trained(cli_run, sample_file):
    assert cli_run("ingest", "books", str(sample_file)).exit_code == 0
    assert cli_run("train", "en", "--corpus", "books", "--vocab-size", "400").exit_code == 0
    return cli_run


def test_cli_vocab_and_merges(cli_trained):
    store = bpestore.open(cli_trained.db)
    out = cli_trained("vocab", "en", "--grep", "^ th", "--limit", "2").stdout.splitlines()
    picked = store.vocab("en", grep="^ th", limit=2)
    assert out == [f"{t.id}\t{t.text!r}\t{len(t.data)} bytes\tmerge\trank {t.rank:,}, pair count {t.count:,}"
                   for t in picked]
    listed = json.loads(cli_trained("vocab", "en", "--longest", "3", "--json").stdout)
    assert [t["id"] for t in listed] == [t.id for t in store.vocab("en", longest=3)]
    assert set(listed[0]) == {"id", "token", "bytes", "hex", "kind", "rank", "count"}
    assert cli_trained("vocab", "en", "--prefix", "\x00zz").stdout == "no token matches\n"
    first = store.merges("en", limit=1)[0]
    line = cli_trained("merges", "en", "--limit", "1").stdout
    assert line == (f"0\t{token_text(first.left_bytes)!r} + {token_text(first.right_bytes)!r} -> {first.token} "
                    f"{token_text(first.left_bytes + first.right_bytes)!r}\tpair count {first.count:,}\n")
    assert json.loads(cli_trained("merges", "en", "--start", "5", "--limit", "2", "--json").stdout)[1]["rank"] == 6


def test_cli_explain_and_stats(cli_trained, sample_file):
    store = bpestore.open(cli_trained.db)
    text = "The Count's castle"
    out = cli_trained("explain", "en", text).stdout.splitlines()
    ids = store.tokenizer("en").encode(text)
    assert out[0] == "'The': 'T' 'h' 'e'" and out[-1] == "ids: " + " ".join(map(str, ids))
    assert any(line.startswith("  rank ") for line in out)
    assert json.loads(cli_trained("explain", "en", text, "--json").stdout)["ids"] == ids
    table = cli_trained("stats", "en", "en@1", "--file", str(sample_file)).stdout.splitlines()
    assert table[0] == f"{sample_file}: {len(sample_file.read_bytes()):,} bytes, " \
                       f"{len(sample_file.read_text().split()):,} words"
    assert table[1].split() == ["en@1", "en@1"] and table[2].split()[0] == "tokens"
    [result] = json.loads(cli_trained("stats", "en", "--file", str(sample_file), "--json").stdout)
    assert result["tokens"] == len(store.tokenizer("en").encode(sample_file.read_text()))


def test_cli_lineage_and_rm(cli_trained):
    cli_trained("train", "en", "--corpus", "books", "--vocab-size", "410", "--from", "en@1")
    cli_trained("alias", "en@2", "prod")
    out = cli_trained("lineage", "en").stdout.splitlines()
    assert [line.split("  ")[0] for line in out] == ["en@1", "└── en@2"] and "aliases=prod" in out[1]
    assert json.loads(cli_trained("lineage", "en", "--json").stdout)[0]["children"][0]["ref"] == "en@2"
    assert_error(cli_trained("rm", "en@1"), "en@1 is in use (extended by en@2; en@prod points at en@2); "
                                            "remove those first, or pass --force to remove them with it")
    assert cli_trained("rm", "en@prod").stdout == "removed alias en@prod\n"
    assert cli_trained("rm", "en@1", "--force").stdout == "removed en@1, en@2\n"
    assert cli_trained("versions").stdout.startswith("no versions yet")


@pytest.mark.parametrize("args, message", [
    (("vocab", "nope"), "no tokenizer named 'nope' (known: en)"),
    (("vocab", "en", "--grep", "("), "--grep is not a regular expression: missing ), unterminated subpattern"),
    (("merges", "en@9"), "en has no version 9 (versions: en@1)"),
    (("explain", "en@x", "hi"), "en has no version or alias 'x'"),
    (("stats", "en", "--file", "/nonexistent/file.txt"), "file not found: /nonexistent/file.txt"),
    (("lineage", "nope"), "no tokenizer named 'nope'"),
    (("rm", "en"), "name the version to remove as en@N, or an alias as en@ALIAS"),
])
def test_cli_mistakes_are_one_error_line(cli_trained, args, message):
    assert_error(cli_trained(*args), message)


# -- speed ----------------------------------------------------------------------------
def letter_vocab(n_tokens: int) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """A byte-level vocabulary of ``n_tokens``: the 256 bytes, then every string of
    2, 3, ... lowercase letters in order, each merged from its prefix and last letter."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    level = letters = [bytes([c]) for c in range(ord("a"), ord("z") + 1)]
    while len(vocab) < n_tokens:
        longer = []
        for stem in level:
            for letter in letters[: n_tokens - len(vocab)]:
                merges.append((stem, letter))
                vocab[len(vocab)] = stem + letter
                longer.append(stem + letter)
        level = longer
    return vocab, merges


@pytest.mark.slow
def test_vocab_grep_on_a_big_version_from_a_fresh_process(tmp_path):
    """`vocab --grep` on a version of 200,000 tokens (20,000 unless BPESTORE_SCALE=full)
    in a new process: the tokens Python's re finds, within 0.5 s at full scale (median of 3)."""
    full = os.environ.get("BPESTORE_SCALE") == "full"
    vocab, merges = letter_vocab(200_000 if full else 20_000)
    db = tmp_path / "big.db"
    bpestore.open(db).import_vocab("big", vocab, merges)
    grep = "^zz.a|^ab.de$|q$"
    wanted = [i for i, data in sorted(vocab.items()) if re.search(grep, data.decode("utf-8", "backslashreplace"))]
    argv = [sys.executable, "-m", "bpestore", "--db", str(db), "vocab", "big", "--grep", grep, "--json"]
    times = []
    for _ in range(3):
        started = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        times.append(time.perf_counter() - started)
    listed = json.loads(out)
    assert [t["id"] for t in listed] == wanted and len(wanted) > 100
    assert all(t["rank"] == (t["id"] - 256 if t["id"] >= 256 else None) for t in listed)
    if full:
        assert sorted(times)[1] <= 0.5, times
