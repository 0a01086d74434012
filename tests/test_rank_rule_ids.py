"""The rank-rule check from merge ids (what a snapshot is made with) gives the answer
of the check from byte pairs (encoder/rank_rule.py's ``rank_rule_problem``, which
tests/test_tiktoken_path.py compares with encoding every token) on every vocabulary."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpestore import TokenizerSpec
from bpestore.encoder.rank_rule import _id_codes, rank_rule_problem, rank_rule_problem_ids
from bpestore.trainer import train_word_counts

SPEC = TokenizerSpec(pretokenizer="gpt2")


def both(vocab: dict[int, bytes], specials: list[int], lefts: list[int], rights: list[int], made: list[int],
         checked: int = 0, spec: TokenizerSpec = SPEC) -> str | None:
    """The ids' answer, once it is the byte pairs' answer."""
    pairs = [(vocab[a], vocab[b]) for a, b in zip(lefts, rights)]
    by_bytes = rank_rule_problem(spec, vocab, specials, pairs, checked=checked)
    by_ids = rank_rule_problem_ids(spec, vocab, specials, lefts, rights, made, checked=checked)
    assert by_ids == by_bytes
    # the encode core's side codes (where built) are the pure-Python steps'
    assert _id_codes(vocab, specials, lefts, rights, made) == _id_codes(vocab, specials, lefts, rights, made,
                                                                          compiled=False)
    return by_ids


@st.composite
def vocabularies(draw) -> tuple[dict[int, bytes], list[int], list[int], list[int], list[int]]:
    """Merges over a, b, c (sometimes one that makes a token again, or one whose side is
    made later or is a special), ids sometimes shuffled, reused or apart, an extra multi-byte
    ordinary token or a special whose bytes a merge makes."""
    vocab = {i: bytes([i]) for i in range(256)}
    specials: list[int] = []
    if draw(st.booleans()):
        vocab[256] = draw(st.sampled_from([b"<s>", b"ab", b"abc"]))
        specials.append(256)
    if draw(st.integers(0, 9)) == 0:
        vocab[257] = b"ab"  # an ordinary token no merge makes
    tokens = [ord("a"), ord("b"), ord("c"), *specials]
    lefts: list[int] = []
    rights: list[int] = []
    made: list[int] = []
    next_id = 300
    for _ in range(draw(st.integers(0, 25))):
        left, right = draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens))
        data = vocab[left] + vocab[right]
        same = [i for i in made if vocab[i] == data]
        if same and draw(st.integers(0, 4)):
            continue
        token = same[0] if same and draw(st.booleans()) else next_id
        vocab[token] = data
        next_id += 1 if draw(st.integers(0, 5)) else 2  # sometimes an id no token has between two made
        lefts.append(left)
        rights.append(right)
        made.append(token)
        tokens.append(token)
    if len(made) > 1 and draw(st.integers(0, 5)) == 0:  # ids that do not grow with rank
        i, j = draw(st.integers(0, len(made) - 1)), draw(st.integers(0, len(made) - 1))
        vocab[made[i]], vocab[made[j]] = vocab[made[j]], vocab[made[i]]
        made[i], made[j] = made[j], made[i]
    if len(lefts) > 1 and draw(st.integers(0, 5)) == 0:  # a side made by a later merge
        lefts[0] = made[-1]
    return vocab, specials, lefts, rights, made


@settings(max_examples=2000, deadline=None)
@given(vocabularies(), st.integers(0, 10))
def test_ids_and_byte_pairs_give_the_same_answer(vocabulary, checked):
    vocab, specials, lefts, rights, made = vocabulary
    both(vocab, specials, lefts, rights, made)
    both(vocab, specials, lefts, rights, made, checked=min(checked, len(made)))


def test_a_merge_whose_token_the_vocabulary_lacks_is_a_problem_on_both_paths():
    """A side's bytes changed after the merges were made (ids swapped): merge 3 joins b'b' and
    b'ba', whose b'bba' no token holds; both paths name it in one line."""
    vocab = {i: bytes([i]) for i in range(256)} | {300: b"ba", 301: b"ac", 302: b"ba", 303: b"baba", 310: b"aba"}
    lefts, rights, made = [98, 97, 97, 98], [97, 99, 300, 302], [300, 301, 310, 303]
    assert both(vocab, [], lefts, rights, made) == "merge 3 makes b'bba', which is no ordinary token of the version"


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abcd", min_size=1, max_size=14).map(str.encode), st.integers(1, 30), min_size=1,
                       max_size=25), st.integers(1, 80), st.sampled_from(["lexicographic", "hf"]))
def test_trained_merge_lists_take_the_ids_path(counts, n_merges, tie_break):
    """A trainer's merges: the ids alone show (W), and the answer is the bytes' answer."""
    vocab, merges = train_word_counts(counts, vocab_size=256 + n_merges, tie_break=tie_break)
    id_of = {data: i for i, data in vocab.items()}
    lefts, rights = [id_of[a] for a, _ in merges], [id_of[b] for _, b in merges]
    made = [id_of[a + b] for a, b in merges]
    assert _id_codes(vocab, [], lefts, rights, made) is not None
    both(vocab, [], lefts, rights, made)


@pytest.mark.parametrize("tokens, pairs, problem", [
    ([b"bc", b"ab", b"abc"], [(98, 99), (97, 98), (257, 99)], "token b'abc' (merge 2) does not encode to itself"),
    ([b"ab", b"bc", b"abc"], [(97, 98), (98, 99), (256, 99)], None),
])
def test_small_cases(tokens, pairs, problem):
    vocab = {i: bytes([i]) for i in range(256)} | dict(enumerate(tokens, 256))
    lefts, rights = [a for a, _ in pairs], [b for _, b in pairs]
    result = both(vocab, [], lefts, rights, list(range(256, 256 + len(tokens))))
    assert result == problem or (problem is not None and result is not None and result.startswith(problem))


def test_a_spec_tiktoken_cannot_run_is_said_first():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    spec = TokenizerSpec(pretokenizer="gpt2", normalizer="nfkc")
    assert both(vocab, [], [97], [98], [256], spec=spec) == "the spec has a normalizer"


@pytest.mark.parametrize("lefts, rights", [
    ([97, 256], [98, 99]),  # both sides known: codes
    ([97, 300], [98, 99]),  # an id past every ordinary one
    ([97, -1], [98, 99]),  # a negative id (a list would take it from the end)
    ([97, 200], [98, 255]),  # bytes only
    ([97, 257], [98, 99]),  # a side made by this merge itself
    ([97, 258], [98, 99]),  # the special token
    ([97, 2**70], [98, 99]),  # no int64
    ([97], [98, 99]),  # columns of different lengths
])
def test_side_codes_of_the_core_are_the_reference_steps(lefts, rights):
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b"<s>"}
    made = [256, 257]
    by_core = _id_codes(vocab, [258], lefts, rights, made)
    assert by_core == _id_codes(vocab, [258], lefts, rights, made, compiled=False)
    assert (by_core is not None) == (lefts == [97, 256] or lefts == [97, 200])
