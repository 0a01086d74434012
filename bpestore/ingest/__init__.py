"""Reading sources into word counts: streaming, hashing, UTF-8 checking, parallel counting. No SQL.

* ``bpestore.sources`` (shared with the encoder): naming sources (``expand_paths``),
  opening them (``open_source``, decompressing), reading, hashing and decoding them
  (``TextReader``, the ``errors`` policies);
* ``pool``: the worker processes, and the tasks they count;
* ``scheduler``: ``count_sources``, which cuts sources into tasks, sends them
  and hands the counts back in ``CountedBatch`` es, in source order.

A source that fails (invalid UTF-8 under ``errors="strict"``, a bad JSON line)
raises ``SourceError`` after the batches of the sources before it.

>>> import io
>>> from bpestore import TokenizerSpec
>>> [batch] = count_sources(["-"], TokenizerSpec(pretokenizer="whitespace"), stdin=io.BytesIO(b"a b a"))
>>> batch.counts, batch.sources[0].n_words
(Counter({b'a': 2, b'b': 1}), 3)
"""

from ..processes import default_workers
from ..sources import ERROR_POLICIES, TextReader, expand_paths, open_source
from .scheduler import CountedBatch, IngestTuning, count_sources

__all__ = ["ERROR_POLICIES", "CountedBatch", "IngestTuning", "TextReader", "count_sources",
           "default_workers", "expand_paths", "open_source"]
