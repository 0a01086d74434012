"""The compiled core on words new to its cache, where every look-up of a span goes to the
table of tokens: each token's own text (a token up to 8 bytes is matched in its slot, a
longer one by its bytes), the same text with a letter doubled or cut (spans that are no
token, of the same lengths), and text of several languages. Ids checked against tiktoken
(built offline from the shared files), each text encoded once by a fresh tokenizer."""

from __future__ import annotations

import pytest

from .conftest import corpus_path, fresh_tokenizer, rank_file_version

tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.usefixtures("compiled_encode_core")

LANGUAGES = ["german_1M.txt", "russian_1M.txt", "hindi_1M.txt", "japanese_1M.txt", "chinese_1M.txt"]


@pytest.fixture(scope="module", params=["cl100k", "o200k"])
def version(request):
    return rank_file_version(request.param)


def token_texts(enc, longest: int) -> list[str]:
    """The text of every token of up to ``longest`` bytes that is whole UTF-8."""
    found = []
    for rank in range(enc.n_vocab):
        try:
            token = enc.decode_single_token_bytes(rank)
        except KeyError:
            continue
        if len(token) <= longest:
            try:
                found.append(token.decode("utf-8"))
            except UnicodeDecodeError:
                pass
    return found


def test_each_tokens_text_and_near_misses(version):
    made, enc = version
    texts = token_texts(enc, 16)
    assert len(texts) > enc.n_vocab // 2  # most tokens (the whole file: over 50,000; a stand-in: its first ranks)
    near = [t + t[-1] for t in texts] + [t[:-1] for t in texts if len(t) > 1] + [t[1:] + t[0] for t in texts]
    for words in (texts, near):
        tok = fresh_tokenizer(made)
        for k in range(0, len(words), 5_000):
            text = "\n".join(words[k:k + 5_000])
            assert tok.encode_ordinary(text) == enc.encode_ordinary(text)


@pytest.mark.parametrize("name", LANGUAGES)
def test_text_of_each_language_seen_once(version, name):
    made, enc = version
    text = corpus_path(name).read_text(encoding="utf-8")[100_000:160_000]
    tok = fresh_tokenizer(made)
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
