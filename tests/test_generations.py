"""Corpus generations: every ingest makes one, versions pin theirs, pinned counts stay
readable, resume and verify work on them; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from sqlalchemy import func, select, text, update

from bpestore import ConflictError, InvalidArgumentError, NotFoundError
from bpestore.store.schema import merges, word_count_history
from bpestore.trainer import train_word_counts

from .conftest import CliRun, assert_error, read_corpus

EOT = "<|endoftext|>"


class Stop(Exception):
    pass


def stop_after(n: int):
    def progress(state):
        if state.done >= n:
            raise Stop
    return progress


def history_rows(store) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(word_count_history)).scalar_one()


@pytest.fixture
def parts(tmp_path):
    """Three slices of Shakespeare as files a, b, c."""
    text_ = read_corpus("tinyshakespeare.txt")
    paths = []
    for i, name in enumerate("abc"):
        path = tmp_path / f"{name}.txt"
        path.write_text(text_[i * 40_000:(i + 1) * 40_000], encoding="utf-8")
        paths.append(path)
    return paths


def counted(*paths) -> Counter:
    import regex

    from .conftest import tiktoken_pattern

    pattern = regex.compile(tiktoken_pattern("gpt2"))
    total: Counter = Counter()
    for p in paths:
        total.update(w.encode() for w in pattern.findall(p.read_text(encoding="utf-8")))
    return total


def test_every_ingest_makes_a_generation(store, parts):
    a, b, c = parts
    [first] = store.ingest("c", [a], special_tokens=[EOT])
    assert first.generation == 1
    store.ingest("c", [b])
    store.ingest("c", [a])  # skipped: no generation
    store.ingest("c", [c])
    log = store.corpus_log("c")
    assert [g.ref for g in log] == ["c@1", "c@2", "c@3"]
    assert [g.n_sources for g in log] == [1, 2, 3] and [g.sources_added for g in log] == [1, 1, 1]
    assert [g.kept for g in log] == [False, False, True]
    assert log[-1] == store.corpus("c") == store.corpus("c@3")
    assert log[1] == store.corpus("c@2")
    assert log[0].n_distinct == len(counted(a)) and log[-1].n_words == sum(counted(a, b, c).values())
    assert [s.generation for s in store.corpus_sources("c@2")] == [1, 2]
    assert store.word_counts("c@3") == store.word_counts("c") == counted(a, b, c)
    assert len({g.digest for g in log}) == 3
    assert history_rows(store) == 0  # nothing pinned: nothing copied


def test_pinned_generations_stay_readable(store, parts):
    a, b, c = parts
    store.ingest("c", [a], special_tokens=[EOT])
    v1 = store.train("en", corpus="c", vocab_size=300)
    assert (v1.corpus_generation, v1.corpus_ref) == (1, "c@1")
    store.ingest("c", [b])
    store.ingest("c", [c])
    assert store.word_counts("c@1") == counted(a)
    assert store.word_counts("c@3") == counted(a, b, c)
    assert store.top_words("c@1", 5) == sorted(counted(a).items(), key=lambda x: (-x[1], x[0]))[:5]
    log = store.corpus_log("c")
    assert [(g.kept, g.pinned_by) for g in log] == [(True, ("en@1",)), (False, ()), (True, ())]
    with pytest.raises(NotFoundError, match=r"c@2 are not kept \(kept: c@1, c@3\)"):
        store.word_counts("c@2")
    with pytest.raises(NotFoundError, match=r"no generation 99 \(generations: c@1 to c@3\)"):
        store.word_counts("c@99")
    with pytest.raises(InvalidArgumentError, match="generation number"):
        store.word_counts("c@x")
    # The past generation trains like its counts, and its digest is the one it had.
    past = store.train("old", corpus="c@1", vocab_size=400)
    _, expected = train_word_counts(counted(a), vocab_size=400, special_tokens=[EOT])
    assert store.tokenizer(past.ref).merges == expected
    assert past.corpus_digest == log[0].digest


def test_corpus_diff(store, parts):
    a, b, _ = parts
    store.ingest("c", [a])
    store.train("en", corpus="c", merges=5)
    store.ingest("c", [b])
    d = store.corpus_diff("c@1", "c@2", limit=3)
    before, after = counted(a), counted(a, b)
    assert d["new_words"] == len(after.keys() - before.keys()) and d["vanished_words"] == 0
    assert len(d["new"]) == 3 and len(d["changed"]) == 3
    biggest = max((w for w in before if after[w] != before[w]), key=lambda w: (after[w] - before[w], -len(w)))
    assert d["changed"][0]["delta"] == after[biggest] - before[biggest]
    assert (d["from"]["ref"], d["to"]["ref"]) == ("c@1", "c@2")


def test_compact_frees_only_what_no_version_pins(store, parts):
    a, b, c = parts
    store.ingest("c", [a])
    store.train("x", corpus="c", merges=3)
    store.ingest("c", [b])
    store.train("y", corpus="c", merges=3)
    store.ingest("c", [c])
    rows = history_rows(store)
    assert rows > 0
    assert store.compact("c") == {"corpus": "c", "rows_freed": 0, "bytes_freed": 0, "kept": [1, 2, 3]}
    with store.engine.begin() as conn:  # x@1 goes (as a future `rm` would)
        conn.execute(text("DELETE FROM merges WHERE version_id = (SELECT id FROM versions WHERE number = 1 "
                          "AND tokenizer_id = (SELECT id FROM tokenizers WHERE name = 'x'))"))
        conn.execute(text("DELETE FROM tokens WHERE version_id = (SELECT id FROM versions WHERE number = 1 "
                          "AND tokenizer_id = (SELECT id FROM tokenizers WHERE name = 'x'))"))
        conn.execute(text("DELETE FROM versions WHERE tokenizer_id = (SELECT id FROM tokenizers WHERE name = 'x')"))
    result = store.compact("c")
    assert result["rows_freed"] > 0 and result["bytes_freed"] > 0 and result["kept"] == [2, 3]
    assert history_rows(store) == rows - result["rows_freed"]
    assert store.word_counts("c@2") == counted(a, b)
    with pytest.raises(NotFoundError, match="c@1 are not kept"):
        store.word_counts("c@1")


def test_verify_and_a_tampered_merge(store, parts):
    a, b, _ = parts
    store.ingest("c", [a], special_tokens=[EOT])
    store.train("en", corpus="c", vocab_size=320)
    store.ingest("c", [b])
    child = store.train("en", corpus="c", vocab_size=360, parent="en@1")
    assert child.corpus_generation == 2
    for ref in ("en@1", "en@2"):
        result = store.verify(ref)
        assert result.ok and result.first_difference is None and result.retrained == result.fingerprint
    with store.engine.begin() as conn:
        version_id = store.version("en@1").id
        conn.execute(update(merges).where(merges.c.version_id == version_id, merges.c.rank == 30)
                     .values(left_id=merges.c.right_id, right_id=merges.c.left_id))
    bad = store.verify("en@1")
    assert not bad.ok and bad.first_difference["rank"] == 30
    assert bad.first_difference["stored"] == bad.first_difference["retrained"][::-1]


def test_a_stopped_run_resumes_on_its_generation_after_growth(store, parts):
    a, b, c = parts
    store.ingest("c", [a], special_tokens=[EOT])
    with pytest.raises(Stop):
        store.train("en", corpus="c", vocab_size=600, checkpoint_every=10, progress=stop_after(25))
    store.ingest("c", [b])
    store.ingest("c", [c])
    resumed = store.resume("en@1")
    _, expected = train_word_counts(counted(a), vocab_size=600, special_tokens=[EOT])
    assert store.tokenizer("en@1").merges == expected
    assert resumed.corpus_generation == 1 and store.verify("en@1").ok


def test_versions_and_show_name_the_generation(tmp_path, parts, monkeypatch):
    monkeypatch.delenv("BPESTORE_DB", raising=False)
    run = CliRun(str(tmp_path / "cli.db"))
    a, b, _ = parts
    assert run("ingest", "c", str(a), "-q").exit_code == 0
    assert run("train", "en", "--corpus", "c", "--merges", "10", "-q").exit_code == 0
    assert run("ingest", "c", str(b), "-q").exit_code == 0
    assert run("train", "old", "--corpus", "c@1", "--merges", "10", "-q").exit_code == 0
    assert "corpus=c@1" in run("versions", "en").output
    assert "corpus: c@1" in run("show", "old@1").output
    log = json.loads(run("corpus", "log", "c", "--json").output)
    assert [(g["ref"], g["kept"], g["pinned_by"]) for g in log] == [("c@1", True, ["en@1", "old@1"]),
                                                                     ("c@2", True, [])]
    assert "c@2\t" in run("corpus", "log", "c").output
    shown = json.loads(run("corpus", "show", "c@1", "--json", "--top", "3").output)
    assert shown["generation"] == 1 and len(shown["sources"]) == 1 and len(shown["top_words"]) == 3
    diff = json.loads(run("corpus", "diff", "c@1", "c@2", "--json", "--limit", "2").output)
    assert diff["new_words"] > 0 and len(diff["changed"]) == 2
    assert "largest changes" in run("corpus", "diff", "c@1", "c@2").output
    assert "freed 0 history rows" in run("corpus", "compact", "c").output
    assert_error(run("corpus", "show", "c@99"), "no generation 99 (generations: c@1 to c@2)")
    assert_error(run("train", "x", "--corpus", "c@7", "--merges", "3"), "no generation 7")
    assert_error(run("corpus", "diff", "c@1", "c@x"), "generation number")
    ok = run("verify", "en@1")
    assert ok.exit_code == 0 and "ok" in ok.output
    assert json.loads(run("verify", "old@1", "--json").output)["ok"] is True


def test_verify_exit_status_on_a_difference(tmp_path, parts, monkeypatch):
    monkeypatch.delenv("BPESTORE_DB", raising=False)
    run = CliRun(str(tmp_path / "cli.db"))
    assert run("ingest", "c", str(parts[0]), "-q").exit_code == 0
    assert run("train", "en", "--corpus", "c", "--merges", "20", "-q").exit_code == 0
    import sqlite3

    with sqlite3.connect(run.db) as conn:
        conn.execute("UPDATE merges SET left_id = right_id, right_id = left_id WHERE rank = 4")
    result = run("verify", "en@1")
    assert result.exit_code == 1 and "DIFFERENT at merge 4" in result.output


def test_a_version_from_before_generations_cannot_resume_after_growth(store, parts):
    a, b, _ = parts
    store.ingest("c", [a])
    with pytest.raises(Stop):
        store.train("en", corpus="c", merges=50, checkpoint_every=5, progress=stop_after(10))
    with store.engine.begin() as conn:  # as migration 0003 leaves a version trained before its corpus grew
        conn.execute(text("UPDATE versions SET corpus_generation = NULL, corpus_digest = 'old'"))
    with pytest.raises(ConflictError, match="--from en@1"):
        store.resume("en@1")


def test_a_generation_digest_is_its_spec_and_every_source_sha256_so_far(store, parts):
    """The first generation (its sources' sha256 in hand) and a later one (read back) alike: the
    spec's JSON, then each source's sha256, hashed from the files here, in order."""
    import hashlib
    from pathlib import Path

    a, b, c = parts
    store.ingest("c", [a, b], special_tokens=[EOT])
    store.ingest("c", [c])
    with store.engine.connect() as conn:
        spec_json = conn.execute(text("SELECT spec FROM corpora WHERE name = 'c'")).scalar_one()
    shas = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (a, b, c)]

    def digest(some):
        return hashlib.sha256((spec_json + "".join(sorted(some))).encode()).hexdigest()

    assert [g.digest for g in store.corpus_log("c")] == [digest(shas[:2]), digest(shas)]
