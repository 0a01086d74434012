"""The diff page's answer: every section of two versions compared, computed once from
their vocabularies and kept while both are complete, then answered a page at a time.

Sections: ``new_merges`` (merges of B whose byte pair A does not merge, in B's rank
order), ``removed_merges`` (the same of A against B), ``changed_ids`` (ids in both with
other bytes, both sides' bytes), ``only_a`` / ``only_b`` (byte strings in one
vocabulary only, ordered and searched). A merge's pair count is None where the version
did not count it (an imported merge is stored with count 0; a trained one is >= 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from ..queries import token_text
from ..records import VersionInfo
from ..store.vocabulary import Vocabulary

SECTIONS = ("new_merges", "removed_merges", "changed_ids", "only_a", "only_b")
ONLY_ORDERS = ("rank", "bytes", "longest", "id")


class Side:
    """One version's vocabulary as the diff reads it."""

    def __init__(self, info: VersionInfo, vocab: Vocabulary) -> None:
        self.info, self.vocab = info, vocab
        self.pairs = vocab.pairs
        made = vocab.columns[2]
        self.rank = dict(zip(reversed(made), range(len(made) - 1, -1, -1)))  # the merge that first made each token
        ids, datas = list(vocab.tokens), list(vocab.tokens.values())
        self.first_id = dict(zip(reversed(datas), reversed(ids)))  # the lowest id of each byte string

    def merge(self, rank: int) -> dict[str, Any]:
        left, right, token, count = (column[rank] for column in self.vocab.columns)
        tokens = self.vocab.tokens
        return {"rank": rank, "left": left, "right": right, "token": token, "count": count or None,
                "pair": [token_text(tokens[left]), token_text(tokens[right])],
                "text": token_text(tokens[left] + tokens[right])}

    def token(self, token_id: int) -> dict[str, Any]:
        data = self.vocab.tokens[token_id]
        return {"id": token_id, "token": token_text(data), "bytes": len(data), "rank": self.rank.get(token_id)}


class DiffView:
    """Versions A and B compared, every section whole; ``page`` answers a part."""

    def __init__(self, a: tuple[VersionInfo, Vocabulary], b: tuple[VersionInfo, Vocabulary]) -> None:
        self.a, self.b = Side(*a), Side(*b)
        pairs_a, pairs_b = self.a.pairs, self.b.pairs
        shared = 0
        for x, y in zip(pairs_a, pairs_b):
            if x != y:
                break
            shared += 1
        set_a, set_b = set(pairs_a), set(pairs_b)
        self.shared = shared
        self.new = [r for r in range(shared, len(pairs_b)) if pairs_b[r] not in set_a]
        self.removed = [r for r in range(shared, len(pairs_a)) if pairs_a[r] not in set_b]
        ta, tb = self.a.vocab.tokens, self.b.vocab.tokens
        self.changed = sorted(i for i in ta.keys() & tb.keys() if ta[i] != tb[i])
        self.only = {"only_a": self._only(self.a, self.b), "only_b": self._only(self.b, self.a)}
        self.ordered: dict[tuple[str, str], list[int]] = {}
        spec_a, spec_b = self.a.info.spec.to_dict(), self.b.info.spec.to_dict()
        self.summary = {
            "a": self.a.info.to_dict(), "b": self.b.info.to_dict(),
            "vocab_size": [len(ta), len(tb)], "merges": [len(pairs_a), len(pairs_b)], "shared_merges": shared,
            "spec_changes": {k: [spec_a[k], spec_b[k]] for k in spec_a if spec_a[k] != spec_b.get(k)},
            "counts": {"new_merges": len(self.new), "removed_merges": len(self.removed),
                       "changed_ids": len(self.changed), "only_a": len(self.only["only_a"]),
                       "only_b": len(self.only["only_b"])},
        }

    @staticmethod
    def _only(side: Side, other: Side) -> list[int]:
        """The ids of the byte strings ``side`` has and ``other`` has not (their lowest ids)."""
        first = side.first_id
        return [first[data] for data in first.keys() - other.first_id.keys()]

    def _only_ordered(self, section: str, order: str) -> list[int]:
        key = (section, order)
        if key not in self.ordered:
            side = self.a if section == "only_a" else self.b
            tokens, only = side.vocab.tokens, self.only[section]
            if order == "rank":  # the made tokens in merge order, then the others by id
                wanted = set(only)
                made = [i for i in side.rank if i in wanted]
                self.ordered[key] = sorted(made, key=side.rank.__getitem__) + sorted(wanted.difference(made))
                return self.ordered[key]
            keys: dict[str, Callable[[int], Any]] = {
                "bytes": lambda i: token_text(tokens[i]),
                "longest": lambda i: (-len(tokens[i]), i),
                "id": lambda i: i,
            }
            self.ordered[key] = sorted(self.only[section], key=keys[order])
        return self.ordered[key]

    def page(self, section: str, start: int, limit: int, *, order: str = "rank", query: str = "") -> dict[str, Any]:
        """``limit`` items of ``section`` from ``start``, and the section's total (after ``query``)."""
        if section not in SECTIONS:
            raise InvalidArgumentError(f"section is one of {', '.join(SECTIONS)}, not {section!r}", params=("section",))
        if order not in ONLY_ORDERS:
            raise InvalidArgumentError(f"order is one of {', '.join(ONLY_ORDERS)}, not {order!r}", params=("order",))
        if section in self.only:
            side = self.a if section == "only_a" else self.b
            ids: Sequence[int] = self._only_ordered(section, order)
            if query:
                folded, tokens = query.casefold(), side.vocab.tokens
                ids = [i for i in ids if folded in token_text(tokens[i]).casefold()]
            return {"total": len(ids), "start": start, "items": [side.token(i) for i in ids[start:start + limit]]}
        if section == "changed_ids":
            ta, tb = self.a.vocab.tokens, self.b.vocab.tokens
            ids = self.changed[start:start + limit]
            return {"total": len(self.changed), "start": start,
                    "items": [{"id": i, "a": token_text(ta[i]), "b": token_text(tb[i])} for i in ids]}
        side, ranks = (self.b, self.new) if section == "new_merges" else (self.a, self.removed)
        return {"total": len(ranks), "start": start, "items": [side.merge(r) for r in ranks[start:start + limit]]}
