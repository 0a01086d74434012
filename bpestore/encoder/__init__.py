"""The encoder: ``tokenizer`` (``Tokenizer``, the facade), ``engine`` (special-token
rules, the backend chosen once, the stream cutter), its backends ``reference`` (the
pure-Python encoder), ``core_backend`` (the compiled core) and ``tiktoken_backend``,
``rank_rule`` (when tiktoken's rule gives a version's ids), ``streams`` (streams, id
files, worker processes) and ``explain`` (``explain``, offsets, the curve's counts).
It imports nothing from ``bpestore.ingest`` or the store."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:
    from .engine import DisallowedSpecialError
    from .tokenizer import Tokenizer

# Imported when first used: a store making a snapshot needs only rank_rule, not the encoder (3-4 ms).
_LAZY = {"DisallowedSpecialError": "engine", "Tokenizer": "tokenizer"}

__getattr__ = lazy_names(__name__, _LAZY, globals())


__all__ = ["DisallowedSpecialError", "Tokenizer"]
