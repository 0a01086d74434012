"""Writing a Hugging Face ``tokenizer.json`` (and the two files ``transformers``
reads beside it) that encodes like a version: byte-level, or characters."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from ..charsmap import decode_charsmap
from ..errors import InvalidArgumentError
from ..spec import TokenizerSpec, template_pieces
from ..text import PATTERNS
from .gpt2 import token_to_str

if TYPE_CHECKING:
    from ..encoder import Tokenizer


HF_NORMALIZERS = {"nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD", "lowercase": "Lowercase"}
# collapse-spaces as Hugging Face normalizers: spaces at the text's ends go (with a space
# marker, also markers at its end, as ``mark_spaces`` strips them), then runs become one.
COLLAPSE_RUNS = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}


def collapse_ends(marker: str | None) -> dict[str, Any]:
    ends = r"\A +| +\z" if marker is None else rf"\A +|[ {marker}]+\z"
    return {"type": "Replace", "pattern": {"Regex": ends}, "content": ""}


def hf_tokenizer_json(tok: Tokenizer) -> dict[str, Any]:
    """A Hugging Face ``tokenizer.json`` that encodes like ``tok`` (byte-level, or
    characters; ``export_tokenizer`` refuses word markers first)."""
    spec = tok.spec
    specials = set(tok.special_tokens.values())
    merges: list[Any]
    if spec.byte_level:
        vocab = {token_to_str(data): i for i, data in sorted(tok.vocab.items()) if i not in specials}
        merges = [f"{token_to_str(a)} {token_to_str(b)}" for a, b in tok.merges]
        unk, fallback, decoder = None, False, dict(_BYTE_LEVEL, add_prefix_space=True)
    else:
        vocab, merges = _char_model(tok)
        unk, fallback = spec.unk_token, spec.byte_fallback
        decoder = _char_decoder(spec)
    for text, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1]):
        # HF looks an added token's id up in model.vocab (and numbers it after the
        # model's tokens where absent): each special is in both, at its own id.
        if text in vocab:
            raise InvalidArgumentError(f"special token {text!r} is spelled like token {vocab[text]} in the "
                                       "model's vocabulary; a tokenizer.json cannot hold both", params=("format",))
        vocab[text] = i
    vocab = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for text, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])],
        "normalizer": _hf_normalizer(spec),
        "pre_tokenizer": _hf_pre_tokenizer(spec),
        "post_processor": _template_processing(tok),
        "decoder": decoder,
        "model": {
            "type": "BPE", "dropout": None, "unk_token": unk, "continuing_subword_prefix": None,
            "end_of_word_suffix": spec.end_of_word_suffix, "fuse_unk": spec.fuse_unk, "byte_fallback": fallback,
            "ignore_merges": False, "vocab": vocab, "merges": merges,
        },
    }


# What transformers' AutoTokenizer.from_pretrained reads from a folder.
HF_FOLDER = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def transformers_config(tok: Tokenizer) -> tuple[dict[str, Any], dict[str, str]]:
    """tokenizer_config.json and special_tokens_map.json for ``transformers``: a
    ``PreTrainedTokenizerFast`` with the special tokens' roles, found by their
    usual names (<s>, </s>, <|endoftext|>, <pad>, ...; see formats.sentencepiece);
    the unknown token is the spec's; without a padding token, padding uses EOS."""
    from .sentencepiece import special_roles

    roles = special_roles(tok.special_tokens)
    if tok.spec.unk_token is not None:
        roles["unk"] = tok.spec.unk_token
    if "pad" not in roles and "eos" in roles:
        roles["pad"] = roles["eos"]
    tokens = {f"{role}_token": text for role, text in roles.items()}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False, **tokens}
    return config, tokens


_BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _hf_normalizer(spec: TokenizerSpec) -> dict[str, Any] | None:
    steps = []
    for step in spec.normalizer_steps:
        if step == "collapse-spaces":
            # (\A and \z: in tokenizers' regexes ^ and $ match at every line's ends.)
            steps += [collapse_ends(spec.space_marker), COLLAPSE_RUNS]
        elif step in HF_NORMALIZERS:
            steps.append({"type": HF_NORMALIZERS[step]})
        elif step == "strip-right":
            steps.append({"type": "Strip", "strip_left": False, "strip_right": True})
        elif step == "squeeze-spaces":
            steps.append(COLLAPSE_RUNS)
        elif step == "precompiled" and spec.charsmap is not None:
            blob = decode_charsmap(spec.charsmap)[1]
            steps.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode("ascii")})
        else:
            raise InvalidArgumentError(f"normalizer {step!r} has no Hugging Face equivalent", params=("format",))
    if spec.dummy_prefix == "always":
        # Unconditional, as SentencePiece's dummy prefix (Metaspace's own prepending is not).
        steps.append({"type": "Prepend", "prepend": spec.space_marker or " "})
    return None if not steps else steps[0] if len(steps) == 1 else {"type": "Sequence", "normalizers": steps}


def _hf_pre_tokenizer(spec: TokenizerSpec) -> dict[str, Any] | None:
    prefix = spec.dummy_prefix == "unless-space"
    if spec.space_marker is not None:
        if spec.pretokenizer not in ("metaspace", "none"):
            raise InvalidArgumentError(f"a space marker with pretokenizer={spec.pretokenizer!r} has no Hugging "
                                       "Face equivalent", params=("format",))
        scheme = "first" if spec.dummy_prefix == "first" else "always" if prefix else "never"
        return {"type": "Metaspace", "replacement": spec.space_marker, "prepend_scheme": scheme,
                "split": spec.pretokenizer == "metaspace"}
    split = None
    if spec.pretokenizer not in ("gpt2", "none"):
        pattern = spec.pattern if spec.pretokenizer == "regex" else PATTERNS[spec.pretokenizer]
        # Only the matches are words (what falls between them is dropped, as by regex findall).
        split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Removed", "invert": True}
    if prefix and (split is not None or not spec.byte_level):
        raise InvalidArgumentError("dummy_prefix='unless-space' goes to Hugging Face as ByteLevel's "
                                   "add_prefix_space, which needs GPT-2's pattern", params=("format",))
    if not spec.byte_level:
        return split
    byte_level = dict(_BYTE_LEVEL, add_prefix_space=prefix)
    if spec.pretokenizer == "gpt2":
        return byte_level
    if split is None:
        return dict(byte_level, use_regex=False)
    return {"type": "Sequence", "pretokenizers": [split, dict(byte_level, use_regex=False)]}


def _char_model(tok: Tokenizer) -> tuple[dict[str, int], list[list[str]]]:
    """The vocab and merges of a character version: tokens as their text, byte
    fallback tokens as <0xNN>; with segmentation 'piece', every split of each
    merged token (SentencePiece's rule as pairs: Hugging Face's own conversion)."""
    from ..alphabet import fallback_byte_ids, ordinary_ids
    from ..bpe import PAIR_SHIFT, piece_ranks

    spec = tok.spec
    specials = set(tok.special_tokens.values())
    vocab = tok.vocab
    fallback: dict[int, int] = {}
    if spec.byte_fallback:
        if spec.layout != "sentencepiece":
            raise InvalidArgumentError("its byte fallback tokens are also characters (train with "
                                       "layout='sentencepiece' to keep them apart)", params=("format",))
        fallback = {token_id: b for b, token_id in enumerate(fallback_byte_ids(vocab, specials))}
    text_of: dict[int, str] = {}
    for token_id, data in sorted(vocab.items()):
        if token_id in specials:
            continue
        if token_id in fallback:
            text_of[token_id] = f"<0x{fallback[token_id]:02X}>"
            continue
        try:
            text_of[token_id] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(f"token {token_id} ({data!r}) is not UTF-8 text", params=("format",)) from None
    id_of = ordinary_ids(vocab, specials, chars_over_bytes=spec.byte_fallback)
    if spec.segmentation == "piece":
        made = [vocab[id_of[a + b]] for a, b in tok.merges]
        keys = sorted(piece_ranks(made, id_of, whole_chars=True).items(), key=lambda kv: (kv[1], kv[0]))
        pairs = [(key >> PAIR_SHIFT, key & ((1 << PAIR_SHIFT) - 1)) for key, _ in keys]
    else:
        pairs = [(id_of[a], id_of[b]) for a, b in tok.merges]
    return {text: i for i, text in text_of.items()}, [[text_of[a], text_of[b]] for a, b in pairs]


def _char_decoder(spec: TokenizerSpec) -> dict[str, Any]:
    """``unmark_spaces`` as Llama's decoders: markers to spaces, bytes, one text, its
    dummy prefix dropped (tokenizers' Metaspace decoder drops every marker of the
    first token, and an unsplit version's first token may hold several)."""
    steps: list[dict[str, Any]] = [{"type": "ByteFallback"}] if spec.byte_fallback else []
    if spec.space_marker is not None:
        steps = [{"type": "Replace", "pattern": {"String": spec.space_marker}, "content": " "}, *steps,
                 {"type": "Fuse"}]
        if "collapse-spaces" in spec.normalizer_steps:
            steps.append({"type": "Replace", "pattern": {"Regex": r"\A +"}, "content": ""})
        elif spec.dummy_prefix != "never":
            steps.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    elif spec.end_of_word_suffix is not None:
        steps.append({"type": "BPEDecoder", "suffix": spec.end_of_word_suffix})
    else:
        steps.append({"type": "Fuse"})
    return steps[0] if len(steps) == 1 else {"type": "Sequence", "decoders": steps}


def _template_processing(tok: Tokenizer) -> dict[str, Any] | None:
    """The spec's ``template`` as tokenizers' TemplateProcessing (None without one)."""
    if not tok.spec.template:
        return None
    single, pair = (*tok.spec.template, "$A:0 $B:1")[:2]
    names = {piece for template in (single, pair) for piece, _ in template_pieces(template)} - {"$A", "$B"}

    def pieces(template: str) -> list[dict[str, Any]]:
        return [{"Sequence": {"id": piece[1], "type_id": type_id}} if piece in ("$A", "$B")
                else {"SpecialToken": {"id": piece, "type_id": type_id}}
                for piece, type_id in template_pieces(template)]
    return {"type": "TemplateProcessing", "single": pieces(single), "pair": pieces(pair),
            "special_tokens": {name: {"id": name, "ids": [tok.special_tokens[name]], "tokens": [name]}
                               for name in sorted(names)}}
