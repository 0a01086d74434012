"""Every kind of stored version on its fastest path (the token-rank tables and the
backtracking path where tiktoken's rule gives its ids), and the array output
(``encode_array``, ``encode_batch_array``, ``encode_file``): ids equal tiktoken's run
on the same ranks, and equal ``encode``'s."""

from __future__ import annotations

import random
from array import array

import pytest

import bpestore
from bpestore.encoder import core_backend

from .conftest import corpus_path, tiktoken_pattern

tiktoken = pytest.importorskip("tiktoken")
TRICKY = "Hello, world! 12345 don't 'LL  \n\n\t x日本語のテキスト Ж 😀 \u0301a ＡＢ ﬁ " + "x" * 300


def tiktoken_of(tok: bpestore.Tokenizer, pattern: str):
    """tiktoken's Encoding on a version's ordinary tokens, each id its rank."""
    specials = set(tok.engine.special_tokens.values())
    ranks = {t: i for i, t in tok.vocab.items() if i not in specials}
    return tiktoken.Encoding(name="v", pat_str=tiktoken_pattern(pattern), mergeable_ranks=ranks, special_tokens={})


def long_words(tok: bpestore.Tokenizer, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    letters = [t.decode() for t in tok.vocab.values() if t.isalpha() and t.isascii()]
    return ["".join(rng.choice(letters) for _ in range(rng.randrange(20, 300))) for _ in range(50)]


@pytest.fixture(scope="module")
def stored(tmp_path_factory, sample_text):
    """A store holding a trained version, its extension, GPT-2 imported from its files
    and as a Hugging Face byte-level tokenizer.json."""
    if core_backend.CORE is None:
        pytest.skip(f"the compiled encode core is not built here: {core_backend.CORE_STATUS}")
    folder = tmp_path_factory.mktemp("stored")
    source = folder / "sample.txt"
    source.write_text(sample_text[:150_000], encoding="utf-8")
    store = bpestore.open(str(folder / "s.db"))
    store.ingest("c", [source], pretokenizer="cl100k")
    store.train("t", corpus="c", vocab_size=700)
    store.train("t", corpus="c", vocab_size=900, parent="t@1")
    store.import_gpt2("g", vocab=corpus_path("gpt2_vocab.json"), merges=corpus_path("gpt2_merges.txt"))
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers

    hf = tokenizers.Tokenizer(models.BPE.from_file(str(corpus_path("gpt2_vocab.json")),
                                                   str(corpus_path("gpt2_merges.txt"))))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.save(str(folder / "gpt2.json"))
    store.import_hf("h", folder / "gpt2.json")
    yield store
    store.close()


@pytest.mark.parametrize(("ref", "pattern"), [("t@1", "cl100k"), ("t@2", "cl100k"), ("g@1", "gpt2"),
                                              ("h@1", "gpt2")])
def test_a_stored_version_encodes_by_token_rank(stored, ref, pattern, sample_text):
    """Trained, extended and imported byte-level versions whose merge order is their rank
    order get the token-rank tables from the store (tiktoken's rule: long words by
    backtracking) and tiktoken's ids on text and long words, through every output."""
    tok = stored.tokenizer(ref)
    assert tok.facts.rank_rule_problem is None
    assert tok.backend == "compiled (C)"
    assert tok.engine.accelerated[0].rule == "token ranks"
    enc = tiktoken_of(tok, pattern)
    words = long_words(tok)
    for text in (TRICKY, " ".join(words), sample_text[150_000:200_000], *words[:10]):
        expected = enc.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        assert list(tok.encode_array(text)) == expected
    assert [list(a) for a in tok.encode_batch_array(words, workers=2)] == enc.encode_ordinary_batch(words)


def test_encode_array_equals_encode(stored, tmp_path, monkeypatch):
    """The array output holds encode's ids, as numpy uint32 where numpy imports, else
    array('I'); special tokens and the paths without the core included; encode_file
    writes the same ids."""
    numpy = pytest.importorskip("numpy")
    tok = stored.tokenizer("g@1")
    texts = [TRICKY, "", "<|endoftext|> a <|endoftext|>", "\ud800 lone", "x" * 5000]
    for text in texts:
        for options in ({"disallowed_special": ()}, {"allowed_special": "all"}):
            ids = tok.encode_array(text, **options)
            assert ids.dtype == numpy.uint32 and ids.tolist() == tok.encode(text, **options)
    assert [a.tolist() for a in tok.encode_batch_array(texts, allowed_special="all")] == \
        tok.encode_batch(texts, allowed_special="all")
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode_array("<|endoftext|>")
    pure = bpestore.Tokenizer(tok.vocab, tok.merges, fast=False)
    assert pure.encode_array(TRICKY).tolist() == pure.encode(TRICKY)
    source = tmp_path / "in.txt"
    source.write_text(TRICKY * 50, encoding="utf-8")
    for dtype, code in (("uint16", "H"), ("uint32", "I")):
        tok.encode_file(source, tmp_path / "ids.bin", dtype=dtype, force=True)
        written = array(code, (tmp_path / "ids.bin").read_bytes())
        assert written.tolist() == tok.encode(TRICKY * 50, disallowed_special=())
    from bpestore.encoder import streams

    monkeypatch.setattr(streams, "_numpy", lambda: None)
    ids = tok.encode_array(TRICKY)
    assert isinstance(ids, array) and ids.typecode == "I" and ids.tolist() == tok.encode(TRICKY)


def test_char_class_pages_match_one_character_at_a_time():
    """char_class finds a page of 256 classes at once (the lazily filled class table of the
    scans asks it about every new character): the same answer as matching each character
    alone with the patterns (the definition), on pages of every script."""
    import regex

    from bpestore import text

    categories = [regex.compile(c) for c in (r"[\p{Lu}\p{Lt}]", r"\p{Ll}", r"[\p{Lm}\p{Lo}]", r"\p{M}", r"\p{N}",
                                             r"\s")]
    folds = [regex.compile(f"(?i:{letter})") for letter in "sdmtlver"]
    rng = random.Random(5)
    pages = [0, 1, 0x1E, 0x20, 0x21, 0x30, 0x4E, 0xD8, 0xFB, 0xFF, 0x1F6, 0x10FF,
             *rng.sample(range(0x1100), 20)]
    for page in pages:
        for cp in range(page << 8, (page + 1) << 8):
            char = chr(cp)
            category = next((k for k, c in enumerate(categories, start=1) if c.match(char)), 7)
            fold = next((k for k, f in enumerate(folds, start=1) if f.match(char)), 0)
            assert text.char_class(cp) == category | fold << 4, hex(cp)
