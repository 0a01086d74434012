"""The encoder against tiktoken and Hugging Face tokenizers (GPT-2 built offline
from the shared files), on both encoder paths: pure Python and the compiled core (or tiktoken's)."""

from __future__ import annotations

import lzma
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpestore
import bpestore.encoder.reference
from bpestore import DisallowedSpecialError, InvalidArgumentError, Tokenizer, TokenizerSpec
from bpestore.bpe import _merge_long_word, merge_word

from .conftest import FAST_BACKENDS, corpus_path, read_corpus

EOT = "<|endoftext|>"
SCALE_FULL = os.environ.get("BPESTORE_SCALE") == "full"
TEXT_CORPORA = ["address.txt", "chinese_1M.txt", "corpus.en", "dracula.txt", "german.txt",
                "german_1M.txt", "hindi_1M.txt", "japanese_1M.txt", "russian_1M.txt",
                "taylorswift.txt", "tinyshakespeare.txt", "tinystories_sample.txt"]
XZ_CORPORA = ["code_python_5M.txt.xz", "english_medium.txt.xz", "english_100M.txt.xz"]


def read_prefix(name: str, n_chars: int | None) -> str:
    """The first n_chars characters of a shared corpus (all of it for None)."""
    path = corpus_path(name)
    opener = lzma.open if name.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read() if n_chars is None else f.read(n_chars)


@pytest.fixture(scope="session")
def gpt2_paths(gpt2_files):
    """GPT-2 on each encoder path: {'python': ..., 'fast': ...} (the compiled core, or
    tiktoken's where the core is not built)."""
    from bpestore.formats.gpt2 import read_gpt2

    vocab, merges, specials = read_gpt2(*gpt2_files)
    pure = Tokenizer(vocab, merges, specials, name="gpt2", fast=False)
    fast = Tokenizer(vocab, merges, specials, name="gpt2")
    assert pure.backend == "python (fast=False)"
    assert fast.backend in FAST_BACKENDS, fast.backend
    return {"python": pure, "fast": fast}


@pytest.fixture(params=["python", "fast"])
def gpt2(request, gpt2_paths) -> Tokenizer:
    return gpt2_paths[request.param]


@pytest.fixture(scope="session")
def hf_gpt2(gpt2_files):
    """Hugging Face's BPE from the same vocab.json and merges.txt."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    hf = tokenizers.Tokenizer(models.BPE.from_file(*map(str, gpt2_files)))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True,
                                                trim_offsets=False)
    hf.decoder = decoders.ByteLevel()
    return hf


# -- exact ids on every shared corpus -------------------------------------------
@pytest.mark.parametrize("name", TEXT_CORPORA + XZ_CORPORA)
def test_ids_equal_tiktoken_on_every_shared_corpus(name, gpt2, tiktoken_gpt2):
    # The .xz corpora are read in part here; test_xz_corpora_in_full reads them whole.
    text = read_prefix(name, 1_000_000 if name.endswith(".xz") else None)
    ids = gpt2.encode_ordinary(text)
    assert ids == tiktoken_gpt2.encode_ordinary(text)
    assert gpt2.decode(ids) == text


@pytest.mark.slow
@pytest.mark.parametrize("name", XZ_CORPORA)
def test_xz_corpora_in_full(name, gpt2, tiktoken_gpt2):
    """Whole files at BPESTORE_SCALE=full; the first 2.5 MB otherwise."""
    text = read_prefix(name, None if SCALE_FULL else 2_500_000)
    assert gpt2.encode_ordinary(text) == tiktoken_gpt2.encode_ordinary(text)


@pytest.mark.parametrize("name", TEXT_CORPORA + XZ_CORPORA)
def test_ids_and_offsets_equal_hf_tokenizers(name, gpt2_paths, hf_gpt2):
    text = read_prefix(name, 100_000)  # HF is slow; a slice of each corpus
    expected = hf_gpt2.encode(text)
    for tok in gpt2_paths.values():
        ids, offsets = tok.encode_with_offsets(text, disallowed_special=())
        assert ids == expected.ids
        assert offsets == expected.offsets


# -- generated adversarial text ------------------------------------------------
ADVERSARIAL = [
    "", "🦄", "a", " ", "\n\n\n", "Hello <|endoftext|> world<|endoftext|>", f"{EOT}{EOT}",
    "don't I'LL we've 12345 3.14 $$$ ...", "it's It'S IT'S they're 'tis", "''''''s'",
    "👨‍👩‍👧‍👦 family ZWJ, e\u0301 combining, \u202e rtl, \x00\x01 ctrl, tab\there",
    "🏳️‍🌈 🇩🇪 👍🏽 \u200d\u200d \ufe0f", "a\u0300\u0301\u0302\u0303b\u0308\u0308\u0308",
    "     many     spaces   \n\t\n  ", " " * 3000 + "x", "\n" * 1000, "\t \t \r\n" * 300,
    "日本語のテキスト、中文文本。Русский текст", "한국어 ελληνικά עברית العربية हिन्दी ไทย",
    "x" * 3000, "1234567890" * 300, "٣٤٥ ⅫⅯ ½ ² ١٢", "\x1b[31mred\x1b[0m \x7f \u2028 \u2029 \x85",
    "\u00a0\u3000\u2003 nbsp", "a\ud800b \udfff \ud83d", "CamelCaseWORDSAndnumbers123abc",
    "<|bpestore: never allowed|> is plain text",  # the fast path's placeholder special token
]


@pytest.mark.parametrize("text", ADVERSARIAL)
def test_adversarial_equal_tiktoken_and_round_trip(text, gpt2, tiktoken_gpt2):
    ids = gpt2.encode(text, allowed_special="all")
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert gpt2.decode(ids) == fixed


# Characters assigned in Python's Unicode version: both regex engines classify
# them alike (characters newer than both may not be; see bpestore/encoder/tiktoken_backend.py).
assigned_text = st.text(st.characters(blacklist_categories=("Cn", "Cs")), max_size=8)
pieces = st.sampled_from(ADVERSARIAL[1:] + ["'s", "'ll", " ", "  ", "\n", "1", "é", "\u0301"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(assigned_text, pieces), max_size=12).map("".join))
def test_generated_text_equals_tiktoken(gpt2_paths, tiktoken_gpt2, text):
    expected = tiktoken_gpt2.encode(text, allowed_special="all")
    for tok in gpt2_paths.values():
        assert tok.encode(text, allowed_special="all") == expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_both_paths_agree_on_any_unicode(gpt2_paths, text):
    assert gpt2_paths["python"].encode_ordinary(text) == gpt2_paths["fast"].encode_ordinary(text)


def test_lone_surrogates_are_replaced_like_tiktoken(gpt2, tiktoken_gpt2):
    text = "a\ud800b \udfff"
    assert gpt2.encode(text) == tiktoken_gpt2.encode(text)


# -- special tokens --------------------------------------------------------------
def test_special_token_rules_follow_tiktoken(gpt2, tiktoken_gpt2):
    text = f"hi{EOT}there"
    with pytest.raises(DisallowedSpecialError, match="allowed_special"):
        gpt2.encode(text)
    with pytest.raises(ValueError):
        tiktoken_gpt2.encode(text)
    for options in ({"allowed_special": "all"}, {"allowed_special": {EOT}}, {"disallowed_special": ()}):
        assert gpt2.encode(text, **options) == tiktoken_gpt2.encode(text, **options)
    assert 50256 in gpt2.encode(text, allowed_special="all")
    assert 50256 not in gpt2.encode_ordinary(text)
    with pytest.raises(bpestore.BpestoreError, match="not a special token"):
        gpt2.encode("x", allowed_special={"<|nope|>"})


def overlapping_tokenizer() -> Tokenizer:
    specials = ["<|a|>", "<|a|><|b|>", "<|b|>"]
    vocab = {i: bytes([i]) for i in range(256)}
    for i, s in enumerate(specials):
        vocab[256 + i] = s.encode()
    return Tokenizer(vocab, [], specials)


def test_overlapping_and_adjacent_special_tokens_match_longest_first():
    tok = overlapping_tokenizer()
    assert tok.encode("x<|a|><|b|>y<|a|><|b|>", allowed_special="all") == [120, 257, 121, 257]
    assert tok.encode("<|a|><|a|><|b|>", allowed_special="all") == [256, 257]
    assert tok.encode("<|b|><|a|>", allowed_special={"<|a|>", "<|b|>"}) == [258, 256]
    # Only <|a|> allowed: the longer <|a|><|b|> is not matched, <|b|> is plain text.
    assert tok.encode("<|a|><|b|>", allowed_special={"<|a|>"}, disallowed_special=()) == \
        [256] + list(b"<|b|>")
    with pytest.raises(DisallowedSpecialError, match="<|b|>"):
        tok.encode("<|a|><|b|>", allowed_special={"<|a|>"})


def test_encode_iterable_equals_encode_for_any_chunking(gpt2, tiktoken_gpt2):
    text = read_corpus("taylorswift.txt")[:60000] + f"{EOT}tail  \n\n {EOT}{EOT} end"
    expected = tiktoken_gpt2.encode(text, allowed_special="all")
    rng = random.Random(7)
    for _ in range(5):
        chunks, i = [], 0
        while i < len(text):
            n = rng.choice([1, 2, 3, 5, 13, 100, 4096])
            chunks.append(text[i:i + n])
            i += n
        assert list(gpt2.encode_iterable(chunks, allowed_special="all")) == expected


def test_encode_iterable_never_splits_a_special_token():
    tok = overlapping_tokenizer()
    text = "ab<|a|><|b|>cd<|a|>e"
    expected = tok.encode(text, allowed_special="all")
    for cut in range(len(text) + 1):
        assert list(tok.encode_iterable([text[:cut], text[cut:]], allowed_special="all")) == expected
    for cut in range(1, len(text)):
        chunks = [text[:cut], text[cut:cut + 3], text[cut + 3:]]
        assert list(tok.encode_iterable(chunks, allowed_special="all")) == expected


def test_encode_batch_and_options(gpt2, tiktoken_gpt2):
    texts = ["a b", f"c{EOT}", "", "日本"]
    assert gpt2.encode_batch(texts, allowed_special="all") == \
        tiktoken_gpt2.encode_batch(texts, allowed_special="all")
    with pytest.raises(DisallowedSpecialError):
        gpt2.encode_batch(texts)


# -- workers -------------------------------------------------------------------
def test_two_workers_give_the_ids_of_one(gpt2, tiktoken_gpt2):
    text = read_corpus("german_1M.txt")[:300_000] + EOT + read_corpus("japanese_1M.txt")[:100_000]
    chunks = [text[i:i + 20_000] for i in range(0, len(text), 20_000)]
    expected = tiktoken_gpt2.encode(text, allowed_special="all")
    assert list(gpt2.encode_iterable(chunks, workers=2, allowed_special="all")) == expected
    # A mistake in the options is reported before any worker starts.
    with pytest.raises(DisallowedSpecialError):
        list(gpt2.encode_iterable(chunks, workers=2))


# -- per-word merging --------------------------------------------------------
def test_long_word_heap_merge_equals_simple_merge(gpt2_paths):
    tok = gpt2_paths["python"]
    rng = random.Random(1)
    for word in ["a" * 500, "ab" * 300, "".join(rng.choice("abcdeéü ") for _ in range(800))]:
        reference = tok.engine.reference
        ids = reference.index.symbolize(word.encode())
        assert _merge_long_word(ids, reference.table.ranks, reference.table.merged_ids) == _simple(
            ids, reference.table.ranks, reference.table.merged_ids)


def _simple(ids, ranks, merged_ids):
    import bpestore.bpe as bpe

    saved, bpe._LONG_WORD = bpe._LONG_WORD, 10 ** 9
    try:
        return merge_word(ids, ranks, merged_ids)
    finally:
        bpe._LONG_WORD = saved


def test_huge_whitespace_runs_do_not_reach_tiktoken(gpt2_paths):
    """tiktoken's regex engine overflows its stack on a million spaces; the
    fast path sends such text to the pure path."""
    for text in [" " * 1_100_000 + "x", "\r\n" * 550_000]:
        assert gpt2_paths["fast"].encode_ordinary(text) == gpt2_paths["python"].encode_ordinary(text)


@pytest.mark.parametrize("text", ["a" * 200_000, "7" * 100_001, "".join(
    random.Random(3).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(200_000))])
def test_long_words_without_breaks(text, gpt2, tiktoken_gpt2):
    assert gpt2.encode_ordinary(text) == tiktoken_gpt2.encode_ordinary(text)


# -- decoding ----------------------------------------------------------------
def test_decode_errors_and_unknown_ids(gpt2):
    tok = gpt2
    broken = [tok.token_id(b"\xe6")]  # first byte of a 3-byte character
    assert tok.decode(broken) == "\ufffd"
    with pytest.raises(bpestore.BpestoreError, match="UTF-8"):
        tok.decode(broken, errors="strict")
    with pytest.raises(bpestore.BpestoreError, match="unknown token id"):
        tok.decode([10 ** 9])
    assert tok.decode_single_token_bytes(tok.token_id(" the")) == b" the"


def test_decode_with_offsets_equals_tiktoken(gpt2, tiktoken_gpt2):
    text = "héllo wörld 日本語 👨‍👩‍👧 x" + EOT
    ids = tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2.decode_with_offsets(ids) == tiktoken_gpt2.decode_with_offsets(ids)


def test_encode_with_offsets_hand_checked():
    tok = Tokenizer({**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")])
    # é is two bytes (both cover it); the lone surrogate becomes U+FFFD, three bytes.
    ids, spans = tok.encode_with_offsets("xab é\ud800")
    assert ids == [120, 256, 32, 195, 169, 239, 191, 189]
    assert spans == [(0, 1), (1, 3), (3, 4), (4, 5), (4, 5), (5, 6), (5, 6), (5, 6)]


def test_encode_with_offsets_refuses_tokens_that_do_not_spell_the_text():
    vocab = {i: bytes([i]) for i in range(256)}
    dropping = Tokenizer(vocab, [], spec=TokenizerSpec(pretokenizer="whitespace"))  # the spaces vanish
    assert bytes(dropping.encode("a b")) == b"ab"
    with pytest.raises(InvalidArgumentError, match="do not spell the text"):
        dropping.encode_with_offsets("a b")
    lowering = Tokenizer(vocab, [], spec=TokenizerSpec(normalizer="lowercase"))
    with pytest.raises(InvalidArgumentError, match="use encode"):
        lowering.encode_with_offsets("AB")
    assert lowering.encode_with_offsets("ab") == ([97, 98], [(0, 1), (1, 2)])  # unchanged text: places as usual


# -- segmentation modes --------------------------------------------------------
def abc_vocab() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Bytes, then bc (rank 0), ab (rank 1)."""
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"bc", 257: b"ab"}
    return vocab, [(b"b", b"c"), (b"a", b"b")]


def test_longest_match_hand_checked():
    vocab, merges = abc_vocab()
    merge = Tokenizer(vocab, merges)
    longest = Tokenizer(vocab, merges, spec=TokenizerSpec(segmentation="longest-match"))
    # Merge rank puts b-c first; the greedy left-to-right longest match takes ab.
    assert merge.encode("abc") == [97, 256]
    assert longest.encode("abc") == [257, 99]
    assert longest.encode("abcab bcx") == [257, 99, 257, 32, 256, 120]
    assert longest.backend.startswith("python (segmentation is longest-match")
    with pytest.raises(bpestore.BpestoreError, match="merge segmentation only"):
        longest.encode("abc", dropout=0.1)


def test_longest_match_seed_002_example():
    """The trie example of the Jurafsky & Martin notebook: tokens to, lo, low, app over single letters."""
    vocab = {i: bytes([i]) for i in range(256)}
    for i, token in enumerate([b"to", b"lo", b"low", b"ap", b"app"]):
        vocab[256 + i] = token
    merges = [(b"t", b"o"), (b"l", b"o"), (b"lo", b"w"), (b"a", b"p"), (b"ap", b"p")]
    tok = Tokenizer(vocab, merges, spec=TokenizerSpec(pretokenizer="whitespace",
                                                     segmentation="longest-match"))
    assert [tok.decode([i]) for i in tok.encode("lowtoapplo")] == ["low", "to", "app", "lo"]
    assert [tok.decode([i]) for i in tok.encode("tlowappx")] == ["t", "low", "app", "x"]


def test_dropout_hand_checked_and_seeded():
    vocab, merges = abc_vocab()
    tok = Tokenizer(vocab, merges)
    assert tok.encode("abc ab", dropout=0.0) == tok.encode("abc ab")
    assert tok.encode("abc ab", dropout=1.0) == list(b"abc ab")
    # "ab": one candidate merge, skipped exactly when the first draw is below p.
    for seed in range(20):
        skipped = random.Random(seed).random() < 0.5
        assert tok.encode("ab", dropout=0.5, seed=seed) == ([97, 98] if skipped else [257])
    # Same seed, same ids; over many seeds the merge is kept about 1 - p of the time.
    text = "abcabcab " * 50
    assert tok.encode(text, dropout=0.3, seed=5) == tok.encode(text, dropout=0.3, seed=5)
    kept = sum(tok.encode("ab", dropout=0.3, seed=s) == [257] for s in range(2000))
    assert 0.65 < kept / 2000 < 0.75
    with pytest.raises(bpestore.BpestoreError, match="between 0 and 1"):
        tok.encode("ab", dropout=1.5)


def test_dropout_on_gpt2_round_trips_and_varies(gpt2_paths):
    tok = gpt2_paths["fast"]
    text = read_corpus("taylorswift.txt")[:3000]
    runs = {tuple(tok.encode(text, dropout=0.1, seed=s)) for s in range(5)}
    assert len(runs) == 5
    assert all(tok.decode(list(ids)) == text for ids in runs)
    assert all(len(ids) > len(tok.encode(text)) for ids in runs)
    chunks = [text[i:i + 500] for i in range(0, len(text), 500)]
    once = list(tok.encode_iterable(chunks, dropout=0.1, seed=9))
    assert once == list(tok.encode_iterable(chunks, dropout=0.1, seed=9, workers=2))


def test_segmentation_in_spec_json():
    spec = TokenizerSpec(segmentation="longest-match")
    assert TokenizerSpec.from_json(spec.to_json()) == spec
    assert "segmentation" not in TokenizerSpec().to_json()  # default specs keep their JSON
    with pytest.raises(bpestore.BpestoreError, match="longest-match"):
        TokenizerSpec(segmentation="greedy")


# -- round trips ------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_tokenizer():
    vocab, merges = bpestore.train_bpe(corpus_path("taylorswift.txt"), vocab_size=600, special_tokens=[EOT])
    return Tokenizer(vocab, merges, [EOT])


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_round_trip_any_unicode(small_tokenizer, text):
    fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    assert small_tokenizer.decode(small_tokenizer.encode(text, allowed_special="all")) == fixed


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "ab", "\n", EOT, "é", "🦄", "<|", "|>"]), max_size=30))
def test_round_trip_with_specials(small_tokenizer, parts):
    text = "".join(parts)
    ids = small_tokenizer.encode(text, allowed_special="all")
    assert small_tokenizer.decode(ids) == text
    assert list(small_tokenizer.encode_iterable(parts, allowed_special="all")) == ids


def test_tokenizer_rejects_incomplete_vocab():
    with pytest.raises(bpestore.BpestoreError, match="single-byte"):
        Tokenizer({0: b"a"}, [])
    with pytest.raises(bpestore.BpestoreError, match="missing from the vocabulary"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [(b"a", b"b")])


def test_pickled_tokenizer_encodes_the_same(gpt2_paths):
    import pickle

    tok = gpt2_paths["fast"]
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode("hello 日本 world") == tok.encode("hello 日本 world")
    assert copy.special_tokens == tok.special_tokens


# -- memory ----------------------------------------------------------------
def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def _random_words(total_chars: int, seed: int = 0):
    """Chunks of text made of (mostly distinct) random words, a million kinds:
    the worst case for the word cache, which must stay bounded."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßéèàç"
    heads = ["".join(rng.choices(letters, k=rng.randint(1, 6))) for _ in range(1000)]
    tails = ["".join(rng.choices(letters, k=rng.randint(0, 6))) for _ in range(1000)]
    done = 0
    while done < total_chars:
        n = 20_000
        chunk = " ".join(map(str.__add__, rng.choices(heads, k=n), rng.choices(tails, k=n))) + "\n"
        done += len(chunk)
        yield chunk


@pytest.mark.slow
@pytest.mark.parametrize("path", ["python", "fast"])
def test_encode_iterable_memory_is_bounded(gpt2_paths, path, tmp_path):
    """Resident memory grows by at most 50 MB over a large stream (and over
    writing an id file), however many distinct words it holds."""
    if _rss_bytes() is None:
        pytest.skip("needs /proc/self/statm to read resident memory")
    tok = gpt2_paths[path]
    total = 100_000_000 if SCALE_FULL else 1_500_000 if path == "python" else 4_000_000
    list(tok.encode_iterable(_random_words(2_000_000, seed=1)))  # warm up allocators
    baseline = _rss_bytes()
    peak = baseline
    n_tokens = 0
    for i, _ in enumerate(tok.encode_iterable(_random_words(total))):
        n_tokens += 1
        if i % 200_000 == 0:
            peak = max(peak, _rss_bytes())
    assert n_tokens > total // 10
    # At the small default scale a cache without bound would still fit in 50 MB.
    assert len(tok.engine.reference.words) <= bpestore.encoder.reference.WORD_CACHE_SIZE
    assert len(tok.engine.reference.pieces) <= bpestore.encoder.reference.PIECE_CACHE_SIZE
    print(f"{path}: resident memory grew by {(peak - baseline) / 2**20:.1f} MB over {total:,} chars")
    assert peak - baseline < 50 * 2 ** 20, f"resident memory grew by {(peak - baseline) / 2**20:.0f} MB"
    source = tmp_path / "big.txt"
    with open(source, "w", encoding="utf-8") as f:
        for chunk in _random_words(total // 3, seed=2):
            f.write(chunk)
    baseline = peak = _rss_bytes()

    seen = []

    def sample(progress: bpestore.Progress) -> None:
        nonlocal peak
        peak = max(peak, _rss_bytes())
        seen.append(progress)

    written = tok.encode_file(source, tmp_path / "big.bin", progress=sample)
    assert written.tokens * 2 == (tmp_path / "big.bin").stat().st_size
    assert seen[-1].done == seen[-1].total == source.stat().st_size and seen[-1].tokens == written.tokens
    assert peak - baseline < 50 * 2 ** 20, f"resident memory grew by {(peak - baseline) / 2**20:.0f} MB"


@pytest.mark.parametrize("fast", [False, True])
def test_encode_iterable_with_specials_as_text(gpt2_files, fast):
    from bpestore.formats.gpt2 import read_gpt2

    vocab, merges, specials = read_gpt2(*gpt2_files)
    tok = Tokenizer(vocab, merges, specials, fast=fast)
    # The special token is ordinary text here: no cut may fall at its edges.
    text = f"a{EOT}'s" + "." * 30 + " z"
    expected = tok.encode(text, disallowed_special=())
    for cut in range(len(text) + 1):
        assert list(tok.encode_iterable([text[:cut], text[cut:]], disallowed_special=())) == expected
