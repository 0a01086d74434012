"""The build of the optional compiled cores (pyproject.toml's ``cmdclass``).

Each core is compiled anew: its old output is removed first, so a core left in
``build/`` by an earlier build never stands in for one that does not compile
now (``CC=false pip install .`` installs no core, and ``bpestore --version``
says so). Runs at build time only: setuptools and the standard library.
"""

from __future__ import annotations

import os

from setuptools import Extension
from setuptools.command.build_ext import build_ext


class BuildCores(build_ext):
    def build_extension(self, ext: Extension) -> None:
        output = self.get_ext_fullpath(ext.name)
        if os.path.exists(output):
            os.remove(output)
        super().build_extension(ext)
