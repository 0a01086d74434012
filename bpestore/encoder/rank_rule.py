"""Tiktoken's rank rule on a version's merges: when it gives the merge rule's ids.

Merge-rule BPE (bpestore's reference, ``bpe.merge_word``: join the adjacent pair
of lowest *merge* rank) and rank-rule BPE (tiktoken's: join the adjacent pair
whose *concatenation* has the lowest rank, the ranks being the ids) agree on
every input where the version passes ``rank_rule_problem``: a spec that is
exactly what tiktoken runs (``spec_problem``: byte-level symbols, no normalizer,
no word markers, ``merge`` segmentation, a pre-tokenizer pattern tiktoken ships)
and merges that pass ``rank_equivalence_problem``. Then the version may be
encoded by either backend that runs the rank rule: the compiled core's
token-rank tables (built from the tokens by id, as for a rank file) or
tiktoken's own core. A store computes the answer once per complete version and
keeps it (``version_facts.fast_problem``; ``EncoderFacts.rank_rule_problem``).

Why the check is enough (the proof)
-----------------------------------
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

from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import lt
from typing import cast

from .. import native
from ..alphabet import byte_ids, ordinary_ids
from ..bpe import merge_word, pair_key
from ..spec import TokenizerSpec

# Pre-tokenizers whose pattern tiktoken ships and runs with the same meaning.
TIKTOKEN_PRETOKENIZERS = ("gpt2", "cl100k", "o200k")


def rank_rule_problem(spec: TokenizerSpec, vocab: Mapping[int, bytes], special_ids: Iterable[int],
                      merges: Sequence[tuple[bytes, bytes]], *, id_of: Mapping[bytes, int] | None = None,
                      checked: int = 0) -> str | None:
    """Why tiktoken's rank rule may not give this version's ids (None: it gives them).
    ``id_of``: each ordinary token's id by its bytes, where already known;
    ``checked``: the first merges are those of a version that passed."""
    problem = spec_problem(spec)
    if problem is not None:
        return problem
    if id_of is None:
        id_of = ordinary_ids(vocab, list(special_ids))

    def encode_bytes(data: bytes) -> list[int]:  # what a failing token encodes to, for the message
        ranks: dict[int, int] = {}
        for rank, (left, right) in enumerate(merges):
            ranks.setdefault(pair_key(id_of[left], id_of[right]), rank)
        by_byte = byte_ids(id_of)
        return merge_word([by_byte[b] for b in data], ranks, [id_of[a + b] for a, b in merges])

    return rank_equivalence_problem(merges, id_of, encode_bytes, checked=checked)


def rank_rule_problem_ids(spec: TokenizerSpec, vocab: Mapping[int, bytes], special_ids: Iterable[int],
                          lefts: Sequence[int], rights: Sequence[int], made: Sequence[int], *,
                          checked: int = 0) -> str | None:
    """``rank_rule_problem`` of the merges given as ids (left, right, made token), as a
    trainer holds them: the same answer, without a byte pair or a bytes-to-id map per
    token where the ids alone show (W) (``_id_codes``); otherwise, or for the message
    of a failing token, the bytes path decides."""
    problem = spec_problem(spec)
    if problem is not None:
        return problem
    special_ids = list(special_ids)
    codes = _id_codes(vocab, special_ids, lefts, rights, made)
    if codes is not None and _seam_walk(*codes, checked) is None:
        return None
    pairs = list(zip(map(vocab.__getitem__, lefts), map(vocab.__getitem__, rights)))
    return rank_rule_problem(spec, vocab, special_ids, pairs, checked=checked)


def _id_codes(vocab: Mapping[int, bytes], special_ids: Sequence[int], lefts: Sequence[int],
              rights: Sequence[int], made: Sequence[int], *,
              compiled: bool = True) -> tuple[list[int], list[int]] | None:
    """The seam walk's codes (``_passing_codes``'s) from the merges' ids, where the ids
    alone show that (W) holds and that the codes are those the bytes give: the made
    ids grow, are not special, and their tokens are distinct and two bytes or longer,
    every other ordinary token is one byte, and each side is a byte or the token of an
    earlier merge. None otherwise (the bytes path then decides), and where an id is
    negative (the codes are looked up in a list indexed by id) or the columns differ in
    length. ``compiled``: the last step (each side's code) runs in the encode core where
    it is built (the same answer; the lines below it are its reference)."""
    n = len(made)
    if not n:
        return [], []
    if len(lefts) != n or len(rights) != n:
        return None
    if not all(map(lt, made, made[1:])) or made[0] < 0 or min(vocab) < 0:
        return None
    size = max(max(vocab), made[-1]) + 1
    code: list[int | None] = [None] * size  # an ordinary id's code: its merge's rank, or -1 - b for the byte b
    if made[-1] - made[0] == n - 1:
        code[made[0]:made[-1] + 1] = range(n)
    else:
        for rank, token_id in enumerate(made):
            code[token_id] = rank
    specials = set(special_ids)
    if any(0 <= i < size and code[i] is not None for i in specials):
        return None
    tokens = list(map(vocab.__getitem__, made))
    if len(set(tokens)) < n or min(map(len, tokens)) < 2:
        return None
    others = vocab.keys() - made - specials
    singles = [vocab[i] for i in others]
    if any(len(data) != 1 for data in singles):
        return None
    for token_id, data in zip(others, singles):
        code[token_id] = -1 - data[0]
    core = native.load("_encodecore")[0] if compiled else None
    if core is not None:
        return cast("tuple[list[int], list[int]] | None", core.side_codes(lefts, rights, code))
    if min(lefts) < 0 or min(rights) < 0:
        return None
    try:
        sides = cast("list[list[int]]", [list(map(code.__getitem__, side)) for side in (lefts, rights)])
        if not all(all(map(lt, side, range(n))) for side in sides):
            return None
    except (IndexError, TypeError):  # an id past every ordinary one, or a None: a special id or one not in vocab
        return None
    return sides[0], sides[1]


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
    if spec.pretokenizer not in TIKTOKEN_PRETOKENIZERS:
        return f"pre-tokenizer {spec.pretokenizer} is not one tiktoken ships"
    return None


def rank_equivalence_problem(merges: Sequence[tuple[bytes, bytes]], id_of: Mapping[bytes, int],
                             encode_bytes: Callable[[bytes], list[int]], *, checked: int = 0) -> str | None:
    """Check (W) and (S) of the module docstring; the first failure, or None.

    ``id_of`` maps ordinary token bytes to ids; ``encode_bytes`` is the
    reference encoder of one word's bytes (merge rule, no pre-tokenizer),
    which says what a token that fails encodes to. (S) is decided for each
    token in rank order by ``_seam_problem`` (below), a walk down the two
    merge-tree spines that meet at the token's seam, which gives exactly the
    answer of encoding the token (the definition, which
    tests/test_tiktoken_path.py compares it with) at a fraction of the cost: a store
    keeps the answer of each complete version all the same. ``checked``: the
    first merges are those of a list that passed (an extension's parent), so
    their tokens need no check: whether a token encodes to itself depends only
    on the merges before it, once (W) holds for the whole list.
    """
    codes = _passing_codes(merges, id_of)
    if codes is not None:  # (W) holds
        failed = _seam_walk(*codes, checked)
        if failed is None:
            return None
        token = merges[failed][0] + merges[failed][1]
        return f"token {token!r} (merge {failed}) does not encode to itself but to {encode_bytes(token)}"
    made_at: dict[bytes, int] = {}
    last_id = -1
    for k, (left, right) in enumerate(merges):
        token = left + right
        if token in made_at:
            return f"merges {made_at[token]} and {k} both make {token!r}"
        for part in (left, right):
            if len(part) != 1 and part not in made_at:
                return f"merge {k} uses {part!r} before a merge makes it"
        token_id = id_of.get(token)
        if token_id is None:
            return f"merge {k} makes {token!r}, which is no ordinary token of the version"
        if token_id <= last_id:
            return f"ids do not grow with merge rank (merge {k} makes id {token_id})"
        made_at[token] = k
        last_id = token_id
    failed = _seam_problem(merges, made_at, checked)
    if failed is None:
        return None
    token = merges[failed][0] + merges[failed][1]
    return f"token {token!r} (merge {failed}) does not encode to itself but to {encode_bytes(token)}"


_BYTE_CODES = {bytes([b]): -1 - b for b in range(256)}  # a single byte's code in the seam walk


def _passing_codes(merges: Sequence[tuple[bytes, bytes]],
                   id_of: Mapping[bytes, int]) -> tuple[list[int], list[int]] | None:
    """Where (W) holds, each merge's left and right token as the seam walk's codes (the
    rank of the merge making it, or -1 - b for the byte b); None where it does not (the
    loop of ``rank_equivalence_problem`` then says how). Every step runs in C (maps), none
    per merge in Python: GPT-2's 50,000 merges in milliseconds."""
    n = len(merges)
    if not n:
        return [], []
    lefts, rights = zip(*merges)
    tokens = list(map(bytes.__add__, lefts, rights))
    made_at = dict(zip(tokens, range(n)))
    if len(made_at) < n:
        return None  # two merges make one token
    # A part is a byte or a token an earlier merge made (a made token has two bytes or more).
    sides = [list(map(made_at.get, parts, map(_BYTE_CODES.get, parts))) for parts in (lefts, rights)]
    if any(None in side for side in sides):
        return None
    codes = cast("list[list[int]]", sides)
    if not all(all(map(lt, side, range(n))) for side in codes):
        return None
    found = list(map(id_of.get, tokens))
    if None in found:
        return None
    ids = cast("list[int]", found)
    if not all(map(lt, ids, ids[1:])):
        return None
    return codes[0], codes[1]


def _seam_problem(merges: Sequence[tuple[bytes, bytes]], made_at: dict[bytes, int], checked: int = 0, *,
                  compiled: bool = True) -> int | None:
    """(S) without encoding: the first merge from ``checked`` on whose token does
    not encode to itself, or None. Requires (W) (``made_at``: each token's merge).
    ``compiled``: the walk runs in the encode core where it is built (the same answer;
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
    return _seam_walk(lefts, rights, checked, compiled=compiled)


def _seam_walk(lefts: list[int], rights: list[int], checked: int = 0, *, compiled: bool = True) -> int | None:
    """``_seam_problem`` on the merges' codes (a merge's rank, or -1 - b for the byte b)."""
    n = len(lefts)
    core = native.load("_encodecore")[0] if compiled else None
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


