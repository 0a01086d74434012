"""The counting core's ``read_files`` (``bpestore.ingest.pieces.SmallFiles.read``): a task's small files
read in one call, each byte and each failure as ``read_file`` (the Python reference) has it."""

from __future__ import annotations

import os

import pytest

from bpestore.errors import SourceError
from bpestore.ingest import pieces
from bpestore.ingest.pieces import SmallFiles, read_file
from bpestore.sources import file_stamp
from bpestore.text import COUNT_CORE

pytestmark = pytest.mark.skipif(COUNT_CORE is None, reason="the counting core is not built")

CHANGES = ["none", "grown", "shrunk", "same size", "unlisted", "gone", "folder", "empty", "unreadable"]


def _reference(files: SmallFiles) -> tuple[list[bytes], str | None]:
    """Each file read by ``read_file`` in turn, up to the first that fails: its message."""
    datas = []
    for name, stamp in zip(files.names, files.stamps):
        try:
            datas.append(read_file(name, stamp))
        except SourceError as exc:
            return datas, str(exc)
    return datas, None


def _files(tmp_path, change: str) -> SmallFiles:
    """Three files listed, the second then changed as ``change`` says."""
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    texts = [b"one " * 1000, b"x" * 70_000 + "\u00e9".encode(), "\u65e5\u672c".encode() * 3]
    if change == "empty":
        texts[1] = b""
    for path, text in zip(paths, texts):
        path.write_bytes(text)
    if change == "folder":
        paths[1].unlink()
        paths[1].mkdir()
    names = [str(p) for p in paths]
    stamps = [None if change in ("unlisted", "folder") else file_stamp(name) for name in names]
    files = SmallFiles(names, stamps, sum(stamp[0] for stamp in stamps if stamp))
    middle = paths[1]
    if change == "grown":
        middle.write_bytes(texts[1] + b"y" * (3 << 20))
    elif change == "shrunk":
        middle.write_bytes(texts[1][:-5])
    elif change == "same size":
        os.utime(middle, ns=(1, 1))
    elif change == "gone":
        middle.unlink()
    elif change == "unreadable":
        middle.chmod(0)
    return files


@pytest.mark.parametrize("change", CHANGES)
def test_read_files_reads_and_fails_as_the_reference_does(tmp_path, change):
    files = _files(tmp_path, change)
    expected, message = _reference(files)
    if change == "unreadable" and message is None:
        pytest.skip("this user reads files whatever their mode (root)")
    datas, error = files.read()
    assert datas == expected
    assert (None if error is None else str(error)) == message
    assert error is None or error.source == files.names[len(datas)]
    assert (message is None) == (change in ("none", "unlisted", "empty"))
    assert len(datas) == (3 if message is None else 1)


def test_reading_small_files_without_the_core_is_the_reference(tmp_path, monkeypatch):
    files = _files(tmp_path, "gone")
    monkeypatch.setattr(pieces, "COUNT_CORE", None)
    datas, error = files.read()
    assert (datas, str(error)) == _reference(files)


def test_read_files_refuses_what_is_not_a_stamp(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"a")
    with pytest.raises(ValueError):
        COUNT_CORE.read_files([str(path)], [(1, 2)])
    with pytest.raises(ValueError):
        COUNT_CORE.read_files([str(path)], [])
    assert COUNT_CORE.read_files([], []) == ([], None)
