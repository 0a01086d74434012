"""Encoding on threads: ``encode_batch`` (one call of the compiled core per batch, the GIL
released while it encodes), and many threads on one core at once, give tiktoken's ids
(built offline from the shared cl100k file) and the ids of one thread."""

from __future__ import annotations

import gc
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from bpestore import Tokenizer
from bpestore.encoder import core_backend
from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version
from bpestore.text import COUNT_CORE_PATTERNS, char_class

from .conftest import corpus_path, read_corpus, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")


pytestmark = pytest.mark.usefixtures("compiled_encode_core")


@pytest.fixture(scope="module")
def cl100k():
    ranks = read_ranks(corpus_path("cl100k_base.tiktoken"))
    vocab, merges, spec = tiktoken_version(ranks, "cl100k", {})
    enc = tiktoken.Encoding(name="cl100k", pat_str=tiktoken_pattern("cl100k"), mergeable_ranks=ranks,
                            special_tokens={})
    return Tokenizer(vocab, merges, spec=spec), enc, ranks


def documents() -> list[str]:
    """Documents of every kind: ASCII, Latin-1, Cyrillic, CJK, emoji, empty, one with a
    lone surrogate (the pure path's turn), short and long."""
    mixed = read_corpus("taylorswift.txt")[:60_000] + read_corpus("russian_1M.txt")[:30_000] \
        + read_corpus("japanese_1M.txt")[:20_000]
    docs = [mixed[i:i + 3_000 + 97 * (i % 13)] for i in range(0, len(mixed), 2_500)]
    return docs + ["", "x", "caf\xe9 na\xefve", "\ud800 lone surrogate", "😀 " * 500, "ǅʰ Ⅻ ٣ \u2028"]


def fixed(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # as tiktoken does


def test_a_batch_on_threads_gives_tiktokens_ids_and_one_threads(cl100k):
    tok, enc, _ = cl100k
    docs = documents()
    expected = [enc.encode_ordinary(fixed(d)) for d in docs]
    assert tok.encode_batch(docs) == expected
    for workers in (2, 4, 8):
        assert tok.encode_batch(docs, workers=workers) == expected
    assert tok.encode_batch([]) == [] and tok.encode_batch([], workers=4) == []


def test_threads_on_a_new_core_ask_each_class_once_and_agree(cl100k):
    """Fresh cores (no character's class known yet) encoding on 8 threads at once,
    one text a call and batches: the ids of tiktoken."""
    _, enc, ranks = cl100k
    tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for data, rank in ranks.items():
        tokens[rank] = data
    docs = [d for d in documents() if fixed(d) == d]
    expected = [enc.encode_ordinary(d) for d in docs]
    core = core_backend.CORE.Encoder(tokens, None, [ranks[bytes([b])] for b in range(256)],
                                   mode=core_backend.MODE_RANKS, pattern=COUNT_CORE_PATTERNS["cl100k"],
                                   classify=char_class, backtrack_after=0)
    with ThreadPoolExecutor(8) as pool:
        singles = list(pool.map(core.encode, docs * 3))
        batches = list(pool.map(core.encode_batch, [docs[i::5] for i in range(5)] * 2))
    assert singles == expected * 3
    assert batches[:5] == batches[5:] == [expected[i::5] for i in range(5)]
    as_bytes = core.encode_batch(docs + ["\udc00"], as_bytes=True)
    assert as_bytes[-1] is None
    assert [list(memoryview(b).cast("I")) for b in as_bytes[:-1]] == expected


def test_lists_made_without_the_gil_count_their_references(cl100k):
    """The ids' ints are counted once per batch: each list's references are real ones
    (freeing every list gives each int back the count it had)."""
    tok, _, _ = cl100k
    core = tok.engine.accelerated[0]._core
    docs = documents()[:20]
    core.encode_batch(docs)  # the ints made
    probe = core.encode(docs[0])[5]
    gc.collect()
    before = sys.getrefcount(probe)
    held = [core.encode_batch(docs), core.encode(docs[0]), core.encode_batch(docs[:1] * 3)]
    uses = sum(ids.count(probe) for batch in (held[0], [held[1]], held[2]) for ids in batch)
    assert uses > 0 and sys.getrefcount(probe) == before + uses
    del held
    gc.collect()
    assert sys.getrefcount(probe) == before


def test_a_file_in_ranges_on_threads_gives_tiktokens_ids(cl100k, tmp_path, monkeypatch):
    """encode_file with workers: each thread reads, decodes, encodes and packs a range
    cut at a safe place (ranges of 64 KB here: many of them)."""
    from bpestore.encoder import streams

    tok, enc, _ = cl100k
    text = read_corpus("taylorswift.txt")[:300_000] + read_corpus("japanese_1M.txt")[:200_000] + " \n\n end"
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(streams, "RANGE_BYTES", 1 << 16)
    expected = enc.encode_ordinary(text)
    for workers in (2, 3):
        out = tmp_path / f"ids{workers}.bin"
        done = tok.encode_file(path, out, workers=workers)
        assert done.tokens == len(expected)
        assert done.dtype == ("uint32" if enc.n_vocab > 1 << 16 else "uint16")
        assert list(memoryview(out.read_bytes()).cast({"uint16": "H", "uint32": "I"}[done.dtype])) == expected


def test_the_cores_own_threads_give_tiktokens_ids_for_any_number_of_workers(cl100k):
    """One call on the core's threads (each taking the next text, uneven texts among even
    ones; a fresh core, so that texts with characters met for the first time wait for the
    GIL): the ids of tiktoken, whatever the number of workers asked."""
    _, enc, ranks = cl100k
    tokens: list[bytes | None] = [None] * (max(ranks.values()) + 1)
    for data, rank in ranks.items():
        tokens[rank] = data
    long = read_corpus("taylorswift.txt")[:150_000]
    docs = [d for d in documents() if fixed(d) == d]
    docs = docs[:5] + [long] + docs[5:] * 4 + ["\ud800 alone"]
    expected = [enc.encode_ordinary(d) for d in docs[:-1]] + [None]
    for workers in (2, 64, 1, 3, 1000, 0, -5, 8):
        core = core_backend.CORE.Encoder(tokens, None, [ranks[bytes([b])] for b in range(256)],
                                       mode=core_backend.MODE_RANKS, pattern=COUNT_CORE_PATTERNS["cl100k"],
                                       classify=char_class)
        assert core.encode_batch(docs, workers=workers) == expected, workers
        packed = core.encode_batch(docs, as_bytes=True, workers=workers)
        assert [list(memoryview(b).cast("I")) if b is not None else None for b in packed] == expected
    with ThreadPoolExecutor(4) as pool:  # calls on threads at once, each on threads of the core
        batches = list(pool.map(lambda k: core.encode_batch(docs[k:] + docs[:k], workers=3), range(8)))
    assert batches == [expected[k:] + expected[:k] for k in range(8)]


def test_lists_of_threads_count_their_references_and_behave_as_lists(cl100k):
    """Lists filled on the core's threads: each int gets back the count it had once they
    are freed; they are ordinary lists to the collector (tracked, found by
    gc.get_referrers) and stay usable after mutation, a cycle through one collected."""
    tok, enc, _ = cl100k
    core = tok.engine.accelerated[0]._core
    docs = documents()[:30] * 3
    core.encode_batch(docs, workers=4)  # the ints made
    probe = core.encode(docs[0])[5]
    gc.collect()
    before = sys.getrefcount(probe)
    held = core.encode_batch(docs, workers=4)
    uses = sum(ids.count(probe) for ids in held if ids is not None)
    assert uses > 0 and sys.getrefcount(probe) == before + uses
    first = held[0]
    assert gc.is_tracked(first) and any(r is first for r in gc.get_referrers(probe))
    first.append(first)
    first.extend([probe, [1]])
    first.sort(key=id)
    assert first.count(probe) == enc.encode_ordinary(fixed(docs[0])).count(probe) + 1
    del held, first
    gc.collect()
    assert sys.getrefcount(probe) == before


def test_a_batch_on_threads_of_short_and_uneven_documents(cl100k):
    """Tokenizer.encode_batch with workers: documents of a few characters to 100,000, in
    runs the core shares among its threads: one thread's ids."""
    tok, enc, _ = cl100k
    text = read_corpus("taylorswift.txt")[:200_000]
    docs, at = [], 0
    for size in [3, 500, 100_000, 7, 2_000] * 8:
        docs.append(text[at % 150_000:at % 150_000 + size])
        at += 7_919
    expected = [enc.encode_ordinary(d) for d in docs]
    for workers in (1, 2, 5):
        assert tok.encode_batch(docs, workers=workers) == expected
