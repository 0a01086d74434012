"""The accelerated encoder: tiktoken's Rust core fed a version's ranks.

It is used only where it provably gives the ids of the pure-Python encoder
(``bpe.merge_word`` on the spec's pre-tokens), which stays the reference and the
fallback. Three gates, each checked once and cached:

1. **The spec** is exactly what tiktoken runs: byte-level symbols, no
   normalizer, no word markers, ``merge`` segmentation, and one of the
   pre-tokenizer patterns tiktoken ships (``gpt2``, ``cl100k``, ``o200k``).
   Special tokens are matched by bpestore in Python before any of this, so
   they never reach tiktoken.

2. **The version** passes ``rank_equivalence_problem`` (below): merge-rule BPE
   (ours: merge the adjacent pair of lowest *merge* rank) and rank-based BPE
   (tiktoken: merge the adjacent pair whose *concatenation* has the lowest
   rank) then agree on every input.

3. **The text**: the two regex engines (Python's ``regex`` module and Rust's
   ``fancy-regex``) carry their own Unicode tables, which differ for
   characters assigned in newer Unicode versions (tiktoken 0.14 knows the
   letters of Unicode 16.0 but not those of 17.0; ``regex`` 2026.11 knows 17.0
   and later: they split differently around 17,480 letters and digits, none of
   them assigned in Python 3.11's Unicode 14.0). Both engines are checked to
   know a letter new in each Unicode version up to that of Python's
   ``unicodedata``, and a stretch of text holding a character unassigned there
   is encoded by the pure path. ``tests/test_tiktoken_path.py`` compares the engines
   around every code point ``unicodedata`` knows.

Why gate 2 is enough (the proof)
--------------------------------
Let the merges be (l_k, r_k), k = 0..K-1, and t_k = l_k + r_k the token merge k
makes. Merge-rule BPE (MB) starts from the bytes of a word and repeatedly
joins the adjacent pair (l_k, r_k) of lowest k, leftmost first. Rank-based BPE
(RB) repeatedly joins the adjacent pair (x, y), x and y tokens, whose
concatenation is a token t_k, lowest k first, leftmost first; tiktoken feeds it
rank(t_k) = id(t_k), and returns a whole pre-token that is a token at once.
Call (x, y) an *alien split* of t_k when x + y = t_k but (x, y) != (l_k, r_k).

The check requires:

(W) the t_k are pairwise distinct; l_k and r_k are single bytes or tokens
    t_j with j < k; id(t_k) grows with k;
(S) every t_k encodes to itself under MB: merge_word(bytes of t_k) == [t_k].

Claim: under (W) and (S), MB and RB give the same tokens for every byte string.

Step 1 (MB applies merges in non-decreasing rank). After joining (l_k, r_k),
the only new pairs involve t_k, and by (W) a merge using t_k has a rank > k;
every other pair present already had rank >= k.

Step 2 (no alien split is ever adjacent in an MB state). Suppose tokens x, y
stand side by side at some point of MB on a word w, and x + y = t_k. No merge
so far crossed the outer edges of x y (x and y are tokens now, and tokens
only grow), so the merges made inside x y, in their order, are what MB does on
the bytes of t_k alone: at each of them the pair joined was the lowest
(leftmost) pair in the whole word, hence inside x y too. So MB on t_k passes
through the state [x, y]. There the only pair is (x, y); if it is not
(l_k, r_k), no merge applies and MB(t_k) = [x, y], contradicting (S). So
(x, y) = (l_k, r_k).

Step 3 (both make the same choice at every step). While their states agree,
the pairs RB may join are the adjacent pairs whose concatenation is a token;
by step 2 each is (l_k, r_k) for its token, with RB priority id(t_k), which
orders pairs exactly as k does (W). So RB's candidates and their order equal
MB's, both take the leftmost of the lowest, and both stop together. RB's
shortcut (a pre-token that is itself a token t_k comes out as [t_k]) agrees
with MB by (S).

(S) is also what GitHub's ``bpe`` crate asserts of every dictionary it loads
("token ... encodes to ... instead of to itself"); (W) holds for every version
bpestore trains (ids are 256 + specials + rank) and for GPT-2's files. (S) is
decided without encoding a token (``_seam_problem``: a walk along the two
merge-tree spines at each token's seam, exact, about a third of the cost of
encoding every token for GPT-2); a store decides it once per complete version
and keeps the answer (store/snapshot.py).
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import cast

from . import native
from .spec import TokenizerSpec
from .text import PATTERNS

# Pre-tokenizers whose pattern tiktoken ships and runs with the same meaning.
FAST_PRETOKENIZERS = ("gpt2", "cl100k", "o200k")
CONCURRENT_CHECK_AFTER = 1 << 20  # characters of a text whose check runs beside its encoding


def spec_problem(spec: TokenizerSpec) -> str | None:
    """Why tiktoken cannot run this spec's pipeline as is (None: it can)."""
    if not spec.byte_level:
        return "the alphabet is not bytes"
    if spec.normalizer_steps:
        return "the spec has a normalizer"
    if spec.end_of_word or spec.start_of_word:
        return "the spec has word markers"
    if spec.space_marker is not None or spec.dummy_prefix != "never":
        return "the spec has a space marker or a dummy prefix"
    if spec.segmentation != "merge":
        return f"segmentation is {spec.segmentation}"
    if spec.pretokenizer not in FAST_PRETOKENIZERS:
        return f"pre-tokenizer {spec.pretokenizer} is not one tiktoken ships"
    return None


def rank_equivalence_problem(merges: Sequence[tuple[bytes, bytes]], id_of: dict[bytes, int],
                             encode_bytes: Callable[[bytes], list[int]], *, checked: int = 0) -> str | None:
    """Check (W) and (S) of the module docstring; the first failure, or None.

    ``id_of`` maps ordinary token bytes to ids; ``encode_bytes`` is the
    reference encoder of one word's bytes (merge rule, no pre-tokenizer),
    which says what a token that fails encodes to. (S) is decided for each
    token in rank order by ``_seam_problem`` (below), a walk down the two
    merge-tree spines that meet at the token's seam, which gives exactly the
    answer of encoding the token (``_encoding_problem``, the definition, which
    tests/test_tiktoken_path.py compares it with) at a fraction of the cost: a store
    keeps the answer of each complete version all the same. ``checked``: the
    first merges are those of a list that passed (an extension's parent), so
    their tokens need no check: whether a token encodes to itself depends only
    on the merges before it, once (W) holds for the whole list.
    """
    made_at: dict[bytes, int] = {}
    last_id = -1
    for k, (left, right) in enumerate(merges):
        token = left + right
        if token in made_at:
            return f"merges {made_at[token]} and {k} both make {token!r}"
        for part in (left, right):
            if len(part) != 1 and part not in made_at:
                return f"merge {k} uses {part!r} before a merge makes it"
        token_id = id_of[token]
        if token_id <= last_id:
            return f"ids do not grow with merge rank (merge {k} makes id {token_id})"
        made_at[token] = k
        last_id = token_id
    failed = _seam_problem(merges, made_at, checked)
    if failed is None:
        return None
    token = merges[failed][0] + merges[failed][1]
    return f"token {token!r} (merge {failed}) does not encode to itself but to {encode_bytes(token)}"


def _encoding_problem(merges: Sequence[tuple[bytes, bytes]], id_of: dict[bytes, int],
                      encode_bytes: Callable[[bytes], list[int]], checked: int = 0) -> int | None:
    """(S) by its definition: the first merge from ``checked`` on whose token does
    not encode to itself (one ``encode_bytes`` per token), or None."""
    for k in range(checked, len(merges)):
        left, right = merges[k]
        if encode_bytes(left + right) != [id_of[left + right]]:
            return k
    return None


def _seam_problem(merges: Sequence[tuple[bytes, bytes]], made_at: dict[bytes, int], checked: int = 0, *,
                  compiled: bool = True) -> int | None:
    """(S) without encoding: the first merge from ``checked`` on whose token does
    not encode to itself, or None. Requires (W) (``made_at``: each token's merge).
    ``compiled``: the walk runs in the merge core where it is built (the same answer;
    the loop below is its reference).

    Why it is exact. Take the tokens in rank order and suppose every token made
    before t_k = l_k + r_k encodes to itself. The merge rule applies merges in
    non-decreasing rank, so t_k encodes to itself iff merges below k leave the
    bytes of t_k as [l_k, r_k]: iff no merge below k ever joins two tokens
    across the seam between l_k's bytes and r_k's. Until one does, l_k's bytes
    evolve as l_k alone does, and since l_k encodes to itself, every merge is
    its pair's own (merge j joins (l_j, r_j)), so the token at the seam's left
    runs up the right spine of l_k's merge tree (its last byte, ..., r(r(l_k)),
    r(l_k), l_k), each made at its rank; likewise the token at the seam's right
    runs up the left spine of r_k's. The pair (x, y) standing at the seam joins
    when its rank c comes before either side changes: c below the rank at
    which x grows, and c at most the rank at which y grows (equal ranks are the
    same pair, and the leftmost pair goes first). Walking both spines from the
    top, always undoing the later of the two merges (the right one where both
    sides grow by the same merge), visits every pair that ever stands at the
    seam with the rank that bounds it: this is the check GitHub's ``bpe``
    crate makes of each token (``is_valid_token_pair``), here with merge ranks.
    It costs the length of the two spines per token, not an encoding.
    """
    n = len(merges)
    # Each token as a code: a merge's rank, or -1 - b for the byte b (below every rank).
    lefts = [0] * n
    rights = [0] * n
    for k, (left, right) in enumerate(merges):
        lefts[k] = made_at[left] if len(left) != 1 else -1 - left[0]
        rights[k] = made_at[right] if len(right) != 1 else -1 - right[0]
    core = native.load("_mergecore")[0] if compiled else None
    if core is not None:
        return core.seam_problem(lefts, rights, checked)
    # The rank of each pair of codes (W: each pair makes one token), as one int key.
    pair_rank = {((a + 256) << 32) | (b + 256): k for k, (a, b) in enumerate(zip(lefts, rights))}
    get = pair_rank.get
    for k in range(checked, n):
        x, y = lefts[k], rights[k]
        limit = k  # below this rank, the pair at the seam would join (t_k's own merge is k)
        while x >= 0 or y >= 0:
            c = get(((x + 256) << 32) | (y + 256))
            if c is not None and c < limit:
                return k
            if x > y:  # x grew last: undo it (its pair's right token stood at the seam before)
                limit = x
                x = rights[x]
            else:  # y grew last (or both by one merge, the right one last)
                limit = y + 1
                y = lefts[y]
        c = get(((x + 256) << 32) | (y + 256))  # the two bytes
        if c is not None and c < limit:
            return k
    return None


def tiktoken_problem() -> str | None:
    """None where tiktoken is installed and its Unicode tables can be trusted."""
    if importlib.util.find_spec("tiktoken") is None:
        return "tiktoken is not installed (pip install 'bpestore[fast]')"
    return _unicode_problem()


class FastEncoder:
    """tiktoken's core with a version's ranks and pattern, no special tokens."""

    def __init__(self, spec: TokenizerSpec, ranks: dict[bytes, int]) -> None:
        """``ranks``: each ordinary token's bytes and id, in tiktoken's sense
        (gate 2: a token's id orders it as its merge's rank does)."""
        import tiktoken

        # One special token that is never allowed: without any, the special
        # pattern of tiktoken's encode() is empty and matches everywhere (slow).
        never = {"<|bpestore: never allowed|>": max(ranks.values()) + 1}
        self._encoding = tiktoken.Encoding(name="bpestore", pat_str=PATTERNS[spec.pretokenizer],
                                           mergeable_ranks=ranks, special_tokens=never)

    def encode(self, text: str) -> list[int] | None:
        """The ids of text as a new list (tiktoken's own: no copy); None where
        ``encode_into`` would add nothing."""
        ids = self._checked_ids(text, as_array=False)
        return cast("list[int] | None", ids)

    def encode_into(self, text: str, out: list | array) -> bool:
        """Add the ids of text to ``out`` (a list, or a uint32 array, which
        gets them without a Python int each); False, adding nothing, where the
        text holds a lone surrogate or a character the two regex engines might
        classify differently."""
        ids = self._checked_ids(text, as_array=isinstance(out, array))
        if ids is None:
            return False
        out.extend(ids)
        return True

    def _checked_ids(self, text: str, *, as_array: bool) -> Sequence[int] | None:
        """The ids of text (a list, or with ``as_array`` a uint32 array), or None
        where the text holds a lone surrogate or a character the two regex
        engines might classify differently.

        On a long text that is not ASCII, that check of its characters runs in
        a second thread while tiktoken's core encodes it in this one (the core
        releases the GIL), so it costs no time where a second core is free.
        (The other way round, the core ran 20-25% slower in a thread of its own
        than in the thread that started it, here.)"""
        if _long_space_run(text):
            # tiktoken's regex engine overflows its stack (a Rust panic) on a
            # run of about a million whitespace characters.
            return None
        if text.isascii():
            return self._encode_core(text, as_array)
        if len(text) < CONCURRENT_CHECK_AFTER:
            return self._encode_core(text, as_array) if all_assigned(text) else None
        with ThreadPoolExecutor(1) as pool:
            assigned = pool.submit(all_assigned, text)
            ids = self._encode_core(text, as_array)
            return ids if assigned.result() else None

    def _encode_core(self, text: str, as_array: bool) -> Sequence[int] | None:
        """The ids of text from tiktoken's core; None where the core panicked."""
        core = self._encoding._core_bpe
        try:
            if as_array and hasattr(core, "encode_to_tiktoken_buffer"):
                # The ids as a buffer of uint32 (tiktoken >= 0.9); no specials here.
                ids = array("I")
                ids.frombytes(memoryview(core.encode_to_tiktoken_buffer(text, set())).cast("B"))
                return ids
            return self._encoding.encode_ordinary(text)
        except BaseException as exc:  # a Rust panic is a BaseException
            if type(exc).__name__ != "PanicException":
                raise
            return None


_SPACE_RUN = re.compile(r"\s{50000}")


def _long_space_run(text: str) -> bool:
    """True where text holds a run of 100,000 whitespace characters (or of
    50,000, at least). Such a run holds a multiple p of 50,000 and stretches
    50,000 after p or 50,000 before it, so only every 50,000th character
    needs a look: no cost on ordinary text."""
    step = 50_000
    for p in range(0, len(text), step):
        if text[p].isspace() and (_SPACE_RUN.match(text, p) or
                                  (p >= step and _SPACE_RUN.match(text, p - step + 1))):
            return True
    return False


# -- gate 3: Unicode ---------------------------------------------------------

# One letter first assigned in each Unicode version (Lo or Lu there).
_NEW_LETTERS = {
    "13.0.0": "\U00010E80",  # YEZIDI LETTER ELIF
    "14.0.0": "\U00010F70",  # OLD UYGHUR LETTER ALEPH
    "15.0.0": "\U00011F04",  # KAWI LETTER A
    "15.1.0": "\U0002EBF0",  # CJK UNIFIED IDEOGRAPH-2EBF0
    "16.0.0": "\U00010D50",  # GARAY CAPITAL LETTER A
    "17.0.0": "\U00010940",  # a letter of the Sidetic script
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


@lru_cache(maxsize=1)
def _unicode_problem() -> str | None:
    """Check that both regex engines know every letter of Python's Unicode version."""
    import regex
    import tiktoken

    known = _version(unicodedata.unidata_version)
    if known > max(map(_version, _NEW_LETTERS)):
        return f"Python's Unicode {unicodedata.unidata_version} is newer than bpestore knows"
    probes = [c for v, c in _NEW_LETTERS.items() if _version(v) <= known]
    # Each probe "a" + letter is one pre-token (hence the whole token) exactly
    # when the engine takes the letter for a letter.
    ranks = {bytes([b]): b for b in range(256)}
    for i, letter in enumerate(probes):
        ranks[("a" + letter).encode()] = 256 + i
    probe = tiktoken.Encoding(name="probe", pat_str=r"\p{L}+|[^\p{L}]", mergeable_ranks=ranks,
                              special_tokens={})
    for i, letter in enumerate(probes):
        if probe.encode_ordinary("a" + letter) != [256 + i]:
            return f"tiktoken's regex engine does not know U+{ord(letter):04X}"
        if regex.fullmatch(r"\p{L}", letter) is None:
            return f"the regex module does not know U+{ord(letter):04X}"
    return None


@lru_cache(maxsize=1)
def _unassigned_or_astral() -> re.Pattern:
    """Stdlib ``re`` matching a BMP character unassigned in ``unicodedata``, or
    any astral character (whose assignment is checked one by one): a set of
    BMP ranges compiles to a bitmap, so the scan runs at hundreds of MB/s."""
    # One byte per BMP code point, 1 where unassigned; the runs of 1s are the ranges.
    unassigned = bytes(category in ("Cn", "Cs") for category in map(unicodedata.category, map(chr, range(0x10000))))
    ranges = [(m.start(), m.end() - 1) for m in re.finditer(b"\x01+", unassigned)]
    body = "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    return re.compile(f"[{body}\\U00010000-\\U0010ffff]")


SCAN_CHARS = 1 << 14  # characters searched per call (see all_assigned)


def all_assigned(text: str) -> bool:
    """True where every character of text is assigned in Python's Unicode version.

    The text is looked at a stretch at a time: a stretch that is ASCII (known
    in C as it is cut out) needs no search, so source code or English with a
    few other characters costs a few milliseconds, not a search of all of it;
    and one search holds the GIL until it ends: beside tiktoken's core
    (``FastEncoder._checked_ids``), a search of the whole text kept the core
    from starting (it needs the GIL to take the text) until it was done."""
    if text.isascii():
        return True
    pattern = _unassigned_or_astral()
    for start in range(0, len(text), SCAN_CHARS):
        piece = text[start:start + SCAN_CHARS]
        if piece.isascii():
            continue
        for m in pattern.finditer(piece):
            ch = m.group()
            if ch <= "\uffff" or unicodedata.category(ch) == "Cn":
                return False
    return True
