"""encode_docs' documents: contiguous, disjoint pieces of the text, each at most the size in UTF-8 bytes."""

from __future__ import annotations

from bench.encode_docs import documents, groups


def test_documents_cut_the_text_in_order_within_the_size():
    text = ("日本語のテキスト。\n" * 300) + ("english words here\n" * 300)
    docs = documents(text, 2_000, 10**9)
    assert "".join(docs) == text
    assert all(0 < len(d.encode("utf-8")) <= 2_000 for d in docs)
    assert sum(len(d.encode("utf-8")) for d in documents(text, 500, 3_000)) < 3_500
    assert [d for g in groups(docs) for d in g] == docs
