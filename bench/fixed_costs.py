"""What a user waits for before any work: the everyday commands in a fresh process.

    python -m bench fixed-costs [--runs 5] [--baseline CHECKOUT]
    BPESTORE_BENCH_PG_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test python -m bench fixed-costs

On a small store (a corpus ``web`` of the first 200 kB of ``--corpus``, versions ``en@1``
and ``en@2`` of 600 and 700 tokens), each command runs as a user runs it, timed from
outside (interpreter start included): ``ingest`` of a small new file into the existing
store, ``ingest`` into a new store (which creates it), ``vocab``, ``merges``, ``corpora``,
``corpus show``, ``diff`` and ``stats`` of a short file. Beside them the floor, ``python -c
'import sqlalchemy'``. With ``BPESTORE_BENCH_PG_URL`` the same commands also run on
PostgreSQL (in a database of their own made on that server, dropped at the end): the
table then says what PostgreSQL adds to each. With ``--baseline CHECKOUT`` (a checkout
whose bpestore/ the baseline rows import, its compiled cores built or copied in) every
SQLite command also runs with that code, interleaved, on the same store: the CPU ratio is
the A/B on a loaded machine. PostgreSQL's extra is judged on the client's CPU (the
server's work is a few index lookups; its wall time on a loaded machine is mostly
waiting). "At the floor" scales CPU seconds to the targets' quiet floor
(``QUIET_FLOOR``, ``python -c 'import sqlalchemy'``), as BENCHMARKS.md's table does.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import DATA, REPO, Case, Params, markdown_table, measure
from bench.startup import CLI, CpuResult, _env, _run_outside

TARGETS = {"ingest a small file into the store": 0.35, "ingest into a new store (creates it)": 0.5}
READ_TARGET = 0.3
PG_EXTRA = 0.3  # seconds PostgreSQL may add to a command
QUIET_FLOOR = 0.27  # s: `python -c 'import sqlalchemy'` on the quiet machine the targets were set on
SETUP = """
import sys, bpestore
store = bpestore.open(sys.argv[1])
store.ingest("web", [sys.argv[2]], workers=1)
store.train("en", corpus="web", vocab_size=600)
store.train("en", corpus="web", vocab_size=700)
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", CLI, *args]


def commands(folder: Path, db: str, new_db: Callable[[], str]) -> dict[str, Callable[[Params], list[str]]]:
    """Row -> a function giving the command line of one run (a new file or store each run)."""
    short = folder / "short.txt"
    short.write_text("The quick brown fox jumps over the lazy dog. " * 20, encoding="utf-8")
    numbers = itertools.count()

    def small_file(p: Params) -> list[str]:
        path = folder / f"small-{next(numbers)}.txt"
        path.write_text(f"a new line {path.stem}\n", encoding="utf-8")
        return _cli("--db", db, "ingest", "web", str(path), "--quiet")

    def new_store(p: Params) -> list[str]:
        return _cli("--db", new_db(), "ingest", "web", str(short), "--quiet")

    def read(*args: str) -> Callable[[Params], list[str]]:
        return lambda p: _cli("--db", db, *args)
    return {
        "ingest a small file into the store": small_file,
        "ingest into a new store (creates it)": new_store,
        "`vocab en --limit 20`": read("vocab", "en", "--limit", "20"),
        "`merges en --limit 20`": read("merges", "en", "--limit", "20"),
        "`corpora`": read("corpora"),
        "`corpus show web`": read("corpus", "show", "web"),
        "`diff en@1 en@2`": read("diff", "en@1", "en@2"),
        "`stats en --file short.txt`": read("stats", "en", "--file", str(short)),
    }


def _setup(db: str, text: Path, folder: Path) -> None:
    subprocess.run([sys.executable, "-c", SETUP, db, str(text)], cwd=folder, env=_env(str(REPO)), check=True)


@contextmanager
def _pg_databases(url: str) -> Iterator[Callable[[], str]]:
    """A function that makes a new database on the server of ``url`` and gives its URL;
    every one made is dropped at the end."""
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(url)
    made: list[str] = []
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)

    def new() -> str:
        name = f"bench_fixed_{os.getpid()}_{len(made)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return base.set(database=name).render_as_string(hide_password=False)
    try:
        yield new
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fixed_costs(corpus: Path, name: str, runs: int, vocab_size: int, baseline: str | None = None) -> str:
    """Every command on SQLite (and on PostgreSQL where BPESTORE_BENCH_PG_URL is set; and
    with ``baseline``'s code beside)."""
    pg_url = os.environ.get("BPESTORE_BENCH_PG_URL")
    DATA.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-", dir=DATA) as tmp, \
            (_pg_databases(pg_url) if pg_url else _no_pg()) as new_pg:
        folder = Path(tmp)
        text = folder / "text.txt"
        with open(corpus, "rb") as f:
            data = f.read(200_000)
        text.write_bytes(data[:data.rfind(b"\n") + 1] or data)
        db = str(folder / "fixed.db")
        _setup(db, text, folder)
        stores = itertools.count()
        sqlite = commands(folder, db, lambda: str(folder / f"new-{next(stores)}.db"))
        params = Params(tmp=tmp, code=str(REPO))
        todo = [Case("floor: python -c 'import sqlalchemy'", lambda p: [sys.executable, "-c", "import sqlalchemy"],
                     params)]
        todo += [Case(row, func, params) for row, func in sqlite.items()]
        if baseline is not None:
            old = Params(tmp=tmp, code=str(Path(baseline).resolve()))
            todo += [Case(f"{row} (baseline)", func, old) for row, func in sqlite.items()]
        if new_pg is not None:
            pg_db = new_pg()
            _setup(pg_db, text, folder)
            todo += [Case(f"{row} (PostgreSQL)", func, params) for row, func in commands(folder, pg_db, new_pg).items()]
        results = {r.label: r for r in measure(todo, runs, run=_run_outside, result_type=CpuResult)}
    floor = results[todo[0].label]
    rows = []
    for row in sqlite:
        r = results[row]
        target = TARGETS.get(row, READ_TARGET)
        scaled = r.cpu * QUIET_FLOOR / floor.cpu
        cells = [row, f"{r.seconds:.3f}", f"{r.cpu:.3f}", f"{scaled:.3f}",
                 f"≤ {target:.2f}: " + ("met" if scaled <= target else "**not met**")]
        if baseline is not None:
            old_cpu = results[f"{row} (baseline)"].cpu
            cells += [f"{old_cpu:.3f}", f"{old_cpu * QUIET_FLOOR / floor.cpu:.3f}", f"{r.cpu / old_cpu:.2f}×"]
        if new_pg is not None:
            pg = results[f"{row} (PostgreSQL)"]
            extra = pg.seconds - r.seconds
            extra_cpu = (pg.cpu - r.cpu) * QUIET_FLOOR / floor.cpu
            cells += [f"{pg.seconds:.3f}", f"{extra:+.3f}", f"{pg.cpu:.3f}", f"{extra_cpu:+.3f}",
                      "met" if extra_cpu <= PG_EXTRA else "**not met**"]
        rows.append(cells)
    headers = ["fresh process", "SQLite (s)", "CPU (s)", f"at the floor ({QUIET_FLOOR} s)", "target (s, at the floor)"]
    if baseline is not None:
        headers += ["baseline CPU (s)", "baseline at the floor", "CPU vs baseline"]
    if new_pg is not None:
        headers += ["PostgreSQL (s)", "PostgreSQL − SQLite (s)", "PostgreSQL CPU (s)",
                    "PostgreSQL − SQLite CPU, at the floor (s)", f"≤ +{PG_EXTRA:.2f} s (CPU, at the floor)"]
    return (f"### Fixed costs of the everyday commands (median of {runs}; floor: `python -c 'import sqlalchemy'` "
            f"{floor.seconds:.3f} s, {floor.cpu:.3f} s CPU)\n\n" + markdown_table(headers, rows))


@contextmanager
def _no_pg() -> Iterator[None]:
    yield None


SUITES = {"fixed-costs": fixed_costs}
