"""Hugging Face ``tokenizer.json``: reading BPE models as ``tokenizers`` writes
them, and writing one for a byte-level version.

What is read maps onto a ``TokenizerSpec``; any part of the file bpestore has
no equivalent for is refused by name (``DamagedDataError`` for a file that is
not a tokenizer.json, ``InvalidArgumentError`` for one bpestore cannot run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DamagedDataError, InvalidArgumentError, NotFoundError
from ..spec import TokenizerSpec
from ..text import PATTERNS
from .gpt2 import str_to_token, token_to_str, unicode_to_bytes

if TYPE_CHECKING:
    from ..encoder import Tokenizer

_HF_NORMALIZERS = {"nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD", "lowercase": "Lowercase"}
_FROM_HF_NORMALIZERS = {v: k for k, v in _HF_NORMALIZERS.items()}
# Hugging Face's Whitespace pre-tokenizer: runs of word characters, runs of other non-space.
HF_WHITESPACE = r"\w+|[^\w\s]+"


def hf_tokenizer_json(tok: Tokenizer) -> dict[str, Any]:
    """A Hugging Face ``tokenizer.json`` that encodes like ``tok`` (a byte-level
    version; ``export_tokenizer`` refuses the others first)."""
    spec = tok.spec
    specials_by_id = {i: text for text, i in tok.special_tokens.items()}
    if not spec.byte_level:
        raise InvalidArgumentError("only byte-level versions can be exported", params=("format",))
    steps = []
    for step in spec.normalizer_steps:
        if step not in _HF_NORMALIZERS:
            raise InvalidArgumentError(f"normalizer {step!r} has no Hugging Face equivalent",
                                       params=("format",))
        steps.append({"type": _HF_NORMALIZERS[step]})
    normalizer = None if not steps else steps[0] if len(steps) == 1 else {"type": "Sequence", "normalizers": steps}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if spec.pretokenizer == "gpt2":
        pre_tokenizer = byte_level
    elif spec.pretokenizer == "none":
        pre_tokenizer = dict(byte_level, use_regex=False)
    else:
        pattern = spec.pattern if spec.pretokenizer == "regex" else PATTERNS[spec.pretokenizer]
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]}
    vocab = {token_to_str(data): i for i, data in sorted(tok.vocab.items()) if i not in specials_by_id}
    for i, text in sorted(specials_by_id.items()):
        # HF looks an added token's id up in model.vocab (and numbers it after the
        # model's tokens where absent): each special is in both, at its own id.
        if text in vocab:
            raise InvalidArgumentError(f"special token {text!r} is spelled like token {vocab[text]} in the "
                                       "ByteLevel alphabet; a tokenizer.json cannot hold both", params=("format",))
        vocab[text] = i
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for text, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": False,
            "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])),
            "merges": [f"{token_to_str(a)} {token_to_str(b)}" for a, b in tok.merges],
        },
    }


@dataclass
class HFModel:
    """What a tokenizer.json holds, in bpestore's terms."""

    vocab: dict[int, bytes]
    merges: list[tuple[bytes, bytes]]
    spec: TokenizerSpec


def read_hf(path: str | Path) -> HFModel:
    """Read a Hugging Face ``tokenizer.json`` holding a BPE model."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise NotFoundError(f"file not found: {path}", params=("path",)) from None
    except IsADirectoryError:
        raise InvalidArgumentError(f"{path} is a folder; give the tokenizer.json file", params=("path",)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedDataError(f"{path} is not a JSON file: {exc}", params=("path",)) from None
    except RecursionError:
        raise DamagedDataError(f"{path} is nested too deeply to be a tokenizer.json", params=("path",)) from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise DamagedDataError(f"{path} is not a Hugging Face tokenizer.json (no 'model' object)", params=("path",))
    return _Reader(str(path), data).read()


class _Reader:
    def __init__(self, path: str, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data

    def refuse(self, part: str, why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{self.path}: {part}: {why}; bpestore has no equivalent", params=("path",))

    def damaged(self, part: str, why: str) -> DamagedDataError:
        return DamagedDataError(f"{self.path}: {part}: {why}", params=("path",))

    def read(self) -> HFModel:
        data, model = self.data, self.data["model"]
        kind = model.get("type", "BPE" if "merges" in model else None)
        if kind != "BPE":
            raise self.refuse("model.type", f"{kind!r} is not BPE")
        for key, ok in (("dropout", (None, 0, 0.0)), ("continuing_subword_prefix", (None, "")),
                        ("end_of_word_suffix", (None, "")), ("fuse_unk", (None, False)),
                        ("byte_fallback", (None, False)), ("ignore_merges", (None, False))):
            if model.get(key) not in ok:
                raise self.refuse(f"model.{key}", f"{model.get(key)!r}")
        for key in ("truncation", "padding"):
            if data.get(key) is not None:
                raise self.refuse(key, "set (bpestore encodes whole texts)")
        post = data.get("post_processor")
        if post is not None and not (isinstance(post, dict) and post.get("type") == "ByteLevel"):
            raise self.refuse("post_processor", f"{_type(post)!r} adds or changes ids")
        normalizer = self.normalizer(data.get("normalizer"))
        byte_level, pretokenizer, pattern = self.pre_tokenizer(data.get("pre_tokenizer"))
        decoder = data.get("decoder")
        if decoder is not None and _type(decoder) != "ByteLevel":
            raise self.refuse("decoder", f"{_type(decoder)!r}")
        if decoder is not None and not byte_level:
            raise self.refuse("decoder", "ByteLevel without a ByteLevel pre-tokenizer")
        unk = model.get("unk_token")
        if unk is not None and (not isinstance(unk, str) or not unk):
            raise self.damaged("model.unk_token", f"{unk!r} is not a token")
        if byte_level and unk is not None:
            unk = None  # a byte-level model never meets an unknown character
        vocab_in = model.get("vocab")
        if not isinstance(vocab_in, dict):
            raise self.damaged("model.vocab", "must map token strings to ids")
        table = unicode_to_bytes()

        def token_bytes(text: str, where: str) -> bytes:
            if not byte_level:
                return text.encode("utf-8")
            if text and all(c in table for c in text):
                return str_to_token(text)
            raise self.damaged(where, f"{text!r} is not written in the ByteLevel alphabet")

        vocab: dict[int, bytes] = {}
        kinds: dict[int, str] = {}
        added = data.get("added_tokens") or []
        if not isinstance(added, list):
            raise self.damaged("added_tokens", "must be a list")
        # A special token is in model.vocab too (as HF writes it), spelled as itself.
        special_ids = {e["content"]: e["id"] for e in added
                       if isinstance(e, dict) and e.get("special") and isinstance(e.get("content"), str)}
        for text, token_id in vocab_in.items():
            if type(token_id) is not int or token_id < 0:
                raise self.damaged("model.vocab", f"the id of {text!r} is {token_id!r}, not a whole number")
            if token_id in vocab:
                raise self.damaged("model.vocab", f"id {token_id} is given twice")
            if unk is not None and text == unk:
                vocab[token_id], kinds[token_id] = text.encode("utf-8"), "unk"
                continue
            if special_ids.get(text) == token_id:
                vocab[token_id] = text.encode("utf-8")
                continue
            vocab[token_id] = token_bytes(text, "model.vocab")
        specials = self.added_tokens(vocab, kinds, unk, byte_level)
        if unk is not None and unk not in vocab_in:
            raise self.damaged("model.unk_token", f"{unk!r} is not in model.vocab")
        merges = self.merges(model.get("merges"), token_bytes)
        present = set(vocab.values())
        for rank, (left, right) in enumerate(merges):
            for token in (left, right, left + right):
                if token not in present:
                    raise self.damaged(f"model.merges[{rank}]", f"{_show(token, byte_level)!r} is not "
                                       "in model.vocab")
        try:
            spec = TokenizerSpec(normalizer=normalizer, pretokenizer=pretokenizer, pattern=pattern,
                                 alphabet="bytes" if byte_level else "chars", unk_token=unk,
                                 special_tokens=tuple(specials))
        except InvalidArgumentError as exc:
            raise self.refuse("pre_tokenizer", str(exc)) from None
        return HFModel(vocab, merges, spec)

    def added_tokens(self, vocab: dict[int, bytes], kinds: dict[int, str], unk: str | None,
                     byte_level: bool) -> list[str]:
        """The special tokens of ``added_tokens``, put in ``vocab`` (and ``kinds``)."""
        specials: list[str] = []
        added = self.data.get("added_tokens") or []
        by_id = {i: t for i, t in vocab.items()}
        for entry in added:
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) \
                    or type(entry.get("id")) is not int or entry["id"] < 0 or not entry["content"]:
                raise self.damaged("added_tokens", f"{entry!r} is not a token with an id")
            content, token_id = entry["content"], entry["id"]
            if not entry.get("special", False):
                raise self.refuse("added_tokens", f"{content!r} is not special (added words)")
            for flag in ("single_word", "lstrip", "rstrip"):
                if entry.get(flag):
                    raise self.refuse("added_tokens", f"{content!r} has {flag}")
            if content == unk:
                if kinds.get(token_id) != "unk":
                    raise self.damaged("added_tokens", f"the unknown token {unk!r} has id {token_id}, "
                                       "not its id in model.vocab")
                continue
            known = by_id.get(token_id)
            if known is not None and known != content.encode("utf-8") and \
                    not (byte_level and token_to_str(known) == content):
                raise self.damaged("added_tokens", f"id {token_id} is {content!r} here and "
                                   f"{known!r} in model.vocab")
            if content in specials:
                raise self.damaged("added_tokens", f"{content!r} is given twice")
            specials.append(content)
            vocab[token_id] = content.encode("utf-8")
            kinds[token_id] = "special"
        return specials

    def merges(self, merges_in: Any, token_bytes: Any) -> list[tuple[bytes, bytes]]:
        if not isinstance(merges_in, list):
            raise self.damaged("model.merges", "must be a list")
        merges = []
        for rank, entry in enumerate(merges_in):
            if isinstance(entry, str):
                parts = entry.split(" ")
            elif isinstance(entry, list) and all(isinstance(p, str) for p in entry):
                parts = entry
            else:
                parts = []
            if len(parts) != 2 or not all(parts):
                raise self.damaged(f"model.merges[{rank}]", f"{entry!r} is not a pair of tokens")
            merges.append((token_bytes(parts[0], f"model.merges[{rank}]"),
                           token_bytes(parts[1], f"model.merges[{rank}]")))
        return merges

    def normalizer(self, node: Any) -> str:
        if node is None:
            return "none"
        steps = node.get("normalizers") if _type(node) == "Sequence" else [node]
        if not isinstance(steps, list):
            raise self.damaged("normalizer", "a Sequence without a list of normalizers")
        names = []
        for step in steps:
            name = _FROM_HF_NORMALIZERS.get(_type(step) or "")
            if name is None:
                raise self.refuse("normalizer", f"{_type(step)!r}")
            names.append(name)
        return ",".join(names) or "none"

    def pre_tokenizer(self, node: Any) -> tuple[bool, str, str | None]:
        """(byte_level, pretokenizer, pattern)."""
        if node is None:
            return False, "none", None
        steps = node.get("pretokenizers") if _type(node) == "Sequence" else [node]
        if not isinstance(steps, list) or not steps:
            raise self.damaged("pre_tokenizer", "a Sequence without a list of pre-tokenizers")
        byte_level = False
        splits: list[str] = []
        for at, step in enumerate(steps):
            kind = _type(step)
            if kind == "ByteLevel":
                if at != len(steps) - 1:
                    raise self.refuse("pre_tokenizer", "ByteLevel before another pre-tokenizer")
                if step.get("add_prefix_space"):
                    raise self.refuse("pre_tokenizer", "ByteLevel with add_prefix_space=true")
                byte_level = True
                if step.get("use_regex", True):
                    splits.append(PATTERNS["gpt2"])
            elif kind == "Split":
                pattern = step.get("pattern")
                regex = pattern.get("Regex") if isinstance(pattern, dict) else None
                if not isinstance(regex, str) or step.get("behavior") != "Isolated" or step.get("invert"):
                    raise self.refuse("pre_tokenizer", "Split other than a regex kept as isolated pieces")
                splits.append(regex)
            elif kind == "WhitespaceSplit":
                splits.append(PATTERNS["whitespace"])
            elif kind == "Whitespace":
                splits.append(HF_WHITESPACE)
            else:
                raise self.refuse("pre_tokenizer", f"{kind!r}")
        if len(splits) > 1:
            raise self.refuse("pre_tokenizer", "two splitting steps in a row")
        if not splits:
            return byte_level, "none", None
        for name in ("gpt2", "cl100k", "o200k", "whitespace", "punctuation"):
            if PATTERNS[name] == splits[0]:
                return byte_level, name, None
        return byte_level, "regex", splits[0]


def _type(node: Any) -> str | None:
    return node.get("type") if isinstance(node, dict) else None


def _show(token: bytes, byte_level: bool) -> str:
    return token_to_str(token) if byte_level else token.decode("utf-8", "replace")
