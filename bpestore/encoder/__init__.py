"""The encoder: ``tokenizer`` (``Tokenizer``: special-token rules, decoding, the
backend chosen once), ``reference`` (the pure-Python encoder and its tables),
``streams`` (streams, id files, worker processes), ``explain`` (``explain``,
offsets, the curve's counts). It imports nothing from ``bpestore.ingest`` or the store."""

from .tokenizer import DisallowedSpecialError, Tokenizer

__all__ = ["DisallowedSpecialError", "Tokenizer"]
