"""The SQLite driver keeps its connections for the next transaction of their kind."""

from __future__ import annotations

import os
import sqlite3

import pytest

import bpestore
from bpestore.store.drivers import SqliteDriver


def _store(tmp_path):
    store = bpestore.open(str(tmp_path / "s.db"))
    assert isinstance(store.driver, SqliteDriver)
    return store


def _raw(tx):
    return tx.sqlite


def test_a_transaction_takes_the_connection_the_last_of_its_kind_left(tmp_path):
    store = _store(tmp_path)
    with store.writing() as tx:
        first = _raw(tx)
        tx.run("CREATE TABLE t (x INTEGER)", {})
    with store.writing() as tx:
        assert _raw(tx) is first
        tx.run("INSERT INTO t VALUES (1)", {})
    with store.reading() as tx:
        assert _raw(tx) is not first  # reads keep connections of their own
        assert tx.run("SELECT x FROM t", {}) == [(1,)]
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed with the store
        first.execute("SELECT 1")


def test_a_failed_transaction_leaves_nothing_on_the_kept_connection(tmp_path):
    store = _store(tmp_path)
    with store.writing() as tx:
        tx.run("CREATE TABLE t (x INTEGER)", {})
    with pytest.raises(ZeroDivisionError), store.writing() as tx:
        tx.run("INSERT INTO t VALUES (1)", {})
        kept = _raw(tx)
        1 / 0  # noqa: B018
    assert not kept.in_transaction
    with store.writing() as tx:
        assert _raw(tx) is kept
        assert tx.run("SELECT count(*) FROM t", {}) == [(0,)]
    other = sqlite3.connect(tmp_path / "s.db")  # another process' view: no write lock left held
    other.execute("INSERT INTO t VALUES (2)")
    other.commit()
    other.close()
    store.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_opens_its_own_and_leaves_the_parents_alone(tmp_path):
    store = _store(tmp_path)
    with store.writing() as tx:
        tx.run("CREATE TABLE t (x INTEGER)", {})
        tx.run("INSERT INTO t VALUES (1)", {})
        parents = _raw(tx)
    pid = os.fork()
    if pid == 0:  # the child: a transaction of its own, on a connection of its own
        code = 1
        try:
            with store.writing() as tx:
                code = 0 if _raw(tx) is not parents and tx.run("SELECT x FROM t", {}) == [(1,)] else 2
                tx.run("INSERT INTO t VALUES (2)", {})
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    with store.writing() as tx:
        assert _raw(tx) is parents
        assert tx.run("SELECT x FROM t ORDER BY x", {}) == [(1,), (2,)]
    store.close()


def test_bytes_bind_as_the_same_blobs(tmp_path):
    """The identity adapter the driver registers for bytes (store/drivers.py): words with
    any byte, empty ones included, come back as written; a bytes subclass is not adapted."""
    import sqlite3

    from bpestore.store import drivers

    assert sqlite3.adapters[(bytes, sqlite3.PrepareProtocol)](b"\\x00\\xff") == b"\\x00\\xff"
    assert drivers.sqlite3 is sqlite3
    conn = sqlite3.connect(tmp_path / "blobs.db")
    words = [bytes([i, 255 - i]) * (i % 5) for i in range(256)]
    conn.execute("CREATE TABLE t (word BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(w,) for w in words])
    back = [row[0] for row in conn.execute("SELECT word FROM t ORDER BY rowid")]
    assert back == words and all(type(w) is bytes for w in back)
    assert conn.execute("SELECT typeof(word) FROM t LIMIT 1").fetchone() == ("blob",)
    conn.close()


def test_rows_inserted_from_columns_equal_rows_inserted_one_by_one(tmp_path):
    """``insert`` (the fixed values written into the statement, a string with a quote too;
    more rows than one statement takes; rows turned into columns by ``by_column``) writes the
    rows a plain INSERT per row writes."""
    from bpestore.store.drivers import Transaction, by_column

    conn = sqlite3.connect(tmp_path / "c.db")
    for table in ("a", "b"):
        conn.execute(f'CREATE TABLE {table} (v INTEGER, "rank" INTEGER, data BLOB, kind TEXT, "count" INTEGER)')
    n = 4_321
    ranks, data, counts = range(7, 7 + n), [bytes([i % 256]) * (i % 4) for i in range(n)], [i * i for i in range(n)]
    tx = Transaction.of_sqlite(conn)
    tx.insert("a", {"rank": ranks, "data": data, "count": counts}, {"v": 3, "kind": "it's"})
    conn.executemany('INSERT INTO b (v, kind, "rank", data, "count") VALUES (3, ?, ?, ?, ?)',
                     [("it's", r, d, c) for r, d, c in zip(ranks, data, counts)])
    rows = [conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in ("a", "b")]
    assert rows[0] == rows[1] and len(rows[0]) == n
    tx.insert("a", {"rank": [], "data": [], "count": []}, {"v": 1})
    tx.insert("a", by_column(("v", "kind"), []))
    assert conn.execute("SELECT COUNT(*) FROM a").fetchone() == (n,)
    tx.insert("a", by_column(("v", "kind", "data"), [(i, f"k{i}", b"x" * i) for i in range(1_500)]))
    assert conn.execute("SELECT v, kind, data FROM a WHERE rowid > ? ORDER BY rowid", (n,)).fetchall() == \
        [(i, f"k{i}", b"x" * i) for i in range(1_500)]
    conn.close()
