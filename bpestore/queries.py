"""Questions about stored vocabularies and corpora: what is this token, which
tokens match, what changed, how a text encodes. Pure.

Works on the vocabularies and merges of versions (plus the pair count each
merge had when it was made) and on word counts; the store fetches them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .errors import InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # opening a store and loading a tokenizer do without the records (~8 ms of dataclasses)
    from .records import Merge

Row = TypeVar("Row", bound=tuple)
T = TypeVar("T")


def token_text(data: bytes) -> str:
    """Bytes as readable text: valid UTF-8 as is, other bytes as \\xNN.

    >>> token_text(b"caf\\xc3\\xa9 \\xff")
    'café \\\\xff'
    """
    return data.decode("utf-8", "backslashreplace")


def shown_token(data: bytes) -> str:
    r"""A token as the CLI prints it, the same in every command: quoted, its UTF-8 text
    as is (a backslash once), characters that do not print and bytes that are not
    UTF-8 escaped as Python escapes them (``--json`` has the exact bytes).

    >>> print(shown_token(b"i<\\w>"), shown_token(b"\xc3"), shown_token(" \n\u200b".encode()))
    'i<\w>' '\xc3' ' \n\u200b'
    """
    return shown_text(token_text(data))


def shown_text(text: str) -> str:
    """``shown_token`` of a token already given as ``token_text``."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    quote = '"' if "'" in text and '"' not in text else "'"
    return f"{quote}{text}{quote}"


def merge_tree(token: int, vocab: dict[int, bytes], made_by: Mapping[int, Merge]) -> dict[str, Any]:
    """How a token was built: the merge that made it, and recursively its parts.

    >>> from bpestore.records import Merge
    >>> vocab = {97: b"a", 98: b"b", 99: b"c", 300: b"ab", 301: b"abc"}
    >>> made_by = {300: Merge(0, 97, 98, 300, 9), 301: Merge(1, 300, 99, 301, 4)}
    >>> merge_tree(301, vocab, made_by)["parts"][0]["token"]
    'ab'
    """
    node: dict[str, Any] = {"id": token, "token": token_text(vocab[token])}
    merge = made_by.get(token)
    if merge is not None:
        node.update(rank=merge.rank, count=merge.count,
                    parts=[merge_tree(merge.left, vocab, made_by), merge_tree(merge.right, vocab, made_by)])
    return node


class Tokens(Protocol):
    """A version's tokens as ``token_info`` reads them (``store.vocabulary.Vocabulary``)."""

    tokens: dict[int, bytes]

    @property
    def kinds(self) -> dict[int, str]: ...

    def made_by(self) -> Mapping[int, Merge]: ...


def token_info(ref: str, token: str | int, vocab: Tokens) -> dict[str, Any]:
    """``Store.token``: a token of version ``ref`` (an id, or a token's exact text)
    with its id, bytes, kind and the merges that built it."""
    tokens = vocab.tokens
    if isinstance(token, int):
        token_id = token
        if token_id not in tokens:
            raise NotFoundError(f"{ref} has no token id {token_id} (ids 0..{max(tokens)})")
    else:
        wanted = token.encode("utf-8")
        matches = [i for i, data in tokens.items() if data == wanted]
        if not matches:
            raise NotFoundError(f"{token!r} is not a token of {ref}; encoding it shows how it is split")
        token_id = matches[0]
    info = merge_tree(token_id, tokens, vocab.made_by())  # (its merge table freed before the kinds are made)
    info["kind"] = vocab.kinds[token_id]
    info["bytes"] = tokens[token_id].hex()
    return info


def first_merges(merges: Sequence[Merge]) -> dict[int, Merge]:
    """The merge that first made each token (later merges may spell it again)."""
    made_by: dict[int, Merge] = {}
    for m in merges:
        made_by.setdefault(m.token, m)
    return made_by


def diff_versions(vocab_a: dict[int, bytes], merges_a: Sequence[Merge],
                  vocab_b: dict[int, bytes], merges_b: Sequence[Merge]) -> dict[str, Any]:
    """What changed from version A to version B.

    ``shared_merges``: length of the common prefix of the merge lists (as byte
    pairs); ``changed_ids``: ids present in both with other bytes (an extension
    has none); ``only_a`` / ``only_b``: byte strings in one vocabulary only, in
    the order of their ids there (base tokens, then merge order).
    """
    def pairs(vocab: dict[int, bytes], merges: Sequence[Merge]) -> list[tuple[bytes, bytes]]:
        return [(vocab[m.left], vocab[m.right]) for m in merges]

    pairs_a, pairs_b = pairs(vocab_a, merges_a), pairs(vocab_b, merges_b)
    shared = 0
    for x, y in zip(pairs_a, pairs_b):
        if x != y:
            break
        shared += 1
    strings_a, strings_b = set(vocab_a.values()), set(vocab_b.values())
    return {
        "vocab_size": [len(vocab_a), len(vocab_b)],
        "merges": [len(merges_a), len(merges_b)],
        "shared_merges": shared,
        "changed_ids": sorted(i for i in vocab_a.keys() & vocab_b.keys() if vocab_a[i] != vocab_b[i]),
        "only_a": list(dict.fromkeys(token_text(vocab_a[i]) for i in sorted(vocab_a) if vocab_a[i] not in strings_b)),
        "only_b": list(dict.fromkeys(token_text(vocab_b[i]) for i in sorted(vocab_b) if vocab_b[i] not in strings_a)),
    }


def diff_counts(a: Mapping[bytes, int], b: Mapping[bytes, int], *, limit: int = 20) -> dict[str, Any]:
    """What changed from word counts A to B: the words new in B and vanished from A
    (most frequent first), and the ``limit`` largest count changes.

    >>> d = diff_counts({b"a": 2, b"b": 1}, {b"a": 5, b"c": 1}, limit=5)
    >>> d["new"], d["vanished"], d["changed"]
    ([{'word': 'c', 'count': 1}], [{'word': 'b', 'count': 1}], [{'word': 'a', 'from': 2, 'to': 5, 'delta': 3}])
    """
    def top(words: Mapping[bytes, int], keys: set[bytes]) -> list[dict[str, Any]]:
        ranked = sorted(keys, key=lambda w: (-words[w], w))[:limit]
        return [{"word": token_text(w), "count": words[w]} for w in ranked]

    new, vanished = b.keys() - a.keys(), a.keys() - b.keys()
    changed = sorted((w for w in a.keys() & b.keys() if a[w] != b[w]), key=lambda w: (-abs(b[w] - a[w]), w))
    return {
        "new_words": len(new),
        "vanished_words": len(vanished),
        "changed_words": len(changed),
        "new": top(b, new),
        "vanished": top(a, vanished),
        "changed": [{"word": token_text(w), "from": a[w], "to": b[w], "delta": b[w] - a[w]}
                    for w in changed[:limit]],
    }


def pick_tokens(rows: Iterable[Row], *, grep: str | None = None, prefix: str | None = None,
                longest: int | None = None, limit: int | None = None) -> list[Row]:
    """The rows ``(id, bytes, ...)`` of the tokens wanted, by id: those whose bytes
    start with ``prefix`` (as UTF-8) and whose text (``token_text``) matches the
    regular expression ``grep`` anywhere; ``longest``: the N longest (in bytes)
    of those instead, longest first, ties by id; then at most ``limit``.

    >>> rows = [(1, b"a"), (2, b"the"), (3, b" the"), (4, b"then"), (5, b"\\xe2")]
    >>> [r[0] for r in pick_tokens(rows, grep="the", longest=2)]
    [3, 4]
    >>> [r[0] for r in pick_tokens(rows, prefix="th")], [r[0] for r in pick_tokens(rows, grep=r"^\\\\x")]
    ([2, 4], [5])
    """
    for name, value in (("longest", longest), ("limit", limit)):
        if value is not None and value < 0:
            raise InvalidArgumentError(f"{name} cannot be negative, not {value}", params=(name,))
    picked = list(rows)
    if prefix:
        start = prefix.encode("utf-8", "surrogatepass")
        picked = [r for r in picked if r[1].startswith(start)]
    match = token_matcher(grep)
    if match is not None:
        picked = [r for r in picked if match(r[1])]
    if longest is not None:
        picked = sorted(picked, key=lambda r: (-len(r[1]), r[0]))[:longest]
    return picked if limit is None else picked[:limit]


class TimedMatcher:
    """``token_matcher`` with a time limit over all its calls together (``timeout``
    seconds from the first): a pattern that backtracks catastrophically stops.
    Matches with the ``regex`` module (``re``'s syntax), which can stop a search;
    after the limit every call is False and ``timed_out`` is set.

    >>> m = TimedMatcher(r"(a|aa)+$", 0.05)
    >>> m(b"a" * 40 + b"!"), m.timed_out
    (False, True)
    """

    def __init__(self, grep: str, timeout: float) -> None:
        import regex

        try:
            re.compile(grep)  # re's syntax and messages, as without a time limit
            self.search = regex.compile(grep).search
        except (regex.error, re.error) as exc:
            raise InvalidArgumentError(f"grep is not a regular expression: {exc} in {grep!r}",
                                       params=("grep",)) from None
        self.timeout = timeout
        self.deadline: float | None = None
        self.timed_out = False

    def __call__(self, data: bytes) -> bool:
        if self.timed_out:
            return False
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.timeout
        left = self.deadline - now
        if left <= 0:  # (regex reads a timeout of 0 or less as none)
            self.timed_out = True
            return False
        try:
            return self.search(data.decode("utf-8", "backslashreplace"), timeout=left) is not None
        except TimeoutError:
            self.timed_out = True
            return False


def token_matcher(grep: str | None, timeout: float | None = None) -> Callable[[bytes], bool] | None:
    """Whether a token's text (``token_text``) matches the regular expression
    ``grep`` anywhere; None for no ``grep``. With ``timeout``: a ``TimedMatcher``.

    >>> token_matcher(r"^ t")(b" the"), token_matcher(r"\\\\xff")(b"\\xff")
    (True, True)
    """
    if grep is None:
        return None
    if timeout is not None:
        return TimedMatcher(grep, timeout)
    try:
        search = re.compile(grep).search
    except re.error as exc:
        raise InvalidArgumentError(f"grep is not a regular expression: {exc} in {grep!r}",
                                   params=("grep",)) from None
    return lambda data: search(data.decode("utf-8", "backslashreplace")) is not None


class TextTotals:
    """The UTF-8 bytes and the words of a text read in chunks; a word is a run
    of non-space characters, which a chunk's end may cut.

    >>> totals = TextTotals()
    >>> list(totals.watch(["ab c", "d é"]))
    ['ab c', 'd é']
    >>> totals.bytes, totals.words
    (8, 3)
    """

    def __init__(self) -> None:
        self.bytes = 0
        self.words = 0

    def watch(self, chunks: Iterable[str]) -> Iterator[str]:
        """The chunks, unchanged, counted as they pass."""
        in_word = False
        for chunk in chunks:
            if not chunk:
                continue
            self.bytes += len(chunk.encode("utf-8", "surrogatepass"))
            self.words += len(chunk.split()) - (in_word and not chunk[0].isspace())
            in_word = not chunk[-1].isspace()
            yield chunk


TOKEN_ORDERS = ("id", "rank", "newest", "longest")


def order_tokens(tokens: Sequence[T], order: str) -> list[T]:
    """Tokens (``TokenInfo``) in one of ``TOKEN_ORDERS``: by id; by the rank of the merge
    that made each (``rank``, oldest first; ``newest``, latest first), base tokens last;
    or longest first (ties by id).

    >>> from bpestore.records import TokenInfo
    >>> ts = [TokenInfo(97, b"a", "byte"), TokenInfo(256, b"ab", "merge", 0, 9), TokenInfo(257, b"abc", "merge", 1, 4)]
    >>> [t.id for t in order_tokens(ts, "newest")], [t.id for t in order_tokens(ts, "rank")]
    ([257, 256, 97], [256, 257, 97])
    """
    keys: dict[str, Callable[[Any], Any]] = {
        "id": lambda t: t.id,
        "rank": lambda t: (t.rank is None, t.rank or 0, t.id),
        "newest": lambda t: (t.rank is None, -(t.rank or 0), t.id),
        "longest": lambda t: (-len(t.data), t.id),
    }
    if order not in keys:
        raise InvalidArgumentError(f"order is one of {', '.join(TOKEN_ORDERS)}, not {order!r}", params=("order",))
    return sorted(tokens, key=keys[order])
