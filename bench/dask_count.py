"""Counting on a Dask cluster (beyond one machine): the overhead of the Dask
path against ``ingest --workers 2`` on this machine.

The corpus is cut at line ends into ``N_FILES`` files (a directory, as a cluster would
see it). Cases, each in a fresh process, interleaved, ``--runs`` times:

* ``Store.ingest`` of the directory, 2 worker processes, fresh SQLite;
* the Dask path: a ``LocalCluster`` of 2 worker processes (1 thread each) started,
  ``bpestore.counts.dask_count`` (one ``count_files`` task per group of about
  ``GROUP_BYTES``, each writing a Parquet counts file), ``Store.ingest_counts`` of
  those files into a fresh SQLite, the cluster closed. Its parts are timed too.

Both must end with the same word counts (a digest of the corpus is compared).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from bench.common import Case, Params, markdown_table, run_once
from bench.ingestion import _split

WORKERS = 2
N_FILES = 40
GROUP_BYTES = 8 << 20


def ingest_directory(p: Params):
    import bpestore

    store = bpestore.open(Path(p.tmp) / "plain.db")

    def run() -> dict:
        store.ingest("bench", [p.corpus], workers=WORKERS, glob="*.txt")
        return {"digest": store.corpus("bench").digest, "distinct": store.corpus("bench").n_distinct}
    return run


def dask_path(p: Params):
    import bpestore
    from bpestore.counts import dask_count

    store = bpestore.open(Path(p.tmp) / "dask.db")
    out = Path(p.tmp) / "counts"
    out.mkdir()

    def run() -> dict:
        from dask.distributed import Client, LocalCluster

        t0 = time.perf_counter()
        with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=40) as cluster, Client(cluster) as client:
            t1 = time.perf_counter()
            infos = dask_count(client, [p.corpus], out, group_bytes=GROUP_BYTES, glob="*.txt")
            t2 = time.perf_counter()
            store.ingest_counts("bench", [i.path for i in infos])
            t3 = time.perf_counter()
        t4 = time.perf_counter()
        return {"digest": store.corpus("bench").digest, "distinct": store.corpus("bench").n_distinct,
                "cluster_start": t1 - t0, "count": t2 - t1, "ingest_counts": t3 - t2, "cluster_close": t4 - t3,
                "files": len(infos)}
    return run


def dask_count_suite(corpus: Path, name: str, runs: int, vocab_size: int) -> str:
    folder = _split(corpus, N_FILES)
    params = Params(corpus=str(folder))
    cases = [Case(f"ingest --workers {WORKERS}", ingest_directory, params),
             Case("Dask LocalCluster + ingest --counts", dask_path, params)]
    reports: dict[str, list[dict]] = {c.label: [] for c in cases}
    for i in range(runs):
        for case in cases:
            report = run_once(case)
            reports[case.label].append(report)
            details = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in report["details"].items()
                       if k != "digest"}
            print(f"  run {i + 1}/{runs} {case.label}: {report['seconds']:.2f} s {details}", file=sys.stderr,
                  flush=True)
    plain, dask = (reports[c.label] for c in cases)
    digests = {r["details"]["digest"] for r in plain + dask}
    if len(digests) != 1:
        raise SystemExit(f"Error: the Dask path's corpus differs from the plain ingest's: {digests}")

    def median(rows: list[dict], key: str | None = None) -> float:
        return statistics.median(r["seconds"] if key is None else r["details"][key] for r in rows)

    base = median(plain)
    warm = statistics.median(r["seconds"] - r["details"]["cluster_start"] - r["details"]["cluster_close"]
                             for r in dask)
    size = sum(f.stat().st_size for f in folder.rglob("*.txt"))
    rows = [[f"`ingest --workers {WORKERS}` of the directory", f"{base:.2f}", "1.00×", "", "", ""],
            [f"Dask: {WORKERS} local worker processes, {dask[0]['details']['files']} counts files, "
             "`ingest_counts`", f"{median(dask):.2f}", f"{median(dask) / base:.2f}×",
             f"{median(dask, 'cluster_start') + median(dask, 'cluster_close'):.2f}", f"{median(dask, 'count'):.2f}",
             f"{median(dask, 'ingest_counts'):.2f}"],
            ["Dask without cluster start and close", f"{warm:.2f}", f"{warm / base:.2f}×", "", "", ""]]
    return (f"### Counting on Dask: `{name}` ({size / 1e6:.0f} MB) in {N_FILES} files, medians of {runs}\n\n"
            + markdown_table(["path", "time (s)", "vs ingest", "cluster start + close (s)", "count (s)",
                              "ingest counts (s)"], rows)
            + "\n\nThe same corpus digest from every run (checked).")


SUITES = {"dask-count": dask_count_suite}
