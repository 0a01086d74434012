"""The counting core's ``CountTable`` (bpestore/cores/word_table.h) and its reading of UTF-8 where
it lies (bpestore/cores/utf8_text.h) count exactly what the pure-Python pipeline counts.

The reference is ``TextPipeline.count_utf8`` with the core switched off (``regex.findall``
of the pattern, each word encoded with ``surrogatepass``, in a Counter: its words in the
order they first occurred), and Python's own strict UTF-8 decoder for which bytes are text."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import text
from bpestore.spec import TokenizerSpec
from bpestore.text import COUNT_CORE_PATTERNS, TextPipeline, char_class

from .conftest import read_corpus

PATTERNS = list(COUNT_CORE_PATTERNS)
# Characters where the patterns' alternatives meet, ASCII and not (Latin-1, BMP, beyond,
# marks, other whitespace, digits of other scripts, the letters contractions fold to).
ALPHABET = list("ab Z9 \n\r\t'sdlvtmre.,!?/-_") + ["é", "ß", "中", "😀", "\u3000", "\u00a0", "\u0301", "Ÿ", "ſ",
                                                  "\u212a", "٣", "\u2028", "\x85", "ÿ"]


@pytest.fixture(autouse=True)
def compiled_core():
    if text.COUNT_CORE is None:
        pytest.skip(f"the compiled counting core is not built here: {text.COUNT_CORE_STATUS}")


def reference(texts: list[str], spec: TokenizerSpec) -> tuple[list[tuple[int, int]], dict[bytes, int]]:
    """Each text's words and distinct words, and all their counts in first-occurrence order, the pure way."""
    pure = TextPipeline(spec)
    pure.count_core = None
    total: dict[bytes, int] = {}
    each = []
    for t in texts:
        own: dict[bytes, int] = {}
        each.append((pure.count_utf8(t, own), len(own)))
        for word, n in own.items():
            total[word] = total.get(word, 0) + n
    return each, total


def random_text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, size)))


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("name", ["tinyshakespeare.txt", "german_1M.txt", "russian_1M.txt", "japanese_1M.txt",
                                  "hindi_1M.txt", "code_python_5M.txt.xz"])
def test_utf8_where_it_lies_counts_as_the_text(name, pattern):
    s = read_corpus(name)[:400_000]
    spec = TokenizerSpec(pretokenizer=pattern)
    table = text.COUNT_CORE.CountTable()
    assert TextPipeline(spec).count_bytes([s.encode()], table) == reference([s], spec)[0][0][0]
    assert list(table.take().items()) == list(reference([s], spec)[1].items())  # the counts, in first-seen order
    assert len(table) == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(st.sampled_from(ALPHABET), max_size=80), max_size=6), st.sampled_from(PATTERNS))
def test_texts_counted_into_one_table_as_str_and_as_utf8(texts, pattern):
    """Texts of every string kind counted after one another into one table, as str
    (``count_each``) and as UTF-8 (``count_utf8``): each text's words and distinct words,
    and the counts in first-seen order, are the reference's."""
    spec = TokenizerSpec(pretokenizer=pattern)
    want_each, want = reference(texts, spec)
    core, code = text.COUNT_CORE, COUNT_CORE_PATTERNS[pattern]
    as_str, as_utf8 = core.CountTable(), core.CountTable()
    assert as_str.count_each([[t] for t in texts], char_class, code) == want_each
    assert as_utf8.count_utf8([[t.encode()] for t in texts], char_class, code) == want_each
    assert len(as_str) == len(as_utf8) == len(want)
    assert list(as_str.take().items()) == list(as_utf8.take().items()) == list(want.items())


def test_many_distinct_and_long_words_through_growth():
    """Tens of thousands of distinct words (the table grows many times), words longer than a
    slot holds, one longer than a read: the counts and their order are the reference's."""
    rng = random.Random(7)
    words = [f"w{i}{'x' * (i % 23)}é" if i % 5 == 0 else f"w{i}" for i in range(60_000)]
    s = " ".join(rng.choice(words) for _ in range(200_000)) + " " + "a" * 100_000 + " " + "中" * 70_000
    spec = TokenizerSpec()
    table = text.COUNT_CORE.CountTable()
    for part in (s[:300_000], s[300_000:]):  # cut at a place that is not safe: counted as two texts
        table.count([part], char_class, 0)
    want: dict[bytes, int] = {}
    for part in (s[:300_000], s[300_000:]):
        for word, n in reference([part], spec)[1].items():
            want[word] = want.get(word, 0) + n
    assert list(table.take().items()) == list(want.items())


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40) | st.lists(st.sampled_from([b"a", b" ", b"\xc3\xa9", b"\xe4\xb8\xad", b"\xf0\x9f\x98\x80",
                                                          b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
                                                          b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf", b"\xc3", b"\xe4\xb8",
                                                          b"\x00", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf"]),
                                          max_size=12).map(b"".join))
def test_bytes_that_are_not_strict_utf8_are_not_counted(data):
    """Bytes are counted where they lie exactly when Python's strict decoder takes them and
    they hold no NUL; else nothing is counted (the caller decodes them as its policy says)."""
    try:
        decoded: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        decoded = None
    table = text.COUNT_CORE.CountTable()
    table.count(["x y"], char_class, 0)
    got = table.count_utf8([[b"fine"], [data]], char_class, 0)
    if decoded is None or "\0" in decoded:
        assert got is None and table.take() == {b"x": 1, b" y": 1}
        return
    want_each, want = reference(["x y", "fine", decoded], TokenizerSpec())
    assert got == want_each[1:] and list(table.take().items()) == list(want.items())


@pytest.mark.parametrize("specials", [("<|endoftext|>",), ("<|é|>", "<|é|>x", "中"), ("ab", "a")])
def test_special_tokens_are_found_in_utf8_as_in_the_text(specials):
    rng = random.Random(3)
    pieces = [random_text(rng, 40) for _ in range(200)]
    s = "".join(p + rng.choice(specials) for p in pieces)
    spec = TokenizerSpec(special_tokens=specials)
    pipeline = TextPipeline(spec)
    table = pipeline.new_counts()
    assert pipeline.count_bytes([s.encode(), s[:100].encode()], table) == pipeline.count_together([s, s[:100]], {})
    want_each, want = reference([s + s[:100]], spec)
    assert list(table.take().items()) == list(want.items())


def test_a_normalizer_or_a_dict_is_not_counted_from_bytes():
    assert TextPipeline(TokenizerSpec(normalizer="nfkc")).count_bytes([b"a b"], text.COUNT_CORE.CountTable()) is None
    assert TextPipeline(TokenizerSpec()).count_bytes([b"a b"], {}) is None
    assert TextPipeline(TokenizerSpec()).count_bytes([b"a", None], text.COUNT_CORE.CountTable()) is None


@pytest.mark.parametrize("n_shards", [1, 3])
def test_a_tables_shards_are_its_counts_shards(n_shards):
    s = read_corpus("taylorswift.txt")
    core = text.COUNT_CORE
    table = core.CountTable()
    table.count_utf8([[s[:90_000].encode()], [s[90_000:].encode()]], char_class, 1)
    segments = [(0, 2), (len(table) // 2, 5)]
    pieces = [table.shard(n_shards, segments), table.shard(n_shards)]
    assert len(table) == 0
    again = core.CountTable()
    again.count_utf8([[s[:90_000].encode()], [s[90_000:].encode()]], char_class, 1)
    counts = again.take()
    assert pieces[0] == core.shard(dict(counts), n_shards, segments)
    assert pieces[1] == core.shard({}, n_shards)


def test_count_table_refuses_bad_arguments():
    table = text.COUNT_CORE.CountTable()
    with pytest.raises(TypeError):
        text.COUNT_CORE.CountTable(1)
    for bad in ([["text"]], [b"bytes"], [None]):
        with pytest.raises(TypeError):
            table.count_utf8(bad, char_class, 0)
    with pytest.raises(TypeError):
        table.count([b"bytes"], char_class, 0)
    with pytest.raises(ValueError):
        table.count_utf8([[b"a"]], char_class, 9)
    with pytest.raises(ValueError):
        table.shard(0)
    assert table.count_utf8([], char_class, 0) == [] and table.take() == {}


def test_a_special_token_with_a_lone_surrogate_is_not_looked_for_in_utf8():
    """A special token that is no UTF-8 cannot be found in bytes: such a spec's texts are decoded."""
    pipeline = TextPipeline(TokenizerSpec(special_tokens=("<\ud800>",)))
    assert pipeline.count_bytes([b"a b"], text.COUNT_CORE.CountTable()) is None
    assert pipeline.count_together(["a<\ud800>b"], counts := {}) == 2 and counts == {b"a": 1, b"b": 1}


SHORT = list("abZ9 .'\n") + ["é", "ÿ", "ß"]


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(SHORT), max_size=40), st.sampled_from(PATTERNS))
def test_short_words_of_every_kind_meet_in_one_slot(s, pattern):
    """Words of 8 code points or fewer below 256 are hashed from their packed bytes in a text of
    one byte a character and one at a time in wider texts: the same word met in texts of each
    kind, as str and as UTF-8, ending at every place of the last 8 bytes of a text, is one word."""
    texts = [s[k:] + tail for k in range(min(len(s), 9)) for tail in ("", "中", "😀", " ")] or [s]
    spec = TokenizerSpec(pretokenizer=pattern)
    want_each, want = reference(texts, spec)
    core, code = text.COUNT_CORE, COUNT_CORE_PATTERNS[pattern]
    as_str, as_utf8 = core.CountTable(), core.CountTable()
    assert as_str.count_each([[t] for t in texts], char_class, code) == want_each
    assert as_utf8.count_utf8([[t.encode()] for t in texts], char_class, code) == want_each
    assert list(as_str.take().items()) == list(as_utf8.take().items()) == list(want.items())


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_byte_class_at_every_place_of_a_block(pattern):
    """Each of the bytes where the scans decide (letters, digits, space, newline, apostrophe,
    punctuation, a Latin-1 letter, a wide character) at each of the 16 places of a block after
    runs of each length: the counts and their order are the reference's."""
    spec = TokenizerSpec(pretokenizer=pattern)
    pieces = ["a", "Z", "9", " ", "\n", "'", ".", "é", "中", "s", "\t"]
    texts = [run * k + p + run * (15 - k) for run in ("ab", "a b", "9", ". ", "\n ", "'ll") for p in pieces
             for k in range(16)]
    texts = [t[:16] for t in texts] + texts
    want_each, want = reference(texts, spec)
    core, code = text.COUNT_CORE, COUNT_CORE_PATTERNS[pattern]
    as_utf8 = core.CountTable()
    assert as_utf8.count_utf8([[t.encode()] for t in texts], char_class, code) == want_each
    assert list(as_utf8.take().items()) == list(want.items())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.text(st.sampled_from(ALPHABET), max_size=60), min_size=1, max_size=4), max_size=5),
       st.sampled_from(PATTERNS), st.booleans())
def test_a_source_counted_in_several_calls_is_one_piece(sources, pattern, utf8):
    """Sources counted into one table one after another, each in several calls (``go_on`` before all
    but its first, as str or as UTF-8): each source's distinct words are those of all its parts,
    and the table holds every count in first-seen order."""
    spec = TokenizerSpec(pretokenizer=pattern)
    code = COUNT_CORE_PATTERNS[pattern]
    table = text.COUNT_CORE.CountTable()
    for parts in sources:
        n_words = 0
        for i, part in enumerate(parts):
            if i:
                table.go_on()
            if utf8:
                [(words, distinct)] = table.count_utf8([[part.encode()]], char_class, code)
                assert distinct == table.piece_distinct()
            else:
                words = table.count([part], char_class, code)
            n_words += words
        each, total = reference(parts, spec)
        assert (n_words, table.piece_distinct()) == (sum(w for w, _ in each), len(total))
    assert list(table.take().items()) == list(reference([p for parts in sources for p in parts], spec)[1].items())


# count_utf8(..., threads=2): a piece of 256 KiB or more (the core's SPLIT_MIN_BYTES) has its later
# segments scanned by a second thread into a table of their own, merged after the first ones'.
FILLER = {"german_1M.txt": 300_000, "japanese_1M.txt": 120_000}  # about 300 KB of UTF-8 each


@pytest.mark.parametrize("name", sorted(FILLER))
@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_piece_counted_on_two_threads_counts_as_on_one(name, pattern):
    """A corpus cut into segments at line ends, in pieces (the second going on as the first,
    then a new one): each piece's words and distinct words are one thread's, and every count,
    in first-seen order, the reference's for those segments."""
    s = read_corpus(name)[:2 * FILLER[name]]
    lines = s.splitlines(keepends=True)
    segments = [("".join(lines[i:i + 400])).encode() for i in range(0, len(lines), 400)]
    half = len(segments) // 2
    code = COUNT_CORE_PATTERNS[pattern]
    counted = []
    for threads in (1, 2):
        table = text.COUNT_CORE.CountTable()
        each = [table.count_utf8([segments[:half]], char_class, code, threads)]
        table.go_on()
        each += [table.count_utf8([segments[half:]], char_class, code, threads),
                 table.count_utf8([segments, segments[::-1]], char_class, code, threads)]
        counted.append((each, list(table.take().items())))
    assert counted[0] == counted[1]
    texts = [t.decode() for t in segments]
    assert counted[1][1] == list(reference(texts * 2 + texts[::-1], TokenizerSpec(pretokenizer=pattern))[1].items())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.sampled_from(ALPHABET), max_size=80), max_size=8), st.integers(0, 8),
       st.sampled_from(PATTERNS))
def test_two_threads_count_any_segments_as_one(texts, at, pattern):
    """Short random segments with one large one among them (the split falls anywhere):
    what two threads count is what one counts, in the same order."""
    filler = read_corpus("german_1M.txt")[:FILLER["german_1M.txt"]]
    segments = [t.encode() for t in texts[:at]] + [filler.encode()] + [t.encode() for t in texts[at:]]
    code = COUNT_CORE_PATTERNS[pattern]
    one, two = text.COUNT_CORE.CountTable(), text.COUNT_CORE.CountTable()
    assert one.count_utf8([segments, segments[::-1]], char_class, code, 1) == \
        two.count_utf8([segments, segments[::-1]], char_class, code, 2)
    assert list(one.take().items()) == list(two.take().items())


def test_count_utf8_takes_one_or_two_threads():
    table = text.COUNT_CORE.CountTable()
    for threads in (0, 3):
        with pytest.raises(ValueError, match="threads must be 1 or 2"):
            table.count_utf8([[b"a b"]], char_class, 0, threads)


@pytest.mark.parametrize("name", ["german_1M.txt", "chinese_1M.txt", "code_python_5M.txt.xz"])
def test_one_segment_is_cut_for_two_threads_where_that_changes_no_word(name):
    """One large segment: the second thread takes it from the first safe cut after its middle
    (none in Chinese: then one thread counts it all); the counts are one thread's, in order."""
    corpus = read_corpus(name)  # (a fresh clone's stand-ins are short: repeated to size)
    data = (corpus * (400_000 // len(corpus) + 1))[:400_000].encode()
    assert len(data) >= 256 << 10
    for pattern in PATTERNS:
        code = COUNT_CORE_PATTERNS[pattern]
        one, two = text.COUNT_CORE.CountTable(), text.COUNT_CORE.CountTable()
        assert one.count_utf8([[data]], char_class, code, 1) == two.count_utf8([[data]], char_class, code, 2)
        assert list(one.take().items()) == list(two.take().items())
