"""The BPE training algorithm over word counts. Pure: no database, no files.

Each step merges the most frequent adjacent pair of tokens, counted over the
distinct words times their counts. The loop is incremental:

* ``pair_counts`` holds the count of every adjacent pair;
* ``pair_words`` maps a pair to the words it may occur in (a superset: words
  are not removed when they lose a pair, only skipped when merged);
* a heap orders pairs by (count, tie-break); entries go stale when a count
  drops and are re-pushed with the current count when they surface ("lazy").

A merge rewrites only the words that hold the pair, and for each occurrence
updates only the pairs next to it. Counts of pairs made of older tokens can
only go down, so the heap needs new entries only for pairs with the new token.

Ties between equal counts:
* ``lexicographic``: the greater (left bytes, right bytes) wins (CS336, subword-nmt);
* ``hf``: the smaller (left id, right id) in Hugging Face's numbering wins
  (specials, then the alphabet in code point order, then merges in order);
* ``first-seen``: the pair that occurs first in the text as it stands wins (the
  notebooks' and minbpe's ``max(stats, key=stats.get)`` over a dict filled in text
  order). The words must come in the order the text first shows them; a pair's
  first occurrence is then the earliest word that holds it now, and in that word
  its earliest place among the word's current tokens. With words ``ab`` (first)
  and ``cab``: ``(a, b)`` comes first; once ``(c, a)`` merged into ``ca``,
  ``ab`` still holds ``(a, b)`` at 0 while ``(ca, b)`` is in the second word, so
  ``(a, b)`` still wins a tie; had ``(a, b)`` merged first, ``(c, ab)`` would
  come first of the second word's pairs. The place is kept as
  ``(word index << 32) | byte offset in the word`` (offsets keep their order
  when tokens merge); it is found again only for a pair pushed on the heap or
  come to its top after an occurrence in (or before) its first word came or went.

A token whose bytes already exist (two merges can spell the same string) keeps
its existing id, as in Hugging Face ``tokenizers``: a vocabulary never has two
ids for one byte string.

The compiled core (``bpestore._mergecore.Trainer``, optional) holds the same
state in C (flat word arrays, a pair hash table, per-pair word arrays, the heap
with every tie-break, the ids by bytes) and does the same steps, a batch of merges
per call (``step``) without Python's lock; Python keeps the records, and is asked
only ``allow_merge`` where one is given. The words go to it one at a time from the
iterable given, so they never exist as Python lists all at once; stored merges to
resume or extend from (``replay``) are applied by the core to each word as it comes
in (per-word BPE with ranks, ``bpe.merge_word``'s rule), so a resume builds no
Python list either.
"""

from __future__ import annotations

import heapq
import math
import os
import sys
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from . import alphabet, native
from .bpe import PAIR_SHIFT, merge_word
from .errors import InvalidArgumentError
from .records import Merge
from .spec import TIE_BREAKS, TokenizerSpec

_LOW = 0xFFFFFFFF
_NO_LIMIT = (1 << 64) - 1  # the compiled core's "no vocabulary target"


# The merge loop's compiled core, or None: the pure-Python loop below (the reference).
COMPILED_CORE, CORE_STATUS = native.load("_mergecore")


def merge_core() -> str:
    """Which merge core training uses: ``compiled (C)`` or ``pure-Python (<reason>)``."""
    return native.describe(COMPILED_CORE, CORE_STATUS)


PARALLEL_REPLAY_MIN_WORDS = 50_000  # words from which replay_words forks a helper
# Compiled core: a merge (or the initial count) is split over threads when each gets at least this many words.
PARALLEL_MIN_WORDS = 4096


def default_threads() -> int:
    """The cores this process may run on: the compiled core's default thread count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


_REVERSE_BYTES = bytes(range(255, -1, -1))


def reversed_order_key(data: bytes) -> bytes:
    """A key whose ascending order is the descending order of ``data``.

    Each byte b becomes (0, 255 - b) and the key ends with 1, so a string sorts
    after every string it is a prefix of (b'a' > b'ab' after the mapping).
    """
    key = bytearray(2 * len(data) + 1)
    key[1::2] = data.translate(_REVERSE_BYTES)
    key[-1] = 1
    return bytes(key)


class BpeTrainer:
    """Incremental BPE over word counts.

    >>> words = [([ord(c) for c in "low"], 5), ([ord(c) for c in "lower"], 2)]
    >>> trainer = BpeTrainer(words, [bytes([i]) for i in range(256)])
    >>> [(trainer.token_bytes[m.left], trainer.token_bytes[m.right])
    ...  for m in trainer.train(max_merges=2)]
    [(b'o', b'w'), (b'l', b'ow')]
    """

    def __init__(
        self,
        words: Iterable[tuple[Sequence[int], int]],
        token_bytes: Sequence[bytes],
        *,
        tie_break: str = "lexicographic",
        hf_order: Sequence[int] | None = None,
        min_frequency: int = 1,
        max_token_length: int | None = None,
        allow_merge: Callable[[bytes, bytes], bool] | None = None,
        special_ids: Iterable[int] = (),
        compiled: bool | None = None,
        threads: int | None = None,
    ) -> None:
        """``words``: (initial token ids, count) pairs; ``token_bytes``: the
        initial vocabulary by id, special tokens (``special_ids``) included.
        ``hf_order`` lists the initial ids in Hugging Face's numbering (needed
        only for ``tie_break="hf"``); for ``"first-seen"`` the words come in the order
        the text first shows them. ``allow_merge(left, right)`` may forbid a
        pair for good (e.g. a token must not hold a space inside); like
        ``max_token_length`` it is asked when the pair is about to be merged.
        ``compiled``: use the compiled merge core (None: where it is built and
        ``BPESTORE_PURE`` is not set; True: it must be built); both give the
        same merges. ``threads``: how many threads the compiled core may use for the
        initial pair count and for each large merge (default: the cores this process
        may run on); the merges are the same for any number."""
        if tie_break not in TIE_BREAKS:
            raise InvalidArgumentError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, not {tie_break!r}",
                                       params=("tie_break",))
        self.tie_break = tie_break
        self.min_frequency = max(1, min_frequency)
        self.max_token_length = max_token_length
        self.allow_merge = allow_merge
        if compiled and COMPILED_CORE is None:
            raise InvalidArgumentError(f"the compiled merge core is unavailable: {CORE_STATUS}", params=("compiled",))
        self._core: Any = COMPILED_CORE if compiled is not False else None
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InvalidArgumentError(f"threads must be a positive whole number, not {threads!r}", params=("threads",))
        self.threads = min(threads or default_threads(), 256)
        self._state: Any = None  # the compiled core's Trainer, made by _build_stats
        # Compiled: the words stay in the iterable until _build_stats feeds them to C.
        self._source: Iterable[tuple[Sequence[int], int]] = words if self._core is not None else ()
        # Compiled: replayed merges as (left, right, made) stages, applied in C as the words come in.
        self._replays: list[list[tuple[int, int, int]]] = []
        self.words: list[list[int]] = []
        self.counts: list[int] = []
        if self._core is None:
            for symbols, count in words:
                if count > 0:
                    self.words.append(list(symbols))
                    self.counts.append(count)
        self.token_bytes: list[bytes] = list(token_bytes)
        # Ordinary tokens by bytes (a merge never yields a special token's id); once the
        # compiled core has the words, it keeps them (this stops growing).
        self.id_of_bytes = alphabet.ordinary_ids(self.token_bytes, special_ids)
        if tie_break == "hf":
            if hf_order is None:
                raise InvalidArgumentError("tie_break='hf' needs hf_order", params=("tie_break", "hf_order"))
            tie = list(range(len(self.token_bytes)))
            for hf_id, token_id in enumerate(hf_order):
                tie[token_id] = hf_id
            self._tie: list = tie
        elif tie_break == "first-seen":
            self._tie = []
        else:
            self._tie = [reversed_order_key(b) for b in self.token_bytes]
        self.first_seen = tie_break == "first-seen"
        # first-seen: each pair's first occurrence, (word index << 32) | byte offset; absent: to find again.
        self._first: dict[int, int] = {}
        # The merges made, replayed ones first: (left, right, token) ids and counts, records made when asked.
        self._ids = array("I")
        self._counts = array("q")
        self._records: list[Merge] = []
        self._stats_ready = False

    # -- set-up ----------------------------------------------------------
    def replay(self, merges: Sequence[tuple[int, int]], counts: Sequence[int] | None = None, *,
               parallel_min_words: int = PARALLEL_REPLAY_MIN_WORDS) -> None:
        """Apply stored merges (pairs of ids, in rank order) without searching.

        Used to resume or extend: each word gets the merges by per-word BPE
        with ranks, which is what the uninterrupted run's words look like.
        Compiled: the core does it in C to each word as it takes the words.
        Pure: from ``parallel_min_words`` words on, a second process helps (``replay_words``).
        """
        if self._stats_ready:
            raise RuntimeError("replay() must come before train()")
        if not merges:
            return
        ranks: dict[int, int] = {}
        merged_ids: list[int] = []
        for left, right in merges:
            token = self._add_token(left, right)
            ranks.setdefault((left << PAIR_SHIFT) | right, len(merged_ids))
            merged_ids.append(token)
            self._counts.append(counts[len(self._counts)] if counts else 0)
            self._ids.extend((left, right, token))
        if self._core is not None:
            # Applied in C to each word as it goes in (the core's per-word BPE with ranks).
            self._replays.append([(left, right, token) for (left, right), token in zip(merges, merged_ids)])
            return
        self.words = replay_words(self.words, ranks, merged_ids, parallel_min_words=parallel_min_words)

    def _add_token(self, left: int, right: int) -> int:
        data = self.token_bytes[left] + self.token_bytes[right]
        token = self.id_of_bytes.get(data)
        if token is None:
            token = len(self.token_bytes)
            self.token_bytes.append(data)
            self.id_of_bytes[data] = token
            if self._state is None and not self.first_seen:  # (the built core keeps each new token's tie itself)
                self._tie.append(token if self.tie_break == "hf" else reversed_order_key(data))
        return token

    def _build_stats(self) -> None:
        """Count every adjacent pair and index the words each pair occurs in.

        An index bucket is a plain list of word indices (a word appears once
        per bucket: its occurrences are visited together); it is never pruned,
        so a word that lost the pair is simply skipped when the pair merges.
        """
        if self._core is not None:
            self._build_compiled()
            return
        pair_counts: dict[int, int] = {}
        pair_words: dict[int, list[int]] = {}
        for index, (word, count) in enumerate(zip(self.words, self.counts)):
            for i in range(len(word) - 1):
                key = (word[i] << PAIR_SHIFT) | word[i + 1]
                pair_counts[key] = pair_counts.get(key, 0) + count
                bucket = pair_words.get(key)
                if bucket is None:
                    pair_words[key] = [index]
                elif bucket[-1] != index:
                    bucket.append(index)
        self.pair_counts = pair_counts
        self.pair_words = pair_words
        if self.first_seen:
            first = self._first_of
            self.heap = [(-c, first(k), 0, k) for k, c in pair_counts.items()]
        else:
            tie = self._tie
            self.heap = [(-c, tie[k >> PAIR_SHIFT], tie[k & _LOW], k) for k, c in pair_counts.items()]
        heapq.heapify(self.heap)
        self._stats_ready = True

    def _first_of(self, key: int) -> int:
        """first-seen: pair ``key``'s first occurrence, (word index << 32) | byte offset,
        found again (in the words its bucket lists, each before the best so far) when unknown."""
        first = self._first.get(key)
        if first is not None:
            return first
        left, right = key >> PAIR_SHIFT, key & _LOW
        token_bytes, words = self.token_bytes, self.words
        best = -1
        for index in self.pair_words.get(key, ()):
            if best >= 0 and index >= best >> 32:
                continue
            word = words[index]
            at = 0
            for i in range(len(word) - 1):
                if word[i] == left and word[i + 1] == right:
                    best = (index << 32) | at
                    break
                at += len(token_bytes[word[i]])
        self._first[key] = best
        return best

    def _moved(self, key: int, index: int, gained: bool) -> None:
        """first-seen: pair ``key`` lost or gained an occurrence in word ``index``."""
        first = self._first.get(key)
        if first is not None and (index == first >> 32 or (gained and index < first >> 32)):
            del self._first[key]

    def _build_compiled(self) -> None:
        """Hand the words to the compiled core, which replays the stored merges on
        each as it comes in (if merges were replayed), counts the pairs and makes the heap."""
        state = self._core.Trainer(self.token_bytes, self._tie if self.tie_break == "hf" else None,
                                   threads=self.threads, parallel_min=PARALLEL_MIN_WORDS,
                                   ordinary=list(self.id_of_bytes.values()),
                                   **({"first_seen": True} if self.first_seen else {}))
        for stage in self._replays:
            state.replay(stage)
        self._replays = []
        source, self._source = self._source, ()
        state.add_words(source)  # one word at a time: no list of them all
        state.build()
        self._state = state
        self._stats_ready = True

    def prepare(self) -> None:
        """Take the words and count their pairs now (``train`` does it first
        otherwise): a caller streaming the words from a database cursor calls
        it while the cursor is open."""
        if not self._stats_ready:
            self._build_stats()

    @property
    def n_merges(self) -> int:
        return len(self._counts)

    def merge_columns(self, start: int = 0, stop: int | None = None) -> tuple[array, array, array, array]:
        """Merges ``start`` to ``stop`` (rank order, replayed ones first) as columns:
        left ids, right ids, token ids, counts."""
        stop = self.n_merges if stop is None else stop
        ids = self._ids[3 * start:3 * stop]
        return ids[0::3], ids[1::3], ids[2::3], self._counts[start:stop]

    @property
    def merges(self) -> list[Merge]:
        """The merges as records, in rank order (replayed ones first)."""
        have = len(self._records)
        if have < len(self._counts):
            ids = self._ids
            self._records += map(Merge, range(have, len(self._counts)), ids[3 * have::3], ids[3 * have + 1::3],
                                 ids[3 * have + 2::3], self._counts[have:])
        return self._records

    # -- the loop --------------------------------------------------------
    def train(self, *, vocab_size: int | None = None, max_merges: int | None = None) -> Iterator[Merge]:
        """Yield merges until the vocabulary has ``vocab_size`` tokens, ``max_merges``
        merges exist in all (replayed ones included), or no pair is frequent enough."""
        while self.step(1, vocab_size=vocab_size, max_merges=max_merges):
            yield self.merges[-1]

    def step(self, n: int, *, vocab_size: int | None = None, max_merges: int | None = None,
             seconds: float = math.inf) -> int:
        """Make up to ``n`` merges: fewer where the vocabulary reaches ``vocab_size``
        tokens, ``max_merges`` merges exist in all (replayed ones included), ``seconds``
        have passed (at least one is made), or no pair is frequent enough. Returns how
        many were made (0: none is left to make); ``columns`` and ``merges`` hold them."""
        if not self._stats_ready:
            self._build_stats()
        if max_merges is not None:
            n = min(n, max_merges - self.n_merges)
        if n <= 0:
            return 0
        if self._state is not None:
            return self._step_in_core(n, vocab_size, seconds)
        made, deadline = 0, time.monotonic() + seconds
        while made < n and (vocab_size is None or len(self.token_bytes) < vocab_size):
            key = self._pop_best()
            if key is None:
                break
            self._merge(key)
            made += 1
            if time.monotonic() >= deadline:
                break
        return made

    def _step_in_core(self, n: int, vocab_size: int | None, seconds: float) -> int:
        """``step`` where the compiled core holds the words: it makes the merges and picks
        their ids; here each new token's bytes are added."""
        ids, counts = self._state.run(n, _NO_LIMIT if vocab_size is None else max(vocab_size, 0),
                                      self.min_frequency, self.max_token_length, self.allow_merge, seconds)
        start = len(self._ids)
        self._ids.frombytes(ids)
        self._counts.frombytes(counts)
        self.token_bytes += self._state.tokens_from(len(self.token_bytes))  # (each its left's + its right's)
        return (len(self._ids) - start) // 3

    def close(self) -> None:
        """Free the words and pair counts (the merges and tokens stay): no merge comes after."""
        self._state = None
        self.words, self.counts, self.pair_counts, self.pair_words, self.heap = [], [], {}, {}, []

    def _pop_best(self) -> int | None:
        """The most frequent pair (ties broken by the rule), or None to stop."""
        max_len = self.max_token_length
        heap, pair_counts = self.heap, self.pair_counts
        while heap:
            neg_count, tie_left, tie_right, key = heap[0]
            current = pair_counts.get(key, 0)
            if self.first_seen and current > 0 and self._first_of(key) != tie_left:
                tie_left, neg_count = self._first[key], 0  # its first occurrence moved: stale too
            if current != -neg_count:
                # Stale entry: its count has dropped since it was pushed.
                if current > 0:
                    heapq.heapreplace(heap, (-current, tie_left, tie_right, key))
                else:
                    heapq.heappop(heap)
                continue
            if current < self.min_frequency:
                return None
            heapq.heappop(heap)
            left, right = self.token_bytes[key >> PAIR_SHIFT], self.token_bytes[key & _LOW]
            if (max_len is not None and len(left) + len(right) > max_len) or (
                    self.allow_merge is not None and not self.allow_merge(left, right)):
                # Forbidden: drop the pair for good (its count can only go down,
                # so it is never pushed again).
                continue
            return key
        return None

    def _merge(self, key: int) -> None:
        """Merge pair ``key`` in every word that holds it, updating the counts.

        A word with several occurrences is rebuilt once (slices between them
        copied in C), so a word of n symbols with k occurrences costs O(n + k),
        not the O(n k) of deleting in place occurrence by occurrence (one
        long word was quadratic); a word's only occurrence is merged in place.
        """
        left, right = key >> PAIR_SHIFT, key & _LOW
        count = self.pair_counts[key]
        token = self._add_token(left, right)
        words, counts = self.words, self.counts
        touched: set[int] = set()  # pairs with the new token whose count grew
        token_left = token << PAIR_SHIFT

        for index in self.pair_words.pop(key, ()):
            word = words[index]
            # Visit each occurrence of `left` (found in C by list.index) and
            # merge it when `right` follows it, left to right, into `out`.
            remaining = word.count(left)
            last = len(word) - 1
            n = counts[index]
            out: list[int] | None = None
            copied = 0  # word[:copied] is in `out` already (merged)
            i = -1
            while remaining:
                i = word.index(left, i + 1)
                remaining -= 1
                if i < last and word[i + 1] == right:
                    if right == left:
                        remaining -= 1  # the merged `right` was an occurrence too
                    # (prev, left) becomes (prev, token) and (right, next)
                    # becomes (token, next); prev is the new token when the
                    # occurrences are adjacent ("a b a b"): out[-1] holds it.
                    if out is not None:
                        out += word[copied:i]
                        prev = out[-1] << PAIR_SHIFT
                    else:
                        prev = word[i - 1] << PAIR_SHIFT if i else -1
                    if prev >= 0:
                        self._move(prev | left, prev | token, n, index, touched)
                    if i + 2 <= last:
                        nxt = word[i + 2]
                        self._move((right << PAIR_SHIFT) | nxt, token_left | nxt, n, index, touched)
                    if out is None:
                        if not remaining:
                            # The word's only occurrence (the common case): in place.
                            word[i] = token
                            del word[i + 1]
                            break
                        out = word[:i]
                    out.append(token)
                    copied = i + 2
                    i += 1  # the merged `right` is not a start
            if out is not None:
                out += word[copied:]
                words[index] = out
        self._finish_merge(key, left, right, token, count, touched)

    def _move(self, lost: int, gain: int, n: int, index: int, touched: set[int]) -> None:
        """Word ``index``'s ``n`` of pair ``lost`` (beside a merged occurrence) become pair ``gain``."""
        pair_counts, pair_words = self.pair_counts, self.pair_words
        pair_counts[lost] -= n
        pair_counts[gain] = pair_counts.get(gain, 0) + n
        if self.first_seen:
            self._moved(lost, index, False)
            self._moved(gain, index, True)
        touched.add(gain)
        bucket = pair_words.get(gain)
        if bucket is None:
            pair_words[gain] = [index]
        elif bucket[-1] != index:
            bucket.append(index)

    def _finish_merge(self, key: int, left: int, right: int, token: int, count: int, touched: set[int]) -> None:
        """Drop the merged pair, push the pairs that grew onto the heap, record the merge."""
        pair_counts = self.pair_counts
        # Every occurrence of the pair is gone (left-to-right merging leaves none).
        pair_counts.pop(key, None)
        self._first.pop(key, None)
        tie = self._tie
        for new_key in touched:
            c = pair_counts.get(new_key, 0)
            if c > 0:
                if self.first_seen:
                    heapq.heappush(self.heap, (-c, self._first_of(new_key), 0, new_key))
                else:
                    heapq.heappush(self.heap, (-c, tie[new_key >> PAIR_SHIFT], tie[new_key & _LOW], new_key))
            else:
                pair_counts.pop(new_key, None)
                self._first.pop(new_key, None)
        self._ids.extend((left, right, token))
        self._counts.append(count)


# Words handed to a forked replay child (copy-on-write, never pickled).
_REPLAY_STATE: tuple[list[list[int]], dict[int, int], list[int]] | None = None


def _replay_slice(bounds: tuple[int, int]) -> list[list[int]]:
    assert _REPLAY_STATE is not None, "set by replay_words before the fork"
    words, ranks, merged_ids = _REPLAY_STATE
    return [merge_word(w, ranks, merged_ids) if len(w) > 1 else w
            for w in words[bounds[0]:bounds[1]]]


def replay_words(words: list[list[int]], ranks: dict[int, int], merged_ids: list[int], *,
                 parallel_min_words: int = PARALLEL_REPLAY_MIN_WORDS) -> list[list[int]]:
    """Per-word BPE of every word; from ``parallel_min_words`` words on, on Linux
    with several cores, a forked child does the second half while this process
    does the first."""
    global _REPLAY_STATE
    n = len(words)
    if n < parallel_min_words or (os.cpu_count() or 1) < 2 or sys.platform != "linux":
        return [merge_word(w, ranks, merged_ids) if len(w) > 1 else w for w in words]
    import multiprocessing  # here, not at import: training from counts never forks (3 ms at start-up)

    _REPLAY_STATE = (words, ranks, merged_ids)
    try:
        # The child inherits the words by fork; only its results are pickled.
        with multiprocessing.get_context("fork").Pool(1) as pool:
            second = pool.apply_async(_replay_slice, ((n // 2, n),))
            first = _replay_slice((0, n // 2))
            return first + second.get()
    finally:
        _REPLAY_STATE = None


def train_word_counts(
    word_counts: Mapping[bytes, int],
    *,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    tie_break: str = "lexicographic",
    min_frequency: int = 1,
    max_token_length: int | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Byte-level BPE on word counts; returns (vocab, merges) as bytes."""
    spec = TokenizerSpec(special_tokens=tuple(special_tokens), tie_break=tie_break)
    trainer = BpeTrainer(
        alphabet.initial_words(spec, word_counts),
        alphabet.initial_vocab(spec),
        tie_break=tie_break,
        hf_order=alphabet.hf_order(spec) if tie_break == "hf" else None,
        min_frequency=min_frequency,
        max_token_length=max_token_length,
        special_ids=alphabet.special_ids(spec),
    )
    for _ in trainer.train(vocab_size=vocab_size):
        pass
    vocab = dict(enumerate(trainer.token_bytes))
    merges = [(trainer.token_bytes[m.left], trainer.token_bytes[m.right]) for m in trainer.merges]
    return vocab, merges
