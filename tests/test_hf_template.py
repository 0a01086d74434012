"""Hugging Face's ``TemplateProcessing`` post-processor (Llama 2's and Mistral's files add
``<s>`` with it; Llama 3's sits in a Sequence after ByteLevel): read into the spec's
``template``, applied by ``encode(..., add_special_tokens=True)`` as tokenizers' ``encode``
applies it, and written back; checked against ``tokenizers`` on files it builds."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_error
from tests.test_hf_roundtrip import PROBES, generated_lines, llama_style

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import processors  # noqa: E402

import bpestore  # noqa: E402

TEMPLATES = {
    "llama2": dict(single="<s> $A", pair="<s> $A <s> $B:1"),
    "both-ends": dict(single="<s>:0 $A:0 </s>:0", pair="<s> $A </s> </s>:1 $B:1 </s>:1"),
    "single-only": dict(single="[INST] $A </s>"),
}


@pytest.mark.parametrize("name", TEMPLATES)
@pytest.mark.parametrize("sequence", [False, True], ids=["alone", "after-bytelevel"])
def test_template_processing_encodes_like_tokenizers_and_is_written_back(name, sequence, tmp_path):
    lines = generated_lines(800)
    hf = llama_style("specials-at-end" if name == "single-only" else "prepend-normalizer", lines)
    names = ["<s>", "</s>", "[INST]"] if name == "single-only" else ["<s>", "</s>"]
    template = processors.TemplateProcessing(**TEMPLATES[name],
                                             special_tokens=[(t, hf.token_to_id(t)) for t in names])
    hf.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template]) if sequence \
        else template
    hf.save(str(tmp_path / "t.json"))
    store = bpestore.open(str(tmp_path / "s.db"))
    tok = store.tokenizer(store.import_hf("t", tmp_path / "t.json").ref)
    assert tok.spec.template[0].split() == [f"{p}:0" if ":" not in p else p for p in TEMPLATES[name]["single"].split()]
    texts = lines[:200] + PROBES
    for text in texts:
        with_specials = hf.encode(text).ids  # tokenizers' default: add_special_tokens=True
        assert tok.encode(text, allowed_special="all", add_special_tokens=True) == with_specials, text
        assert tok.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, text
    assert tok.encode_batch(texts[:20], allowed_special="all", add_special_tokens=True) == \
        [e.ids for e in hf.encode_batch(texts[:20])]
    # Exported, tokenizers reads the same template back: the same ids for single texts and pairs.
    store.export("t", format="hf", out=tmp_path / "back.json")
    back = tokenizers.Tokenizer.from_file(str(tmp_path / "back.json"))
    assert json.loads(back.to_str())["post_processor"]["type"] == "TemplateProcessing"
    for a, b in zip(texts, texts[1:]):
        assert back.encode(a).ids == hf.encode(a).ids, a
        assert back.encode(a, b).type_ids == hf.encode(a, b).type_ids, (a, b)
        assert back.encode(a, b).ids == hf.encode(a, b).ids, (a, b)


def test_a_template_changes_no_fingerprint_of_a_spec_without_one():
    from bpestore.spec import TokenizerSpec

    spec = TokenizerSpec(alphabet="chars", unk_token="<unk>", special_tokens=("<s>",))
    assert "template" not in spec.to_json()
    with_template = spec.replace(template=("<s>:0 $A:0", "<s>:0 $A:0 $B:1"))
    assert TokenizerSpec.from_json(with_template.to_json()) == with_template
    for bad in [("$A:0 $A:0",), ("<s>:0",), ("$A", "$A:0"), ("$A", "$A $B", "$A")]:
        with pytest.raises(bpestore.errors.InvalidArgumentError, match="template"):
            spec.replace(template=bad)


def test_a_template_adding_what_is_not_one_special_token_is_refused(cli_run, tmp_path):
    hf = llama_style("prepend-normalizer", generated_lines(300))
    hf.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 7)])
    hf.save(str(tmp_path / "t.json"))
    assert_error(cli_run("import", "hf", "t", str(tmp_path / "t.json")), "post_processor.special_tokens['<s>']")
    data = json.loads(hf.to_str())
    data["post_processor"] = {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}
    (tmp_path / "b.json").write_text(json.dumps(data), encoding="utf-8")
    assert_error(cli_run("import", "hf", "b", str(tmp_path / "b.json")), "post_processor")
