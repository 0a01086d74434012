"""A package's names imported when first used (PEP 562): ``import bpestore`` and the command
line's start-up do not pay for what a call does not reach."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, where: dict[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` that imports each name of ``where`` from
    its module (``where[name]``, relative to the package) when first asked, and keeps it
    in ``namespace`` (the package's globals) for the next time."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(f".{where[name]}", package), name)
        return value

    return __getattr__
