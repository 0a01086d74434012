"""Long words under token ranks (the compiled core encodes them by backtracking over the
tokens, not by merging byte pairs): their ids against tiktoken's, word by word
(_encode_single_piece) and in texts, on the rank files and on small rank tables built so
that the greedy longest token is wrong, a token is never made by a merge, or a token is
made from one of higher rank."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore.encoder import core_backend
from bpestore.formats.tiktoken_ranks import load_tokenizer, read_ranks
from bpestore.text import char_class

from .conftest import corpus_path, read_corpus, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(autouse=True)
def compiled_core():
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")


def by_rank(ranks: dict[bytes, int]) -> list[bytes | None]:
    tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        tokens[rank] = token
    return tokens


def core_of(ranks: dict[bytes, int]):
    """The core of ranks, its backtracking tables built by the first long word (backtrack_after=0)."""
    return core_backend.CORE.Encoder(by_rank(ranks), None, None, mode=core_backend.MODE_RANKS, backtrack_after=0)


def tiktoken_of(name: str, ranks: dict[bytes, int], pattern: str | None = None):
    return tiktoken.Encoding(name=name, pat_str=pattern or tiktoken_pattern(name), mergeable_ranks=ranks,
                             special_tokens={})


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def encoding(request):
    ranks = read_ranks(corpus_path(f"{request.param}_base.tiktoken"))
    return request.param, ranks, tiktoken_of(request.param, ranks), core_of(ranks)


def greedy(ranks: dict[bytes, int], data: bytes) -> list[int]:
    """The longest token at each position in turn: what backtracking starts from."""
    longest = max(map(len, ranks))
    ids, at = [], 0
    while at < len(data):
        n = min(longest, len(data) - at)
        while data[at:at + n] not in ranks:
            n -= 1
        ids.append(ranks[data[at:at + n]])
        at += n
    return ids


PIECES = st.one_of(
    st.text(st.characters(min_codepoint=0x3040, max_codepoint=0x30FF), min_size=1, max_size=12),  # kana
    st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=12),  # CJK
    st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=12),
    st.text("0123456789", min_size=1, max_size=6),
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), min_size=1, max_size=4),  # emoji
    st.binary(min_size=1, max_size=12).map(lambda b: b.decode("latin-1")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=12))
def test_long_mixed_words_give_tiktokens_ids(encoding, pieces):
    _, _, enc, core = encoding
    word = "".join(pieces)
    assert core.encode_words([word]) == enc._encode_single_piece(word.encode("utf-8"))


def test_every_length_on_both_sides_of_the_threshold(encoding):
    """Words of 1..80 bytes (CJK, kana, Latin, digits, a mix), each alone: whatever length
    the encoding switches at, the words on both sides give tiktoken's ids."""
    _, _, enc, core = encoding
    rng = random.Random(5)
    japanese = read_corpus("japanese_1M.txt")[:200_000]
    alphabets = [sorted({c for c in japanese if ord(c) >= 0x3000}), "abcdefghijklmnopqrstuvwxyz", "0123456789",
                 [chr(c) for c in range(0x80, 0x100)] + ["é", "ß", "😀", "日", "の"]]
    for length in range(1, 81):
        for chars in alphabets:
            for _ in range(4):
                data = b""
                while len(data) < length:
                    data += rng.choice(chars).encode("utf-8")
                word = data.decode("utf-8")
                assert core.encode_words([word]) == enc._encode_single_piece(data), word


def test_words_where_the_longest_token_is_wrong(encoding):
    """Words of tokens side by side whose ids differ from the greedy longest tokens' (the
    backtracking case: a shorter token, or an earlier token taken back), and their texts."""
    name, ranks, enc, core = encoding
    rng = random.Random(7)
    tokens = [t for t in ranks if len(t) >= 2]
    words, wrong = [], 0
    while len(words) < 4000:
        data = b"".join(rng.choices(tokens, k=rng.randint(3, 12)))
        word = data.decode("utf-8", "replace")  # a word of tiktoken's pattern need not come whole: each is alone
        data = word.encode("utf-8")
        if len(data) <= 16:
            continue
        expected = enc._encode_single_piece(data)
        wrong += expected != greedy(ranks, data)
        words.append(word)
        assert core.encode_words([word]) == expected, word
    assert wrong > 400  # the test would pass on a greedy encoder otherwise
    assert core_of(ranks).encode_words(words) == [i for w in words for i in enc._encode_single_piece(w.encode())]


def test_the_corpora_give_tiktokens_ids(encoding):
    name, _, enc, _ = encoding
    tok = load_tokenizer(corpus_path(f"{name}_base.tiktoken"), name)
    for corpus in ("japanese_1M.txt", "chinese_1M.txt", "hindi_1M.txt", "russian_1M.txt", "german_1M.txt"):
        text = read_corpus(corpus)
        assert tok.encode_ordinary(text) == enc.encode_ordinary(text), corpus


BUILT_BYTES = 100_000


def grown(core, words: list[str], enc) -> list[bool]:
    """Whether the core's tables grew by more than BUILT_BYTES with each word (tiktoken's ids
    checked): a backtracking table built then."""
    grew = []
    for word in words:
        before = core.table_bytes()
        assert core.encode_words([word]) == enc._encode_single_piece(word.encode()), word
        grew.append(core.table_bytes() - before > BUILT_BYTES)
    return grew


def test_the_tables_wait_for_enough_long_words(encoding):
    """backtrack_after long words with a byte below 0x80 after their first (Latin) are merged,
    the next builds the backtracking tables of every token; words of bytes >= 0x80 alone (CJK)
    wait for backtrack_after // 8 of theirs, then the tables of such tokens are built (once, and
    not again when the others are); words of high bytes after a low first (" " and Cyrillic)
    count for neither. By default a fresh core merges its first len(tokens) // 16 long words
    (// 128 of 3-byte characters): tiktoken's ids all along."""
    name, ranks, enc, _ = encoding
    pattern = tiktoken_pattern(name)
    high = [w for w in regex.findall(pattern, read_corpus("japanese_1M.txt")) if all(len(c.encode()) == 3 for c in w)]
    high = list(dict.fromkeys(w for w in high if len(w.encode()) > 16 and w.encode() not in ranks))
    cyrillic = [w for w in regex.findall(pattern, read_corpus("russian_1M.txt")) if w[0] == " "]
    cyrillic = list(dict.fromkeys(w for w in cyrillic if len(w.encode()) > 16 and min(w[1:].encode()) >= 0x80))
    rng = random.Random(5)
    latin = list(dict.fromkeys(" " + "".join(rng.choices("abcdefghijklmnopqrstuvwxyzäöü", k=rng.randint(17, 30)))
                               for _ in range(len(ranks) // 16 + 100)))
    core = core_backend.CORE.Encoder(by_rank(ranks), None, None, mode=core_backend.MODE_RANKS, backtrack_after=24)
    core.encode_words(["a"])  # (the table of ids' ints, made by the first list)
    # the backtracking tables are ~1 MB even for the stand-in rank files; a merged word adds
    # only its new ids' ints (32 bytes each)
    assert grown(core, high[:5], enc) == [False, False, False, True, False]
    assert grown(core, cyrillic[:30], enc) == [False] * 30
    assert grown(core, latin[:26], enc) == [False] * 24 + [True, False]
    assert grown(core, high[5:8] + cyrillic[30:33], enc) == [False] * 6
    default = core_backend.CORE.Encoder(by_rank(ranks), None, None, mode=core_backend.MODE_RANKS)
    default.encode_words(["a"])
    after = len(by_rank(ranks)) // 16
    assert len(high) > after // 8 and len(latin) > after
    assert grown(default, high[:after // 8 + 2], enc) == [False] * (after // 8) + [True, False]
    assert grown(default, latin[:after + 1], enc) == [False] * after + [True]


def test_threads_that_meet_long_words_first_at_once(encoding):
    """A fresh encoder's first long words met by several threads at once (the tables are
    built by one of them while the others merge): built by the first, the 100th, and after
    the default count of long words merged."""
    _, ranks, enc, _ = encoding
    japanese = read_corpus("japanese_1M.txt")[:400_000]
    docs = [japanese[i:i + 20_000] for i in range(0, len(japanese), 20_000)]
    expected = [enc.encode_ordinary(d) for d in docs]
    for after in (0, 100, -1):
        core = core_backend.CORE.Encoder(by_rank(ranks), None, None, mode=core_backend.MODE_RANKS,
                                       pattern=core_backend.SCANNED_PATTERNS[encoding[0]], classify=char_class,
                                       backtrack_after=after)
        assert core.encode_batch(docs, workers=4) == expected
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(core.encode, docs)) == expected


def small_ranks(*tokens: bytes) -> dict[bytes, int]:
    """Every byte (ranks 0..255), then the tokens in the order given."""
    ranks = {bytes([b]): b for b in range(256)}
    for token in tokens:
        ranks[token] = len(ranks)
    return ranks


@pytest.mark.parametrize("tokens, words", [
    # "abcd" is a token, but its bytes stop at a | bc | d: never made inside a longer word
    ((b"bc", b"abcd"), ["abcd" * 10, "xabcdabcdabcdabcdy", "abcdabcdabcdabcdabcdabc"]),
    # "abc" is made from "ab", of a higher rank than its own
    ((b"abc", b"ab"), ["abc" * 12, "abcabcababcabcabcabcabc", "zabcabcabcabcabcabcabcz"]),
    # the longest token first is wrong: "aab" takes "a" from "aa", where "aa" ranks first
    ((b"aa", b"ab", b"aab", b"aaa", b"ba"), ["aab" * 9, "aaab" * 8, "ab" * 13, "aaaaabaaabaabab" * 2]),
    # a chain of prefixes, each a token, and the longest ones of higher rank than the parts
    ((b"xy", b"yz", b"xyz", b"zx", b"xyzx", b"yzxy", b"xyzxy"), ["xyz" * 10, "xyzx" * 8, "zxyzxyzxyzxyzxyzxy"]),
])
def test_small_rank_tables(tokens, words):
    ranks = small_ranks(*tokens)
    enc = tiktoken_of("small", ranks, r"\S+|\s+")
    core = core_of(ranks)
    for word in words:
        assert len(word) > 16
        assert core.encode_words([word]) == enc._encode_single_piece(word.encode()), word


def merged_ranks(rng: random.Random, alphabet: list[bytes] | None = None) -> dict[bytes, int]:
    """Every byte, then tokens each the join of two before it (over alphabet: "abcd"), some that
    no merge makes, and in one table of three two ranks swapped (a token made from a higher one)."""
    ranks = small_ranks()
    made = list(alphabet or [b"a", b"b", b"c", b"d"])
    for _ in range(rng.randint(20, 300)):
        token = rng.choice(made) + rng.choice(made)
        if len(token) <= 12 and token not in ranks:
            ranks[token] = len(ranks)
            made.append(token)
    for _ in range(rng.randint(0, 10)):
        ranks.setdefault(b"".join(rng.choice(made[:len(alphabet or "abcd")]) for _ in range(rng.randint(2, 6))),
                         len(ranks))
    if rng.random() < 1 / 3:
        first, second = rng.sample(list(ranks)[256:], 2)
        ranks[first], ranks[second] = ranks[second], ranks[first]
    return ranks


@pytest.mark.parametrize("seed", range(60))
def test_random_rank_tables(seed):
    """Rank tables made as BPE training makes them, with tokens no merge makes and swapped
    ranks: each token's last merge and its place in the trie as tiktoken's ids need them."""
    rng = random.Random(seed)
    ranks = merged_ranks(rng)
    enc = tiktoken_of("merged", ranks, r"\S+|\s+")
    core = core_of(ranks)
    words = ["".join(rng.choices("abcd", k=rng.randint(17, 60))) for _ in range(40)]
    for word in words:
        assert core.encode_words([word]) == enc._encode_single_piece(word.encode()), word
    assert core_of(ranks).encode_words(words) == [i for w in words for i in enc._encode_single_piece(w.encode())]


@pytest.mark.parametrize("seed", range(40))
def test_random_rank_tables_of_high_bytes(seed):
    """Tables of tokens over the bytes of "あい" (3-byte UTF-8) and "ab": the words of "あい" alone
    backtracked first over the tables of such tokens (built alone), then, once a word of both
    built the tables of every token, over those: tiktoken's ids each time."""
    rng = random.Random(seed)
    ranks = merged_ranks(rng, [b"\xe3", b"\x81", b"\x82", b"\x84", b"a", b"b"])
    enc = tiktoken_of("merged", ranks, r"\S+|\s+")
    core = core_of(ranks)
    high = ["".join(rng.choices("あい", k=rng.randint(6, 30))) for _ in range(30)]
    mixed = ["".join(rng.choices("あいab", k=rng.randint(9, 30))) for _ in range(30)]
    for words in (high, mixed, high):
        for word in words:
            assert core.encode_words([word]) == enc._encode_single_piece(word.encode()), word
