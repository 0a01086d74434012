"""The optional compiled cores, imported where they were built and are allowed.

Each core (``_mergecore``: the merge loop; ``_countcore``: the built-in pre-tokenizers
and word count) has a pure-Python reference that gives the same results and is
used instead where the core is missing or ``BPESTORE_PURE`` is set.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def load(name: str) -> tuple[ModuleType | None, str]:
    """The compiled core ``bpestore.<name>`` if built and allowed, and why (not)."""
    if os.environ.get("BPESTORE_PURE"):
        return None, "BPESTORE_PURE is set"
    try:
        return importlib.import_module(f"{__package__}.{name}"), "compiled (C)"
    except ModuleNotFoundError:
        return None, "not built: installed without a C compiler?"
    except ImportError as exc:  # built, but not loadable here
        return None, f"not loadable: {exc}"


def describe(module: ModuleType | None, status: str) -> str:
    """``compiled (C)`` or ``pure-Python (<why>)``."""
    return status if module is not None else f"pure-Python ({status})"
