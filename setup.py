"""The optional compiled merge core (bpestore/_mergecore.c); everything else is in pyproject.toml.

``optional=True``: where no C compiler (or no Python headers) is found, the
install goes on without it and bpestore trains on the pure-Python path
(``bpestore --version`` says which).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("bpestore._mergecore", ["bpestore/_mergecore.c"], optional=True)])
