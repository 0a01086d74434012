"""The store with ``tie_break="first-seen"`` and a reused run's progress."""

from __future__ import annotations

import pytest

import bpestore
from bpestore.errors import ConflictError


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


def test_first_seen_is_refused_by_corpus_name_and_writes_nothing(store):
    with pytest.raises(ConflictError, match="corpus 'c' does not keep where in the text each word first occurs"):
        store.train("fs", corpus="c", merges=3, tie_break="first-seen")
    assert store.versions() == []
