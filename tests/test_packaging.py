"""What a non-editable install ships: pyproject.toml's packages and package-data globs
cover every file the web pages load and the sample text (an editable install reads the
source tree, so only these globs decide what a wheel holds)."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def shipped(path: Path) -> bool:
    """Whether a wheel holds this file of the package tree: a package listed, and one of
    its package-data globs matching the file's name."""
    package = ".".join(path.parent.relative_to(ROOT).parts)
    globs = SETUPTOOLS["package-data"].get(package, [])
    return package in SETUPTOOLS["packages"] and any(fnmatch(path.name, glob) for glob in globs)


def test_every_file_the_pages_load_ships():
    static = ROOT / "bpestore" / "web" / "static"
    loaded = {name for page in static.glob("*.html")
              for name in re.findall(r'(?:href|src)="/static/([^"?#]+)"', page.read_text(encoding="utf-8"))}
    assert "favicon.svg" in loaded and "app.css" in loaded
    for name in sorted(loaded):
        assert (static / name).is_file(), name
        assert shipped(static / name), name
    for path in static.iterdir():
        assert shipped(path), path.name


def test_the_sample_text_ships():
    for path in (ROOT / "bpestore" / "data").iterdir():
        assert shipped(path), path.name


def test_license_is_an_spdx_expression_with_its_file():
    assert PYPROJECT["project"]["license"] == "MIT"
    for pattern in PYPROJECT["project"]["license-files"]:
        assert list(ROOT.glob(pattern)), pattern
    requires = " ".join(PYPROJECT["build-system"]["requires"])
    minimum = re.search(r"setuptools>=(\d+)", requires)
    assert minimum and int(minimum.group(1)) >= 77, requires  # the first setuptools to read PEP 639 licenses


def test_a_core_that_does_not_compile_now_is_not_taken_from_an_earlier_build(tmp_path, monkeypatch):
    """A stale build/ folder must not stand in for a compiler that fails now
    (``CC=false pip install .`` once installed the cores of an earlier build)."""
    from setuptools import Distribution, Extension

    from bpestore._build import BuildCores

    assert PYPROJECT["tool"]["setuptools"]["cmdclass"]["build_ext"] == "bpestore._build.BuildCores"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "core.c").write_text("this is not C\n", encoding="utf-8")
    dist = Distribution({"name": "t", "ext_modules": [Extension("t._core", ["core.c"], optional=True)]})
    command = BuildCores(dist)
    command.build_lib, command.build_temp = str(tmp_path / "lib"), str(tmp_path / "temp")
    command.ensure_finalized()
    stale = Path(command.get_ext_fullpath("t._core"))
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier build's core")
    command.run()  # the optional core fails to compile: a warning, no error
    assert not stale.exists()


def test_the_sqlite_schema_ships():
    """A new SQLite store is made from this file (store/db.py's create_sqlite_file)."""
    assert shipped(ROOT / "bpestore" / "store" / "schema_sqlite.sql")
