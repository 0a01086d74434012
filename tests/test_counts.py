"""Counts files (counting beyond one machine): ``bpestore count`` writes the counts of
sources as Parquet; ``bpestore ingest C --counts FILE...`` adds them as one generation.
The reference is a plain ``ingest`` of the same files (itself checked against
``collections.Counter`` over the GPT-2 regex in test_ingest.py), and for one file here
``regex.findall`` with tiktoken's GPT-2 pattern directly."""

from __future__ import annotations

import json
import lzma
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import CliRun, assert_error, corpus_path, tiktoken_pattern

pytest.importorskip("pyarrow")

SPECIAL = "<|endoftext|>"


@pytest.fixture
def sources(tmp_path) -> Path:
    """A folder of sources: shared corpora slices, a compressed one, special tokens, a repeat."""
    folder = tmp_path / "src"
    folder.mkdir()
    for name in ("dracula.txt", "german_1M.txt", "russian_1M.txt", "tinyshakespeare.txt"):
        text = corpus_path(name).read_bytes()[:400_000]
        (folder / name).write_bytes(text.decode("utf-8", "ignore").encode())
    story = corpus_path("tinystories_sample.txt").read_text(encoding="utf-8")[:300_000]
    (folder / "stories.txt.xz").write_bytes(lzma.compress(story.replace("\n\n", f"\n{SPECIAL}\n").encode()))
    for i in range(30):  # small files: counted together
        (folder / f"small{i:02d}.txt").write_text(f"small file {i} says hello {SPECIAL} again {i * i}\n" * (i + 1))
    (folder / "repeat.txt").write_bytes((folder / "small03.txt").read_bytes())
    return folder


def _snapshot(store, corpus: str) -> tuple:
    try:
        info = store.corpus(corpus)
    except Exception:  # noqa: BLE001 - the corpus is not there: that is the state
        return (None,)
    return (info.n_sources, info.size_bytes, info.n_words, info.n_distinct, info.generation,
            store.word_counts(corpus), [s.sha256 for s in store.corpus_sources(corpus)])


def test_count_then_ingest_equals_plain_ingest(db_url, sources, tmp_path):
    """Two counts files (sources split between them) ingested in one call give exactly a plain
    ingest's counts and totals, in one generation; on SQLite and PostgreSQL."""
    from bpestore import open as open_store
    from bpestore.counts import count_files, read_counts

    files = sorted(str(p) for p in sources.iterdir())
    first = count_files(files[:9], tmp_path / "a.parquet", special_tokens=[SPECIAL], workers=2)
    second = count_files(files[9:], tmp_path / "b.parquet", special_tokens=[SPECIAL], workers=1)
    assert len(first.sources) + len(second.sources) == len(files) - 1  # the repeat is left out
    with open_store(db_url) as store:
        store.ingest("plain", [sources], special_tokens=[SPECIAL], workers=2)
        results = store.ingest_counts("counted", [tmp_path / "a.parquet", tmp_path / "b.parquet"])
        assert {r.generation for r in results} == {1}
        plain, counted = _snapshot(store, "plain"), _snapshot(store, "counted")
        assert counted[5] == plain[5]  # word by word
        assert counted[:4] == plain[:4]  # sources, bytes, words, distinct
        assert sorted(counted[6]) == sorted(plain[6])
        assert store.corpus("counted").spec == store.corpus("plain").spec
        assert store.corpus("counted").generation == 1
    info, counts = read_counts(tmp_path / "a.parquet")
    assert info.n_words == sum(counts.values()) == first.n_words
    assert {s.sha256 for s in info.sources} == {s.sha256 for s in first.sources}


def test_counts_match_an_independent_count(tmp_path):
    """One file's counts file against regex.findall with tiktoken's GPT-2 pattern."""
    regex = pytest.importorskip("regex")
    from bpestore.counts import count_files, read_counts

    text = corpus_path("tinyshakespeare.txt").read_text(encoding="utf-8")
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8")
    count_files([path], tmp_path / "t.parquet", workers=2)
    _, counts = read_counts(tmp_path / "t.parquet")
    expected = Counter(w.encode() for w in regex.findall(tiktoken_pattern("gpt2"), text))
    assert counts == dict(expected)


def test_cli_reingest_is_a_no_op(db_url, sources, tmp_path):
    run = CliRun(db_url)
    out = tmp_path / "all.parquet"
    result = run("count", str(sources), "--out", str(out), "--special-token", SPECIAL, "--workers", "2")
    assert result.exit_code == 0, result.output
    assert run("ingest", "c", "--counts", str(out)).exit_code == 0
    from bpestore import open as open_store

    with open_store(db_url) as store:
        before = _snapshot(store, "c")
    again = run("ingest", "c", "--counts", str(out), str(out))
    assert again.exit_code == 0, again.output
    assert "0 source(s) counted" in again.output and "skipped" in again.output
    with open_store(db_url) as store:
        assert _snapshot(store, "c") == before
        assert len(store.corpus_log("c")) == 1
    # A plain ingest of the same files afterwards skips them all too: idempotent by digest.
    plain = run("ingest", "c", str(sources), "--special-token", SPECIAL)
    assert plain.exit_code == 0 and "0 source(s) counted" in plain.output
    # A counts file holding some sources already in and some new ones cannot be split: refused.
    extra = tmp_path / "extra.txt"
    extra.write_text("brand new words here\n")
    mixed = tmp_path / "mixed.parquet"
    assert run("count", str(sources / "dracula.txt"), str(extra), "--out", str(mixed),
               "--special-token", SPECIAL).exit_code == 0
    assert_error(run("ingest", "c", "--counts", str(mixed)), "cannot be split")
    with open_store(db_url) as store:
        assert _snapshot(store, "c") == before


def test_spec_mismatch_refused(db_url, sources, tmp_path):
    run = CliRun(db_url)
    assert run("ingest", "c", str(sources / "dracula.txt")).exit_code == 0
    out = tmp_path / "ws.parquet"
    counted = run("count", str(sources / "german_1M.txt"), "--out", str(out), "--pretokenizer", "whitespace")
    assert counted.exit_code == 0
    from bpestore import open as open_store

    with open_store(db_url) as store:
        before = _snapshot(store, "c")
    assert_error(run("ingest", "c", "--counts", str(out)), "pretokenizer")
    # Two files of different specs in one call: refused before anything is written.
    gpt2 = tmp_path / "gpt2.parquet"
    assert run("count", str(sources / "tinyshakespeare.txt"), "--out", str(gpt2)).exit_code == 0
    assert_error(run("ingest", "new", "--counts", str(gpt2), str(out)), "pretokenizer")
    # Spec options beside --counts: the spec is the file's.
    assert_error(run("ingest", "c", "--counts", str(gpt2), "--pretokenizer", "gpt2"), "--counts")
    with open_store(db_url) as store:
        assert _snapshot(store, "c") == before
        assert _snapshot(store, "new") == (None,)


def test_damaged_and_foreign_files_refused(db_url, sources, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = CliRun(db_url)
    good = tmp_path / "good.parquet"
    assert run("count", str(sources / "dracula.txt"), "--out", str(good)).exit_code == 0
    data = good.read_bytes()
    cases = {}
    cases["truncated"] = tmp_path / "truncated.parquet"
    cases["truncated"].write_bytes(data[: len(data) // 2])
    cases["text"] = tmp_path / "text.parquet"
    cases["text"].write_text("word,count\nthe,3\n")
    cases["foreign"] = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"word": [b"the"], "count": [3]}), cases["foreign"])
    table = pq.read_table(good)
    counts = table.column("count").to_pylist()
    counts[0] += 1
    cases["tampered"] = tmp_path / "tampered.parquet"
    pq.write_table(table.set_column(1, "count", pa.array(counts, pa.int64())), cases["tampered"])
    meta = json.loads(table.schema.metadata[b"bpestore.counts"])
    meta["spec"] = "{not json"
    cases["bad_meta"] = tmp_path / "bad_meta.parquet"
    pq.write_table(table.replace_schema_metadata({b"bpestore.counts": json.dumps(meta)}), cases["bad_meta"])
    for case, value in (("meta_null", "null"), ("meta_list", "[1, 2]"),
                        ("meta_huge", json.dumps(meta).replace(f'"n_words": {meta["n_words"]}', '"n_words": 1e999'))):
        cases[case] = tmp_path / f"{case}.parquet"
        pq.write_table(table.replace_schema_metadata({b"bpestore.counts": value}), cases[case])
    expected = {"meta_null": "metadata is damaged", "meta_list": "metadata is damaged",
                "meta_huge": "metadata is damaged",
                "truncated": "not a readable Parquet file", "text": "not a readable Parquet file",
                "foreign": "not a bpestore counts file", "tampered": "do not match its digest",
                "bad_meta": "metadata is damaged"}
    assert run("ingest", "c", "--counts", str(good)).exit_code == 0
    from bpestore import open as open_store

    with open_store(db_url) as store:
        before = _snapshot(store, "c")
    for name, path in cases.items():
        # With a good new file before it: nothing of the call is written.
        fresh = tmp_path / f"fresh_{name}.parquet"
        assert run("count", str(sources / "german_1M.txt"), "--out", str(fresh)).exit_code == 0
        assert_error(run("ingest", "c", "--counts", str(fresh), str(path)), expected[name])
    assert_error(run("ingest", "c", "--counts", str(tmp_path / "missing.parquet")), "not found")
    with open_store(db_url) as store:
        assert _snapshot(store, "c") == before


def test_a_relabelled_spec_is_refused_for_a_new_corpus(db_url, sources, tmp_path):
    """The spec in a counts file's metadata is covered by its check; a file without
    the check (written before it) is read when its words are its spec's, refused when not."""
    import pyarrow.parquet as pq

    from bpestore import TokenizerSpec

    run = CliRun(db_url)
    good = tmp_path / "good.parquet"
    assert run("count", str(sources / "dracula.txt"), "--out", str(good)).exit_code == 0  # the gpt2 pattern
    table = pq.read_table(good)
    meta = json.loads(table.schema.metadata[b"bpestore.counts"])
    whitespace = TokenizerSpec(pretokenizer="whitespace").to_json()
    legacy = {k: v for k, v in meta.items() if k != "check"}
    cases = {"relabelled": ({**meta, "spec": whitespace}, "does not match its check"),
             "relabelled_unchecked": ({**legacy, "spec": whitespace}, "not a word of its spec")}
    for name, (changed, message) in cases.items():
        path = tmp_path / f"{name}.parquet"
        pq.write_table(table.replace_schema_metadata({b"bpestore.counts": json.dumps(changed)}), path)
        assert_error(run("ingest", f"new_{name}", "--counts", str(path)), message)
    unchecked = tmp_path / "unchecked.parquet"
    pq.write_table(table.replace_schema_metadata({b"bpestore.counts": json.dumps(legacy)}), unchecked)
    assert run("ingest", "old", "--counts", str(unchecked)).exit_code == 0
    assert run("ingest", "fresh", "--counts", str(good)).exit_code == 0
    from bpestore import open as open_store

    with open_store(db_url) as store:
        assert store.word_counts("old") == store.word_counts("fresh")
        assert {c.name for c in store.corpora()} == {"old", "fresh"}


def test_count_refuses_to_overwrite(tmp_path, sources):
    run = CliRun(str(tmp_path / "unused.db"))
    out = tmp_path / "c.parquet"
    out.write_text("mine")
    assert_error(run("count", str(sources / "dracula.txt"), "--out", str(out)), "--force")
    assert out.read_text() == "mine"
    assert run("count", str(sources / "dracula.txt"), "--out", str(out), "--force").exit_code == 0
    assert_error(run("count", str(sources / "dracula.txt"), "--out", str(tmp_path / "no" / "c.parquet")),
                 "does not exist")
    assert_error(run("count", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "d.parquet")), "not found")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
    assert not (tmp_path / "unused.db").exists()  # count needs no database


def test_missing_extra_is_one_error_line(tmp_path, monkeypatch, sources):
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    run = CliRun(str(tmp_path / "x.db"))
    assert_error(run("count", str(sources / "dracula.txt"), "--out", str(tmp_path / "c.parquet")),
                 "pip install 'bpestore[parquet]'")
    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    assert_error(run("ingest", "c", "--counts", str(tmp_path / "d.parquet")), "bpestore[parquet]")
    from bpestore.errors import MissingExtraError

    with pytest.raises(MissingExtraError) as caught:
        from bpestore.counts import read_counts

        read_counts(tmp_path / "c.parquet")
    assert caught.value.extra == "parquet"
