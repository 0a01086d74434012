"""Faults found in review, each as a test that failed before its fix: export, concurrent
schema creation, torn reads, concurrent resumes, GPT-2 import checks, custom patterns,
integer bounds, foreign and read-only databases, changing sources, file names, workers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import regex

import bpestore
from bpestore.errors import (
    ConflictError,
    DamagedDataError,
    InvalidArgumentError,
    NotFoundError,
    SourceError,
)
from bpestore.ingest import IngestTuning
from tests.conftest import PG_URL, assert_error, corpus_path, stop_at

TEXT = "".join(f"the cat {i % 7} sat on the mat{i % 13}, and a dog ran far away {i % 5}.\n" for i in range(400))


@pytest.fixture
def trained(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    store.ingest("c", [path], workers=1)
    store.train("en", corpus="c", vocab_size=300)
    return store


# -- 1. export: atomic, never over a file without force, never into a missing folder ----------
def test_export_refuses_an_existing_file_without_force(trained, tmp_path):
    out = tmp_path / "tokenizer.json"
    out.write_text("mine")
    with pytest.raises(ConflictError, match="force"):
        trained.export("en", format="hf", out=out)
    assert out.read_text() == "mine"
    trained.export("en", format="hf", out=out, force=True)
    assert json.loads(out.read_text())["model"]["type"] == "BPE"


def test_export_into_a_missing_folder_is_refused_and_creates_nothing(trained, tmp_path):
    for fmt, out in (("hf", tmp_path / "no" / "t.json"), ("gpt2", tmp_path / "no" / "gpt2")):
        with pytest.raises(NotFoundError, match="does not exist"):
            trained.export("en", format=fmt, out=out)
    assert not (tmp_path / "no").exists()


def test_export_failing_midway_leaves_the_old_file_whole(trained, tmp_path, monkeypatch):
    out = tmp_path / "tokenizer.json"
    trained.export("en", format="hf", out=out)
    before = out.read_bytes()

    def half_then_full_disk(data, f, **kwargs):
        f.write('{"version": "1.0", "trunc')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", half_then_full_disk)
    with pytest.raises(OSError, match="No space"):
        trained.export("en", format="hf", out=out, force=True)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp file left


# -- 2. PostgreSQL: processes opening a new database at once wait for its schema ------------
def test_concurrent_first_opens_wait_for_the_schema(db_url):
    """Processes (not threads: Alembic's context is one per process) open a new database at once."""
    script = "import sys, bpestore; bpestore.open(sys.argv[1]).versions()"
    processes = [subprocess.Popen([sys.executable, "-c", script, db_url], stderr=subprocess.PIPE, text=True,
                                  cwd=Path(__file__).resolve().parents[1]) for _ in range(4)]
    failures = [p.communicate(timeout=120)[1] for p in processes if p.wait(timeout=120) != 0]
    assert failures == []


# -- 3. a version read while it trains is read in one snapshot -------------------------------
def test_loading_a_version_while_it_trains_never_sees_half_a_checkpoint(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT * 3)
    store.ingest("c", [path], workers=1)
    reader = bpestore.open(store.url)
    errors: list[BaseException] = []
    done = threading.Event()

    def train() -> None:
        try:
            store.train("en", corpus="c", vocab_size=700, checkpoint_every=1)
        finally:
            done.set()

    thread = threading.Thread(target=train)
    thread.start()
    loads = 0
    try:
        while not done.is_set():
            try:
                bpestore.Store.tokenizer_cache.clear()
                reader.tokenizer("en@1").encode("the cat sat")
                loads += 1
            except NotFoundError:
                pass  # not created yet
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)
    finally:
        thread.join()
        reader.close()
    assert errors == [] and loads > 0


# -- 4. two runs of one version: the second is told, nothing breaks ---------------------------
def test_a_second_resume_of_a_version_in_training_is_refused(store, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    store.ingest("c", [path], workers=1)
    reference = store.train("ref", corpus="c", merges=60)

    with pytest.raises(KeyboardInterrupt):
        store.train("en", corpus="c", merges=60, tie_break="lexicographic", checkpoint_every=1,
                    progress=stop_at(10), special_tokens=["<x>"])
    # (a special token keeps this run from reusing ref's merges: it trains)
    second = bpestore.open(store.url)
    told: list[BaseException] = []

    def meanwhile(p):
        if p.done == 11 and not told:
            try:
                second.resume("en@1", checkpoint_every=1)  # SQLite: it runs to the end
            except ConflictError as exc:  # PostgreSQL: refused at once
                told.append(exc)

    try:
        store.resume("en@1", checkpoint_every=1, progress=meanwhile)
    except ConflictError as exc:  # SQLite: the first run's next checkpoint finds the second's merges
        told.append(exc)
    second.close()
    assert len(told) == 1 and "being trained by another process" in str(told[0])
    assert store.version("en@1").status == "complete"
    ours = store.tokenizer("en@1").merges
    assert ours == store.tokenizer(reference.ref).merges
    assert store.verify("en@1").ok


@pytest.mark.skipif(not PG_URL, reason="a PostgreSQL session lock")
def test_postgres_refuses_a_resume_while_another_session_trains(tmp_path):
    import uuid

    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    try:
        with bpestore.open(url) as store:
            path = tmp_path / "t.txt"
            path.write_text(TEXT)
            store.ingest("c", [path], workers=1)
            with pytest.raises(KeyboardInterrupt):
                store.train("en", corpus="c", merges=30, checkpoint_every=1,
                            progress=lambda p: (_ for _ in ()).throw(KeyboardInterrupt) if p.done >= 5 else None)
            from bpestore.store import version_tables

            version_id = store.version("en@1").id
            with store.session() as held:  # as a training process would hold it
                assert version_tables.try_lock_training(held, version_id)
                with pytest.raises(ConflictError, match="being trained by another process"):
                    store.resume("en@1")
                version_tables.unlock_training(held, version_id)
            assert store.resume("en@1").status == "complete"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


# -- 5. import gpt2 checks its input -----------------------------------------------------------
@pytest.fixture(scope="module")
def gpt2_text():
    vocab = json.loads(corpus_path("gpt2_vocab.json").read_text(encoding="utf-8"))
    merges = corpus_path("gpt2_merges.txt").read_text(encoding="utf-8")
    return vocab, merges


def _broken(tmp_path, vocab, merges):
    (tmp_path / "v.json").write_text(vocab if isinstance(vocab, str) else json.dumps(vocab), encoding="utf-8")
    (tmp_path / "m.txt").write_text(merges, encoding="utf-8")
    return {"vocab": tmp_path / "v.json", "merges": tmp_path / "m.txt"}


@pytest.mark.parametrize("case", ["truncated merges", "id -1", "id out of range", "id twice", "key twice",
                                  "merge of unknown tokens", "id not a number"])
def test_import_gpt2_refuses_broken_files(case, gpt2_text, tmp_path):
    vocab, merges = dict(gpt2_text[0]), gpt2_text[1]
    if case == "truncated merges":
        merges = merges[:200_000].rsplit("\n", 1)[0] + "\n"
    elif case == "id -1":
        vocab["Ġthe"] = -1
    elif case == "id out of range":
        vocab["Ġthe"] = 2**40
    elif case == "id twice":
        vocab["Ġthe"] = vocab["Ġa"]
    elif case == "key twice":
        vocab = json.dumps(vocab)[:-1] + ', "Ġthe": 262}'
    elif case == "merge of unknown tokens":
        merges += "Ġzzqx Ġqqzx\n"
    elif case == "id not a number":
        vocab["Ġthe"] = True
    with bpestore.open(":memory:") as store:
        with pytest.raises((DamagedDataError, InvalidArgumentError)):
            store.import_gpt2("g", **_broken(tmp_path, vocab, merges))
        assert store.versions() == []


# -- 7. custom patterns: exactly regex.findall's words --------------------------------------
@pytest.mark.parametrize("pattern", [r"\w+(?=\s)", r"(?<=\s)\w+", r"x*", r"\w+\s\w+", r"\w+(?=.*\.$)"])
def test_custom_patterns_count_exactly_what_regex_findall_finds(pattern, tmp_path):
    text = TEXT * 20
    path = tmp_path / "t.txt"
    path.write_text(text)
    expected = Counter(w.encode() for w in regex.findall(pattern, text) if w)
    tuning = IngestTuning(chunk_bytes=4096, small_source_bytes=1024, part_chars=2048, cut_window=1024,
                          parallel_min_bytes=1 << 30)
    with bpestore.open(":memory:") as store:
        store.ingest("c", [path], pattern=pattern, workers=1, tuning=tuning)
        assert store.word_counts("c") == dict(expected)
        assert b"" not in store.word_counts("c")


def test_encoding_with_a_lookahead_pattern_sees_the_whole_text():
    spec = bpestore.TokenizerSpec(pretokenizer="regex", pattern=r"\w+(?=\s)")
    tok = bpestore.Tokenizer({i: bytes([i]) for i in range(256)}, [], spec=spec)
    text = TEXT * 5
    whole = [i for w in regex.findall(r"\w+(?=\s)", text) for i in w.encode()]
    assert list(tok.encode_iterable(text[i:i + 100] for i in range(0, len(text), 100))) == whole


# -- 8. integers beyond the database's, a port that is not a number --------------------------
@pytest.mark.parametrize("option", ["vocab_size", "merges", "min_frequency", "max_token_length"])
def test_huge_training_numbers_are_refused(option):
    from bpestore.store.training import TrainOptions

    settings = {"merges": 10, option: 2**63}
    if option == "vocab_size":
        settings.pop("merges")
    with pytest.raises(InvalidArgumentError, match=option):
        TrainOptions(**settings)


@pytest.mark.parametrize("argv", [
    ["train", "x", "--corpus", "c", "--vocab-size", str(2**63)],
    ["train", "x", "--corpus", "c", "--merges", str(2**64)],
    ["train", "x", "--corpus", "c", "--merges", "5", "--min-frequency", str(2**63)],
    ["train", "x", "--corpus", "c", "--merges", "5", "--max-token-length", str(2**63)],
    ["corpus", "show", "c", "--top", str(2**63)],
    ["ingest", "c", "{t}", "--workers", str(2**63), "--force"],
    ["--db", "postgresql+psycopg://u:secret@localhost:notaport/db", "versions"],
])
def test_huge_numbers_and_bad_ports_are_one_error_line(argv, cli_run, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    assert cli_run("ingest", "c", str(text), "--workers", "1").exit_code == 0
    result = cli_run(*(a.replace("{t}", str(text)) for a in argv))
    assert "secret" not in result.output
    assert_error(result, "")
    assert result.exit_code in (1, 2)


def test_workers_beyond_reason_are_refused(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    with bpestore.open(":memory:") as store, pytest.raises(InvalidArgumentError, match="workers"):
        store.ingest("c", [path], workers=2**63)


# -- 9. option mistakes: one Error: line, a hint, no usage block ---------------------------
@pytest.mark.parametrize("argv", [
    ["train", "x", "--corpus", "c", "--vocab-size", "0"],
    ["train", "x", "--corpus", "c", "--vocab-size", "-5"],
    ["ingest", "c", "f.txt", "--pretokenizer", "nope"],
    ["ingest", "c", "f.txt", "--workers", "0"],
    ["decode", "en", "abc"],
    ["encode", "en"],
    ["nope"],
    ["--bogus", "versions"],
    ["corpus", "show"],
])
def test_option_mistakes_are_one_error_line(argv, cli_run):
    result = cli_run(*argv)
    assert_error(result, "--help")
    assert "Usage:" not in result.output and result.exit_code == 2


# -- 10. smaller ones ------------------------------------------------------------------------
def test_a_foreign_sqlite_database_is_left_alone(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(ConflictError, match="not a bpestore database"):
        bpestore.open(path)
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["people"]


def _run_bound_by_permissions(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the CLI where the permission bits bind: root without its power to override them."""
    command = [sys.executable, "-m", "bpestore", *argv]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("BPESTORE_DB", None)
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            pytest.skip("root ignores permission bits, and capsh (to drop that power) is absent")
        command = ["capsh", "--drop=cap_dac_override,cap_dac_read_search,cap_fowner", "--",
                   "-c", 'exec "$@"', "run", *command]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_a_database_in_a_read_only_folder_can_be_read(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "b.db"
    with bpestore.open(db) as store:
        text = folder / "t.txt"
        text.write_text(TEXT)
        store.ingest("c", [text], workers=1)
        store.train("en", corpus="c", vocab_size=280)
        expected = store.tokenizer("en").encode("the cat sat")
    made = sorted(p.name for p in folder.iterdir())  # the training's lock file (b.db-train.lock) too
    os.chmod(tmp_path, 0o755)
    os.chmod(folder, 0o555)
    os.chmod(db, 0o444)
    try:
        versions = _run_bound_by_permissions(["--db", str(db), "versions"], tmp_path)
        assert versions.returncode == 0 and "en@1" in versions.stdout, versions.stderr
        encoded = _run_bound_by_permissions(["--db", str(db), "encode", "en", "the cat sat", "--json"], tmp_path)
        assert encoded.returncode == 0 and json.loads(encoded.stdout) == expected, encoded.stderr
        write = _run_bound_by_permissions(["--db", str(db), "alias", "en@1", "prod"], tmp_path)
        assert write.returncode != 0 and write.stderr.count("Error:") == 1 and "Traceback" not in write.stderr
        assert sorted(p.name for p in folder.iterdir()) == made  # no -wal, no -shm made
    finally:
        os.chmod(folder, 0o755)


def test_a_file_changed_while_it_is_ingested_is_refused(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)

    def grow(p):
        with open(path, "a") as f:
            f.write("more words\n")

    with bpestore.open(":memory:") as store:
        with pytest.raises(SourceError, match="changed while it was read"):
            store.ingest("c", [path], workers=1, progress=grow)
        assert store.corpora() == []
        assert store.ingest("c", [path], workers=1)[0].skipped is False  # and it counts once it is still


def test_a_file_name_that_is_not_utf8_is_named(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text(TEXT)
    try:
        with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "w") as f:
            f.write(TEXT)
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    with bpestore.open(":memory:") as store:
        with pytest.raises(SourceError, match=r"caf\\xe9\.txt"):
            store.ingest("c", [folder], workers=1)


@pytest.mark.parametrize("name", [" ", "\t", "a@b", ""])
def test_blank_names_and_at_signs_are_refused(name, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT)
    with bpestore.open(":memory:") as store:
        with pytest.raises(InvalidArgumentError, match="name"):
            store.ingest(name, [path], workers=1)
        store.ingest("c", [path], workers=1)
        with pytest.raises(InvalidArgumentError, match="name"):
            store.train(name, corpus="c", vocab_size=260)
        assert store.versions() == []


def test_counting_processes_die_with_their_parent(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(TEXT * 400)  # about 23 MB: enough to start the pool of workers
    script = (f"import bpestore; bpestore.open({str(tmp_path / 'k.db')!r}).ingest('c', [{str(path)!r}], "
              "workers=2)")
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1])
    children: list[int] = []
    deadline = time.monotonic() + 60
    while len(children) < 2 and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.05)
        children = _children(parent.pid)
    if len(children) < 2:
        parent.kill()
        pytest.skip("the ingest ended before its workers were seen")
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline and any(_alive(c) for c in children):
        time.sleep(0.02)
    left = [c for c in children if _alive(c)]
    for c in left:
        os.kill(c, signal.SIGKILL)
    assert left == []


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

