"""What a store answers by reading alone beyond a table's rows: a corpus' top words and
two generations compared, a version's tokens and merges, two versions compared; each in
one read transaction. And what versions make of corpus generations' word counts
(``bpestore.usage``): statistics, token usage, two versions compared."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import InvalidArgumentError
from ..queries import diff_counts, diff_versions, pick_tokens, token_matcher
from ..records import CorpusInfo, CorpusStats, MergeInfo, TokenInfo, TokenUsage, VersionInfo
from . import count_tables, vocab_tables
from .corpus_tables import CorpusReads
from .drivers import Transaction
from .version_tables import VersionReads
from .vocabulary import Vocabulary

MAX_RANK = 2**31 - 1  # the largest rank (an INTEGER column)


if TYPE_CHECKING:
    from ..encoder import Tokenizer


class Readable(Protocol):
    def reading(self) -> AbstractContextManager[Transaction]: ...

    def tokenizer(self, ref: str) -> Tokenizer: ...


class Questions:
    """The store's questions above: each in one read transaction of the store (through its
    driver or its engine)."""

    def __init__(self, store: Readable) -> None:
        self.store = store

    def top_words(self, corpus: str, n: int) -> list[tuple[bytes, int]]:
        n = min(max(n, 0), 2**62)  # any n is "all of them" beyond the number of words
        with self.store.reading() as tx:
            corpora = CorpusReads(tx)
            return corpora.read_generation(corpus, lambda tx, c, g: count_tables.top_words(tx, c, n, g))

    def corpus_diff(self, ref_a: str, ref_b: str, limit: int) -> dict[str, Any]:
        with self.store.reading() as tx:
            corpora = CorpusReads(tx)
            a, b = (corpora.read_generation(ref, count_tables.counts) for ref in (ref_a, ref_b))
            info_a, info_b = corpora.info(ref_a), corpora.info(ref_b)
        return {"from": info_a.to_dict(), "to": info_b.to_dict(), **diff_counts(a, b, limit=limit)}

    def vocab(self, ref: str, *, grep: str | None, prefix: str | None, longest: int | None, limit: int | None,
              timeout: float | None) -> list[TokenInfo]:
        match = token_matcher(grep, timeout)
        with self.store.reading() as tx:
            version_id = VersionReads(tx).resolve(ref)
            rows = vocab_tables.token_rows(tx, version_id, prefix=(prefix or "").encode("utf-8", "surrogatepass"),
                                           match=match)
            if getattr(match, "timed_out", False):
                raise InvalidArgumentError(f"grep {grep!r} took longer than {timeout:g}s; give a simpler "
                                           "pattern", params=("grep",))
            rows = pick_tokens(rows, longest=longest, limit=limit)
            made = vocab_tables.first_merges(tx, version_id, [r[0] for r in rows])
        return [TokenInfo(token_id, data, kind, *made.get(token_id, (None, None))) for token_id, data, kind in rows]

    def merges(self, ref: str, start: int, limit: int | None) -> list[MergeInfo]:
        for name, value in (("start", start), ("limit", limit)):
            if value is not None and value < 0:
                raise InvalidArgumentError(f"{name} cannot be negative, not {value}", params=(name,))
        if start > MAX_RANK:
            return []  # past every rank (and past what the rank column holds)
        limit = None if limit is not None and limit > MAX_RANK else limit
        with self.store.reading() as tx:
            return vocab_tables.merge_infos(tx, VersionReads(tx).resolve(ref), start, limit)

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        with self.store.reading() as tx:
            reads = VersionReads(tx)
            a, b = (reads.info(reads.resolve(ref)) for ref in (ref_a, ref_b))
            vocab_a, vocab_b = reads.vocabulary(a.id), reads.vocabulary(b.id)
        result = diff_versions(vocab_a.tokens, vocab_a.merges, vocab_b.tokens, vocab_b.merges)
        spec_a, spec_b = a.spec.to_dict(), b.spec.to_dict()
        result["spec_changes"] = {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)}
        return result

    def compared(self, ref_a: str, ref_b: str) -> tuple[tuple[VersionInfo, Vocabulary], tuple[VersionInfo, Vocabulary]]:
        """Two versions and their vocabularies, read together (what a full diff is made from)."""
        with self.store.reading() as tx:
            reads = VersionReads(tx)
            a, b = (reads.info(reads.resolve(ref)) for ref in (ref_a, ref_b))
            return (a, reads.vocabulary(a.id)), (b, reads.vocabulary(b.id))

    # -- versions on corpus generations' word counts (bpestore.usage) ---------------
    def generation(self, corpus: str) -> tuple[CorpusInfo, dict[bytes, int]]:
        """A kept corpus generation (``C``: the newest) and its word counts, read in one transaction."""
        with self.store.reading() as tx:
            corpora = CorpusReads(tx)
            counts = corpora.read_generation(corpus, count_tables.counts)
            return corpora.info(corpus), counts

    def _on(self, refs: Sequence[str], corpora: Sequence[str]
            ) -> tuple[list[Tokenizer], list[tuple[CorpusInfo, dict[bytes, int]]]]:
        """The versions' tokenizers and the generations, each version checked to cut words as each corpus did."""
        from ..usage import check_words

        if not refs or not corpora:
            raise InvalidArgumentError("name at least one version and one corpus", params=("refs", "corpora"))
        toks = [self.store.tokenizer(ref) for ref in refs]
        read = [self.generation(corpus) for corpus in corpora]
        for tok in toks:
            for info, _ in read:
                check_words(tok.spec, info.spec, ref=str(tok.name), corpus_ref=info.ref)
        return toks, read

    def corpus_stats(self, refs: Sequence[str], corpora: Sequence[str]) -> list[CorpusStats]:
        from ..usage import corpus_stats

        toks, read = self._on(refs, corpora)
        return [corpus_stats(tok, counts, ref=str(tok.name), corpus=info.ref) for tok in toks for info, counts in read]

    def token_usage(self, ref: str, corpus: str | None, rare: int) -> TokenUsage:
        from ..usage import check_words, token_usage

        if corpus is not None:
            (tok,), ((info, counts),) = self._on([ref], [corpus])
            return token_usage(tok, counts, ref=str(tok.name), corpus=info.ref, rare=rare)
        from .training import pinned_counts  # the counts it was trained on: its generation, or its mixture's

        tok = self.store.tokenizer(ref)
        with self.store.reading() as tx:
            reads = VersionReads(tx)
            v = reads.info(reads.resolve(ref))
            counts, _ = pinned_counts(tx, v)
            spec = CorpusReads(tx).spec(v.corpus or "")
        if spec is not None:
            check_words(tok.spec, spec, ref=v.ref, corpus_ref=v.inputs)
        return token_usage(tok, counts, ref=v.ref, corpus=v.inputs, rare=rare)

    def compare(self, ref_a: str, ref_b: str, corpora: Sequence[str], limit: int) -> list[dict[str, Any]]:
        from ..usage import compare_stats

        (a, b), read = self._on([ref_a, ref_b], corpora)
        return [compare_stats(a, b, counts, ref_a=str(a.name), ref_b=str(b.name), corpus=info.ref, limit=limit)
                for info, counts in read]
