"""The encoder: ``tokenizer`` (``Tokenizer``, the facade), ``engine`` (special-token
rules, the backend chosen once, the stream cutter), its backends ``reference`` (the
pure-Python encoder), ``core_backend`` (the compiled core) and ``tiktoken_backend``,
``rank_rule`` (when tiktoken's rule gives a version's ids), ``streams`` (streams, id
files, worker processes) and ``explain`` (``explain``, offsets, the curve's counts).
It imports nothing from ``bpestore.ingest`` or the store."""

from .engine import DisallowedSpecialError
from .tokenizer import Tokenizer

__all__ = ["DisallowedSpecialError", "Tokenizer"]
