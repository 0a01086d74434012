"""store/schema.py describes exactly what the migrations create, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import (
    Column,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
    inspect,
    text,
)
from sqlalchemy.engine import Connection

import bpestore
from bpestore.store.db import HEAD, SQLITE_SCHEMA, create_schema, make_engine, migrate, resolve_url
from bpestore.store.schema import created_on, include_object, metadata
from tests.conftest import pg_schema

ALEMBIC_INI = Path(__file__).resolve().parents[1] / "migrations" / "alembic.ini"


def differences(conn: Connection, target: MetaData) -> list:
    """What `alembic revision --autogenerate` would write to make the database match
    target, plus the primary keys, which Alembic does not compare."""
    context = MigrationContext.configure(conn, opts={
        "compare_type": True,
        "compare_server_default": True,
        "include_object": include_object(conn.dialect.name),
    })
    with warnings.catch_warnings():
        # SQLite: the PostgreSQL-only expression index cannot be compared there (nor exists).
        warnings.filterwarnings("ignore", "autogenerate skipping metadata-specified expression-based index")
        found = compare_metadata(context, target)
    inspector = inspect(conn)
    for table in target.sorted_tables:
        if not inspector.has_table(table.name):
            continue  # add_table above
        declared = [c.name for c in table.primary_key] if created_on(table.primary_key, conn.dialect.name) else []
        actual = inspector.get_pk_constraint(table.name)["constrained_columns"]
        if declared != actual:
            found.append(("primary_key", table.name, actual, declared))
    return found


def kinds(found: list) -> list[str]:
    """The operation names of differences(): column changes come as lists of tuples."""
    return sorted(item[0][0] if isinstance(item, list) else item[0] for item in found)


@pytest.fixture
def migrated(db_url):
    """A connection to a database that Alembic's revisions brought to the newest revision."""
    engine = make_engine(resolve_url(db_url))
    migrate(engine)
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def structure(conn: Connection) -> dict:
    """Everything the database says about its tables: columns in order (type, nullability,
    default), primary and foreign keys, indexes, unique and check constraints; and the
    stamped revision."""
    inspector = inspect(conn)
    found: dict = {"revision": conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()}
    for table in sorted(inspector.get_table_names()):
        def listed(items: list[dict]) -> list[str]:
            return sorted(repr(sorted(item.items())) for item in items)
        found[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], c.get("default"), c.get("autoincrement"))
                        for c in inspector.get_columns(table)],
            "primary key": inspector.get_pk_constraint(table),
            "foreign keys": listed(inspector.get_foreign_keys(table)),
            "indexes": listed(inspector.get_indexes(table)),
            "unique": listed(inspector.get_unique_constraints(table)),
            "checks": listed(inspector.get_check_constraints(table)),
        }
    return found


def test_a_new_store_is_what_the_migrations_make(db_url, tmp_path):
    """bpestore.open makes a new database's schema from store/schema.py, without Alembic:
    the result equals what ``alembic upgrade head`` makes, on SQLite and PostgreSQL."""
    if db_url.startswith("postgresql"):
        with pg_schema() as other:
            _compare_new_and_migrated(db_url, other)
    else:
        _compare_new_and_migrated(db_url, str(tmp_path / "migrated.db"))


def _compare_new_and_migrated(new_url: str, migrated_url: str) -> None:
    store = bpestore.open(new_url)
    engine = make_engine(resolve_url(migrated_url))
    alembic(migrated_url, "upgrade", "head")
    try:
        with store.engine.connect() as made, engine.connect() as migrated:
            new, old = structure(made), structure(migrated)
            assert new["revision"] == [HEAD]
            assert len(new) > 10  # the tables are there
            assert new == old
            assert differences(made, metadata) == []
    finally:
        engine.dispose()
        store.close()


def test_creating_a_store_does_not_import_alembic(tmp_path):
    script = ("import sys, bpestore; bpestore.open(sys.argv[1]).close(); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "new.db")], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_a_database_with_an_empty_version_table_is_made_new(tmp_path):
    """After ``alembic downgrade base`` only an empty alembic_version is left: opening it makes the schema."""
    url = str(tmp_path / "down.db")
    alembic(url, "upgrade", "head")
    alembic(url, "downgrade", "base")
    store = bpestore.open(url)
    with store.engine.connect() as conn:
        assert differences(conn, metadata) == []
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD]
    store.close()


def test_migrations_create_the_schema(migrated):
    assert differences(migrated, metadata) == []


def copy_of_schema() -> MetaData:
    copy = MetaData()
    for table in metadata.sorted_tables:
        new = table.to_metadata(copy)
        # to_metadata drops ddl_if.
        new.primary_key._ddl_if = table.primary_key._ddl_if
        for index in new.indexes:
            index._ddl_if = next(i for i in table.indexes if i.name == index.name)._ddl_if
    return copy


def without_cascade(copy: MetaData) -> None:
    (fk,) = [fk for fk in copy.tables["aliases"].foreign_key_constraints if fk.referred_table.name == "versions"]
    fk.ondelete = None
    for element in fk.elements:
        element.ondelete = None


def keyed_by_word_everywhere(copy: MetaData) -> None:
    """schema.py as it was before it declared revision 0002."""
    table = copy.tables["word_counts"]
    table.primary_key._ddl_if = None
    table.indexes.clear()


MUTATIONS = {
    "extra table": (lambda m: Table("extra", m, Column("id", Integer, primary_key=True)), ["add_table"]),
    "extra column": (lambda m: m.tables["corpora"].append_column(Column("extra", Integer)), ["add_column"]),
    "extra index": (lambda m: Index("ix_tokens_bytes", m.tables["tokens"].c.bytes), ["add_index"]),
    "extra unique constraint": (
        lambda m: m.tables["tokens"].append_constraint(UniqueConstraint("version_id", "bytes")),
        ["add_constraint"]),
    "extra foreign key": (
        lambda m: m.tables["merges"].append_constraint(ForeignKeyConstraint(
            ["version_id", "token_id"], ["tokens.version_id", "tokens.id"])),
        ["add_fk"]),
    "foreign key without cascade": (without_cascade, ["add_fk", "remove_fk"]),
    "other type": (lambda m: setattr(m.tables["corpora"].c.name, "type", String(100)), ["modify_type"]),
    "other nullability": (lambda m: setattr(m.tables["versions"].c.parent_id, "nullable", False), ["modify_nullable"]),
    "server default": (lambda m: m.tables["versions"].append_column(
        Column("min_frequency", Integer, nullable=False, server_default=text("1")), replace_existing=True),
        ["modify_default"]),
    "other primary key": (lambda m: m.tables["merges"].append_constraint(PrimaryKeyConstraint("rank", "version_id")),
                          ["primary_key"]),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_difference_is_found(migrated, mutation):
    copy = copy_of_schema()
    assert differences(migrated, copy) == []
    change, expected = MUTATIONS[mutation]
    change(copy)
    assert kinds(differences(migrated, copy)) == expected


def test_the_schema_before_revision_0002_differs_on_postgresql(migrated):
    copy = copy_of_schema()
    keyed_by_word_everywhere(copy)
    expected = {"sqlite": [], "postgresql": ["primary_key", "remove_index"]}[migrated.dialect.name]
    assert kinds(differences(migrated, copy)) == expected


def test_only_the_parts_for_this_dialect_are_compared(migrated):
    this = migrated.dialect.name
    other = {"sqlite": "postgresql", "postgresql": "sqlite"}[this]
    copy = copy_of_schema()
    Index("ix_tokens_kind_other", copy.tables["tokens"].c.kind).ddl_if(dialect=other)
    assert differences(migrated, copy) == []
    Index("ix_tokens_kind_this", copy.tables["tokens"].c.kind).ddl_if(dialect=this)
    assert kinds(differences(migrated, copy)) == ["add_index"]


def alembic(db_url: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "alembic", "-c", str(ALEMBIC_INI), "-x", f"db={db_url}", *args],
                   check=True, capture_output=True)


def test_alembic_command_line_upgrades_and_downgrades(db_url):
    engine = make_engine(resolve_url(db_url))
    alembic(db_url, "upgrade", "head")
    with engine.connect() as conn:
        assert differences(conn, metadata) == []
    alembic(db_url, "downgrade", "0001")
    with engine.connect() as conn:
        assert inspect(conn).get_pk_constraint("word_counts")["constrained_columns"] == ["corpus_id", "word"]
        assert inspect(conn).get_indexes("word_counts") == []
    alembic(db_url, "downgrade", "base")
    with engine.connect() as conn:
        assert inspect(conn).get_table_names() == ["alembic_version"]
    alembic(db_url, "upgrade", "head")
    with engine.connect() as conn:
        assert differences(conn, metadata) == []
    engine.dispose()


def test_head_is_the_newest_revision():
    """store/db.py opens an up-to-date store without Alembic by comparing with HEAD."""
    from alembic.script import ScriptDirectory

    from bpestore.store.db import HEAD, alembic_config

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD


def sqlite_ddl() -> str:
    """``create_schema``'s tables as SQLite's DDL, in the order SQLite keeps them."""
    from sqlalchemy import create_engine

    engine = create_engine("sqlite://")
    with engine.connect() as conn, conn.begin():
        create_schema(conn)
        rows = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid").all()
    engine.dispose()
    return ";\n\n".join(sql for (sql,) in rows)


def test_the_sqlite_ddl_is_the_schemas():
    """store/schema_sqlite.sql, which makes a new SQLite store without SQLAlchemy, is
    exactly ``create_schema``'s tables (after a schema change: BPESTORE_WRITE_SCHEMA=1
    pytest tests/test_schema.py rewrites it)."""
    if os.environ.get("BPESTORE_WRITE_SCHEMA"):
        SQLITE_SCHEMA.write_text(sqlite_ddl(), encoding="utf-8")
    assert SQLITE_SCHEMA.read_text(encoding="utf-8") == sqlite_ddl(), \
        "store/schema_sqlite.sql is stale: BPESTORE_WRITE_SCHEMA=1 pytest tests/test_schema.py"


def test_a_new_sqlite_store_is_made_without_sqlalchemy(tmp_path):
    script = ("import sys, bpestore; s = bpestore.open(sys.argv[1]); s.ingest('c', [sys.argv[2]]); s.close(); "
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic'}))")
    text_file = tmp_path / "t.txt"
    text_file.write_text("a new store\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "new.db"), str(text_file)],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    store = bpestore.open(str(tmp_path / "new.db"))
    assert store.schema_revision() == HEAD and store.corpus("c").n_words == 4
    with store.engine.connect() as conn:
        assert differences(conn, metadata) == []
    store.close()


def _without_rowid(path: Path) -> bool:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT wr FROM pragma_table_list WHERE name = 'word_counts'").fetchone()[0] == 1
    finally:
        conn.close()


def test_migration_0008_keeps_the_counts_in_a_table_without_rowid(tmp_path):
    """SQLite: 0008 remakes word_counts as its key's b-tree, every row kept (and back on downgrade);
    a new store's is the same."""
    path = tmp_path / "old.db"
    url = resolve_url(str(path))
    alembic(url, "upgrade", "0007_ordinals")
    rows = [(1, b"the", 7, 1, 0), (1, b"a\x00b", 3, 2, 5), (1, b"x" * 5000, 1, 1, None), (2, b"the", 4, 1, 1)]
    engine = make_engine(url)
    with engine.begin() as conn:
        for corpus_id in (1, 2):
            conn.execute(text("INSERT INTO corpora (id, name, spec, created_at) VALUES (:i, :n, '{}', '2026-11-29')"),
                         {"i": corpus_id, "n": f"c{corpus_id}"})
        conn.execute(text('INSERT INTO word_counts (corpus_id, word, "count", changed_in, ordinal) '
                          "VALUES (:c, :w, :n, :g, :o)"), [dict(zip("cwngo", row)) for row in rows])
    engine.dispose()
    assert not _without_rowid(path)

    def stored() -> list:
        engine = make_engine(url)
        with engine.connect() as conn:
            found = [tuple(r) for r in conn.execute(text(
                'SELECT corpus_id, word, "count", changed_in, ordinal FROM word_counts ORDER BY corpus_id, word'))]
        engine.dispose()
        return found

    alembic(url, "upgrade", "head")
    assert _without_rowid(path) and stored() == sorted(rows)
    engine = make_engine(url)
    with engine.connect() as conn:
        assert differences(conn, metadata) == []
    engine.dispose()
    alembic(url, "downgrade", "0007_ordinals")
    assert not _without_rowid(path) and stored() == sorted(rows)
    bpestore.open(str(tmp_path / "new.db")).close()
    assert _without_rowid(tmp_path / "new.db")
