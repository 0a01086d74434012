"""A pack file is somebody else's file: read without a byte of it changing (on success
and on refusal, through ``copy FILE`` and ``--db FILE``), its schema checked before any
query touches its tables, every version in it checked whole before anything is
written; ``pack`` and ``copy`` into a new file land whole or not at all, and what a
killed run left beside its file is removed by the next."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import bpestore
from bpestore import ConflictError, DamagedDataError, ReadOnlyError, Store
from bpestore.errors import InvalidArgumentError

from .conftest import assert_error


@pytest.fixture
def store(tmp_path, sample_text) -> Store:
    (tmp_path / "a.txt").write_text(sample_text[:60_000], encoding="utf-8")
    s = bpestore.open(tmp_path / "source.db")
    s.ingest("books", [tmp_path / "a.txt"], workers=1)
    s.train("en", corpus="books", vocab_size=320)
    s.set_alias("en@1", "prod")
    s.import_gpt2("imp", vocab=_gpt2_files(tmp_path, s)[0], merges=_gpt2_files(tmp_path, s)[1])
    yield s
    s.close()


def _gpt2_files(tmp_path: Path, s: Store) -> tuple[Path, Path]:
    out = tmp_path / "gpt2"
    if not out.exists():
        s.export("en@1", format="gpt2", out=out)
    return out / "vocab.json", out / "merges.txt"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path)


def _tampered(pack: Path, out: Path, *statements: str) -> Path:
    """A copy of ``pack`` changed by ``statements`` (as somebody else could)."""
    out.write_bytes(pack.read_bytes())
    conn = sqlite3.connect(out, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()
    return out


def test_a_pack_is_read_without_changing_a_byte(store, tmp_path, db_url, cli_run):
    pack = store.pack("en@1", tmp_path / "en.bpestore")
    before = _digest(pack)
    copied = bpestore.open(pack).copy(None, db_url, aliases=True)
    assert copied.ref == "en@1" and copied.aliases == ("en@prod",)  # a pack keeps the aliases
    with bpestore.open(db_url) as target:
        assert target.tokenizer("en@1").encode("the castle") == store.tokenizer("en@1").encode("the castle")
    listed = cli_run("--db", str(pack), "versions")
    assert listed.exit_code == 0 and "en@1" in listed.stdout
    assert_error(cli_run("--db", str(pack), "alias", "en@1", "x"), "a pack file is only read")
    with pytest.raises(ReadOnlyError):
        bpestore.open(pack).set_alias("en@1", "y")
    assert _digest(pack) == before and _beside(pack) == []


@pytest.mark.parametrize("change, message", [
    ("UPDATE versions SET status = 'bogus'", "status 'bogus'"),
    ("UPDATE versions SET status = 'training'", "status 'training' and a fingerprint"),
    ("UPDATE tokens SET bytes = X'7a7a7a' WHERE id = 300", "is not the bytes of the two tokens"),
    ("CREATE TABLE extra (x)", "holds a table 'extra'"),
    ("CREATE TRIGGER t AFTER INSERT ON aliases BEGIN SELECT 1; END", "holds a trigger 't'"),
    ("CREATE VIEW v AS SELECT 1", "holds a view 'v'"),
])
def test_a_changed_pack_is_refused_whole_and_stays_as_it_was(store, tmp_path, db_url, change, message):
    pack = store.pack("en@1", tmp_path / "en.bpestore")
    bad = _tampered(pack, tmp_path / "bad.bpestore", change)
    if "status" in change:  # the status alone changed: no check of a complete version applies any more
        conn = sqlite3.connect(bad, isolation_level=None)
        if "training" in change:
            conn.execute("UPDATE tokens SET bytes = X'7a7a7a' WHERE id = 300")
        conn.close()
    before = _digest(bad)
    with pytest.raises((DamagedDataError, InvalidArgumentError), match=message):
        with bpestore.open(bad) as opened:
            opened.copy(None, db_url)
    assert _digest(bad) == before and _beside(bad) == []
    with bpestore.open(db_url) as target:
        assert target.versions() == []


def test_a_pack_whose_table_is_a_recursive_view_is_refused_at_once(store, tmp_path, cli_run):
    pack = store.pack("en@1", tmp_path / "en.bpestore")
    bad = _tampered(pack, tmp_path / "loop.bpestore", "DROP TABLE tokens",
                    "CREATE VIEW tokens AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                    "SELECT n AS version_id, n AS id, X'00' AS bytes, 'byte' AS kind FROM r")
    before = _digest(bad)
    for args in (["copy", str(bad), "--to", str(tmp_path / "t.db")], ["--db", str(bad), "versions"]):
        done = subprocess.run([sys.executable, "-m", "bpestore", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and done.stderr.startswith("Error:") and "view 'tokens'" in done.stderr
        assert "Traceback" not in done.stderr
    assert _digest(bad) == before and not (tmp_path / "t.db").exists()


def test_pack_over_the_store_it_reads_is_refused(store, tmp_path):
    source = Path(str(tmp_path / "source.db"))
    with pytest.raises(ConflictError, match="is the store en@1 is read from"):
        store.pack("en@1", source, force=True)
    assert store.corpus("books").n_words > 0 and store.version("en@prod").ref == "en@1"


def test_a_killed_packs_leftovers_are_removed_by_the_next(store, tmp_path):
    out = tmp_path / "en.bpestore"
    dead = _dead_pid()
    left = [tmp_path / f".en.bpestore.{dead}.pack.part{side}" for side in ("", "-wal", "-shm", "-journal")]
    for path in left:
        path.write_bytes(b"left by a killed pack")
    store.pack("en@1", out)
    assert not any(path.exists() for path in left) and _beside(out) == []


def test_a_copy_into_a_new_file_lands_whole_or_not_at_all(store, tmp_path, monkeypatch):
    from bpestore.store import transfer

    target = tmp_path / "new.db"

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # stopped after the store was made, before the version was written

    monkeypatch.setattr(transfer, "_write", killed)
    with pytest.raises(KeyboardInterrupt):
        store.copy("en@1", target)
    assert not target.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".new.db")]
    monkeypatch.undo()
    assert store.copy("en@1", target).target.endswith("/new.db")
    with bpestore.open(target) as copied:
        assert [v.ref for v in copied.versions()] == ["en@1"]


def test_copy_with_counts_of_a_version_without_counts_is_refused(store, tmp_path, cli_run):
    with pytest.raises(InvalidArgumentError, match="imp@1 was imported"):
        store.copy("imp@1", tmp_path / "t.db", with_counts=True)
    assert not (tmp_path / "t.db").exists()
    cli_run.db = str(tmp_path / "source.db")
    assert_error(cli_run("copy", "imp@1", "--to", str(tmp_path / "t.db"), "--with-counts"), "--with-counts")


def _dead_pid() -> int:
    """A process id that no running process has."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(done.stdout)
    assert not os.path.exists(f"/proc/{pid}")
    return pid
