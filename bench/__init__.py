"""Benchmarks of bpestore against its peers (HF tokenizers, tiktoken).

Run from the repository root: ``python -m bench {ingest,train,encode,all} [options]``.
Every measurement runs in a fresh subprocess; see ``bench/common.py``.
"""
