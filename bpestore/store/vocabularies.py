"""Questions about stored vocabularies: their tokens, their merges, two versions compared."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..queries import diff_versions, pick_tokens, token_matcher
from ..records import MergeInfo, TokenInfo
from . import repository
from .reader import VersionReads
from .repository import Transactions


class Vocabularies:
    """The vocabularies of a store's versions (``db``: its transactions)."""

    def __init__(self, db: Transactions) -> None:
        self.db = db

    def vocab(self, ref: str, *, grep: str | None, prefix: str | None, longest: int | None, limit: int | None,
              timeout: float | None) -> list[TokenInfo]:
        match = token_matcher(grep, timeout)
        with self.db.reading() as conn:
            version_id = VersionReads.over(conn).resolve(ref)
            rows = repository.token_rows(conn, version_id, prefix=(prefix or "").encode("utf-8", "surrogatepass"),
                                         match=match)
            if getattr(match, "timed_out", False):
                raise InvalidArgumentError(f"grep {grep!r} took longer than {timeout:g}s; give a simpler "
                                           "pattern", params=("grep",))
            rows = pick_tokens(rows, longest=longest, limit=limit)
            made = repository.first_merges(conn, version_id, [r[0] for r in rows])
        return [TokenInfo(token_id, data, kind, *made.get(token_id, (None, None))) for token_id, data, kind in rows]

    def merges(self, ref: str, start: int, limit: int | None) -> list[MergeInfo]:
        for name, value in (("start", start), ("limit", limit)):
            if value is not None and value < 0:
                raise InvalidArgumentError(f"{name} cannot be negative, not {value}", params=(name,))
        if start > repository.MAX_RANK:
            return []  # past every rank (and past what the rank column holds)
        limit = None if limit is not None and limit > repository.MAX_RANK else limit
        with self.db.reading() as conn:
            return repository.merge_infos(conn, VersionReads.over(conn).resolve(ref), start, limit)

    def diff(self, ref_a: str, ref_b: str) -> dict[str, Any]:
        with self.db.reading() as conn:
            reads = VersionReads.over(conn)
            a, b = (reads.info(reads.resolve(ref)) for ref in (ref_a, ref_b))
            vocab_a, vocab_b = reads.vocabulary(a.id), reads.vocabulary(b.id)
        result = diff_versions(vocab_a.tokens, vocab_a.merges, vocab_b.tokens, vocab_b.merges)
        spec_a, spec_b = a.spec.to_dict(), b.spec.to_dict()
        result["spec_changes"] = {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)}
        return result
