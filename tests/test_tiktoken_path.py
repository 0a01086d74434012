"""The tiktoken fast path: when it may run (per spec, per version, per text),
and that it gives the pure-Python encoder's ids wherever it runs."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
from bpestore import Tokenizer, TokenizerSpec
from bpestore.bpe import merge_word
from bpestore.encoder.rank_rule import rank_equivalence_problem
from bpestore.encoder.tiktoken_backend import all_assigned
from bpestore.native import load
from bpestore.text import PATTERNS

from .conftest import byte_vocab, corpus_path, read_corpus

tiktoken = pytest.importorskip("tiktoken")
regex = pytest.importorskip("regex")

EOT = "<|endoftext|>"
ENCODE_CORE = load("_encodecore")[0]
SCALE_FULL = os.environ.get("BPESTORE_SCALE") == "full"


@pytest.fixture(autouse=True, scope="module")
def _tiktoken_gate(tiktoken_gate):
    """These tests are about the gate to tiktoken's core (the compiled core is off)."""


# -- gate 2: the version ---------------------------------------------------------
def test_a_token_that_does_not_encode_to_itself_keeps_the_pure_path():
    """bc (rank 0), ab (rank 1), abc = ab + c (rank 2). By merge rule, "abc"
    is a + bc (b-c merges first, and (a, bc) is no merge); tiktoken's rank rule
    joins a and bc because their concatenation abc is a token."""
    vocab = byte_vocab(b"bc", b"ab", b"abc")
    merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
    tok = Tokenizer(vocab, merges)
    assert tok.backend.startswith("python (token b'abc' (merge 2) does not encode to itself")
    assert tok.encode("abc") == [97, 256]
    ranks = {data: token_id for token_id, data in vocab.items()}
    rank_based = tiktoken.Encoding(name="t", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                                   special_tokens={})
    assert rank_based.encode_ordinary("abc") == [258]  # why the check is needed


def test_an_alien_split_that_never_meets_is_accepted():
    """ab (0), bc (1), abc = ab + c (2): a + bc is a split of abc too, but a
    and bc are never side by side (a-b always merges before b-c)."""
    vocab = byte_vocab(b"ab", b"bc", b"abc")
    merges = [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]
    tok = Tokenizer(vocab, merges)
    assert tok.backend == "tiktoken"
    pure = Tokenizer(vocab, merges, fast=False)
    for text in ["abc", "abcbc", "babc", "aabcc", "xbcabc abc bcab"]:
        assert tok.encode(text) == pure.encode(text)
    assert pure.encode("abc") == [258]


@pytest.mark.parametrize("tokens, merges, problem", [
    ((b"ab", b"bc", b"abc"), [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c"), (b"a", b"bc")], "both make b'abc'"),
    ((b"ab", b"abc"), [(b"ab", b"c"), (b"a", b"b")], "uses b'ab' before a merge makes it"),
])
def test_merge_lists_outside_the_proof_keep_the_pure_path(tokens, merges, problem):
    tok = Tokenizer(byte_vocab(*tokens), merges)
    assert problem in tok.backend


def test_ids_that_do_not_grow_with_rank_keep_the_pure_path():
    vocab = {i: bytes([i]) for i in range(256)}
    vocab[300], vocab[299] = b"ab", b"abc"  # abc is made later but has the lower id
    tok = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    assert "ids do not grow with merge rank" in tok.backend
    assert tok.encode("abcab") == [299, 300]


def test_gpt2_passes_the_check(gpt2_tokenizer):
    tok = gpt2_tokenizer
    table = tok.engine.reference.table
    encode_bytes = lambda data: merge_word(tok.engine.reference.index.symbolize(data), table.ranks, table.merged_ids)  # noqa: E731
    assert rank_equivalence_problem(tok.merges, tok.engine.reference.index.id_of, encode_bytes) is None
    # The session's tokenizer may have chosen the compiled core before this module turned it off.
    assert Tokenizer(tok.vocab, tok.merges, tok.special_tokens).backend == "tiktoken"


@st.composite
def merge_lists(draw) -> list[tuple[bytes, bytes]]:
    """A merge list over a, b, c: each merge joins two tokens made before."""
    tokens = [b"a", b"b", b"c"]
    merges = []
    for _ in range(draw(st.integers(1, 30))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        if left + right not in tokens:
            merges.append((left, right))
            tokens.append(left + right)
    return merges


@settings(max_examples=400, deadline=None)
@given(merge_lists(), st.lists(st.text("abc", min_size=1, max_size=40), max_size=6))
def test_where_the_check_passes_tiktoken_gives_the_merge_rule_ids(merges, words):
    """The theorem of bpestore/encoder/rank_rule.py on random merge lists: where the check
    passes, tiktoken's rank rule gives the merge rule's ids on any text; where
    it fails, some token's own text already tells them apart."""
    vocab = byte_vocab(*(left + right for left, right in merges))
    passes = Tokenizer(vocab, merges).backend == "tiktoken"
    pure = Tokenizer(vocab, merges, fast=False)
    ranks = {data: token_id for token_id, data in vocab.items()}
    rank_based = tiktoken.Encoding(name="t", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                                   special_tokens={})
    tokens = [(left + right).decode() for left, right in merges]
    if passes:
        for text in words + tokens + [" ".join(words)]:
            assert rank_based.encode_ordinary(text) == pure.encode_ordinary(text)
    else:
        assert any(rank_based.encode_ordinary(t) != pure.encode_ordinary(t) for t in tokens)


def encoding_problem(merges: Sequence[tuple[bytes, bytes]], id_of: Mapping[bytes, int],
                     encode_bytes: Callable[[bytes], list[int]], checked: int = 0) -> int | None:
    """(S) by its definition: the first merge from ``checked`` on whose token does
    not encode to itself (one ``encode_bytes`` per token), or None."""
    for k in range(checked, len(merges)):
        left, right = merges[k]
        if encode_bytes(left + right) != [id_of[left + right]]:
            return k
    return None


def _reference_and_walk(merges: list[tuple[bytes, bytes]], checked: int = 0) -> tuple[int | None, int | None]:
    """The first token that does not encode to itself: by encoding each (the
    definition) and by the seam walk."""
    from bpestore.encoder.rank_rule import _seam_problem

    tok = Tokenizer(byte_vocab(*(left + right for left, right in merges)), merges, fast=False)
    made_at = {left + right: k for k, (left, right) in enumerate(merges)}
    walk = _seam_problem(merges, made_at, checked, compiled=False)
    assert _seam_problem(merges, made_at, checked) == walk  # the encode core's walk, where built
    return encoding_problem(merges, tok.engine.reference.index.id_of, tok.engine.reference.encode_bytes, checked), walk


@settings(max_examples=1500, deadline=None)
@given(merge_lists(), st.integers(0, 30))
def test_the_seam_walk_finds_what_encoding_every_token_finds(merges, checked):
    """(S) decided without encoding gives the definition's answer, token for token:
    the first failing merge (from ``checked`` on, where the tokens before pass)."""
    by_encoding, by_walk = _reference_and_walk(merges)
    assert by_walk == by_encoding
    if by_encoding is None or by_encoding >= checked:
        assert _reference_and_walk(merges, checked) == (by_encoding, by_encoding)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abc", min_size=1, max_size=14).map(str.encode), st.integers(1, 30), min_size=1,
                       max_size=25), st.integers(1, 80), st.sampled_from(["lexicographic", "hf"]))
def test_the_seam_walk_on_trained_merge_lists(counts, n_merges, tie_break):
    """Trained lists (deep merge trees, mostly passing) give the same answer both ways."""
    from bpestore.trainer import train_word_counts

    _, merges = train_word_counts(counts, vocab_size=256 + n_merges, tie_break=tie_break)
    by_encoding, by_walk = _reference_and_walk(merges)
    assert by_walk == by_encoding


@pytest.mark.parametrize("merges, first", [
    ([(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")], 2),  # abc = ab + c, but b c joins first
    ([(b"a", b"a"), (b"aa", b"a")], None),  # aaa: the leftmost pair first, then aa + a
    ([(b"a", b"a"), (b"a", b"aa")], 1),  # ... so a + aa never stands
    ([(b"a", b"a"), (b"aa", b"aa"), (b"aaaa", b"a")], None),
    ([(b"a", b"a"), (b"aa", b"aa"), (b"a", b"aaaa")], 2),
    ([(b"a", b"b"), (b"b", b"a"), (b"ab", b"a")], None),  # aba: a b joins first
    ([(b"a", b"b"), (b"b", b"a"), (b"a", b"ba")], 2),
])
def test_the_seam_walk_on_small_cases(merges, first):
    assert _reference_and_walk(merges) == (first, first)


def test_the_seam_walk_on_gpt2_and_trained_vocabularies(gpt2_tokenizer):
    from bpestore.encoder.rank_rule import _seam_problem

    tok = gpt2_tokenizer
    made_at = {left + right: k for k, (left, right) in enumerate(tok.merges)}
    assert _seam_problem(tok.merges, made_at) is None
    assert _seam_problem(tok.merges, made_at, compiled=False) is None
    for tie_break in ("lexicographic", "hf"):
        vocab, merges = bpestore.train_bpe(corpus_path("tinyshakespeare.txt"), vocab_size=1200,
                                           tie_break=tie_break)
        pure = Tokenizer(vocab, merges, fast=False)
        made_at = {left + right: k for k, (left, right) in enumerate(merges)}
        by_encoding = encoding_problem(merges, pure.engine.reference.index.id_of, pure.engine.reference.encode_bytes)
        assert _seam_problem(merges, made_at) == _seam_problem(merges, made_at, compiled=False) == by_encoding


@pytest.mark.skipif(ENCODE_CORE is None, reason="the encode core is not built")
@pytest.mark.parametrize("lefts, rights", [([0], [-1]), ([-1, 1], [-2, -3]), ([-1], [-257]), ([-1, -2], [-1])])
def test_the_cores_seam_walk_refuses_codes_no_merge_list_has(lefts, rights):
    """A code is a rank below its merge's own (W), or -1 - byte; else no walk (it could loop)."""
    with pytest.raises(ValueError):
        ENCODE_CORE.seam_problem(lefts, rights, 0)


# -- gate 1: the spec --------------------------------------------------------------
@pytest.mark.parametrize("spec, reason", [
    (TokenizerSpec(normalizer="nfkc"), "normalizer"),
    (TokenizerSpec(pretokenizer="whitespace"), "pre-tokenizer whitespace"),
    (TokenizerSpec(pretokenizer="regex", pattern=r"\w+|\W"), "pre-tokenizer regex"),
    (TokenizerSpec(segmentation="longest-match"), "longest-match"),
])
def test_specs_tiktoken_cannot_run_keep_the_pure_path(spec, reason):
    tok = Tokenizer(byte_vocab(b"ab"), [(b"a", b"b")], spec=spec)
    assert tok.backend.startswith("python (") and reason in tok.backend


def test_fast_false_keeps_the_pure_path():
    assert Tokenizer(byte_vocab(b"ab"), [(b"a", b"b")], fast=False).backend == "python (fast=False)"



def test_a_token_no_merge_makes_is_left_out_of_tiktokens_ranks():
    """zz is in the vocabulary but no merge makes it: the merge rule never
    gives it, so tiktoken's ranks hold the bytes and the merged tokens only,
    whether the merges come as byte pairs or, as a store gives them, as ids."""
    vocab = {**byte_vocab(b"ab", b"abc"), 258: b"zz"}
    merges = [(b"a", b"b"), (b"ab", b"c")]
    text = "abc zz abcab zzz " * 70_000  # long enough for tiktoken's core
    pure = Tokenizer(vocab, merges, fast=False).encode(text)
    assert 258 not in pure
    from_pairs = Tokenizer(vocab, merges)
    from_ids = Tokenizer(vocab, None, facts=from_pairs.facts, merge_ids=([97, 256], [98, 99], [256, 257]))
    for tok in (from_pairs, from_ids):
        assert tok.encode(text) == pure
        assert tok.backend == "tiktoken"

# -- a trained version: both paths agree on every shared corpus -------------------
@pytest.fixture(scope="module", params=["gpt2", "cl100k", "o200k"])
def trained_pair(request):
    vocab, merges = bpestore.train_bpe(corpus_path("tinyshakespeare.txt"), vocab_size=1500,
                                       special_tokens=[EOT], pretokenizer=request.param)
    spec = TokenizerSpec(pretokenizer=request.param, special_tokens=(EOT,))
    fast = Tokenizer(vocab, merges, [EOT], spec=spec)
    assert fast.backend == "tiktoken", fast.backend
    return Tokenizer(vocab, merges, [EOT], spec=spec, fast=False), fast


@pytest.mark.parametrize("name", ["chinese_1M.txt", "german_1M.txt", "hindi_1M.txt", "japanese_1M.txt",
                                  "russian_1M.txt", "taylorswift.txt", "tinystories_sample.txt",
                                  "dracula.txt", "code_python_5M.txt.xz", "english_medium.txt.xz"])
def test_trained_version_paths_agree_on_shared_corpora(trained_pair, name):
    pure, fast = trained_pair
    text = read_corpus(name)[:200_000] if not name.endswith(".xz") else _xz_prefix(name, 200_000)
    assert fast.encode(text, allowed_special="all") == pure.encode(text, allowed_special="all")


def _xz_prefix(name: str, n_chars: int) -> str:
    import lzma

    with lzma.open(corpus_path(name), "rt", encoding="utf-8") as f:
        return f.read(n_chars)


def test_store_versions_use_the_fast_path(store):
    store.ingest("c", [corpus_path("corpus.en")], special_tokens=[EOT])
    store.train("en", corpus="c", vocab_size=400)
    tok = store.tokenizer("en@1")
    assert tok.backend == "tiktoken"
    text = read_corpus("tinystories_sample.txt")
    pure = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, spec=tok.spec, fast=False)
    assert tok.encode(text, allowed_special="all") == pure.encode(text, allowed_special="all")


# -- gate 3: Unicode ---------------------------------------------------------------
def _newer_letter() -> str | None:
    """A letter to the regex module that Python's unicodedata does not know yet."""
    for cp in (0x10940, 0x10D50, 0x2EBF0, 0x11F04, 0x31350, 0x10F70):
        ch = chr(cp)
        if unicodedata.category(ch) == "Cn" and regex.fullmatch(r"\p{L}", ch):
            return ch
    return None


def test_the_check_searches_a_stretch_at_a_time(monkeypatch):
    """all_assigned finds an unassigned character in any stretch, at either end of one."""
    import bpestore.encoder.tiktoken_backend

    monkeypatch.setattr(bpestore.encoder.tiktoken_backend, "SCAN_CHARS", 7)
    base = "abc 日本語 🦄 xyz" * 5
    assert all_assigned(base)
    for at in range(len(base) + 1):
        assert not all_assigned(base[:at] + "\u0378" + base[at:]), at  # unassigned in every Unicode version
        assert all_assigned(base[:at] + "\U0001F984" + base[at:]), at  # an assigned astral character


def test_text_with_characters_newer_than_python_takes_the_pure_path(gpt2_tokenizer):
    letter = _newer_letter()
    if letter is None:
        pytest.skip("the regex module knows no letter newer than Python's Unicode tables")
    text = f"a{letter}b {letter}{letter} x"
    assert not all_assigned(text)
    assert all_assigned("plain text, 日本語, 🦄")
    pure = Tokenizer(gpt2_tokenizer.vocab, gpt2_tokenizer.merges, gpt2_tokenizer.special_tokens,
                     fast=False)
    assert gpt2_tokenizer.encode_ordinary(text) == pure.encode_ordinary(text)


def test_a_long_text_is_checked_beside_its_encoding(gpt2_tokenizer, monkeypatch):
    """Past CONCURRENT_CHECK_AFTER characters the check runs while tiktoken
    encodes; the answer is the same: tiktoken's ids where the text passes,
    the pure path's where it holds an unassigned character."""
    import bpestore.encoder.tiktoken_backend

    monkeypatch.setattr(bpestore.encoder.tiktoken_backend, "CONCURRENT_CHECK_AFTER", 100)
    pure = Tokenizer(gpt2_tokenizer.vocab, gpt2_tokenizer.merges, gpt2_tokenizer.special_tokens, fast=False)
    passing = "Grüße aus Köln, 日本語 and 🦄. " * 500
    unassigned = passing + "\u0378" + passing  # U+0378 is unassigned in every Unicode version
    fast = Tokenizer(gpt2_tokenizer.vocab, gpt2_tokenizer.merges, gpt2_tokenizer.special_tokens)
    assert fast.backend == "tiktoken"
    encoder = fast.engine.accelerated[0]
    out: list[int] = []
    assert encoder.encode_into(passing, out) and out == pure.encode_ordinary(passing)
    assert not encoder.encode_into(unassigned, out) and out == pure.encode_ordinary(passing)  # nothing added
    assert fast.encode_ordinary(unassigned) == pure.encode_ordinary(unassigned)
    assert fast.encode_ordinary(passing) == pure.encode_ordinary(passing)  # tiktoken's own list
    assert encoder.encode(passing) == out and encoder.encode(unassigned) is None


def _probe_ranks() -> dict[bytes, int]:
    """Bytes plus every pair of a probe character and any byte: token
    boundaries then show where the regex split the text."""
    ranks = {bytes([b]): b for b in range(256)}
    for ch in b"a1 A'\nx":
        for b in range(256):
            for token in (bytes([ch, b]), bytes([b, ch])):
                ranks.setdefault(token, len(ranks))
    return ranks


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
def test_regex_engines_agree_on_every_assigned_code_point(name):
    """Python's regex module and tiktoken's engine split alike around every
    code point Python's unicodedata knows (the fast path's gate 3 relies on
    it). Every 61st code point by default; all at BPESTORE_SCALE=full."""
    pattern = regex.compile(PATTERNS[name])
    probe = tiktoken.Encoding(name="probe", pat_str=PATTERNS[name], mergeable_ranks=_probe_ranks(),
                              special_tokens={})
    step = 1 if SCALE_FULL else 61
    disagree = []
    for cp in range(0, 0x110000, step):
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cn", "Cs"):
            continue
        for shape in ("a{}a", "1{}1", " {}x", "{} ", "x{}", "'{}", "{}\n", "A{}a", "a{}A", "{}'s"):
            text = shape.format(ch)
            split = [t for w in pattern.findall(text) for t in probe._encode_single_piece(w.encode())]
            if split != probe.encode_ordinary(text):
                disagree.append(f"U+{cp:04X} in {shape!r}")
    assert not disagree, disagree[:20]


def test_short_texts_do_not_pay_for_the_check():
    tok = Tokenizer(byte_vocab(b"ab"), [(b"a", b"b")])
    assert tok.encode("ab ab") == [256, 32, 256]
    assert "accelerated" not in tok.engine.__dict__  # decided only when a long text comes
    assert tok.encode("ab " * 5000) == [256, 32] * 4999 + [256, 32]
    assert "accelerated" in tok.engine.__dict__ and tok.backend == "tiktoken"


@pytest.mark.parametrize("before", [0, 1, 49_999, 50_000, 77_777])
def test_long_whitespace_runs_are_found_wherever_they_sit(before):
    from bpestore.encoder.tiktoken_backend import _long_space_run

    assert _long_space_run("x" * before + " \t\n" * 33_334 + "y")      # 100,002 spaces
    assert not _long_space_run("x" * before + " " * 49_999 + "y")
    assert not _long_space_run(("x" + " " * 40_000) * 5)


def test_unassigned_pattern_is_unicodedata_on_every_bmp_character():
    """The scan's pattern matches a BMP character exactly where unicodedata calls it
    unassigned (Cn) or a surrogate (Cs), and every astral character."""
    import unicodedata

    from bpestore.encoder.tiktoken_backend import _unassigned_or_astral

    pattern = _unassigned_or_astral()
    wrong = [cp for cp in range(0x10000)
             if bool(pattern.fullmatch(chr(cp))) != (unicodedata.category(chr(cp)) in ("Cn", "Cs"))]
    assert wrong == []
    assert all(pattern.fullmatch(chr(cp)) for cp in (0x10000, 0x1F984, 0x10FFFF))
