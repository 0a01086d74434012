"""Training on a weighted mixture of corpus generations (``train --corpus A --corpus B --weight
3 --weight 1``): integer weights multiply counts, so a mixture equals one corpus holding the
texts that many times; the mixture is recorded, pinned, verified and resumed."""

from __future__ import annotations

import json

import pytest

import bpestore
from bpestore.errors import ConflictError, InvalidArgumentError
from tests.conftest import read_corpus, stop_at


@pytest.fixture
def texts(tmp_path, sample_text):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(sample_text[:40_000], encoding="utf-8")
    b.write_text(read_corpus("taylorswift.txt")[:40_000], encoding="utf-8")
    return a, b


def pairs(store, ref):
    return [(m.left_bytes, m.right_bytes) for m in store.merges(ref)]


def test_weights_multiply_counts(store, texts):
    """1:1 gives the merges of one corpus holding both texts; 3:1 those of one holding the
    first text three times and the second once, and other merges than 1:1."""
    a, b = texts
    store.ingest("a", [a])
    store.ingest("b", [b])
    store.ingest("ab", [a, b])
    store.ingest("aaab", [a, b])
    store.ingest("aaab", [a], force=True)
    store.ingest("aaab", [a], force=True)
    mix = store.train("mix", corpus=["a", "b"], vocab_size=700)
    assert mix.mixture == (("a@1", 1), ("b@1", 1)) and mix.corpus_ref == "a@1"
    store.train("union", corpus="ab", vocab_size=700)
    assert pairs(store, "mix@1") == pairs(store, "union@1")
    heavy = store.train("mix", corpus=["a@1", "b@1"], weights=[3, 1], vocab_size=700)
    assert heavy.mixture == (("a@1", 3), ("b@1", 1))
    store.train("thrice", corpus="aaab", vocab_size=700)
    assert pairs(store, "mix@2") == pairs(store, "thrice@1") != pairs(store, "mix@1")
    assert len({v.fingerprint for v in store.versions("mix")}) == 2
    assert store.verify("mix@2").ok and store.verify("mix@1").ok
    # The second part stays readable whatever the corpus does next.
    store.ingest("b", [a])
    store.compact("b")
    assert store.verify("mix@2").ok
    assert [g.kept for g in store.corpus_log("b")] == [True, True]


def test_resume_and_extend_a_mixture(store, texts):
    """A mixture stopped and resumed ends with the merges of one corpus holding the texts as
    often as the weights say; an extension continues on the mixture."""
    a, b = texts
    store.ingest("a", [a])
    store.ingest("b", [b])
    with pytest.raises(KeyboardInterrupt):
        store.train("cut", corpus=["a", "b"], weights=[2, 3], vocab_size=600, checkpoint_every=10,
                    progress=stop_at(40))
    assert store.version("cut@1").status == "training"
    resumed = store.resume("cut@1")
    store.ingest("aabbb", [a, b])
    for path in (a, b, b):
        store.ingest("aabbb", [path], force=True)
    store.train("whole", corpus="aabbb", vocab_size=600)
    assert resumed.status == "complete" and pairs(store, "cut@1") == pairs(store, "whole@1")
    child = store.train("more", corpus=["a", "b"], weights=[2, 3], vocab_size=700, parent="cut@1")
    assert child.mixture == (("a@1", 2), ("b@1", 3)) and store.verify("more@1").ok
    assert pairs(store, "more@1")[:len(pairs(store, "cut@1"))] == pairs(store, "cut@1")


def test_mixtures_refused(store, texts, tmp_path):
    a, b = texts
    store.ingest("a", [a])
    store.ingest("ws", [b], pretokenizer="whitespace")
    with pytest.raises(InvalidArgumentError, match="ws@1 was ingested with pretokenizer='whitespace', a with "
                                                   "pretokenizer='gpt2'"):
        store.train("x", corpus=["a", "ws@1"], vocab_size=600)
    with pytest.raises(InvalidArgumentError, match="one weight per corpus"):
        store.train("x", corpus=["a", "a@1"], weights=[1], vocab_size=600)
    with pytest.raises(InvalidArgumentError, match="named twice"):
        store.train("x", corpus=["a", "a@1"], vocab_size=600)
    with pytest.raises(InvalidArgumentError, match="a weight is a whole number"):
        store.train("x", corpus=["a"], weights=[0], vocab_size=600)
    assert store.versions() == []
    store.ingest("b", [b])
    store.train("mix", corpus=["a", "b"], vocab_size=300)
    with pytest.raises(ConflictError, match="mixture"):
        store.copy("mix@1", str(tmp_path / "other.db"))


def test_cli_mixture(cli_run, texts):
    a, b = texts
    cli_run("ingest", "a", str(a), "--quiet")
    cli_run("ingest", "b", str(b), "--quiet")
    r = cli_run("train", "mix", "--corpus", "a", "--corpus", "b@1", "--weight", "3", "--weight", "1",
                "--vocab-size", "400", "--quiet")
    assert r.exit_code == 0, r.output
    assert "corpus: a@1*3 + b@1*1" in cli_run("show", "mix@1").output
    assert json.loads(cli_run("show", "mix@1", "--json").output)["mixture"] == [["a@1", 3], ["b@1", 1]]
    assert "corpus=a@1*3 + b@1*1" in cli_run("lineage", "mix").output
    assert cli_run("verify", "mix@1").exit_code == 0
    usage = json.loads(cli_run("usage", "mix@1", "--json").output)  # on the mixture it was trained on
    assert usage["corpus"] == "a@1*3 + b@1*1"
    a_only, b_only = (json.loads(cli_run("usage", "mix@1", "--corpus", c, "--json").output) for c in ("a", "b"))
    assert usage["tokens"] == 3 * a_only["tokens"] + b_only["tokens"]
    bad = cli_run("train", "x", "--corpus", "a", "--corpus", "b", "--weight", "2", "--vocab-size", "400")
    assert bad.exit_code != 0 and "one weight per corpus, in order (2 corpora, 1 given)" in bad.stderr
    with bpestore.open(cli_run.db) as store:
        single = store.train("one", corpus="a", vocab_size=400)
        assert single.mixture == () and single.corpus_digest == store.corpus("a@1").digest
