"""The encoder: ``Tokenizer`` and the modules it is made of.

* ``tokenizer``: ``Tokenizer`` (encode and decode, tiktoken's rules for special
  tokens, the choice of backend);
* ``reference``: the reference encoder of ordinary text, in pure Python;
* ``mergetable``: its tables (``TokenIndex``, ``MergeTable``), each made by one constructor;
* ``streams``: streams, id files and worker processes;
* ``explain``: ``explain``, offsets, and what the compression curve needs.

The accelerated backend is ``bpestore.fast``. Nothing here imports ``bpestore.ingest``
or the store.
"""

from .tokenizer import DisallowedSpecialError, Tokenizer

__all__ = ["DisallowedSpecialError", "Tokenizer"]
