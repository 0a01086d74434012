"""A pytest plugin (.ci/sanitize): the compiled cores of $BPESTORE_SANITIZED_CORES stand in for
the package's own, imported under the package's names before anything imports those."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

CORES = ("_mergecore", "_countcore", "_encodecore")
FOLDER = Path(os.environ["BPESTORE_SANITIZED_CORES"])

for _core in CORES:
    _name = f"bpestore.{_core}"
    if _name in sys.modules:
        raise RuntimeError(f"{_name} was imported before the sanitized build could stand in for it")
    _files = [p for p in FOLDER.glob(f"{_core}.*") if p.suffix in importlib.machinery.EXTENSION_SUFFIXES
              or any(p.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)]
    if len(_files) != 1:
        raise RuntimeError(f"{FOLDER}: expected one build of {_core}, found {_files}")
    _spec = importlib.util.spec_from_file_location(_name, _files[0])
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _module
    _spec.loader.exec_module(_module)


def pytest_report_header(config) -> str:
    return "sanitized cores: " + ", ".join(sys.modules[f"bpestore.{c}"].__file__ or c for c in CORES)
