"""The Dask recipe (counting beyond one machine): a directory of files counted on a
``dask.distributed.LocalCluster`` (the same code runs on a real cluster), the counts
files ingested into the store, giving exactly the counts of a plain ``ingest``."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from tests.conftest import corpus_path

pytest.importorskip("pyarrow")
distributed = pytest.importorskip("distributed")

SPECIAL = "<|endoftext|>"


@pytest.fixture(scope="module")
def client():
    """Two worker processes, one thread each."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A directory tree: the shared corpora cut into files, one compressed, special tokens in some."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "sub").mkdir()
    for name in ("dracula.txt", "german_1M.txt", "russian_1M.txt", "japanese_1M.txt"):
        data = corpus_path(name).read_text(encoding="utf-8")
        step = len(data) // 5
        for i in range(5):
            part = data[i * step:(i + 1) * step]
            where = root / "sub" if i % 2 else root
            (where / f"{Path(name).stem}-{i}.txt").write_text(part.replace("\n\n", f"\n{SPECIAL}\n", 3))
    story = corpus_path("tinystories_sample.txt").read_text(encoding="utf-8")[:200_000]
    (root / "stories.txt.xz").write_bytes(lzma.compress(story.encode()))
    (root / "copy.txt").write_bytes((root / "dracula-0.txt").read_bytes())  # the same content twice
    return root


def test_dask_recipe_equals_plain_ingest(client, folder, db_url, tmp_path):
    from bpestore import open as open_store
    from bpestore.counts import dask_count

    out = tmp_path / "counts"
    out.mkdir()
    group = min(600_000, sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) // 6)
    infos = dask_count(client, [folder], out, group_bytes=group, special_tokens=[SPECIAL])
    assert len(infos) > 4  # really spread over tasks
    ran_on = client.run(lambda: __import__("os").getpid())
    assert len(ran_on) == 2
    with open_store(db_url) as store:
        store.ingest("plain", [folder], special_tokens=[SPECIAL], workers=2)
        results = store.ingest_counts("dask", [out])
        assert len(store.corpus_log("dask")) == 1  # one generation per call
        assert sum(not r.skipped for r in results) == len(store.corpus_sources("plain"))
        assert store.word_counts("dask") == store.word_counts("plain")
        a, b = store.corpus("dask"), store.corpus("plain")
        assert (a.n_sources, a.size_bytes, a.n_words, a.n_distinct) == (b.n_sources, b.size_bytes, b.n_words,
                                                                         b.n_distinct)
        assert a.spec == b.spec and a.digest == b.digest
        # Counting again and ingesting again changes nothing.
        again = tmp_path / "again"
        again.mkdir()
        dask_count(client, [folder], again, group_bytes=group, special_tokens=[SPECIAL])
        assert all(r.skipped for r in store.ingest_counts("dask", [again]))
        assert len(store.corpus_log("dask")) == 1 and store.word_counts("dask") == store.word_counts("plain")


def test_dask_task_failure_reaches_the_caller(client, tmp_path):
    from bpestore.counts import dask_count
    from bpestore.errors import SourceError

    (tmp_path / "good.txt").write_text("fine words\n")
    (tmp_path / "bad.txt").write_bytes(b"fine then \xff broken\n")
    out = tmp_path / "counts"
    out.mkdir()
    with pytest.raises(SourceError, match="bad.txt"):
        dask_count(client, [tmp_path / "good.txt", tmp_path / "bad.txt"], out, group_bytes=1)
