"""The compiled encode core (bpestore/_encodecore.c) gives the ids of independent references.

GPT-2, cl100k and o200k: tiktoken's, built offline from the shared files (the core's
token-rank rule directly, and through a Tokenizer, whose merge rule the rank files'
derived merges give); every other spec: the pure-Python encoder's, which stays the
oracle (``fast=False``)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from array import array
from collections import Counter
from collections.abc import Callable

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import Tokenizer, alphabet
from bpestore.encoder import core_backend
from bpestore.formats.gpt2 import read_gpt2
from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version
from bpestore.spec import EncoderFacts, TokenizerSpec
from bpestore.store import snapshot
from bpestore.store.vocabulary import Vocabulary
from bpestore.text import COUNT_CORE, COUNT_CORE_PATTERNS, TextPipeline, char_class
from bpestore.trainer import BpeTrainer

from .conftest import corpus_path, read_corpus, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")
ENCODINGS = ["gpt2", "cl100k", "o200k"]
CORPORA = ["tinyshakespeare.txt", "taylorswift.txt", "german_1M.txt", "russian_1M.txt", "chinese_1M.txt",
           "japanese_1M.txt", "hindi_1M.txt", "english_medium.txt.xz", "code_python_5M.txt.xz"]
EOT = "<|endoftext|>"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""  # GPT-2's encoder.py


@pytest.fixture(autouse=True)
def compiled_core():
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")


class Reference:
    """One encoding: tiktoken's Encoding, bpestore's Tokenizer of the same files, and
    the core with tiktoken's rule (token ranks) on the rank file itself."""

    def __init__(self, name: str, classify: Callable[[int], int] = char_class) -> None:
        if name == "gpt2":
            vocab, merges, specials = read_gpt2(corpus_path("gpt2_vocab.json"), corpus_path("gpt2_merges.txt"))
            self.tokenizer = Tokenizer(vocab, merges, specials, name=name)
            ranks = {data: i for i, data in vocab.items() if data != EOT.encode()}
        else:
            ranks = read_ranks(corpus_path(f"{name}_base.tiktoken"))
            vocab, merges, spec = tiktoken_version(ranks, name, {})
            self.tokenizer = Tokenizer(vocab, merges, spec=spec, name=name)
        self.tiktoken = tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks,
                                          special_tokens={})
        tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
        for data, rank in ranks.items():
            tokens[rank] = data
        self.rank_core = core_backend.CORE.Encoder(tokens, None, [ranks[bytes([b])] for b in range(256)],
                                                 mode=core_backend.MODE_RANKS, pattern=COUNT_CORE_PATTERNS[name],
                                                 classify=classify)

    def check(self, text: str) -> None:
        expected = self.tiktoken.encode_ordinary(text)
        assert self.tokenizer.encode_ordinary(text) == expected
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # as tiktoken does
        assert self.rank_core.encode(fixed) == expected


def test_latin1_text_after_a_wider_one_is_classified_whole():
    """A wider text fills the encoder's class table only for its own characters, ÿ among
    them: a Latin-1 text encoded next must still have each of its characters asked. (A
    classify function of its own: the table of char_class is the process's, filled already.)"""
    fresh = Reference("gpt2", functools.partial(char_class))
    fresh.check("ÿ中")
    fresh.check(' "£5 ^{×} ½ ¿Qué?\xa0\xa0a')
    wide = Reference("gpt2", functools.partial(char_class))  # and a wider text next: its Latin-1 characters too
    wide.check("ÿ中")
    wide.check(' "£5 ^{×} ½\xa0\xa0a 中')


def test_encoders_given_one_classify_function_share_its_classes():
    """The second encoder given a classify function asks it nothing the first asked;
    an encoder given another function asks that one."""
    asked: list[int] = []

    def counting(code_point: int) -> int:
        asked.append(code_point)
        return char_class(code_point)

    def core(classify: Callable[[int], int]):
        return core_backend.CORE.Encoder([bytes([b]) for b in range(256)], None, list(range(256)),
                                       mode=core_backend.MODE_RANKS, pattern=COUNT_CORE_PATTERNS["cl100k"],
                                       classify=classify)

    text = "Grüße, 中文 ok"
    assert core(counting).encode(text) == list(text.encode("utf-8"))
    assert len(asked) == 256 + 2 and asked[-2:] == [ord("中"), ord("文")]
    assert core(counting).encode(text + " ą") == list((text + " ą").encode("utf-8"))
    assert asked[256 + 2:] == [ord("ą")]
    other: list[int] = []
    core(lambda c: other.append(c) or char_class(c)).encode(text)
    assert len(other) == 256 + 2


@pytest.fixture(scope="module", params=ENCODINGS)
def reference(request) -> Reference:
    ref = Reference(request.param)
    assert ref.tokenizer.backend == "compiled (C)"
    return ref


@pytest.mark.parametrize("name", CORPORA)
def test_tiktokens_ids_on_the_shared_corpora(reference, name):
    text = read_corpus(name)
    reference.check(text[:2_000_000])


# The characters where the pattern's alternatives meet (as the count core's tests), and
# letters that merge.
TRICKY = (" \n\r\t\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000'sdmtlverSDMTLVERſK_-./1é٣½Ⅻ\u0301\u200b"
          "ǅʰ中ÀßΣ\ud800\udc00😀theinganorж日本")


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=TRICKY, max_size=80))
def test_tiktokens_ids_on_text_where_the_alternatives_meet(reference, text):
    reference.check(text)


SMALL_MERGES = ["th", "the", " the", "in", "ing", "an", "and", "中文", "日本", "日本語", "ab", "abab", "ababab", "aa",
                "aaaa", "😀😀", "é", "ée"]


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="theingadbe 中文日本語😀é\n", max_size=300))
def test_tiktokens_ids_with_a_small_rank_table(text):
    """A table of a few tokens, the least filter of the span look-ups (most spans are
    no token): the ids tiktoken gives with the same ranks, words of every length."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in SMALL_MERGES:
        ranks.setdefault(token.encode("utf-8"), len(ranks))
    tokens = sorted(ranks, key=ranks.__getitem__)
    core = core_backend.CORE.Encoder(tokens, None, list(range(256)), mode=core_backend.MODE_RANKS,
                                   pattern=COUNT_CORE_PATTERNS["cl100k"], classify=char_class)
    expected = tiktoken.Encoding(name="small", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks,
                                 special_tokens={})
    assert core.encode(text) == expected.encode_ordinary(text)
    assert core.encode(text.replace(" ", "")) == expected.encode_ordinary(text.replace(" ", ""))


@pytest.mark.parametrize("text", [
    "a" * 100_000, "ab" * 50_000, " " * 100_000, "\n" * 50_000, " \n" * 30_000, "1234567890" * 10_000,
    "x" + " " * 70_000 + "y", "Donaudampfschifffahrt" * 3_000, ("日本語のテキスト" + "Ж" + "😀") * 5_000,
    "".join(chr(c) for c in range(0x20, 0x3000, 7)) * 10, "\ud800abc\udfff \ud83d\ude00", "'S'LL'Ve" * 5_000,
])
def test_tiktokens_ids_on_worst_cases(reference, text):
    reference.check(text)


def words_of_every_length(letters: str, most: int = 300) -> str:
    """One word of each length 1..most (in symbols: across the merge paths' limits, 16
    and 256: arrays, per-block minimums, heap), of letters that repeat and merge."""
    return " ".join("".join(letters[(i * 7 + n) % len(letters)] for i in range(n)) for n in range(1, most + 1))


@pytest.mark.parametrize("letters", ["theinganor", "ab", "a", "日本語のテキスト中文", "жизнь"])
def test_tiktokens_ids_on_words_of_every_length(reference, letters):
    reference.check(words_of_every_length(letters, 300 if letters.isascii() else 100))


# Where an ASCII letter run (read 8 bytes or 4 characters at a time) meets what ends it or
# goes on with it: ASCII neighbours of the letters' bytes, Latin-1 and wider letters whose
# low 7 bits are an ASCII letter's (Á, ő, š), marks, modifiers, non-letters.
RUN_ENDS = "@[`{0 '\n_-éÁ×÷ßªµ" + "łőš—ǅʰ\u0301中Ꭰ"


def letter_run_texts(wider: str) -> list[str]:
    """Runs of 0..20 ASCII letters before and after each of RUN_ENDS, and at a text's end."""
    ends = [c for c in RUN_ENDS if wider or ord(c) < 256]
    runs = ["".join(letters[(n + k) % len(letters)] for k in range(n)) for n in range(21)
            for letters in ("aBzZyA", "azyxb", "AZYXB")]  # o200k's runs: upper case, lower case
    return ([wider + " ".join(run + c + run for run in runs for c in ends)]
            + [wider + space + run for run in runs for space in ("", " ")])


@pytest.mark.parametrize("wider", ["", "ł", "😀"])
def test_tiktokens_ids_where_ascii_letter_runs_end(reference, wider):
    for text in letter_run_texts(wider):
        reference.check(text)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("wider", ["", "ł", "😀"])
def test_the_scans_words_where_ascii_letter_runs_end(name, wider):
    """The scan the encode and count cores share (cores/pretok.h) cuts the regex's words."""
    if COUNT_CORE is None:
        pytest.skip("the compiled counting core is not built here")
    pattern = regex.compile(GPT2_PATTERN if name == "gpt2" else tiktoken_pattern(name))
    for text in letter_run_texts(wider):
        counts: dict[bytes, int] = {}
        COUNT_CORE.count(text, counts, char_class, COUNT_CORE_PATTERNS[name])
        assert counts == Counter(w.encode("utf-8") for w in pattern.findall(text))


@pytest.mark.slow
def test_a_word_of_megabytes_stays_exact(reference):
    text = ("".join(chr(0x61 + (i * 7919) % 26) for i in range(1 << 20)))  # one piece of 1 MB
    reference.check(text)


def train(spec: TokenizerSpec, text: str, vocab_size: int) -> Tokenizer:
    """A version of ``spec`` trained on ``text`` (any alphabet and markers)."""
    counts = TextPipeline(spec).count_words(text)
    vocab_bytes = alphabet.initial_vocab(spec, counts)
    trainer = BpeTrainer(alphabet.initial_words(spec, counts, vocab_bytes), vocab_bytes,
                         special_ids=alphabet.special_ids(spec))
    for _ in trainer.train(vocab_size=vocab_size):
        pass
    merges = [(trainer.token_bytes[m.left], trainer.token_bytes[m.right]) for m in trainer.merges]
    return Tokenizer(dict(enumerate(trainer.token_bytes)), merges, spec=spec)


SPECS = [
    TokenizerSpec(special_tokens=(EOT,)),
    TokenizerSpec(pretokenizer="cl100k", normalizer="nfkc,lowercase"),
    TokenizerSpec(pretokenizer="o200k", normalizer="nfd"),
    TokenizerSpec(pretokenizer="whitespace", special_tokens=(EOT,)),
    TokenizerSpec(pretokenizer="punctuation"),
    TokenizerSpec(pretokenizer="none"),
    TokenizerSpec(pretokenizer="regex", pattern=r"\w+|[^\w\s]+|\s+"),
    TokenizerSpec(end_of_word="</w>"),
    TokenizerSpec(start_of_word="\u2581", pretokenizer="whitespace"),
    TokenizerSpec(alphabet="chars", end_of_word="</w>", unk_token="<unk>", special_tokens=(EOT,)),
    TokenizerSpec(alphabet="chars", byte_fallback=True, pretokenizer="whitespace"),
    TokenizerSpec(alphabet="chars", start_of_word="\u2581", unk_token="<unk>", normalizer="lowercase"),
    TokenizerSpec(alphabet="chars", pretokenizer="cl100k"),
]
UNSEEN = " Ωμέγα 日本語 😀 \u0301x ＡＢ ﬁ don't 'LL \r\n\t 12345 "


@pytest.fixture(scope="module")
def training_text() -> str:
    return read_corpus("tinyshakespeare.txt")[:60_000]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.to_json())
def test_the_pure_encoders_ids_for_every_spec(spec, training_text):
    tok = train(spec, training_text.replace("\n\n", EOT), 700)
    pure = Tokenizer(tok.vocab, tok.merges, spec=spec, fast=False)
    assert tok.backend == "compiled (C)" and pure.backend.startswith("python")
    text = read_corpus("taylorswift.txt")[:50_000] + EOT + UNSEEN * 3 + "a" * 300
    known = training_text[:30_000]  # every character seen (chars without unk or fallback)
    for sample in (known, text) if spec.unk_token or spec.byte_fallback or spec.byte_level else (known,):
        assert tok.encode(sample, allowed_special="all") == pure.encode(sample, allowed_special="all")
        assert tok.encode(sample, disallowed_special=()) == pure.encode(sample, disallowed_special=())
    if not (spec.unk_token or spec.byte_fallback or spec.byte_level):
        with pytest.raises(ValueError, match="not seen in training"):
            tok.encode("Ω")


@pytest.mark.parametrize("spec", [SPECS[7], SPECS[9], SPECS[10], SPECS[11]], ids=lambda s: s.to_json())
def test_the_pure_encoders_ids_on_words_of_every_length(spec, training_text):
    tok = train(spec, training_text, 500)
    pure = Tokenizer(tok.vocab, tok.merges, spec=spec, fast=False)
    text = words_of_every_length("theinganorsd") + " " + words_of_every_length("ab", 100)
    assert tok.backend == "compiled (C)"
    assert tok.encode_ordinary(text) == pure.encode_ordinary(text)


def test_longest_match_and_dropout_stay_on_the_python_path(training_text):
    tok = train(TokenizerSpec(segmentation="longest-match"), training_text, 400)
    assert tok.backend == "python (segmentation is longest-match)"
    merge = train(TokenizerSpec(), training_text, 400)
    assert merge.backend == "compiled (C)"
    pure = Tokenizer(merge.vocab, merge.merges, fast=False)
    assert merge.encode("the king", dropout=0.5, seed=3) == pure.encode("the king", dropout=0.5, seed=3)


def test_tokens_that_do_not_encode_to_themselves_are_merged_not_looked_up():
    """bc (rank 0), ab (1), abc = ab + c (2): by merge rule "abc" is a + bc; a word
    that is the token abc must not come out whole (tiktoken's rule gives abc)."""
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"bc", 257: b"ab", 258: b"abc"}
    merges = [(b"b", b"c"), (b"a", b"b"), (b"ab", b"c")]
    for facts in (None, EncoderFacts("token b'abc' (merge 2) does not encode to itself")):
        tok = Tokenizer(vocab, merges, facts=facts)
        assert tok.backend == "compiled (C)"
        assert tok.encode("abc abc") == [97, 256, 32, 97, 256]
    core = core_backend.CORE.Encoder([vocab.get(i) for i in range(259)], None, list(range(256)),
                                   mode=core_backend.MODE_RANKS, pattern=0, classify=char_class)
    assert core.encode("abc") == [258]


def test_offsets_streams_batches_and_files_give_the_ids_of_one_encode(tmp_path):
    ref = Reference("gpt2")
    tok = ref.tokenizer
    text = read_corpus("german_1M.txt")[:400_000] + "\ud800 x" + " " * 5000 + "end"
    whole = tok.encode(text, disallowed_special=())
    assert whole == ref.tiktoken.encode_ordinary(text)
    ids, spans = tok.encode_with_offsets(text[:50_000])
    assert ids == tok.encode(text[:50_000])
    pieces = [text[i:i + 7_777] for i in range(0, len(text), 7_777)]
    assert list(tok.encode_iterable(pieces)) == whole
    assert list(tok.encode_iterable(pieces, workers=2)) == whole
    docs = text.split("\n")
    assert tok.encode_batch(docs, workers=2) == [tok.encode(d) for d in docs]
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for workers in (1, 2):
        out = tmp_path / f"ids{workers}.bin"
        tok.encode_file(path, out, dtype="uint32", errors="replace", workers=workers)
        ids_file = array("I", out.read_bytes())
        expected = tok.encode(path.read_text(encoding="utf-8", errors="replace"))
        assert ids_file.tolist() == expected


def test_bad_arguments_are_errors():
    tokens = [bytes([i]) for i in range(256)]
    with pytest.raises(ValueError, match="mode must be"):
        core_backend.CORE.Encoder(tokens, None, list(range(256)), mode=3)
    with pytest.raises(ValueError, match="byte_ids must hold 256"):
        core_backend.CORE.Encoder(tokens, ([], [], []), list(range(255)))
    with pytest.raises(ValueError, match="differ in number"):
        core_backend.CORE.Encoder(tokens, ([1], [2], []), list(range(256)))
    with pytest.raises(TypeError, match="classify"):
        core_backend.CORE.Encoder(tokens, ([], [], []), list(range(256)), pattern=0)
    core = core_backend.CORE.Encoder(tokens, ([], [], []), list(range(256)))
    assert core.encode("hé") == [104, 195, 169]
    assert core.encode("\ud800") is None  # the tokenizer fixes surrogates, as tiktoken, and asks again


def test_a_stored_vocabularys_tokens_unpack_the_same_in_c_and_python(monkeypatch):
    vocab = {**{i: bytes([i]) for i in range(256)}, 256: b"", 300: b"ab", 257: "é".encode()}
    kinds = dict.fromkeys(vocab, "byte") | {256: "merge", 300: "merge", 257: "char"}
    packed = snapshot.pack(Vocabulary(vocab, kinds, [97], [98], [300], [1]))
    from_c = snapshot.unpack(packed).tokens
    monkeypatch.setattr(snapshot, "CORE", None)
    assert from_c == snapshot.unpack(packed).tokens == vocab
    assert list(from_c) == sorted(vocab)
    ids = array("I", range(3))
    with pytest.raises(ValueError, match="longer"):
        core_backend.CORE.token_dict(b"abcd", 0, ids, array("I", [1, 1, 1]))
    with pytest.raises(ValueError, match="run past"):
        core_backend.CORE.token_dict(b"abcd", 1, ids, array("I", [1, 1, 2]))
    for core in (None, core_backend.CORE):
        monkeypatch.setattr(snapshot, "CORE", core)
        for bad in (packed[:-1], packed + b"x"):
            with pytest.raises(ValueError):
                snapshot.unpack(bad)


def test_tokens_of_the_same_bytes_take_the_token_index_path():
    """Two ids of the same bytes: the core cannot take each byte's id from the tokens
    (``unique`` says so), so the tokenizer builds it from its index, as the pure path."""
    tokens = [bytes([i]) for i in range(256)] + [b"ab", b"a"]
    with pytest.raises(ValueError, match="same bytes"):
        core_backend.CORE.Encoder(tokens, ([97], [98], [256]), None, unique=True)
    vocab = dict(enumerate(tokens))
    tok = Tokenizer(vocab, [(b"a", b"b")], facts=EncoderFacts(None), merge_ids=([97], [98], [256]))
    pure = Tokenizer(vocab, [(b"a", b"b")], fast=False)
    assert tok.encode("ab a ba") == pure.encode("ab a ba") and tok.backend == "compiled (C)"


def test_pure_turns_the_core_off_and_version_names_it():
    env = {**os.environ, "BPESTORE_PURE": "1"}
    code = ("from bpestore import Tokenizer; "
            "print(Tokenizer({i: bytes([i]) for i in range(256)}, []).backend)")
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert not off.stdout.startswith("compiled"), off.stdout
    version = subprocess.run([sys.executable, "-m", "bpestore", "--version"], capture_output=True, text=True,
                             check=True)
    assert "encode core: compiled (C)" in version.stdout
    version = subprocess.run([sys.executable, "-m", "bpestore", "--version"], env=env, capture_output=True,
                             text=True, check=True)
    assert "encode core: pure-Python (BPESTORE_PURE is set)" in version.stdout


@pytest.fixture(scope="module")
def whitespace_pair(training_text) -> tuple[Tokenizer, Tokenizer]:
    tok = train(TokenizerSpec(pretokenizer="whitespace"), training_text, 500)
    return tok, Tokenizer(tok.vocab, tok.merges, spec=tok.spec, fast=False)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=TRICKY, max_size=80))
def test_the_whitespace_scan_cuts_as_the_regex(whitespace_pair, text):
    """The core scans ``\\S+`` itself (\\s as the regex module's, from char_class)."""
    tok, pure = whitespace_pair
    assert tok.encode(text) == pure.encode(text)
