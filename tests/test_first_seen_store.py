"""The store with ``tie_break="first-seen"``: trained from stored word counts, whose
ordinals (where each word first occurred) ingest keeps; a reused run's progress.

The notebooks and minbpe (``notebook_ports``, nothing of bpestore) are reproduced merge
for merge through the store, on SQLite and PostgreSQL, ingested with one worker and
with four, from one file and from the text cut into several."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
import regex
from sqlalchemy import text as sql

import bpestore
from bpestore.errors import ConflictError, InvalidArgumentError
from bpestore.ingest import IngestTuning

from .notebook_ports import END, minbpe_train, raw_text_merges, sennrich_learn, textbook_learn, word_start_bpe

SHARED = Path("/work/shared/corpora")
# Four workers count even a small text, in many tasks, handing their counts on in shards
# and in many batches (generations): every path ordinals travel.
SMALL_PIECES = IngestTuning(parallel_min_bytes=0, chunk_bytes=2048, small_source_bytes=3000, task_bytes=4096,
                            merge_bytes=1 << 13, batch_bytes=1 << 14, batch_words=400, cut_window=512)


@pytest.fixture
def store(db_url, tmp_path):
    """SQLite and PostgreSQL (conftest's db_url)."""
    path = tmp_path / "t.txt"
    path.write_text("low " * 5 + "lowest " * 2 + "newer " * 6 + "wider " * 3 + "new " * 2, encoding="utf-8")
    s = bpestore.open(db_url)
    s.ingest("c", [path], pretokenizer="whitespace")
    yield s
    s.close()


def heard(store, **options):
    calls = []
    info = store.train("a", corpus="c", progress=calls.append, **options)
    return info, [(p.done, p.total, p.merge, p.token) for p in calls]


def test_a_reused_run_reports_every_merge_in_order(store):
    """Before: one Progress(done=n, merge=None) for a run taken whole from an equal one."""
    first, made = heard(store, merges=6)
    again, taken = heard(store, merges=6)
    assert again.fingerprint == first.fingerprint and again.ref != first.ref
    assert taken == made and [m[0] for m in taken] == list(range(1, 7)) and all(m[2] is not None for m in taken)
    # A longer run takes the six and makes two: it hears all eight, as a fresh store's run would.
    _, longer = heard(store, merges=8)
    assert longer[:6] == [(d, 8, m, t) for d, _, m, t in made] and [m[0] for m in longer] == list(range(1, 9))


# -- the notebooks through the store ----------------------------------------------------------
def pieces(text: str, n: int) -> list[str]:
    """``text`` cut into n pieces, each cut between a letter and a space before a letter:
    every pre-tokenizer here sees the same words in the pieces in order as in the whole."""
    cuts = [m.start() for m in regex.finditer(r"(?<=\p{L}) (?=\p{L})", text)]
    at = [0, *(cuts[len(cuts) * i // n] for i in range(1, n)), len(text)]
    return [text[a:b] for a, b in zip(at, at[1:])]


def files(tmp_path: Path, text: str, n: int) -> list[Path]:
    paths = []
    for i, piece in enumerate(pieces(text, n)):
        paths.append(tmp_path / f"part{i}.txt")
        paths[-1].write_text(piece, encoding="utf-8")
    return paths


def through_store(db_url: str, paths: list[Path], workers: int, k: int, ingest: dict, train: dict):
    """The first-seen merges of a store's run on ``paths`` as (left, right, count) text, and its tokenizer."""
    s = bpestore.open(db_url)
    try:
        s.ingest("text", paths, workers=workers, tuning=SMALL_PIECES, **ingest)
        v = s.train("fs", corpus="text", merges=k, tie_break="first-seen", **train)
        merges = [(m.left_bytes.decode(), m.right_bytes.decode(), m.count) for m in s.merges(v.ref)]
        assert s.verify(v.ref).ok
        return merges, s.tokenizer(v.ref)
    finally:
        s.close()


def dracula(n: int) -> str:
    return lzma.open(bpestore.sample_path(), "rt", encoding="utf-8").read()[:n]


LAYOUTS = pytest.mark.parametrize("workers, n_files", [(1, 1), (4, 1), (1, 3), (4, 3)],
                                  ids=["1 worker", "4 workers", "3 files", "3 files, 4 workers"])


@pytest.mark.parametrize("workers", [1, 4])
def test_notebook_000_raw_text(db_url, tmp_path, workers):
    """The whole text is one word (pre-tokenizer none): one file."""
    text = dracula(20_000)
    expected, _ = raw_text_merges(text, 40)
    got, tok = through_store(db_url, files(tmp_path, text, 1), workers, 40, {"pretokenizer": "none"},
                             {"alphabet": "chars", "no_inner_space": True})
    assert got == expected


@LAYOUTS
def test_notebook_001_sennrich(db_url, tmp_path, workers, n_files):
    paths = files(tmp_path, dracula(40_000), n_files)
    expected, first_tie = sennrich_learn(paths, 100)
    assert first_tie is not None and first_tie < 60  # ties decide most of the merges
    got, _ = through_store(db_url, paths, workers, 100, {"normalizer": "alphanumeric,lowercase",
                                                          "pretokenizer": "whitespace"},
                           {"alphabet": "chars", "end_of_word": END})
    assert got == expected


@LAYOUTS
def test_notebook_002_textbook(db_url, tmp_path, workers, n_files):
    eow = "\ue000"
    text = "low " * 5 + "lowest " * 2 + "newer " * 6 + "wider " * 3 + "new " * 2
    expected = textbook_learn(text, 12, eow)
    got, tok = through_store(db_url, files(tmp_path, text, n_files), workers, 12, {"pretokenizer": "whitespace"},
                             {"alphabet": "chars", "end_of_word": eow})
    assert got == expected


@LAYOUTS
def test_notebook_004_word_start(db_url, tmp_path, workers, n_files):
    corpus = ["I", "like", "to", "watch", "good", "movies"]
    expected = word_start_bpe(corpus, 25)
    got, _ = through_store(db_url, files(tmp_path, " ".join(corpus), n_files), workers, 8,
                           {"pretokenizer": "whitespace"}, {"alphabet": "chars", "start_of_word": "_",
                                                            "unk_token": "<unk>"})
    assert got == expected  # all eight are ties


def minbpe_through_store(db_url, paths, workers, vocab_size, split):
    s = bpestore.open(db_url)
    try:
        s.ingest("text", paths, workers=workers, tuning=SMALL_PIECES, pretokenizer="cl100k" if split else "none")
        v = s.train("fs", corpus="text", vocab_size=vocab_size, tie_break="first-seen")
        return [(m.left_bytes, m.right_bytes) for m in s.merges(v.ref)]
    finally:
        s.close()


@pytest.mark.parametrize("workers", [1, 4])
def test_minbpe_basic_on_a_generated_text(db_url, tmp_path, workers):
    text = dracula(6_000)
    _, expected = minbpe_train(text, 320, split=False)
    assert minbpe_through_store(db_url, files(tmp_path, text, 1), workers, 320, split=False) == expected


@LAYOUTS
def test_minbpe_regex_on_a_generated_text(db_url, tmp_path, workers, n_files):
    text = dracula(30_000)
    _, expected = minbpe_train(text, 400, split=True)
    assert minbpe_through_store(db_url, files(tmp_path, text, n_files), workers, 400, split=True) == expected


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "taylorswift.txt").exists(), reason="../shared/corpora is not here")
@pytest.mark.parametrize("split", [False, True], ids=["basic", "regex"])
def test_minbpe_taylorswift_512_through_the_store(db_url, split):
    path = SHARED / "taylorswift.txt"
    _, expected = minbpe_train(path.read_text(encoding="utf-8"), 512, split)
    assert minbpe_through_store(db_url, [path], 4, 512, split) == expected


# -- generations, stdin, extension, refusals -----------------------------------------------------
def test_generations_added_later_keep_the_text_order(db_url, tmp_path):
    """Each file its own ingest (generation): their words in order, as one text would give them."""
    paths = files(tmp_path, dracula(30_000), 4)
    _, expected = minbpe_train("".join(p.read_text(encoding="utf-8") for p in paths), 360, split=True)
    s = bpestore.open(db_url)
    for path in paths:
        s.ingest("text", [path], pretokenizer="cl100k")
    v = s.train("fs", corpus="text", vocab_size=360, tie_break="first-seen")
    assert [(m.left_bytes, m.right_bytes) for m in s.merges(v.ref)] == expected
    assert s.verify(v.ref).ok
    s.close()


def test_standard_input_keeps_ordinals(db_url, tmp_path, monkeypatch):
    import io

    text = dracula(12_000)
    _, expected = minbpe_train(text, 320, split=True)
    s = bpestore.open(db_url)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    s.ingest("text", ["-"], pretokenizer="cl100k", workers=4, tuning=SMALL_PIECES)
    v = s.train("fs", corpus="text", vocab_size=320, tie_break="first-seen")
    assert [(m.left_bytes, m.right_bytes) for m in s.merges(v.ref)] == expected
    s.close()


def test_an_extension_and_a_resumed_run_equal_one_run(db_url, tmp_path):
    text = dracula(20_000)
    _, expected = minbpe_train(text, 360, split=True)
    paths = files(tmp_path, text, 1)
    s = bpestore.open(db_url)
    s.ingest("text", paths, pretokenizer="cl100k")
    first = s.train("fs", corpus="text", vocab_size=300, tie_break="first-seen")
    longer = s.train("fs", corpus="text", vocab_size=360, parent=first.ref)
    assert longer.spec.tie_break == "first-seen"
    assert [(m.left_bytes, m.right_bytes) for m in s.merges(longer.ref)] == expected
    assert s.verify(longer.ref).ok and s.verify(first.ref).ok
    s.close()


def test_first_seen_is_refused_on_a_generation_without_ordinals_and_writes_nothing(store):
    """A generation from before migration 0007 (its ordinals NULL) is refused by name."""
    with store.engine.begin() as conn:
        conn.execute(sql("UPDATE generations SET ordinal_end = NULL"))
        conn.execute(sql("UPDATE word_counts SET ordinal = NULL"))
    with pytest.raises(ConflictError, match=r"corpus generation c@1 does not keep where in the text each word "
                                            r"first occurs .*ingest its sources again into a new corpus"):
        store.train("fs", corpus="c", merges=3, tie_break="first-seen")
    assert store.versions() == []
    # A generation added after one without ordinals has none either (its older words lack them).
    path = Path(store.corpus_sources("c")[0].source).with_name("more.txt")
    path.write_text("wider newest", encoding="utf-8")
    store.ingest("c", [path])
    with pytest.raises(ConflictError, match="corpus generation c@2 does not keep"):
        store.train("fs", corpus="c", merges=3, tie_break="first-seen")
    store.train("lex", corpus="c", merges=3)  # the other tie rules need no ordinals


def test_first_seen_refuses_a_mixture(store):
    with pytest.raises(InvalidArgumentError, match="first-seen.*one corpus generation"):
        store.train("fs", corpus="c", merges=3, tie_break="first-seen", weights=[2])
    assert store.versions() == []


@pytest.mark.parametrize("workers", [1, 4])
def test_counts_files_keep_ordinals(db_url, tmp_path, workers):
    """``bpestore count`` files (what a Dask count writes), added together in order."""
    pytest.importorskip("pyarrow")
    from bpestore.counts import count_files

    text = dracula(30_000)
    _, expected = minbpe_train(text, 380, split=True)
    paths = files(tmp_path, text, 3)
    made = [count_files([paths[0], paths[1]], tmp_path / "a.parquet", pretokenizer="cl100k", workers=workers),
            count_files([paths[2]], tmp_path / "b.parquet", pretokenizer="cl100k", workers=workers)]
    assert all(info.ordered for info in made)
    s = bpestore.open(db_url)
    s.ingest_counts("text", [tmp_path / "a.parquet", tmp_path / "b.parquet"])
    v = s.train("fs", corpus="text", vocab_size=380, tie_break="first-seen")
    assert [(m.left_bytes, m.right_bytes) for m in s.merges(v.ref)] == expected
    s.close()


def test_copy_with_counts_keeps_ordinals(db_url, tmp_path):
    """A first-seen version copied with its counts verifies and trains on there; a corpus
    grown by the copy past its own generations keeps the text order too."""
    paths = files(tmp_path, dracula(30_000), 2)
    _, expected = minbpe_train("".join(p.read_text(encoding="utf-8") for p in paths), 380, split=True)
    s = bpestore.open(db_url)
    s.ingest("text", [paths[0]], pretokenizer="cl100k", workers=4, tuning=SMALL_PIECES)
    target = bpestore.open(tmp_path / "target.db")
    s.copy(s.train("one", corpus="text", vocab_size=300, tie_break="first-seen").ref, target, with_counts=True)
    s.ingest("text", [paths[1]], pretokenizer="cl100k")
    v = s.train("fs", corpus="text", vocab_size=380, tie_break="first-seen")
    s.copy(v.ref, target, with_counts=True)  # grows the target's corpus from generation 1 to 2
    assert target.verify(v.ref).ok
    again = target.train("again", corpus="text", vocab_size=380, tie_break="first-seen")
    assert [(m.left_bytes, m.right_bytes) for m in target.merges(again.ref)] == expected
    s.close()
    target.close()


# -- the ordinals' pieces: the compiled core gives what the pure Python gives ------------------------
def test_counted_words_come_in_the_order_the_text_first_shows_them(monkeypatch):
    from bpestore import text as text_module
    from bpestore.spec import TokenizerSpec
    from bpestore.text import TextPipeline

    sample = dracula(50_000)
    expected = list(dict.fromkeys(w.encode() for w in regex.findall(text_module.PATTERNS["gpt2"], sample)))
    pipeline = TextPipeline(TokenizerSpec())
    counts: dict[bytes, int] = {}
    pipeline.count_utf8(sample, counts)
    assert list(counts) == expected
    many: dict[bytes, int] = {}
    pipeline.count_each(pieces(sample, 3), many)  # small files: counted together, in order
    assert list(many) == expected
    monkeypatch.setattr(pipeline, "count_core", None)
    pure: dict[bytes, int] = {}
    pipeline.count_utf8(sample, pure)
    assert list(pure) == expected


def test_the_cores_ordinals_in_shards_equal_the_pure_pythons(monkeypatch):
    from collections import Counter

    from bpestore.ingest import pool
    from bpestore.ingest.shards import ordinals

    if pool.COUNT_CORE is None:
        pytest.skip("the counting core is not built")
    words = [f"w{i % 997}".encode() for i in range(5_000)]
    parts = [Counter(dict.fromkeys(words[i::3], 1)) for i in range(3)]
    segments = [[(0, 5), (100, 9)], [(0, 2)], [(0, 7), (10, 8), (10, 11)]]
    compiled = [pool.shard_counts(Counter(p), 4, s) for p, s in zip(parts, segments)]
    monkeypatch.setattr(pool, "COUNT_CORE", None)
    pure = [pool.shard_counts(Counter(p), 4, s) for p, s in zip(parts, segments)]
    assert compiled == pure
    reduced_pure = [pool.reduce_shard([(1, piece[s]) for piece in pure], {1}) for s in range(4)]
    monkeypatch.undo()
    reduced = [pool.reduce_shard([(1, piece[s]) for piece in compiled], {1}) for s in range(4)]
    for a, b in zip(reduced, reduced_pure):
        assert (a.counts, a.firsts) == (b.counts, b.firsts)
    # Each word's ordinal: the smallest of its places, (task << 32) | place in its part.
    firsts = {}
    for part, segs in zip(parts, segments):
        for word, first in zip(part, ordinals(len(part), segs)):
            firsts[word] = min(firsts.get(word, first), first)
    assert {w: o for r in reduced for w, o in r.firsts.items()} == firsts


def test_a_run_stopped_part_way_resumes_to_the_same_merges(db_url, tmp_path):
    text = dracula(20_000)
    _, expected = minbpe_train(text, 380, split=True)
    s = bpestore.open(db_url)
    s.ingest("text", files(tmp_path, text, 2), pretokenizer="cl100k", workers=4, tuning=SMALL_PIECES)

    def stop(p):
        if p.done == 70:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        s.train("fs", corpus="text", vocab_size=380, tie_break="first-seen", checkpoint_every=10, progress=stop)
    assert s.version("fs@1").status == "training" and 0 < s.version("fs@1").n_merges < 124
    assert s.resume("fs@1").status == "complete"
    assert [(m.left_bytes, m.right_bytes) for m in s.merges("fs@1")] == expected
    assert s.verify("fs@1").ok
    s.close()


def test_a_dask_count_keeps_ordinals(db_url, tmp_path):
    """A distributed count (one counts file per group of files, in order) trains as the text does."""
    pytest.importorskip("pyarrow")
    distributed = pytest.importorskip("distributed")
    from bpestore.counts import dask_count

    text = dracula(30_000)
    _, expected = minbpe_train(text, 380, split=True)
    (tmp_path / "out").mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        infos = dask_count(client, files(tmp_path, text, 4), tmp_path / "out", group_bytes=8_000,
                           pretokenizer="cl100k")
    assert len(infos) > 1
    s = bpestore.open(db_url)
    s.ingest_counts("text", [info.path for info in infos])
    v = s.train("fs", corpus="text", vocab_size=380, tie_break="first-seen")
    assert [(m.left_bytes, m.right_bytes) for m in s.merges(v.ref)] == expected
    s.close()
