"""bench/synthetic.py: the synthetic corpus is deterministic and has the promised shape."""

from __future__ import annotations

import hashlib
from collections import Counter

from bench import synthetic


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = synthetic.generate(tmp_path / "a.txt", scale=0.002, seed=3)
    b = synthetic.generate(tmp_path / "b.txt", scale=0.002, seed=3)
    c = synthetic.generate(tmp_path / "c.txt", scale=0.002, seed=4)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    assert a.sha256 == b.sha256 == hashlib.sha256((tmp_path / "a.txt").read_bytes()).hexdigest()
    assert c.sha256 != a.sha256


def test_shape_words_distinct_and_zipf_head(tmp_path):
    s = synthetic.generate(tmp_path / "s.txt", scale=0.01, seed=0)
    words = (tmp_path / "s.txt").read_bytes().split()
    assert len(words) == s.words == 300_000
    counts = Counter(words)
    assert len(counts) == s.distinct
    # Most of the 50,000-word lexicon appears, not all of it (Zipf with a long tail).
    assert 25_000 < s.distinct < 50_000
    # The head follows k^-1.15: the 10th most frequent word about 10^-1.15 as often as the first.
    top = [c for _, c in counts.most_common(10)]
    assert 0.04 < top[9] / top[0] < 0.12
    assert s.bytes == (tmp_path / "s.txt").stat().st_size
