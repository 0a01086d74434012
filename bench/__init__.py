"""Benchmarks of bpestore against its peers (HF tokenizers, tiktoken, quicktok-v1, bpe-openai, rs-bpe).

A project of its own (bench/pyproject.toml: ``bpestore-bench``, with the peers). From the
repository root::

    pip install -e . -e ./bench        # bpestore, then the benchmarks and their peers
    python -m bench --help
    python -m bench encode-peers --quick --runs 1
    python -m bench fixed-costs --runs 1
    python -m pytest bench/tests       # the benchmarks' own tests

(Without installing: run from the repository root, where ``python -m`` finds ``bench/``.)
The corpora come from ../shared/corpora (``BPESTORE_CORPORA`` points elsewhere). Every
measurement runs in a fresh subprocess; see ``bench/common.py``.
"""
