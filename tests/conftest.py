"""Shared fixtures: the corpora (../shared/corpora, or the small stand-ins in tests/data/corpora
where it is absent), stores on SQLite and (when configured) PostgreSQL, and the command line run
through click's CliRunner."""

from __future__ import annotations

import atexit
import functools
import lzma
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

# tests/data holds fixtures; its make_store_0002.py is a script, not a module to import.
collect_ignore = ["data"]
# The shared corpora (../shared/corpora beside the checkout); BPESTORE_TEST_CORPORA points elsewhere
# (a folder that does not exist runs the suite as a fresh clone would, on the fixtures alone).
CORPORA = Path(os.environ.get("BPESTORE_TEST_CORPORA") or Path(__file__).resolve().parents[2] / "shared" / "corpora")
PG_URL = os.environ.get("BPESTORE_TEST_PG_URL")
# The web view's kept answers (bpestore.web.kept) go to a folder of this run's, not ~/.cache
# (the servers the tests start inherit it).
if "BPESTORE_WEB_CACHE" not in os.environ:
    os.environ["BPESTORE_WEB_CACHE"] = tempfile.mkdtemp(prefix="bpestore-web-kept-")
    atexit.register(shutil.rmtree, os.environ["BPESTORE_WEB_CACHE"], ignore_errors=True)
# The encoders faster than the pure-Python path: the compiled core, or tiktoken's where it is not built.
FAST_BACKENDS = ("compiled (C)", "tiktoken")


@pytest.fixture(scope="module")
def tiktoken_gate():
    """Tokenizers made in the module decide between tiktoken's core and the pure path
    (the compiled encode core, which covers both, is off)."""
    from bpestore.encoder import core_backend

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(core_backend, "CORE", None)
        yield


def stop_at(n: int):
    """A progress callback that interrupts a run (KeyboardInterrupt) once it has done ``n``."""
    def progress(p) -> None:
        if p.done >= n:
            raise KeyboardInterrupt
    return progress


# Stand-ins for the shared files, made by tests/data/make_corpora.py: small ones whole, a corpus's
# first tens of KB, a rank file's first ranks. Dracula stands in for itself: the package ships it.
STAND_INS = Path(__file__).resolve().parent / "data" / "corpora"


@functools.cache
def _unpacked() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="bpestore-corpora-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def stand_in_path(name: str) -> Path | None:
    """The stand-in for shared file ``name`` (unpacked, unless ``name`` is itself .xz); None if there is none."""
    packed = bpestore_sample() if name == "dracula.txt" else STAND_INS / (name.removesuffix(".xz") + ".xz")
    if not packed.exists():
        return None
    if name.endswith(".xz"):
        return packed
    path = _unpacked() / name
    if not path.exists():
        with lzma.open(packed, "rb") as f:
            data = f.read()
        partial = path.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(path)
    return path


def shared_corpus_path(name: str) -> Path:
    """A file of ../shared/corpora itself, for an assertion that holds only on the whole file;
    skips the test (with the reason) where it is absent."""
    path = CORPORA / name
    if not path.exists():
        pytest.skip(f"{path} is absent: this test needs the whole shared file")
    return path


def corpus_path(name: str) -> Path:
    """A file of ../shared/corpora, or its stand-in in tests/data/corpora where the folder is absent."""
    path = CORPORA / name
    if path.exists():
        return path
    stand_in = stand_in_path(name)
    if stand_in is None:
        pytest.skip(f"{path} is absent and tests/data/corpora has no stand-in for it")
    return stand_in


def read_corpus(name: str) -> str:
    path = corpus_path(name)
    if name.endswith(".xz"):
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


@pytest.fixture
def corpora_dir() -> Path:
    """../shared/corpora, or a folder of all the stand-ins under the shared names where it is absent."""
    if CORPORA.exists():
        return CORPORA
    folder = _unpacked()
    for packed in [*STAND_INS.glob("*.xz"), bpestore_sample()]:
        stand_in_path(packed.name.removesuffix(".xz"))
        if not (folder / packed.name).exists():
            (folder / packed.name).symlink_to(packed)
    return folder


def bpestore_sample() -> Path:
    import bpestore

    return bpestore.sample_path()


def _pg_schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


@contextmanager
def pg_schema() -> Iterator[str]:
    """A new schema on the test PostgreSQL, dropped afterwards; yields its store URL.
    Skips the test (with the reason) where BPESTORE_TEST_PG_URL is not set."""
    if not PG_URL:
        pytest.skip("BPESTORE_TEST_PG_URL is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)")
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield _pg_schema_url(schema)
    finally:
        from bpestore import Store

        Store.tokenizer_cache.clear()
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new schema on the test PostgreSQL."""
    if request.param == "sqlite":
        yield str(tmp_path / "test.db")
        return
    with pg_schema() as url:
        yield url


@pytest.fixture(scope="module")
def sample_text() -> str:
    """The sample text shipped in the package (Dracula)."""
    import lzma

    import bpestore

    with lzma.open(bpestore.sample_path(), "rt", encoding="utf-8") as f:
        return f.read()


@pytest.fixture
def sample_file(sample_text, tmp_path) -> Path:
    """The sample's first 60,000 characters as a file."""
    path = tmp_path / "sample.txt"
    path.write_text(sample_text[:60_000], encoding="utf-8")
    return path


@pytest.fixture
def store(db_url):
    import bpestore

    s = bpestore.open(db_url)
    yield s
    s.close()


class CliRun:
    """Runs bpestore command lines against one database; returns click's Result
    (stdout and stderr apart; exceptions other than a user mistake propagate)."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        from bpestore.cli import cli

        return self.runner.invoke(cli, ["--db", self.db, *args], input=input, catch_exceptions=False)


@pytest.fixture
def cli_run(tmp_path, monkeypatch) -> CliRun:
    """The command line against a fresh SQLite file (``cli_run.db`` is its path)."""
    monkeypatch.delenv("BPESTORE_DB", raising=False)
    return CliRun(str(tmp_path / "cli.db"))


def assert_error(result: Result, message: str) -> None:
    """A user mistake: one ``Error:`` line holding ``message`` on stderr, no traceback."""
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    assert message in lines[0], result.stderr
    assert "Traceback" not in result.output


@pytest.fixture(scope="session")
def gpt2_files() -> tuple[Path, Path]:
    return corpus_path("gpt2_vocab.json"), corpus_path("gpt2_merges.txt")


@pytest.fixture(scope="session")
def gpt2_tokenizer(gpt2_files):
    from bpestore import Tokenizer
    from bpestore.formats.gpt2 import read_gpt2

    vocab, merges, specials = read_gpt2(*gpt2_files)
    return Tokenizer(vocab, merges, specials, name="gpt2")


@pytest.fixture(scope="session")
def tiktoken_gpt2(gpt2_files):
    """tiktoken's GPT-2 Encoding built offline from the shared vocabulary (no download)."""
    tiktoken = pytest.importorskip("tiktoken")
    import json

    from bpestore.formats.gpt2 import str_to_token

    encoder = json.loads(gpt2_files[0].read_text(encoding="utf-8"))
    ranks = {str_to_token(s): i for s, i in encoder.items() if s != "<|endoftext|>"}
    return tiktoken.Encoding(name="gpt2_offline", pat_str=tiktoken_pattern("gpt2"), mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": encoder["<|endoftext|>"]})


def tiktoken_pattern(name: str) -> str:
    """The pre-tokenizer regex as tiktoken ships it (an independent reference)."""
    pytest.importorskip("tiktoken")
    from unittest import mock

    from tiktoken_ext import openai_public

    if name == "gpt2":
        return openai_public.r50k_pat_str
    # The constructors download their ranks; only the pattern is wanted here.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {}):
        make = {"cl100k": openai_public.cl100k_base, "o200k": openai_public.o200k_base}[name]
        return make()["pat_str"]


@pytest.fixture
def compiled_encode_core() -> None:
    """Skips a test where the compiled encode core is not built (``autouse`` in a module's own
    fixture, or ``pytest.mark.usefixtures``)."""
    from bpestore.encoder import core_backend

    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")


@functools.cache
def rank_file_version(name: str):
    """A shared rank file (``cl100k``, ``o200k``) as a version's (vocab, merges, spec), and
    tiktoken's Encoding of the same ranks, neither with special tokens (read once per test
    run: callers do not change them)."""
    import tiktoken

    from bpestore.formats.tiktoken_ranks import read_ranks, tiktoken_version

    ranks = read_ranks(corpus_path(f"{name}_base.tiktoken"))
    encoding = tiktoken.Encoding(name=name, pat_str=tiktoken_pattern(name), mergeable_ranks=ranks, special_tokens={})
    return tiktoken_version(ranks, name, {}), encoding


def rank_file_tokenizer(name: str):
    """A fresh tokenizer of a shared rank file (``cl100k``, ``o200k``) and tiktoken's Encoding of it."""
    made, encoding = rank_file_version(name)
    return fresh_tokenizer(made), encoding


def fresh_tokenizer(made):
    """A tokenizer of its own for a version's (vocab, merges, spec): its scratch space and
    caches start empty and small."""
    from bpestore import Tokenizer

    vocab, merges, spec = made
    return Tokenizer(vocab, merges, spec=spec)


def reference_merges() -> list[tuple[bytes, bytes]]:
    from bpestore.formats.gpt2 import str_to_token

    lines = corpus_path("train-bpe-reference-merges.txt").read_text(encoding="utf-8").splitlines()
    return [tuple(str_to_token(part) for part in line.split(" ")) for line in lines if line]


@pytest.fixture(params=["compiled", "pure"])
def merge_core(request, monkeypatch):
    """Run a test on the compiled merge core and on the pure-Python one (the reference)."""
    from bpestore import trainer

    if request.param == "pure":
        monkeypatch.setattr(trainer, "COMPILED_CORE", None)
    elif trainer.COMPILED_CORE is None:
        pytest.skip(f"the compiled merge core is not built here: {trainer.CORE_STATUS}")
    return request.param


@pytest.fixture(params=["compiled", "pure"])
def counting_core(request, monkeypatch):
    """Run a test on the compiled counting core and on the pure-Python one (regex, the reference).
    Pipelines made afterwards (in this process, or in workers forked from it) use that one."""
    from bpestore import text

    if request.param == "pure":
        monkeypatch.setattr(text, "COUNT_CORE", None)
    elif text.COUNT_CORE is None:
        pytest.skip(f"the compiled counting core is not built here: {text.COUNT_CORE_STATUS}")
    return request.param


def byte_vocab(*tokens: bytes) -> dict[int, bytes]:
    """The 256 single bytes, then ``tokens`` at ids 256, 257, ..."""
    vocab = {i: bytes([i]) for i in range(256)}
    for i, token in enumerate(tokens):
        vocab[256 + i] = token
    return vocab
