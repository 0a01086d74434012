"""How a spec turns words into initial symbols: the starting vocabulary of training.

The trainer and the encoder only ever see token ids; this module decides what
the first ids are and how a word becomes them (its *symbolization*):

* ``bytes`` (the default): ids 0..255 are the byte values, then the special
  tokens, then the word markers; a word's symbols are its UTF-8 bytes.
* ``chars``: the characters seen in training are the alphabet (by code
  point), after the special tokens, the unknown token and the markers; with
  ``byte_fallback`` the 256 bytes come first and unseen characters become
  their bytes, otherwise they become ``unk_token``.
* ``end_of_word`` / ``start_of_word``: one marker symbol after / before the
  symbols of every word (Sennrich et al.'s ``</w>``, SentencePiece's ``▁``).

A vocabulary never holds two ids for one byte string (as in the trainer and in
Hugging Face ``tokenizers``): a marker ``_`` and the character ``_`` are one
token.

>>> spec = TokenizerSpec(alphabet="chars", end_of_word="</w>")
>>> vocab = initial_vocab(spec, {b"low": 5, b"lowest": 2})
>>> vocab
[b'</w>', b'e', b'l', b'o', b's', b't', b'w']
>>> [(ids, n) for ids, n in initial_words(spec, {b"low": 5}, vocab)]
[([2, 3, 6, 0], 5)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache

from .errors import InvalidArgumentError
from .spec import TokenizerSpec

Symbolizer = Callable[[str], list[int]]


def _markers(spec: TokenizerSpec) -> list[bytes]:
    return [m.encode("utf-8") for m in (spec.unk_token, spec.start_of_word, spec.end_of_word)
            if m is not None]


def initial_vocab(spec: TokenizerSpec, word_counts: Iterable[bytes] | None = None) -> list[bytes]:
    """The tokens a version starts with, by id.

    ``word_counts`` (the counted words, or just their keys) is needed for the
    ``chars`` alphabet: its characters are the alphabet.
    """
    sentencepiece = spec.layout == "sentencepiece"
    fallback = [bytes([i]) for i in range(256)] if spec.byte_level or spec.byte_fallback else []
    specials = [t.encode("utf-8") for t in spec.special_tokens]
    if sentencepiece:
        # The unknown token, the special tokens, the byte tokens: SentencePiece's order.
        assert spec.unk_token is not None  # the spec checks it
        tokens = [spec.unk_token.encode("utf-8"), *specials, *fallback]
        tokens += [m.encode("utf-8") for m in (spec.start_of_word, spec.end_of_word) if m is not None]
    else:
        tokens = fallback + specials + _markers(spec)
    if not spec.byte_level:
        if word_counts is None:
            raise InvalidArgumentError("a 'chars' alphabet is made from the counted words; pass word_counts",
                                       params=("word_counts",))
        seen: set[str] = set()
        last: set[str] = set()  # the last characters of words, for a glued end-of-word suffix
        for word in word_counts:
            text = word.decode("utf-8", "surrogatepass")
            seen.update(text)
            if text:
                last.add(text[-1])
        tokens += [c.encode("utf-8", "surrogatepass") for c in sorted(seen)]
        if spec.end_of_word_suffix is not None:
            tokens += [(c + spec.end_of_word_suffix).encode("utf-8", "surrogatepass") for c in sorted(last)]
    # One id per byte string: later duplicates (a marker that is also a
    # character, a character that is also a byte) are dropped. Special tokens
    # keep their ids even when their bytes repeat; so do SentencePiece's byte
    # tokens, apart from the characters that are the same bytes.
    n_fixed = len(specials) + len(fallback) + sentencepiece
    unique = tokens[:n_fixed]
    known = {spec.unk_token.encode("utf-8")} if sentencepiece else set(fallback)  # type: ignore[union-attr]
    for data in tokens[n_fixed:]:
        if data not in known:
            known.add(data)
            unique.append(data)
    return unique


def special_ids(spec: TokenizerSpec) -> list[int]:
    """The ids of the special tokens, in the spec's order."""
    first = 1 if spec.layout == "sentencepiece" else 256 if spec.byte_level or spec.byte_fallback else 0
    return list(range(first, first + len(spec.special_tokens)))


def initial_kinds(spec: TokenizerSpec, vocab: Sequence[bytes]) -> list[str]:
    """What each initial token is: byte, special, unk, marker or char."""
    specials = set(special_ids(spec))
    names = {m.encode("utf-8"): kind for kind, m in (("marker", spec.end_of_word),
                                                      ("marker", spec.start_of_word),
                                                      ("unk", spec.unk_token)) if m is not None}
    n_bytes = 256 if spec.byte_level or spec.byte_fallback else 0
    first_byte = 1 + len(specials) if spec.layout == "sentencepiece" else 0
    kinds = []
    for token_id, data in enumerate(vocab):
        if token_id in specials:
            kinds.append("special")
        elif first_byte <= token_id < first_byte + n_bytes:
            kinds.append("byte")
        else:
            kinds.append(names.get(data, "char"))
    return kinds


def ordinary_ids(vocab: Mapping[int, bytes] | Sequence[bytes], special_ids: Iterable[int] = (), *,
                 chars_over_bytes: bool = False) -> dict[bytes, int]:
    """The id of each ordinary (non-special) token's bytes; where a byte
    string has several ids, the lowest. ``vocab`` maps ids to bytes (a dict, or
    a list indexed by id). ``chars_over_bytes`` (byte fallback): where a single
    byte has several ids, the highest: the character (the lowest is the byte
    fallback token, see ``fallback_byte_ids``).

    >>> ordinary_ids({5: b"a", 3: b"a", 4: b"<s>"}, special_ids=[4])
    {b'a': 3}
    >>> ordinary_ids({5: b"a", 3: b"a", 4: b"<s>"}, special_ids=[4], chars_over_bytes=True)
    {b'a': 5}
    """
    special_ids = list(special_ids)
    id_of = _lowest_ids(vocab, special_ids)
    if chars_over_bytes:
        specials = set(special_ids)
        pairs = vocab.items() if isinstance(vocab, Mapping) else enumerate(vocab)
        for token_id, data in pairs:
            if len(data) == 1 and token_id not in specials and token_id > id_of[data]:
                id_of[data] = token_id
    return id_of


def fallback_byte_ids(vocab: Mapping[int, bytes] | Sequence[bytes], special_ids: Iterable[int] = ()) -> list[int]:
    """The byte fallback token of each byte value: the lowest ordinary id holding it."""
    return byte_ids(_lowest_ids(vocab, special_ids))


def _lowest_ids(vocab: Mapping[int, bytes] | Sequence[bytes], special_ids: Iterable[int] = ()) -> dict[bytes, int]:
    if isinstance(vocab, Mapping):
        ids: Sequence[int] = sorted(vocab)
        datas = list(map(vocab.__getitem__, ids))
    else:
        ids, datas = range(len(vocab)), list(vocab)
    # Written from the highest id down: where bytes repeat, the lowest id stays
    # (one C-level pass; GPT-2's 50,000 tokens in milliseconds).
    id_of = dict(zip(reversed(datas), reversed(ids)))
    specials = set(special_ids)
    for special in specials:
        data = datas[ids.index(special)] if special in ids else None
        if data is not None and id_of.get(data) == special:
            # A special token's bytes: the lowest ordinary id with them, if any.
            others = [] if datas.count(data) == 1 else \
                [i for i, d in zip(ids, datas) if d == data and i not in specials]
            if others:
                id_of[data] = others[0]
            else:
                del id_of[data]
    return id_of


def byte_ids(id_of: Mapping[bytes, int]) -> list[int]:
    """The id of each byte value 0..255, or an error naming the first missing one."""
    missing = [b for b in range(256) if bytes([b]) not in id_of]
    if missing:
        raise InvalidArgumentError(f"the vocabulary lacks {len(missing)} single-byte tokens "
                                   f"(first: {missing[0]}); a byte-level tokenizer needs all 256",
                                   params=("vocab",))
    return [id_of[bytes([b])] for b in range(256)]


def symbolizer(spec: TokenizerSpec, id_of: Mapping[bytes, int],
               fallback_ids: Sequence[int] | None = None) -> Symbolizer | None:
    """The function turning one pre-token into its initial token ids.

    ``id_of`` maps the bytes of the vocabulary's ordinary tokens to their ids;
    ``fallback_ids``: the byte fallback tokens (default: ``id_of``'s bytes).
    Returns None for plain byte-level specs (no markers), whose symbols are
    simply the bytes: callers keep their own fast path for that case.
    """
    if spec.byte_level and spec.start_of_word is None and spec.end_of_word is None:
        return None

    def token(text: str, what: str) -> int:
        found = id_of.get(text.encode("utf-8"))
        if found is None:
            raise InvalidArgumentError(f"the vocabulary has no token for the {what} {text!r}",
                                       params=("vocab",))
        return found

    prefix = [token(spec.start_of_word, "start-of-word marker")] if spec.start_of_word else []
    suffix = [token(spec.end_of_word, "end-of-word marker")] if spec.end_of_word else []
    if spec.byte_level or spec.byte_fallback:
        id_of_byte = list(fallback_ids) if fallback_ids is not None else byte_ids(id_of)
    if spec.byte_level:
        def byte_symbols(word: str) -> list[int]:
            return prefix + [id_of_byte[b] for b in word.encode("utf-8", "surrogatepass")] + suffix
        return byte_symbols

    known = char_ids(id_of)
    unk = token(spec.unk_token, "unknown token") if spec.unk_token is not None else None

    def unseen(char: str) -> list[int]:
        if spec.byte_fallback:
            return [id_of_byte[b] for b in char.encode("utf-8", "surrogatepass")]
        if unk is not None:
            return [unk]
        if spec.drop_unseen:
            return []
        raise InvalidArgumentError(f"the character {char!r} was not seen in training and this "
                                   "tokenizer has neither an unknown token nor byte fallback; "
                                   "train with an unk_token or byte_fallback=True",
                                   params=("unk_token", "byte_fallback"))

    fuse = spec.fuse_unk and not spec.byte_fallback
    glued = spec.end_of_word_suffix
    # A glued suffix: the last character's symbol is the character with the suffix.
    last_ids = {} if glued is None else {
        text[:-len(glued)]: token_id for text, token_id in
        ((data.decode("utf-8", "surrogatepass"), token_id) for data, token_id in id_of.items() if _is_utf8(data))
        if text.endswith(glued) and len(text) == len(glued) + 1}

    users = {symbol: token(symbol, "user symbol") for symbol in spec.user_symbols}

    def char_symbols(word: str) -> list[int]:
        if word in users:  # the pre-tokenizer gives each user symbol as a word of its own
            return [users[word]]
        ids = list(prefix)
        after_unseen = False
        for at, char in enumerate(word):
            found = known.get(char) if glued is None or at < len(word) - 1 else last_ids.get(char)
            if found is None:
                if not (fuse and after_unseen):
                    ids.extend(unseen(char))
                after_unseen = True
            else:
                ids.append(found)
                after_unseen = False
        ids.extend(suffix)
        return ids
    return char_symbols


def char_ids(id_of: Mapping[bytes, int]) -> dict[str, int]:
    """The alphabet of a ``chars`` spec: every token that is one character, by character."""
    found: dict[str, int] = {}
    for data, token_id in id_of.items():
        text = data.decode("utf-8", "surrogatepass") if _is_utf8(data) else ""
        if len(text) == 1:
            found[text] = token_id
    return found


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
        return True
    except UnicodeDecodeError:
        return False


def initial_words(spec: TokenizerSpec, word_counts: Mapping[bytes, int] | Iterable[tuple[bytes, int]],
                  vocab: Sequence[bytes] | None = None) -> Iterable[tuple[Sequence[int], int]]:
    """Each counted word as its initial symbol ids, with its count.

    ``word_counts``: a mapping, or (word, count) pairs read once (then ``vocab``
    must be given). ``vocab`` is the version's initial vocabulary (default:
    ``initial_vocab`` of these words). The unknown token never merges: a word
    holding one is handed to the trainer as the pieces on either side of it.
    """
    if vocab is None:
        if not isinstance(word_counts, Mapping):
            raise TypeError("initial_words needs vocab when the words come as pairs")
        vocab = initial_vocab(spec, word_counts)
    pairs = word_counts.items() if isinstance(word_counts, Mapping) else word_counts
    id_of = ordinary_ids(vocab, special_ids(spec), chars_over_bytes=spec.byte_fallback)
    fallback = fallback_byte_ids(vocab, special_ids(spec)) if spec.byte_fallback else None
    symbols = symbolizer(spec, id_of, fallback)
    if symbols is None:
        # Plain byte-level: a word's bytes are its ids. The pairs go on as they are given
        # (no list per word): the trainers take bytes, the compiled one straight into C.
        return pairs
    return _symbolized(pairs, symbols, id_of.get(spec.unk_token.encode("utf-8")) if spec.unk_token else None)


def _symbolized(pairs: Iterable[tuple[bytes, int]], symbols: Symbolizer,
                unk: int | None) -> Iterator[tuple[Sequence[int], int]]:
    """``initial_words``' pairs where words are symbolized: split at the unknown token ``unk``."""
    for word, count in pairs:
        ids = symbols(word.decode("utf-8", "surrogatepass"))
        if unk is None or unk not in ids:
            yield ids, count
            continue
        piece: list[int] = []
        for token_id in ids:
            if token_id == unk:
                if piece:
                    yield piece, count
                piece = []
            else:
                piece.append(token_id)
        if piece:
            yield piece, count


def hf_order(spec: TokenizerSpec, vocab: Sequence[bytes] | None = None) -> list[int]:
    """Initial ids in Hugging Face's numbering: the special tokens first, then
    the rest of the alphabet by code point (of each byte's GPT-2
    byte-to-unicode character for byte tokens, of the text otherwise)."""
    char_of = bytes_to_unicode()
    if vocab is None:
        vocab = initial_vocab(spec)
    specials = special_ids(spec)
    reserved = set(specials)

    def key(token_id: int) -> str:
        data = vocab[token_id]
        if spec.byte_level or not _is_utf8(data):
            return "".join(char_of[b] for b in data)
        return data.decode("utf-8", "surrogatepass")
    return specials + sorted((i for i in range(len(vocab)) if i not in reserved), key=key)


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for every byte value.

    Printable Latin-1 bytes stand for themselves; the others (controls, space,
    0x7F-0xA0, 0xAD) are shifted to code points 256 and up, in byte order.
    """
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = {}
    shifted = 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return chars


def merge_filter(spec: TokenizerSpec) -> Callable[[bytes, bytes], bool] | None:
    """The trainer's ``allow_merge`` predicate for a spec, or None if every
    merge is allowed. With ``no_inner_space`` a merged token may hold a space
    only as its first or last character (the Dracula notebook's rule)."""
    if not spec.no_inner_space:
        return None

    def no_inner_space(left: bytes, right: bytes) -> bool:
        return b" " not in (left + right)[1:-1]
    return no_inner_space
