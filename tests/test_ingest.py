"""Ingestion: parallel, chunked counting equals one plain Counter; sources, skips, failures.

References are independent of the code under test: ``regex.findall`` with the
published patterns (tiktoken's openai_public.py, GPT-2's encoder.py) over each
whole text, summed with ``collections.Counter``.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import hashlib
import io
import itertools
import json
import lzma
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from bpestore import BpestoreError, TokenizerSpec
from bpestore.errors import SourceError
from bpestore.ingest import IngestTuning, count_sources, expand_paths
from bpestore.ingest.scheduler import task_spans
from bpestore.store.schema import ingests, word_counts
from bpestore.text import TextPipeline

from .conftest import read_corpus

EOT = "<|endoftext|>"
SCALE = os.environ.get("BPESTORE_SCALE", "small")

# The patterns as their authors publish them.
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
          r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
PUBLISHED = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}


def reference_counts(text: str, pattern: str, special: str | None = None) -> Counter:
    """A plain Counter of the pattern's matches over each stretch between special tokens."""
    counts: Counter = Counter()
    for part in (text.split(special) if special else [text]):
        counts.update(w.encode("utf-8") for w in regex.findall(pattern, part))
    return counts


PARALLEL = IngestTuning(parallel_min_bytes=0, chunk_bytes=50_000, cut_window=3_000, part_chars=7_000,
                        small_source_bytes=10_000, task_bytes=20_000)


@pytest.fixture
def parallel():
    """Worker processes and many small pieces, even for a small text."""
    return PARALLEL


def only_batch(paths, spec, **options):
    batches = list(count_sources([str(p) for p in paths], spec, **options))
    assert len(batches) == 1
    return batches[0]


# -- parallel, chunked counts == one Counter ------------------------------------
CORPORA = ["tinyshakespeare.txt", "dracula.txt", "taylorswift.txt", "german_1M.txt", "russian_1M.txt",
           "japanese_1M.txt", "chinese_1M.txt", "hindi_1M.txt", "code_python_5M.txt.xz"]


def text_files(folder: Path, texts: list[str]) -> list[Path]:
    """Each text as a UTF-8 file in ``folder``: 0.txt, 1.txt, ..."""
    paths = [folder / f"{i}.txt" for i in range(len(texts))]
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")
    return paths


@pytest.mark.parametrize("name", CORPORA)
def test_parallel_counts_equal_a_counter_on_every_shared_corpus(name, parallel, counting_core, tmp_path):
    text = read_corpus(name)[:1_500_000]
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    batch = only_batch([path], TokenizerSpec(), workers=2, tuning=parallel)
    expected = reference_counts(text, GPT2)
    assert batch.counts == expected
    assert batch.sources[0].sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert batch.sources[0].n_words == sum(expected.values())
    assert batch.sources[0].n_distinct == len(expected)


@pytest.mark.parametrize("pretokenizer", ["cl100k", "o200k"])
@pytest.mark.parametrize("name", ["japanese_1M.txt", "hindi_1M.txt", "code_python_5M.txt.xz"])
def test_parallel_counts_with_tiktoken_patterns(name, pretokenizer, parallel, tmp_path):
    text = read_corpus(name)[:600_000]
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wb") as f:  # a compressed stream: read here, counted by the workers
        f.write(text.encode("utf-8"))
    batch = only_batch([path], TokenizerSpec(pretokenizer=pretokenizer), workers=2, tuning=parallel)
    assert batch.counts == reference_counts(text, PUBLISHED[pretokenizer])


def test_two_workers_below_the_process_threshold_count_on_two_threads(counting_core, tmp_path, monkeypatch):
    """Two workers on a file too small for processes: this process counts its ranges on two threads
    (``TextPipeline.count_bytes(..., threads=2)``), and the counts and their order are one worker's."""
    text = read_corpus("german_1M.txt") + read_corpus("russian_1M.txt")[:600_000]
    text = (text * (1_600_000 // len(text) + 1))[:1_600_000]  # (a fresh clone's stand-ins are short)
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    asked: list[int] = []
    real = TextPipeline.count_bytes

    def spy(self, datas, counts, threads=1):
        asked.append(threads)
        return real(self, datas, counts, threads)
    monkeypatch.setattr(TextPipeline, "count_bytes", spy)
    one = only_batch([path], TokenizerSpec(), workers=1)
    by_one = len(asked)
    two = only_batch([path], TokenizerSpec(), workers=2)
    if counting_core == "compiled":  # (the pure pipeline counts decoded text, on one thread)
        assert by_one and set(asked[:by_one]) == {1} and set(asked[by_one:]) == {2}
    assert list(two.counts.items()) == list(one.counts.items()) and two.firsts == one.firsts
    assert two.counts == reference_counts(text, GPT2)
    assert two.sources[0].n_distinct == len(two.counts)


def test_special_tokens_at_chunk_boundaries(parallel, tmp_path):
    """Special tokens and multi-byte characters right at, before and after every read boundary."""
    tuning = dataclasses.replace(parallel, chunk_bytes=97, cut_window=41)
    rng = random.Random(7)
    words = ["the", " cat", "é", "日本", " ", "\n", "  ", "x1", "!!", "<|", "|>"]
    text = ""
    while len(text.encode()) < 60_000:
        text += rng.choice(words)
        if rng.random() < 0.2:
            # Land the special token across the next boundary, at every offset.
            gap = 97 - len(text.encode()) % 97
            text += "a" * max(0, gap - rng.randrange(len(EOT) + 2)) + EOT
    path = tmp_path / "specials.txt"
    path.write_bytes(text.encode("utf-8"))
    assert text.count(EOT) > 100
    for packed in (path, tmp_path / "specials.txt.gz"):  # file ranges, and a stream re-cut here
        packed.write_bytes(gzip.compress(text.encode()) if packed.suffix == ".gz" else text.encode())
        batch = only_batch([packed], TokenizerSpec(special_tokens=(EOT,)), workers=2, tuning=tuning)
        assert batch.counts == reference_counts(text, GPT2, EOT)


def test_gpt2_pattern_is_gpt2s(tmp_path):
    """bpestore's spelling of GPT-2's regex matches exactly what GPT-2's spelling matches."""
    from bpestore.text import PATTERNS

    for name in ["tinyshakespeare.txt", "russian_1M.txt", "code_python_5M.txt.xz"]:
        text = read_corpus(name)[:300_000] + "  \n \t x \n"
        assert regex.findall(PATTERNS["gpt2"], text) == regex.findall(GPT2, text)


def test_workers_hand_back_the_counts_of_every_task(parallel, tmp_path):
    """Workers keep no counts between tasks: a source's are added up here, from many small ranges."""
    tuning = dataclasses.replace(parallel, chunk_bytes=5_000, cut_window=1_000)
    text = read_corpus("german_1M.txt")[:400_000]
    path = tmp_path / "g.txt"
    path.write_bytes(text.encode())
    batch = only_batch([path], TokenizerSpec(), workers=2, tuning=tuning)
    assert batch.counts == reference_counts(text, GPT2)


@pytest.mark.parametrize(("n_ranges", "workers"), [(0, 2), (1, 16), (3, 2), (200, 2), (200, 16), (800, 16)])
def test_task_spans_cover_every_range_once(n_ranges, workers):
    """Consecutive spans of at most 8 ranges from 0 to n_ranges; the last two per worker alone."""
    spans = task_spans(n_ranges, workers, 8)
    assert [r for first, last in spans for r in range(first, last)] == list(range(n_ranges))
    assert all(1 <= last - first <= 8 for first, last in spans)
    assert all(last - first == 1 for first, last in spans[-min(n_ranges, 2 * workers):])
    assert len(spans) < n_ranges or n_ranges <= 4 * workers


@pytest.mark.parametrize(("n_ranges", "workers", "later"), [(20, 2, 180), (20, 2, 3), (1, 2, 50), (0, 2, 9),
                                                          (20, 16, 2000), (200, 2, 0)])
def test_task_spans_with_files_after_leave_the_tail_to_the_last(n_ranges, workers, later):
    """With ``later`` ranges of files after it, a file's ranges are cut as part of them all: every range
    once, fewer tasks than alone where more follow, single ranges only where the tail reaches it."""
    spans = task_spans(n_ranges, workers, 8, later)
    assert [r for first, last in spans for r in range(first, last)] == list(range(n_ranges))
    assert all(1 <= last - first <= 8 for first, last in spans)
    tail = min(n_ranges, max(0, 2 * workers - later))
    assert all(last - first == 1 for first, last in spans[len(spans) - tail:])
    assert len(spans) <= len(task_spans(n_ranges, workers, 8))
    if later >= 8 * workers * 4 and n_ranges >= 8:
        assert len(spans) == -(-n_ranges // 8)  # as many ranges a task as may be


def test_ten_large_files_at_two_workers_count_as_each_alone(parallel, tmp_path):
    """Several large files, their ranges cut with the files after in view (few tasks, no tail but the
    last's): each file's words and distinct words, and the whole counts, as counted one by one."""
    tuning = dataclasses.replace(parallel, chunk_bytes=4_000, cut_window=1_000, small_source_bytes=10_000)
    text = read_corpus("german_1M.txt")[:300_000]
    paths = text_files(tmp_path, [text[i * 50_000:(i + 1) * 50_000] for i in range(6)])
    batches = list(count_sources([str(p) for p in paths], TokenizerSpec(), workers=2, tuning=tuning))
    sources = [s for b in batches for s in b.sources]
    each = [reference_counts(p.read_text(encoding="utf-8"), GPT2) for p in paths]
    assert [(s.n_words, s.n_distinct) for s in sources] == [(sum(c.values()), len(c)) for c in each]
    assert sum((Counter(b.counts) for b in batches), Counter()) == sum(each, Counter())


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_ten_large_files_sharing_one_table_count_as_each_alone(parallel, workers, tmp_path):
    """Large files each a piece of one table, counted here (in several tasks) or whole by a worker (the
    last ones in ranges): each file's words and distinct words, the whole counts, and the words'
    ordinals in the order the files first show them."""
    tuning = dataclasses.replace(parallel, chunk_bytes=4_000, cut_window=1_000, small_source_bytes=10_000)
    text = read_corpus("russian_1M.txt")[:120_000]
    paths = text_files(tmp_path, [text[i * 12_000:(i + 1) * 12_000] for i in range(10)])
    [batch] = count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers, tuning=tuning)
    texts = [p.read_text(encoding="utf-8") for p in paths]
    each = [reference_counts(t, GPT2) for t in texts]
    assert [(s.n_words, s.n_distinct) for s in batch.sources] == [(sum(c.values()), len(c)) for c in each]
    assert batch.counts == sum(each, Counter())
    first_seen = dict.fromkeys(w.encode() for t in texts for w in regex.findall(GPT2, t))
    assert sorted(batch.firsts, key=batch.firsts.__getitem__) == list(first_seen)


@pytest.mark.parametrize("whole_bytes", [1 << 20, 20_000])
def test_a_large_file_goes_whole_to_a_worker_only_while_files_after_it_wait(parallel, whole_bytes, tmp_path,
                                                                          monkeypatch):
    """At 2 workers: each file up to ``whole_bytes`` with twice its size in files after it is one
    task into the shared table; the others, and the last ones, go in ranges under keys of their own."""
    from bpestore.ingest import pool

    tuning = dataclasses.replace(parallel, chunk_bytes=4_000, cut_window=1_000, small_source_bytes=10_000,
                                 whole_bytes=whole_bytes)
    text = read_corpus("german_1M.txt") * 4  # (the stand-in of a fresh clone is 50,000 characters)
    text = text[:150_000]
    cuts = [0, 30_000, 45_000, 75_000, 90_000, 120_000, 150_000]  # characters: about 30, 15, 30, 15, 30, 30 kB
    paths = text_files(tmp_path, [text[a:b] for a, b in itertools.pairwise(cuts)])
    sent = []
    submit = pool.Pool.submit
    monkeypatch.setattr(pool.Pool, "submit", lambda self, task: sent.append(task) or submit(self, task))
    [batch] = count_sources([str(p) for p in paths], TokenizerSpec(), workers=2, tuning=tuning)
    tasks = {str(p): [t for t in sent if t.pieces[0].name == str(p)] for p in paths}
    sizes = [p.stat().st_size for p in paths]
    for i, p in enumerate(paths):
        whole = sizes[i] <= whole_bytes and sum(sizes[i + 1:]) >= 2 * sizes[i]
        assert [t.shared for t in tasks[str(p)]] == ([True] if whole else [False] * len(tasks[str(p)])), i
        assert whole or len(tasks[str(p)]) > 1
    each = [reference_counts(p.read_bytes().decode(), GPT2) for p in paths]
    assert [(s.n_words, s.n_distinct) for s in batch.sources] == [(sum(c.values()), len(c)) for c in each]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_file_failing_in_a_shared_table_keeps_those_before_it_exactly(parallel, workers, tmp_path):
    """A file counted into the table others share (whole by a worker: many files after it) fails:
    the one before it, in the same table, is counted again and kept exactly; none after it."""
    tuning = dataclasses.replace(parallel, chunk_bytes=4_000, cut_window=1_000, small_source_bytes=10_000)
    text = read_corpus("german_1M.txt")[:240_000]
    paths = []
    for i in range(8):
        paths.append(tmp_path / f"{i}.txt")
        data = text[i * 30_000:(i + 1) * 30_000].encode()
        paths[-1].write_bytes(data[:20_000] + b"\xff" + data[20_000:] if i == 1 else data)
    batches = []
    with pytest.raises(SourceError, match="1.txt"):
        for batch in count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers, tuning=tuning):
            batches.append(batch)
    expected = reference_counts(paths[0].read_text(encoding="utf-8"), GPT2)
    assert [(s.source, s.n_words, s.n_distinct) for b in batches for s in b.sources] == \
        [(str(paths[0]), sum(expected.values()), len(expected))]
    assert sum((Counter(b.counts) for b in batches), Counter()) == expected


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_range_inside_a_task_of_several_fails_the_source(parallel, workers, tmp_path):
    """Ranges sent several to a task: one that cannot be decoded fails the source, and the
    file before it is still counted exactly."""
    tuning = dataclasses.replace(parallel, chunk_bytes=5_000, cut_window=1_000)
    good = tmp_path / "a.txt"
    good.write_text(read_corpus("german_1M.txt")[:100_000], encoding="utf-8")
    bad = tmp_path / "b.txt"
    data = read_corpus("dracula.txt")[:200_000].encode()
    bad.write_bytes(data[:33_000] + b"\xff" + data[33_000:])
    assert len(task_spans(40, workers, 8)) < 40  # the bad byte is in a task of several ranges
    batches = []
    with pytest.raises(SourceError, match="b.txt"):
        for batch in count_sources([str(good), str(bad)], TokenizerSpec(), workers=workers, tuning=tuning):
            batches.append(batch)
    assert [s.source for b in batches for s in b.sources] == [str(good)]
    assert batches[0].counts == reference_counts(good.read_text(encoding="utf-8"), GPT2)


def test_workers_end_before_the_last_batch_is_handed_on(parallel, tmp_path):
    import multiprocessing

    path = tmp_path / "g.txt"
    path.write_text(read_corpus("german_1M.txt")[:300_000], encoding="utf-8")
    seen = []
    for _ in count_sources([str(path)], TokenizerSpec(), workers=2, tuning=parallel,
                           progress=lambda _: seen.append(len(multiprocessing.active_children()))):
        assert multiprocessing.active_children() == []  # their memory is gone while it is written
    assert max(seen) == 2


@pytest.mark.slow
def test_parallel_counts_at_scale(tmp_path):
    """english_medium (11 MB), or english_100M with BPESTORE_SCALE=full, with the default settings."""
    text = read_corpus("english_100M.txt.xz" if SCALE == "full" else "english_medium.txt.xz")
    path = tmp_path / "english.txt"
    path.write_bytes(text.encode())
    batch = only_batch([path], TokenizerSpec(special_tokens=(EOT,)), workers=2)
    assert batch.counts == reference_counts(text, GPT2, EOT)


# -- many small sources ----------------------------------------------------
def test_directory_of_small_files_counts_each_and_all(parallel, tmp_path):
    text = read_corpus("tinyshakespeare.txt")[:300_000]
    folder = tmp_path / "many"
    (folder / "sub").mkdir(parents=True)
    pieces = [text[i:i + 997] for i in range(0, len(text), 997)]
    for i, piece in enumerate(pieces):
        (folder / ("sub" if i % 3 else "") / f"{i:04d}.txt").write_text(piece, encoding="utf-8")
    (folder / "notes.md").write_text("not counted", encoding="utf-8")
    files = expand_paths([folder], glob="*.txt")
    assert len(files) == len(pieces) and files == sorted(files)
    batches = list(count_sources(files, TokenizerSpec(), workers=2, tuning=parallel))
    stats = [s for b in batches for s in b.sources]
    assert [s.source for s in stats] == files
    by_name = {s.source: s for s in stats}
    for i, piece in enumerate(pieces[:50]):
        expected = reference_counts(piece, GPT2)
        s = by_name[str(folder / ("sub" if i % 3 else "") / f"{i:04d}.txt")]
        assert (s.n_words, s.n_distinct, s.size_bytes) == (sum(expected.values()), len(expected),
                                                      len(piece.encode()))
    total = sum((b.counts for b in batches), Counter())
    assert total == sum((reference_counts(p, GPT2) for p in pieces), Counter())


def test_repeated_content_is_skipped_unless_forced(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("same text", encoding="utf-8")
    b.write_text("same text", encoding="utf-8")
    [batch] = count_sources([str(a), str(b)], TokenizerSpec())
    assert [s.skipped for s in batch.sources] == [False, True]
    assert batch.counts == {b"same": 1, b" text": 1}
    [forced] = count_sources([str(a), str(b)], TokenizerSpec(), force=True)
    assert forced.counts == {b"same": 2, b" text": 2}


def test_repeated_large_sources_are_skipped(parallel, tmp_path):
    text = read_corpus("german_1M.txt")[:200_000]
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt.gz"
    a.write_text(text, encoding="utf-8")
    b.write_text(text, encoding="utf-8")
    c.write_bytes(gzip.compress(text.encode()))
    sha = hashlib.sha256(text.encode()).hexdigest()
    batches = list(count_sources([str(a), str(b), str(c)], TokenizerSpec(), workers=2, tuning=parallel))
    assert [(s.sha256, s.skipped) for bt in batches for s in bt.sources] == [
        (sha, False), (sha, True), (sha, True)]
    assert sum((bt.counts for bt in batches), Counter()) == reference_counts(text, GPT2)
    [again] = count_sources([str(b)], TokenizerSpec(), workers=2, already_counted={sha}, tuning=parallel)
    assert again.sources[0].skipped and not again.counts


def test_stdin_and_compressed_sources(tmp_path):
    data = b"Stdin, gzip, xz and bz2 all read the same.\n" * 100
    for suffix, opener in [(".gz", gzip.open), (".xz", lzma.open), (".bz2", bz2.open)]:
        with opener(tmp_path / f"t{suffix}", "wb") as f:
            f.write(data)
    batches = list(count_sources(["-", *(str(tmp_path / f"t{s}") for s in (".gz", ".xz", ".bz2"))],
                                 TokenizerSpec(), stdin=io.BytesIO(data), force=True,
                                 # a batch per source: each one's counts
                                 tuning=IngestTuning(batch_bytes=0, batch_words=0)))
    assert [b.counts for b in batches] == [reference_counts(data.decode(), GPT2)] * 4
    assert {b.sources[0].sha256 for b in batches} == {hashlib.sha256(data).hexdigest()}


def test_progress_reports_bytes_and_sources(tmp_path):
    paths = []
    for i in range(3):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_text("word " * (100 * (i + 1)), encoding="utf-8")
    seen = []
    list(count_sources([str(p) for p in paths], TokenizerSpec(), progress=seen.append))
    total = sum(p.stat().st_size for p in paths)
    assert seen[-1].done == seen[-1].total == total
    assert [s.done for s in seen] == sorted(s.done for s in seen)
    assert seen[-1].sources_done == seen[-1].sources_total == 3


# -- JSON Lines ------------------------------------------------------------
def test_jsonl_counts_each_record_text(parallel, tmp_path):
    docs = [line for line in read_corpus("taylorswift.txt").split("\n") if line][:400]
    path = tmp_path / "docs.jsonl.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        for i, doc in enumerate(docs):
            f.write(json.dumps({"id": i, "text": doc}) + "\n")
    batch = only_batch([path], TokenizerSpec(), workers=2, jsonl_field="text", tuning=parallel)
    expected = sum((reference_counts(doc, GPT2) for doc in docs), Counter())
    assert batch.counts == expected


def test_jsonl_errors_name_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\n{"text": "fine"}\n{"text": broken}\n', encoding="utf-8")
    with pytest.raises(BpestoreError, match="bad.jsonl: line 3 is not valid JSON"):
        list(count_sources([str(path)], TokenizerSpec(), jsonl_field="text"))
    path.write_text('{"text": "fine"}\n{"body": "no text"}\n', encoding="utf-8")
    with pytest.raises(BpestoreError, match="line 2 has no text field 'text'"):
        list(count_sources([str(path)], TokenizerSpec(), jsonl_field="text"))


# -- failures: nothing of the failing source, everything before it ---------
def test_invalid_utf8_deep_in_a_large_source_names_the_offset(parallel, tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a good source\n" * 10_000, encoding="utf-8")
    bad = tmp_path / "bad.txt"
    prefix = "ok text é\n".encode() * 20_000
    bad.write_bytes(prefix + b"\xff tail" + b" more" * 1000)
    batches = []
    with pytest.raises(BpestoreError, match=f"bad.txt is not valid UTF-8 at byte {len(prefix)}") as failed:
        for batch in count_sources([str(good), str(bad)], TokenizerSpec(), workers=2, tuning=parallel):
            batches.append(batch)
    # Found by a worker; raised here with its fields.
    error = failed.value
    assert (type(error), error.source, error.offset) == (SourceError, str(bad), len(prefix))
    assert error.params == ("errors",) and "errors='replace'" in str(error)
    assert [[s.source for s in b.sources] for b in batches] == [[str(good)]]
    for errors, python_errors in [("replace", "replace"), ("skip", "ignore")]:
        [batch] = count_sources([str(bad)], TokenizerSpec(), errors=errors, workers=2, tuning=parallel)
        assert batch.counts == reference_counts(bad.read_bytes().decode("utf-8", python_errors), GPT2)


def test_a_failing_small_source_keeps_the_ones_before_it(parallel, tmp_path):
    names = []
    for i in range(40):
        names.append(tmp_path / f"{i:02d}.jsonl")
        names[-1].write_text(json.dumps({"text": f"doc {i}"}) + "\n", encoding="utf-8")
    names[25].write_text("not json\n", encoding="utf-8")
    kept = []
    with pytest.raises(BpestoreError, match="25.jsonl: line 1 is not valid JSON"):
        for batch in count_sources([str(p) for p in names], TokenizerSpec(), workers=2,
                                   jsonl_field="text", tuning=parallel):
            kept.append(batch)
    assert [s.source for b in kept for s in b.sources] == [str(p) for p in names[:25]]
    assert sum((b.counts for b in kept), Counter()) == Counter(
        {b"doc": 25, **{f" {i}".encode(): 1 for i in range(25)}})


def test_a_source_that_fails_half_way_adds_none_of_its_words(tmp_path):
    good, bad = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    good.write_text('{"text": "kept"}\n', encoding="utf-8")
    bad.write_text('{"text": "lost"}\nnot json\n', encoding="utf-8")
    kept = []
    with pytest.raises(SourceError, match="b.jsonl: line 2 is not valid JSON") as failed:
        for batch in count_sources([str(good), str(bad)], TokenizerSpec(), jsonl_field="text",
                                   tuning=IngestTuning(task_bytes=1)):  # each source a task of its own
            kept.append(batch)
    assert failed.value.source == str(bad)
    assert [s.source for b in kept for s in b.sources] == [str(good)]
    assert sum((b.counts for b in kept), Counter()) == {b"kept": 1}


def test_store_rolls_back_a_source_that_fails_while_written(store, monkeypatch, tmp_path):
    from bpestore.store import count_tables

    one_each = IngestTuning(small_source_bytes=5, batch_bytes=0, batch_words=0)  # each source a transaction of its own
    good, big = tmp_path / "good.txt", tmp_path / "big.txt"
    good.write_text("kept words", encoding="utf-8")
    big.write_text(" ".join(f"w{i}" for i in range(30_000)), encoding="utf-8")
    real = count_tables.upsert_counts

    def fail_half_way(conn, corpus_id, counts, generation, *ordinals):
        half = dict(list(counts.items())[: len(counts) // 2])
        real(conn, corpus_id, half, generation, *ordinals)  # rows really written inside the transaction...
        if len(counts) > 100:
            raise RuntimeError("disk full")  # ...then the failure
        real(conn, corpus_id, {w: n for w, n in counts.items() if w not in half}, generation, *ordinals)
    monkeypatch.setattr(count_tables, "upsert_counts", fail_half_way)
    with pytest.raises(RuntimeError, match="disk full"):
        store.ingest("c", [good, big], tuning=one_each)
    assert store.word_counts("c") == {b"kept": 1, b" words": 1}
    assert [s.source for s in store.corpus_sources("c")] == [str(good)]
    monkeypatch.setattr(count_tables, "upsert_counts", real)
    store.ingest("c", [good, big], tuning=one_each)  # the failed source was not recorded: it is counted now
    assert store.word_counts("c") == (reference_counts(good.read_text(), GPT2)
                                      + reference_counts(big.read_text(), GPT2))


def test_small_sources_sharing_a_transaction_fail_together(store, monkeypatch, tmp_path):
    from bpestore.store import count_tables

    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(f"source {i}", encoding="utf-8")

    def fail(conn, corpus_id, counts, generation, *ordinals):
        raise RuntimeError("disk full")
    monkeypatch.setattr(count_tables, "upsert_counts", fail)
    with pytest.raises(RuntimeError):
        store.ingest("c", paths)
    with store.engine.connect() as conn:  # each source all or nothing: here, nothing
        assert conn.execute(select(func.count()).select_from(ingests)).scalar() == 0


def test_store_failure_in_a_worker_leaves_no_counts(store, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine words " * 20_000 + b"\xc3(" + b" more" * 100)
    with pytest.raises(BpestoreError, match="not valid UTF-8 at byte 220000"):
        store.ingest("c", [bad], workers=2, tuning=PARALLEL)
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(word_counts)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(ingests)).scalar() == 0


# -- the store: re-ingest, force, directories, specs ---------------------------
def test_reingesting_a_directory_is_a_noop_and_force_doubles(store, tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    text = read_corpus("dracula.txt")[:120_000]
    for i in range(0, len(text), 4000):
        (folder / f"{i:06d}.txt").write_text(text[i:i + 4000], encoding="utf-8")
    first = store.ingest("c", [folder], workers=2, tuning=PARALLEL)
    counts = store.word_counts("c")
    assert counts == sum((reference_counts(text[i:i + 4000], GPT2) for i in range(0, len(text), 4000)),
                         Counter())
    again = store.ingest("c", [folder], workers=2, tuning=PARALLEL)
    assert all(r.skipped for r in again) and len(again) == len(first)
    assert store.word_counts("c") == counts
    store.ingest("c", [folder], workers=2, force=True, tuning=PARALLEL)
    assert store.word_counts("c") == {w: 2 * n for w, n in counts.items()}
    assert store.corpus("c").n_sources == 2 * len(first)


def test_a_corpus_refuses_a_source_with_another_spec(store, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("Some Text", encoding="utf-8")
    store.ingest("c", [path], normalizer="lowercase", special_tokens=[EOT])
    for other in [dict(normalizer="nfkc"), dict(special_tokens=["<s>"]), dict(pretokenizer="cl100k"),
                  dict(pattern=r"\w+")]:
        with pytest.raises(BpestoreError, match="words from different specs never mix"):
            store.ingest("c", [path], force=True, **other)
    store.ingest("c", [path], force=True, normalizer="lowercase")  # the same spec: fine
    assert store.word_counts("c") == {b"some": 2, b" text": 2}


def test_corpus_sources_and_top_words(store, tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("b a b c b a", encoding="utf-8")
    store.ingest("c", [path], pretokenizer="whitespace")
    assert store.top_words("c", 2) == [(b"b", 3), (b"a", 2)]
    [source] = store.corpus_sources("c")
    assert (source.source, source.n_words, source.n_distinct) == (str(path), 6, 3)


def test_missing_paths_and_empty_directories_are_user_errors(tmp_path):
    with pytest.raises(BpestoreError, match="file not found"):
        expand_paths([tmp_path / "nope.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(BpestoreError, match="no files matching '\\*.txt' under"):
        expand_paths([tmp_path / "empty"], glob="*.txt")


# -- the command line ----------------------------------------------------------
@pytest.fixture
def cli_run(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bpestore.cli import cli

    monkeypatch.delenv("BPESTORE_DB", raising=False)
    db = str(tmp_path / "cli.db")

    def invoke(*args: str, input: str | None = None):
        return CliRunner().invoke(cli, ["--db", db, *args], input=input, catch_exceptions=False)
    return invoke


def test_cli_ingest_directory_jsonl_and_corpus_show(cli_run, tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.jsonl").write_text('{"text": "the cat"}\n{"text": "the dog"}\n', encoding="utf-8")
    (folder / "sub" / "b.jsonl").write_text('{"text": "the end"}\n', encoding="utf-8")
    (folder / "notes.txt").write_text("not JSON", encoding="utf-8")
    first = cli_run("ingest", "docs", str(folder), "--glob", "*.jsonl", "--jsonl-field", "text")
    assert first.exit_code == 0, first.output
    assert "docs: 2 source(s) counted, 0 skipped, 60 bytes, 6 words" in first.stdout
    assert "4 distinct words in the corpus" in first.stdout
    again = cli_run("ingest", "docs", str(folder), "--glob", "*.jsonl", "--jsonl-field", "text")
    assert "0 source(s) counted, 2 skipped (already in the corpus" in again.stdout
    shown = json.loads(cli_run("corpus", "show", "docs", "--top", "2", "--json").stdout)
    assert shown["top_words"] == [{"word": "the", "count": 3}, {"word": " cat", "count": 1}]
    assert [s["source"] for s in shown["sources"]] == [str(folder / "a.jsonl"),
                                                       str(folder / "sub" / "b.jsonl")]
    assert shown["spec"]["pretokenizer"] == "gpt2" and shown["n_distinct"] == 4
    text = cli_run("corpus", "show", "docs", "--top", "1").stdout
    assert "top 1 words:" in text and "'the'" in text and "sha256" in text
    assert cli_run("ingest", "docs", str(folder), "--quiet", "--force", "--jsonl-field",
                   "text").stdout == ""


def test_cli_train_scheme_options(cli_run, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("low lower lowest " * 10, encoding="utf-8")
    assert cli_run("ingest", "t", str(path), "--pretokenizer", "whitespace").exit_code == 0
    result = cli_run("train", "w", "--corpus", "t", "--merges", "4", "--alphabet", "chars",
                     "--end-of-word", "</w>", "--unk-token", "<unk>")
    assert result.exit_code == 0, result.output
    tokens = json.loads(cli_run("encode", "w", "lowz", "--tokens", "--json").stdout)
    assert [t["token"] for t in tokens][-2:] == ["<unk>", "</w>"]
    bad = cli_run("train", "b", "--corpus", "t", "--merges", "4", "--byte-fallback")
    assert bad.exit_code != 0 and bad.stderr.startswith("Error: ") and "--alphabet chars" in bad.stderr


def test_progress_line_on_a_terminal(monkeypatch):
    from bpestore import Progress
    from bpestore.cli import ProgressLine

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    printer = ProgressLine(True)
    printer.started -= 2.0  # two seconds in
    printer(Progress("ingest", "b.txt", 30_000_000, 60_000_000, "bytes", sources_done=1, sources_total=3))
    line = screen.getvalue()
    assert "50%" in line and "30.0/60.0 MB" in line and "15.0 MB/s" in line and "ETA 0:02" in line
    assert "file 2/3 b.txt" in line
    printer.clear()
    assert screen.getvalue().endswith("\r")
    quiet = ProgressLine(False)
    quiet(Progress("ingest", "b.txt", 1, 1, "bytes", sources_done=1, sources_total=1))
    assert screen.getvalue().count("MB/s") == 1


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker pids from /proc")
def test_workers_end_when_the_ingesting_process_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "big.txt"
    path.write_text("some words here\n" * 400_000, encoding="utf-8")
    script = (
        "import os, sys, time\n"
        "from bpestore import TokenizerSpec\n"
        "from bpestore.ingest import IngestTuning, count_sources\n"
        "def progress(state):\n"
        "    pid = os.getpid()\n"
        "    kids = open(f'/proc/{pid}/task/{pid}/children').read().split()\n"
        "    if kids:\n"
        "        print(' '.join(kids), flush=True)\n"
        "        time.sleep(60)\n"
        "list(count_sources([sys.argv[1]], TokenizerSpec(), workers=2, progress=progress,\n"
        "                   tuning=IngestTuning(parallel_min_bytes=0)))\n")
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE,
                            text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    workers = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(workers) == 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
        except OSError:
            return False
    deadline = time.monotonic() + 20
    while any(running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(running(pid) for pid in workers)


# -- the workers' shared memory budget (merge_bytes) ------------------------------
@pytest.mark.parametrize("workers", [2, 3])
def test_a_tiny_merge_budget_counts_the_same_as_the_default_and_one_worker(store, workers, counting_core, tmp_path):
    """Workers that hand on their counts after every task (a budget of a few bytes)
    and workers that keep them all until the source ends store the same counts as
    one worker, and as a plain Counter; a plain file and a compressed stream."""
    text = read_corpus("dracula.txt")[:400_000] + read_corpus("russian_1M.txt")[:200_000]
    plain = tmp_path / "corpus.txt"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "corpus.txt.xz"
    packed.write_bytes(lzma.compress(text.encode("utf-8")))
    expected = reference_counts(text, GPT2)
    stored = {}
    default = IngestTuning().merge_bytes
    for name, w, merge_bytes in [("one", 1, default), ("default", workers, default),
                                 ("tiny", workers, 1), ("some", workers, 40_000 * workers)]:
        tuning = dataclasses.replace(PARALLEL, merge_bytes=merge_bytes)
        for path in (plain, packed):
            [source] = store.ingest(f"{name}-{path.suffix}", [path], workers=w, tuning=tuning)
            stored[name, path.suffix] = store.word_counts(f"{name}-{path.suffix}")
            assert (source.n_words, source.n_distinct) == (sum(expected.values()), len(expected))
    assert all(counts == expected for counts in stored.values())


def test_a_tiny_merge_budget_over_many_sources_and_a_failure(tmp_path):
    """Large sources after one another (each flushed on its own), small ones
    between them, then a failing source: the ones before it keep exact counts."""
    texts = [read_corpus(n)[:150_000] for n in ("dracula.txt", "german_1M.txt", "tinyshakespeare.txt")]
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_text(text, encoding="utf-8")
        paths.append(tmp_path / f"{i}-small.txt")
        paths[-1].write_text(text[:3000], encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine words " * 20_000 + b"\xc3(")
    tiny = dataclasses.replace(PARALLEL, merge_bytes=1)
    batches = []
    with pytest.raises(SourceError, match="not valid UTF-8"):
        for batch in count_sources([str(p) for p in [*paths, bad]], TokenizerSpec(), workers=3, tuning=tiny):
            batches.append(batch)
    got = sum((b.counts for b in batches), Counter())
    assert got == sum((reference_counts(t, GPT2) + reference_counts(t[:3000], GPT2) for t in texts), Counter())


@pytest.mark.parametrize("sizes", [(1,), (499, 500, 501), (20_001, 3)])
def test_upsert_counts_adds_rows_at_every_batch_size(store, sizes):
    """The bulk upsert (many rows per statement on SQLite, COPY on PostgreSQL) adds
    counts exactly as a Counter does, across its batch and statement boundaries,
    for any bytes (NUL, invalid UTF-8, a word longer than an index entry)."""
    from bpestore.store import corpus_tables, count_tables

    rng = random.Random(len(sizes))
    pool = [b"\x00", b"\xff\xfe", b" a", b"x" * 5000] + [
        bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))) for _ in range(30_000)]
    expected: Counter = Counter()
    with store.writing() as db:
        corpus_id, _ = corpus_tables.lock_corpus(db, "c", TokenizerSpec().to_json())
    for generation, size in enumerate(sizes, start=1):
        counts = {word: rng.randint(1, 2**40) for word in rng.sample(pool, size)}
        expected.update(counts)
        with store.writing() as db:
            count_tables.upsert_counts(db, corpus_id, counts, generation)
        with store.reading() as tx:
            assert count_tables.counts(tx, corpus_id) == expected
        with store.engine.connect() as conn:
            changed = dict(conn.execute(select(word_counts.c.word, word_counts.c.changed_in)).all())
        assert {bytes(w) for w, g in changed.items() if g == generation} == set(counts)


def test_merge_counts_adds_like_a_counter():
    from bpestore.ingest.scheduler import merge_counts

    rng = random.Random(7)
    total: Counter = Counter()
    reference: Counter = Counter()
    for _ in range(20):
        part = {rng.randbytes(2): rng.randint(1, 9) for _ in range(rng.choice([0, 1, 500]))}
        merge_counts(total, part)
        reference.update(part)
        assert total == reference


def test_upsert_counts_without_a_staging_table(store, monkeypatch):
    """Where PostgreSQL refuses this role a temporary table, the rows go by executemany: same counts."""
    from bpestore.store import corpus_tables, count_tables

    monkeypatch.setattr(count_tables, "_staging_table", lambda conn: False)
    with store.writing() as db:
        corpus_id, _ = corpus_tables.lock_corpus(db, "c", TokenizerSpec().to_json())
        count_tables.upsert_counts(db, corpus_id, {b"a": 1, b"b" * 3000: 2}, 1)
        count_tables.upsert_counts(db, corpus_id, {b"a": 5, b"c": 1}, 2)
    with store.reading() as tx:
        assert count_tables.counts(tx, corpus_id) == {b"a": 6, b"b" * 3000: 2, b"c": 1}


@pytest.mark.parametrize("workers", [1, 2])
def test_counts_kept_in_this_process_until_the_flush(workers, tmp_path):
    """One worker (every task counted here), and workers that start only once part
    of the text was counted here (a compressed file holds more text than its size
    suggests): both keep a large source's counts until its flush. Exact counts per
    source, and a failing source after them leaves nothing of it behind."""
    texts = [read_corpus("dracula.txt")[:20_000] * 30, read_corpus("russian_1M.txt")[:100_000]]
    paths = [tmp_path / "0.txt.gz", tmp_path / "1.txt"]
    paths[0].write_bytes(gzip.compress(texts[0].encode("utf-8")))
    paths[1].write_text(texts[1], encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine words " * 5_000 + b"\xc3(")
    expected_bytes = 4 * paths[0].stat().st_size + paths[1].stat().st_size + bad.stat().st_size
    assert expected_bytes < 400_000 < len(texts[0])  # the workers start inside the first source
    # a batch per source
    # (two workers start once 2 x 200,000 bytes were read: (N - 1) / N of the text)
    tuning = dataclasses.replace(PARALLEL, parallel_min_bytes=200_000, batch_bytes=0, batch_words=0)
    batches = []
    with pytest.raises(SourceError, match="not valid UTF-8"):
        for batch in count_sources([str(p) for p in [*paths, bad]], TokenizerSpec(), workers=workers,
                                   tuning=tuning):
            batches.append(batch)
    assert [b.counts for b in batches] == [reference_counts(t, GPT2) for t in texts]
    assert [b.sources[0].n_distinct for b in batches] == [len(reference_counts(t, GPT2)) for t in texts]


@pytest.mark.parametrize(("expected", "workers", "start_at"), [
    (96, 2, 0), (95, 2, 96), (0, 2, 96), (52, 16, 0), (51, 16, 51), (72, 3, 0), (71, 3, 72)])
def test_workers_start_where_all_but_one_share_of_the_text_reaches_the_minimum(expected, workers, start_at):
    """N workers start at once where (N - 1) / N of the expected text is at least
    ``parallel_min_bytes``; otherwise once enough text was read to make it so."""
    assert IngestTuning(parallel_min_bytes=48).workers_start_at(expected, workers) == start_at


@pytest.mark.parametrize("n_shards", [1, 2, 5])
def test_shards_a_worker_hands_on_reduce_to_every_count_in_word_order(n_shards):
    """Counts cut into shards (lone surrogates too) and two workers' shards merged
    shard by shard: each word in one shard only, every count added, each shard's
    result sorted by the UTF-8 bytes."""
    from bpestore.ingest.pool import reduce_shard, shard_counts, shard_of, unpack_shard

    first = Counter({"zeta": 3, " the": 9, "é": 2, "\ud800x": 1, "日本": 4, "a": 5, "\uffff": 6})
    second = Counter({" the": 1, "a": 2, "new": 7, "日本": 1})
    expected = {w.encode("utf-8", "surrogatepass"): n for w, n in (first + second).items()}
    utf8_second = Counter({w.encode("utf-8"): n for w, n in second.items()})  # as the counting core counts
    pieces = [shard_counts(c, n_shards) for c in (Counter(first), utf8_second)]
    for piece in pieces:
        for i, packed in enumerate(piece):
            assert all(shard_of(w, n_shards) == i for w in unpack_shard(packed)[0])
    results = [reduce_shard([(key, piece[i]) for key, piece in zip((1, 2), pieces)], {1, 2})
               for i in range(n_shards)]
    reduced = [r.counts for r in results]
    assert all(list(part) == sorted(part) for part in reduced)
    assert sum(len(part) for part in reduced) == len(expected)
    assert {w: n for part in reduced for w, n in part.items()} == expected
    # Each key's distinct words, a word the two share counted once for each.
    assert sum((Counter(r.distinct) for r in results), Counter()) == {1: len(first), 2: len(second)}


def test_shards_of_several_keys_count_each_keys_distinct_words():
    """Three workers' shards of two keys (sources), one of them not asked for: its
    words are merged but not counted as its own; one key alone in a shard."""
    from bpestore.ingest.pool import reduce_shard, shard_counts

    a1, a2 = Counter({b"x": 1, b"y": 2}), Counter({b"y": 3, b"z": 1})
    b1 = Counter({b"x": 5, b"w": 1})
    pieces = [(1, shard_counts(Counter(a1), 1)[0]), (2, shard_counts(Counter(b1), 1)[0]),
              (1, shard_counts(Counter(a2), 1)[0])]
    both = reduce_shard(pieces, {1, 2})
    assert both.counts == {b"w": 1, b"x": 6, b"y": 5, b"z": 1} and both.distinct == {1: 3, 2: 2}
    assert reduce_shard(pieces, {2}).distinct == {2: 2}
    assert reduce_shard(pieces[:1], {1}).distinct == {1: 2}


def test_packed_shards_hold_long_words_and_the_largest_counts():
    """Lengths and counts of several bytes each (a 300-byte word, 2**63 - 1) pack
    and merge back exactly, compiled as pure; a piece cut short is refused."""
    from bpestore.ingest import pool, shards

    counts = {b"w" * 300: 2**63 - 1, b"": 1, b"x" * 128: 127, b"y": 128}
    compiled = pool.shard_counts(Counter(counts), 1)
    core, pool.COUNT_CORE = pool.COUNT_CORE, None
    try:
        pure = pool.shard_counts(Counter(counts), 1)
        assert pool.reduce_shard([(1, pure[0])], {1}).counts == dict(sorted(counts.items()))
    finally:
        pool.COUNT_CORE = core
    assert compiled == pure and shards.n_packed(pure[0]) == len(counts)
    assert dict(zip(*shards.unpack_shard(pure[0]))) == counts
    assert pool.reduce_shard([(1, compiled[0])], {1}).counts == dict(sorted(counts.items()))
    if core is not None:
        data, lengths, tallies = compiled[0]
        for cut in [(data[:-1], lengths, tallies), (data, lengths[:-1], tallies), (data, lengths, tallies[:-1])]:
            with pytest.raises(ValueError, match="not distinct words in order"):
                core.merge_shard([cut])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.binary(max_size=11), st.integers(1, 2**40), max_size=40), min_size=1, max_size=4),
       st.integers(1, 6))
def test_the_counting_cores_shards_equal_the_pure_pythons(parts, n_shards):
    """The compiled shard / merge give byte for byte the pure-Python packed shards, and
    the same merged counts in the same order (words sharing long prefixes, NULs, empty)."""
    from bpestore.ingest import pool

    if pool.COUNT_CORE is None:
        pytest.skip("the compiled counting core is not built here")
    keys = [k % 2 for k in range(len(parts))]  # two keys, one with several pieces where there are 3+ parts

    def shards_and_merged() -> tuple[list, list]:
        shards = [pool.shard_counts(Counter(part), n_shards) for part in parts]
        return shards, [pool.reduce_shard([(key, piece[i]) for key, piece in zip(keys, shards)], {0, 1})
                        for i in range(n_shards)]
    compiled, merged = shards_and_merged()
    core, pool.COUNT_CORE = pool.COUNT_CORE, None
    try:
        pure, pure_merged = shards_and_merged()
    finally:
        pool.COUNT_CORE = core
    assert compiled == pure
    assert [list(m.counts.items()) for m in merged] == [list(m.counts.items()) for m in pure_merged]
    assert [m.distinct for m in merged] == [m.distinct for m in pure_merged]
    assert sum(map(Counter, parts), Counter()) == Counter({w: n for m in merged for w, n in m.counts.items()})


def test_the_counting_cores_merge_refuses_pieces_out_of_order():
    from bpestore.ingest import pool

    if pool.COUNT_CORE is None:
        pytest.skip("the compiled counting core is not built here")
    with pytest.raises(ValueError, match="in order"):
        pool.COUNT_CORE.merge_shard([pool.pack_shard([b"b", b"a"], [1, 2])])
    with pytest.raises(ValueError, match="in order"):
        pool.COUNT_CORE.merge_shard([(b"ab", (5).to_bytes(8, "little"), (1).to_bytes(8, "little"))])


def test_a_packed_shard_gives_back_its_words_and_counts():
    """Any bytes (NUL, newlines, invalid UTF-8, a long word), huge counts, and no words."""
    from bpestore.ingest.pool import pack_shard, unpack_shard

    words = [b"\x00", b"a\nb", b"\xff\xfe", b" the", b"x" * 70_000, b"\xe6\x97\xa5"]
    counts = [1, 2**62, 3, 4, 5, 6]
    assert unpack_shard(pack_shard(words, counts)) == (words, counts)
    assert unpack_shard(pack_shard([], [])) == ([], [])


@pytest.mark.parametrize("workers", [1, 2])
def test_sources_of_one_call_are_written_together(workers, tmp_path):
    """Large and small sources counted in one call come out as one batch (one transaction,
    one generation) while their distinct words fit ``batch_words``: the counts are the
    sum of each source's, each source keeps its own totals; past the bound, a new batch."""
    texts = [read_corpus("dracula.txt")[:60_000], read_corpus("russian_1M.txt")[:80_000], "small one",
             read_corpus("dracula.txt")[60_000:130_000]]
    paths = [tmp_path / f"{i}.txt" for i in range(len(texts))]
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")
    each = [reference_counts(t, GPT2) for t in texts]
    tuning = dataclasses.replace(PARALLEL, small_source_bytes=1_000)
    batches = list(count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers, tuning=tuning))
    assert len(batches) == 1
    assert batches[0].counts == sum(each, Counter())
    assert [(s.n_words, s.n_distinct) for s in batches[0].sources] == [(c.total(), len(c)) for c in each]
    # Words no two sources share: the first two fit the bound, the third does not.
    def word(prefix: str, i: int) -> str:  # letters only: one pre-token
        return prefix + "".join(chr(ord("a") + int(d)) for d in str(i))
    sizes = [("p", 900), ("q", 700), ("r", 2), ("s", 800)]
    texts = [" ".join(word(prefix, i) for i in range(n)) for prefix, n in sizes]
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")
    each = [reference_counts(t, GPT2) for t in texts]
    batches = list(count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers,
                                 tuning=dataclasses.replace(tuning, batch_words=len(each[0]) + len(each[1]))))
    assert [[s.source for s in b.sources] for b in batches] == [[str(paths[0]), str(paths[1])],
                                                               [str(paths[2]), str(paths[3])]]
    assert [b.counts for b in batches] == [each[0] + each[1], each[2] + each[3]]


def test_an_ingest_of_many_files_is_one_generation(store, tmp_path):
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(read_corpus("dracula.txt")[i * 50_000:(i + 1) * 50_000], encoding="utf-8")
    store.ingest("c", paths, workers=2, tuning=dataclasses.replace(PARALLEL, small_source_bytes=1_000))
    assert [g.generation for g in store.corpus_log("c")] == [1]
    assert {s.generation for s in store.corpus_sources("c")} == {1}
    assert store.word_counts("c") == sum((reference_counts(p.read_text(encoding="utf-8"), GPT2) for p in paths),
                                         Counter())


@pytest.mark.parametrize("workers", [1, 2])
def test_small_sources_before_a_failing_one_keep_exact_counts(workers, tmp_path):
    """The workers keep a group of small sources' counts together; one that fails leaves
    the sources before it with exactly their own counts, and nothing of itself."""
    texts = [read_corpus("dracula.txt")[i * 3_000:(i + 1) * 3_000] for i in range(4)]
    paths = [tmp_path / f"{i}.txt" for i in range(5)]
    for path, text in zip(paths, texts):
        path.write_text(text, encoding="utf-8")
    paths[4].write_bytes(texts[0].encode() + b"\xc3(")
    tuning = dataclasses.replace(PARALLEL, task_bytes=1)  # each source a task of its own
    kept = []
    with pytest.raises(SourceError, match="not valid UTF-8"):
        for batch in count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers, tuning=tuning):
            kept.append(batch)
    assert [s.source for b in kept for s in b.sources] == [str(p) for p in paths[:4]]
    assert sum((b.counts for b in kept), Counter()) == sum((reference_counts(t, GPT2) for t in texts), Counter())


def test_a_counting_process_that_died_is_a_bpestore_error():
    """The pool imports multiprocessing only where workers start; a broken pool's error
    (a worker killed) still becomes the one-line BpestoreError."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from bpestore.ingest.pool import Pool

    future: Future = Future()
    future.set_exception(BrokenProcessPool("A child process terminated abruptly"))
    with pytest.raises(BpestoreError, match="a counting process died"):
        Pool.take(future)


def test_a_small_ingest_starts_no_process_machinery(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("a few words", encoding="utf-8")
    script = ("import sys, bpestore; bpestore.open(sys.argv[1]).ingest('c', [sys.argv[2]]); "
              "print(sorted(m for m in ('multiprocessing', 'concurrent.futures.process', 'ctypes') "
              "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s.db"), str(path)], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def _cut_at_safe_places(text: str, step: int) -> list[str]:
    """Text cut about every ``step`` characters after a letter or digit, at a whitespace
    before a non-space: no word of GPT-2's pattern spans such a place."""
    cuts = [0]
    for m in regex.finditer(r"(?<=[\p{L}\p{N}])\s(?=\S)", text):
        if m.start() - cuts[-1] >= step:
            cuts.append(m.start())
    return [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)])]


@pytest.mark.parametrize("workers", [1, 3])
def test_many_small_files_write_the_counts_of_one_file_in_one_generation(workers, db_url, tmp_path):
    """Small files of every string kind (ASCII, Latin-1, CJK, emoji), several to a task, at 1 and
    3 workers (3: the workers' counts come back in shards), and the same bytes as one file:
    each ingest call is one generation, with the reference's counts and each file's words."""
    import bpestore

    base = read_corpus("tinyshakespeare.txt")[:120_000]
    lines = base.split("\n")
    extra = ["Price £5 ×2 ½ ÿ", "中文 字 the", "emoji 😀 the", EOT]
    text = "\n".join(line + (f" {extra[i % 4]}" if i % 7 == 0 else "") for i, line in enumerate(lines))
    pieces = _cut_at_safe_places(text, 1_500)
    assert len(pieces) > 50 and "".join(pieces) == text
    folder = tmp_path / "many"
    folder.mkdir()
    for i, piece in enumerate(pieces):
        (folder / f"{i:04d}.txt").write_text(piece, encoding="utf-8")
    whole = tmp_path / "whole.txt"
    whole.write_text(text, encoding="utf-8")
    expected = reference_counts(text, GPT2, EOT)
    assert sum((reference_counts(p, GPT2, EOT) for p in pieces), Counter()) == expected
    tuning = dataclasses.replace(PARALLEL, task_bytes=8_000)  # tasks of several files each
    with bpestore.open(db_url) as store:
        for corpus, paths in (("many", [folder]), ("one", [whole])):
            sources = store.ingest(corpus, paths, workers=workers, tuning=tuning, special_tokens=[EOT])
            assert [g.generation for g in store.corpus_log(corpus)] == [1]
            assert store.word_counts(corpus) == expected
            assert sum(s.n_words for s in sources) == sum(expected.values())
        by_name = {Path(s.source).name: s for s in store.corpus_sources("many")}
        for i, piece in enumerate(pieces):
            own = reference_counts(piece, GPT2, EOT)
            assert (by_name[f"{i:04d}.txt"].n_words, by_name[f"{i:04d}.txt"].n_distinct) == \
                (sum(own.values()), len(own))


# -- several sources counted together: each source's own words, none twice ---------
def _mixed_sources(tmp_path):
    """Large and small files cut from one text (words shared across them), a large one
    repeating an earlier one, a compressed one repeating an earlier large one (known
    to repeat only once read), a small one repeating an earlier small one, an empty one."""
    text = read_corpus("tinyshakespeare.txt")[:240_000]
    cuts = [0, 41_000, 43_000, 90_000, 95_500, 96_000, 150_000, 151_000, 240_000]
    texts = [text[a:b] for a, b in itertools.pairwise(cuts)]
    texts[3:3] = [texts[0]]  # a large repeat
    texts[6:6] = [texts[1], "", texts[2]]  # a small repeat, an empty file, a compressed repeat
    paths = []
    for i, t in enumerate(texts):
        paths.append(tmp_path / f"{i:02d}.txt")
        paths[-1].write_text(t, encoding="utf-8")
    paths[8] = paths[8].rename(paths[8].with_suffix(".txt.gz"))
    paths[8].write_bytes(gzip.compress(texts[8].encode()))
    return texts, paths


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("merge_bytes", [64 << 20, 1])  # 1: each worker hands on after every task
@pytest.mark.parametrize("platform", ["linux", "other"])  # other: workers keep no counts, each task's come back
def test_sources_counted_together_keep_each_ones_words_and_distinct_words(tmp_path, monkeypatch, workers,
                                                                          merge_bytes, platform):
    import types

    from bpestore.ingest import pool

    if platform != "linux":
        monkeypatch.setattr(pool, "sys", types.SimpleNamespace(platform=platform))
    texts, paths = _mixed_sources(tmp_path)
    tuning = dataclasses.replace(PARALLEL, chunk_bytes=8_000, merge_bytes=merge_bytes)
    for order in (paths, paths[::-1]):
        batches = list(count_sources([str(p) for p in order], TokenizerSpec(), workers=workers, tuning=tuning))
        assert len(batches) == 1 and len({id(s) for s in batches[0].sources}) == len(paths)
        by_name = {s.source: s for s in batches[0].sources}
        seen, kept = set(), Counter()
        for p in order:  # the first of two equal contents counts, in the order given
            t = texts[paths.index(p)]
            s = by_name[str(p)]
            expected = reference_counts(t, GPT2)
            assert s.sha256 == hashlib.sha256(t.encode()).hexdigest() and s.size_bytes == len(t.encode())
            if t in seen:
                assert (s.skipped, s.n_words, s.n_distinct) == (True, 0, 0), p
                continue
            seen.add(t)
            kept += expected
            assert (s.skipped, s.n_words, s.n_distinct) == (False, sum(expected.values()), len(expected)), p
        assert batches[0].counts == kept


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_source_failing_among_large_ones_keeps_those_before_it_exactly(tmp_path, workers):
    texts, paths = _mixed_sources(tmp_path)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(texts[2].encode() + b"\xc3(" + texts[4].encode())
    large = [p for p, t in zip(paths, texts) if len(t.encode()) > PARALLEL.small_source_bytes]
    order = [str(p) for p in [large[0], large[1], bad, large[3]]]
    tuning = dataclasses.replace(PARALLEL, chunk_bytes=8_000)
    batches = []
    with pytest.raises(SourceError, match="bad.txt is not valid UTF-8"):
        for batch in count_sources(order, TokenizerSpec(), workers=workers, tuning=tuning):
            batches.append(batch)
    sources = [s for b in batches for s in b.sources]
    assert [s.source for s in sources] == order[:2]
    for s, p in zip(sources, order):
        expected = reference_counts(Path(p).read_text(encoding="utf-8"), GPT2)
        assert (s.n_words, s.n_distinct) == (sum(expected.values()), len(expected))
    assert sum((b.counts for b in batches), Counter()) == sum(
        (reference_counts(Path(p).read_text(encoding="utf-8"), GPT2) for p in order[:2]), Counter())


@pytest.mark.parametrize("workers", [1, 2])
def test_a_small_file_changed_before_it_is_read_fails_after_those_before_it(tmp_path, workers):
    texts = [f"file {i} has words of its own, {'and more ' * i}" for i in range(5)]
    paths = [tmp_path / f"{i}.txt" for i in range(5)]
    for p, t in zip(paths, texts):
        p.write_text(t, encoding="utf-8")

    def change_the_third(progress):
        if progress.name == str(paths[0]):
            with open(paths[2], "a", encoding="utf-8") as f:
                f.write(" written meanwhile")

    batches = []
    with pytest.raises(SourceError, match="2.txt changed while it was read"):
        for batch in count_sources([str(p) for p in paths], TokenizerSpec(), workers=workers,
                                   progress=change_the_third, tuning=PARALLEL):
            batches.append(batch)
    assert [s.source for b in batches for s in b.sources] == [str(p) for p in paths[:2]]
    assert sum((b.counts for b in batches), Counter()) == \
        reference_counts(texts[0], GPT2) + reference_counts(texts[1], GPT2)


@pytest.mark.parametrize("change", ["none", "grown", "shrunk", "same size", "unlisted", "gone"])
def test_a_small_file_is_read_in_one_read_and_refused_where_it_changed_since_listed(tmp_path, change):
    """``read_file``: one read of the size listed gives every byte; a file grown (read to its
    end), shrunk or rewritten since it was listed is refused; without a stamp, read to its end."""
    import os

    from bpestore.ingest.pieces import read_file
    from bpestore.sources import file_stamp

    path = tmp_path / "a.txt"
    data = b"x" * 70_000 + "é".encode()
    path.write_bytes(data)
    stamp = None if change == "unlisted" else file_stamp(str(path))
    if change == "grown":
        path.write_bytes(data + b"y" * (3 << 20))
    elif change == "shrunk":
        path.write_bytes(data[:-5])
    elif change == "same size":
        os.utime(path, ns=(1, 1))
    elif change == "gone":
        path.unlink()
    if change in ("none", "unlisted"):
        assert read_file(str(path), stamp) == data
    else:
        with pytest.raises(SourceError, match="cannot read" if change == "gone" else "changed while it was read"):
            read_file(str(path), stamp)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_large_file_changed_while_counted_with_others_fails_after_those_before_it(tmp_path, workers):
    texts, paths = _mixed_sources(tmp_path)
    large = [p for p, t in zip(paths, texts) if len(t.encode()) > PARALLEL.small_source_bytes and p.suffix == ".txt"]
    order = [str(p) for p in large[:3]]
    expected = [reference_counts(Path(p).read_text(encoding="utf-8"), GPT2) for p in order]

    def change_the_second(progress):
        if progress.name == order[0] and progress.sources_done == 1:
            with open(order[1], "a", encoding="utf-8") as f:
                f.write(" written meanwhile")

    batches = []
    with pytest.raises(SourceError, match=f"{large[1].name} changed while it was read"):
        for batch in count_sources(order, TokenizerSpec(), workers=workers, progress=change_the_second,
                                   tuning=dataclasses.replace(PARALLEL, chunk_bytes=8_000)):
            batches.append(batch)
    [kept] = [s for b in batches for s in b.sources]
    assert (kept.source, kept.n_words, kept.n_distinct) == (order[0], sum(expected[0].values()), len(expected[0]))
    assert sum((b.counts for b in batches), Counter()) == expected[0]


def test_a_large_files_hash_read_in_a_thread_is_its_first_size_bytes(tmp_path, monkeypatch):
    """``FileHash``: hashlib's sha256 of the file's first ``size`` bytes, read a block at a time (smaller
    blocks here: several), however the reads fall; an unreadable file is a ``SourceError`` once asked."""
    from bpestore.ingest.pieces import FileHash

    monkeypatch.setattr(FileHash, "BLOCK", 1000)
    data = random.Random(4).randbytes(10_500)
    path = tmp_path / "big.txt"
    path.write_bytes(data)
    for size in (0, 1, 999, 1000, 1001, 10_000, 10_500):
        with FileHash(str(path), size, hashlib.sha256()) as hashing:
            assert hashing.hexdigest() == hashlib.sha256(data[:size]).hexdigest()
    with FileHash(str(path), 10_500, None):  # nothing to hash: no thread
        pass
    with FileHash(str(tmp_path / "missing.txt"), 10, hashlib.sha256()) as hashing:
        with pytest.raises(SourceError, match="cannot read"):
            hashing.hexdigest()
