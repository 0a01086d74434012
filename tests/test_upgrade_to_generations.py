"""Revision 0003 upgrades a store written before corpus generations without losing anything.

tests/data/store_0002.db was written by bpestore at revision 0002, and
tests/data/store_0002.json is what that code reported about it (see
tests/data/make_store_0002.py). On PostgreSQL the same rows are copied into a
schema created at revision 0002, then opened alike.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, text

import bpestore

DATA = Path(__file__).resolve().parent / "data"
REFERENCE = json.loads((DATA / "store_0002.json").read_text(encoding="utf-8"))
TABLES = ("corpora", "ingests", "word_counts", "tokenizers", "versions", "aliases", "merges", "tokens")
SAMPLE = "To be, or not to be: that is the question. Über alles!"


def counts_sha256(counts):
    h = hashlib.sha256()
    for word, n in sorted(counts.items()):
        h.update(word.hex().encode() + b"=" + str(n).encode() + b";")
    return h.hexdigest()


def copy_to_postgresql(sqlite_path: Path, url: str) -> None:
    """The 0002 store's rows in a PostgreSQL schema created at revision 0002."""
    from alembic import command

    from bpestore.store.db import alembic_config

    target = create_engine(url)
    source = create_engine(f"sqlite:///{sqlite_path}")
    try:
        with target.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, "0002")
        old, new = MetaData(), MetaData()
        old.reflect(source, only=TABLES)
        new.reflect(target, only=TABLES)
        with source.connect() as src, target.begin() as dst:
            for name in TABLES:
                rows = [dict(r._mapping) for r in src.execute(old.tables[name].select())]
                if rows:
                    dst.execute(new.tables[name].insert(), rows)
            for name in ("corpora", "ingests", "tokenizers", "versions"):
                dst.execute(text(f"SELECT setval(pg_get_serial_sequence('{name}', 'id'), "
                                 f"(SELECT max(id) FROM {name}))"))
    finally:
        source.dispose()
        target.dispose()


@pytest.fixture
def upgraded(db_url, tmp_path):
    """The 0002 fixture store, opened (so upgraded) by this bpestore."""
    copy = tmp_path / "store_0002.db"
    shutil.copy(DATA / "store_0002.db", copy)
    if db_url.startswith("postgresql"):
        copy_to_postgresql(copy, db_url)
        url = db_url
    else:
        url = str(copy)
    store = bpestore.open(url)
    yield store
    store.close()


def test_0003_keeps_counts_versions_and_fingerprints(upgraded):
    store = upgraded
    for name, expected in REFERENCE["corpora"].items():
        info = store.corpus(name)
        d = info.to_dict()
        for field in ("name", "spec", "n_sources", "size_bytes", "n_words", "n_distinct", "digest", "created_at"):
            assert d[field] == expected[field], (name, field)
        assert (info.generation, info.kept) == (1, True)
        assert [g.ref for g in store.corpus_log(name)] == [f"{name}@1"]
        assert counts_sha256(store.word_counts(name)) == expected["counts_sha256"]
        assert counts_sha256(store.word_counts(f"{name}@1")) == expected["counts_sha256"]
        assert [[w.hex(), n] for w, n in store.top_words(name, 5)] == expected["top_words"]
        assert all(s.generation == 1 for s in store.corpus_sources(name))
    versions = store.versions()
    assert [v.ref for v in versions] == [v["ref"] for v in REFERENCE["versions"]]
    for v, expected in zip(versions, REFERENCE["versions"]):
        d = v.to_dict()
        for field, value in expected.items():
            assert d[field] == value, (v.ref, field)
    # en@1 was trained before its corpus grew: its counts were overwritten then.
    assert {v.ref: v.corpus_generation for v in versions} == {
        "de@1": 1, "en@1": None, "en@2": 1, "en@3": 1, "half@1": 1}
    for ref, ids in REFERENCE["encodings"].items():
        assert store.tokenizer(ref).encode(SAMPLE) == ids, ref


def test_0003_versions_verify_resume_and_grow(upgraded, tmp_path):
    store = upgraded
    for ref in ("de@1", "en@2", "en@3"):
        assert store.verify(ref).ok, ref
    with pytest.raises(bpestore.ConflictError, match="before corpus generations"):
        store.verify("en@1")
    more = tmp_path / "more.txt"
    more.write_text("Brand new words arrive after the upgrade. " * 50, encoding="utf-8")
    store.ingest("plays", [more])
    half = store.resume("half@1")  # on generation 1, though plays has grown
    assert half.status == "complete" and store.verify("half@1").ok
    assert counts_sha256(store.word_counts("plays@1")) == REFERENCE["corpora"]["plays"]["counts_sha256"]
    assert store.corpus("plays").generation == 2
