"""A rank file's tokenizer (``tiktoken_ranks.load_tokenizer``): the file read in C, the
compiled core's tables built straight from its ranks (tiktoken's rule), the merges
derived only where needed; ids equal tiktoken's (built offline from the same shared
files), on the compiled core and on the paths without it."""

from __future__ import annotations

import base64
import json
import pickle
import random

import pytest

from bpestore.encoder import core_backend
from bpestore.errors import DamagedDataError, InvalidArgumentError, NotFoundError
from bpestore.formats.gpt2 import str_to_token
from bpestore.formats.tiktoken_ranks import load_tokenizer, rank_tokens, read_ranks
from bpestore.text import char_class

from .conftest import corpus_path, read_corpus, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")
TRICKY = "Hello, world! 12345 don't 'LL  \n\n\t x日本語のテキスト Ж 😀 \u0301a \ud800 ＡＢ ﬁ"


def rank_file_of_gpt2(tmp_path) -> tuple[str, dict[bytes, int]]:
    """GPT-2's vocabulary as a rank file (its ids are its ranks)."""
    encoder = json.loads(corpus_path("gpt2_vocab.json").read_text(encoding="utf-8"))
    ranks = {str_to_token(s): i for s, i in encoder.items() if s != "<|endoftext|>"}
    path = tmp_path / "gpt2.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    return str(path), ranks


@pytest.fixture(scope="module", params=["gpt2", "cl100k", "o200k"])
def encoding(request, tmp_path_factory):
    name = request.param
    if name == "gpt2":
        path, ranks = rank_file_of_gpt2(tmp_path_factory.mktemp("ranks"))
    else:
        path = str(corpus_path(f"{name}_base.tiktoken"))
        ranks = read_ranks(path)
    enc = tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks, special_tokens={})
    return name, path, ranks, enc


def fixed(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # as tiktoken does


def test_the_tables_built_from_the_rank_file_give_tiktokens_ids(encoding):
    name, path, ranks, enc = encoding
    tok = load_tokenizer(path, name)
    assert tok.backend == ("compiled (C)" if core_backend.CORE is not None else tok.backend)
    for text in (read_corpus("english_medium.txt.xz")[:1_000_000], read_corpus("japanese_1M.txt")[:300_000],
                 read_corpus("code_python_5M.txt.xz")[:500_000], TRICKY * 50, "a" * 50_000):
        assert tok.encode_ordinary(text) == enc.encode_ordinary(fixed(text))
    assert tok.vocab == {rank: token for token, rank in ranks.items()}
    assert tok.decode(tok.encode(TRICKY)) == fixed(TRICKY)
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode(TRICKY) == enc.encode_ordinary(fixed(TRICKY))


def test_cjk_runs_and_words_of_short_tokens_give_tiktokens_ids(encoding):
    """Words of every length the merge takes another way for (runs of 1 to 150 CJK
    characters: 3 to 450 bytes, mostly merged a byte pair at a time) and words joined
    from tokens of 1 to 4 bytes (the spans the tables of short tokens and of byte pairs
    answer), each merged alone and in a text, against tiktoken."""
    name, path, ranks, enc = encoding
    if core_backend.CORE is None:
        pytest.skip("the encode core is not built")
    tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        tokens[rank] = token
    core = core_backend.CORE.Encoder(tokens, None, None, mode=core_backend.MODE_RANKS)
    rng = random.Random(12)
    japanese = read_corpus("japanese_1M.txt")[:100_000]
    cjk = sorted({c for c in japanese if ord(c) >= 0x3000}) + [chr(c) for c in range(0x4E00, 0x4E00 + 300)]
    words = ["".join(rng.choices(cjk, k=n)) for n in [*range(1, 90), 100, 120, 150] for _ in range(3)]
    short = []
    for token in ranks:
        if len(token) <= 4:
            try:
                short.append(token.decode("utf-8"))
            except UnicodeDecodeError:
                pass
    words += short + ["".join(rng.choices(short, k=rng.randint(2, 8))) for _ in range(3000)]
    for word in words:
        assert core.encode_words([word]) == enc._encode_single_piece(word.encode("utf-8")), word
    text = " ".join(words)
    assert load_tokenizer(path, name).encode_ordinary(text) == enc.encode_ordinary(text)


def test_the_c_reader_reads_what_read_ranks_reads(encoding):
    _, path, ranks, _ = encoding
    tokens = rank_tokens(path)
    assert {token: rank for rank, token in enumerate(tokens) if token is not None} == ranks
    if core_backend.CORE is not None:
        with open(path, "rb") as f:
            assert core_backend.CORE.read_rank_file(f.read()) == tokens


def test_special_tokens_and_the_derived_merges(tmp_path):
    path, ranks = rank_file_of_gpt2(tmp_path)
    tok = load_tokenizer(path, "gpt2", {"<|endoftext|>": 50256}, name="gpt2")
    enc = tiktoken.Encoding(name="gpt2", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    text = "hi<|endoftext|> there"
    assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")
    assert len(tok.merges) == 50_000  # derived when asked
    pure = load_tokenizer(path, "gpt2")
    pure.engine.use_fast = False
    assert pure.encode(TRICKY) == enc.encode_ordinary(fixed(TRICKY))


def test_without_the_core_the_ids_are_the_same(encoding, monkeypatch):
    monkeypatch.setattr(core_backend, "CORE", None)  # this test only: the module's later tests want the core
    name, path, _, enc = encoding
    tok = load_tokenizer(path, name)
    assert tok.backend != "compiled (C)"
    assert tok.encode(TRICKY) == enc.encode_ordinary(fixed(TRICKY))


@pytest.mark.parametrize("content, error, message", [
    (b"", DamagedDataError, "holds no ranks"),
    (b"QQ== 0\nQg== x\n", DamagedDataError, ":2: a line is a base64 token and its rank"),
    (b"QQ== 0\nQQ== 1\n", DamagedDataError, "is given twice"),
    (b"QQ== 0\nQg== 0\n", DamagedDataError, "rank 0 is given twice"),
    (b"QQ 0\n", DamagedDataError, "a line is a base64 token"),
    (b"QQ== 0\nQg== 1\n", DamagedDataError, "lacks 254 single bytes"),
])
def test_a_bad_rank_file_gets_read_ranks_message(tmp_path, content, error, message):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(error, match=message):
        load_tokenizer(path, "cl100k")


def test_odd_but_valid_lines_and_missing_files(tmp_path):
    singles = b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256))
    path = tmp_path / "odd.tiktoken"
    path.write_bytes(singles + b"\n  YWI=\t+256 \r\n" + base64.b64encode(b"abc") + b" 0258\n")
    tok = load_tokenizer(path, "gpt2")
    assert tok.vocab[256] == b"ab" and tok.vocab[258] == b"abc" and 257 not in tok.vocab
    assert tok.encode("abc ab") == [258, 32, 256]
    with pytest.raises(NotFoundError):
        load_tokenizer(tmp_path / "absent.tiktoken", "gpt2")
    with pytest.raises(InvalidArgumentError, match="pattern cannot be empty"):
        load_tokenizer(path, "")


def test_a_stored_version_builds_the_core_from_its_columns(tmp_path):
    """A store's snapshot (token bytes, merge ids) goes to the core as it is: no index of
    the tokens is built in Python, and the ids are tiktoken's."""
    import bpestore

    path, ranks = rank_file_of_gpt2(tmp_path)
    bpestore.open(str(tmp_path / "s.db")).import_tiktoken("g", path, pattern="gpt2", special_tokens={"<|e|>": 50256})
    tok = bpestore.open(str(tmp_path / "s.db")).tokenizer("g")
    enc = tiktoken.Encoding(name="gpt2", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks, special_tokens={})
    text = read_corpus("taylorswift.txt")[:200_000]
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
    if core_backend.CORE is not None:
        assert tok.backend == "compiled (C)" and "index" not in tok.engine.reference.__dict__
    assert tok.encode_ordinary(TRICKY) == enc.encode_ordinary(fixed(TRICKY))  # a surrogate: the pure path


def test_the_core_finds_the_bytes_ids_of_plain_byte_symbols():
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")
    tokens = [bytes([255 - i]) for i in range(256)] + [b"ba"]
    core = core_backend.CORE.Encoder(tokens, ([157], [158], [256]), None)
    assert core.encode("bad") == [256, 155]
    with pytest.raises(ValueError, match="1 of the 256 bytes have no token"):
        core_backend.CORE.Encoder([*tokens[:-2], None, b"ba"], ([157], [158], [256]), None)


def test_a_stored_version_gets_the_rank_files_tables(tmp_path, sample_text):
    """The same ranks, imported into a store and loaded from it or read from the rank file,
    build the same token-rank tables (the backtracking path for long words) and give
    tiktoken's ids (tiktoken run on the same ranks) on long words and on text."""
    import bpestore

    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")
    source = tmp_path / "sample.txt"
    source.write_text(sample_text[:200_000], encoding="utf-8")
    vocab, _ = bpestore.train_bpe(source, vocab_size=1256, pretokenizer="cl100k")
    ranks = {token: token_id for token_id, token in vocab.items()}  # ids by merge rank: a valid rank table
    path = tmp_path / "small.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    with bpestore.open(str(tmp_path / "store.db")) as store:
        store.import_tiktoken("small", path, pattern="cl100k")
        stored = store.tokenizer("small")
    from_file = load_tokenizer(path, "cl100k")
    assert stored.facts.rank_rule_problem is None  # tiktoken's rule holds: its tables may serve
    cores = [tok.engine.accelerated[0] for tok in (stored, from_file)]
    assert [core.rule for core in cores] == ["token ranks", "token ranks"]
    assert cores[0].table_bytes() == cores[1].table_bytes()
    enc = tiktoken.Encoding(name="small", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks,
                            special_tokens={})
    rng = random.Random(7)
    letters = [t.decode() for t in ranks if t.isalpha() and t.isascii()]
    words = ["".join(rng.choice(letters) for _ in range(rng.randrange(20, 400))) for _ in range(200)]
    for text in (*words, " ".join(words), sample_text[:50_000]):
        assert stored.encode_ordinary(text) == from_file.encode_ordinary(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("repeated", [b"a", b"ab", b"abcdefghij", b"x" * 40])
def test_token_ranks_with_repeated_bytes(repeated):
    """Under token ranks the table of tokens finds two ids of the same bytes as it is built
    (``unique``: ValueError, the tokenizer then takes the merge tables); without ``unique`` the
    lower id wins: the ids of the same tokens without the repeat, which tiktoken gives."""
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")
    tokens = [bytes([i]) for i in range(256)] + [b"ab", b"abc", b"abcdefghij", b"x" * 20, b"x" * 40]
    with_repeat = [*tokens, None, repeated]
    with pytest.raises(ValueError, match="same bytes"):
        core_backend.CORE.Encoder(with_repeat, None, None, mode=core_backend.MODE_RANKS, unique=True)
    enc = tiktoken.Encoding(name="small", pat_str=tiktoken_pattern("cl100k"), special_tokens={},
                            mergeable_ranks={t: i for i, t in enumerate(tokens)})
    scan = {"pattern": core_backend.SCANNED_PATTERNS["cl100k"], "classify": char_class, "backtrack_after": 0}
    text = "abcdefghij abc ab " + "x" * 97 + " ba cab"
    core = core_backend.CORE.Encoder(with_repeat, None, None, mode=core_backend.MODE_RANKS, **scan)
    assert core.encode(text) == enc.encode_ordinary(text)
    core = core_backend.CORE.Encoder(tokens, None, None, mode=core_backend.MODE_RANKS, unique=True, **scan)
    assert core.encode(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("ids", [[], [0], [0, 1, 2], [1, 0, 2], [0, 2, 1], [0, 1, 3], [2, 0], [0, 1, 1000, 3]])
def test_tokens_by_id_whatever_the_order_of_the_ids(ids):
    """``by_id``: each id's token, None where an id below the largest has none, however a
    vocabulary's ids are ordered (a stored version's come in id order: the fast path)."""
    vocab = {i: b"t%d" % i for i in ids}
    assert core_backend.by_id(vocab) == [vocab.get(i) for i in range(max(ids, default=-1) + 1)]
