"""bpestore's precompiled-map normalizers beside their libraries', in one process.

    python -m bench.spm_normalize [--lines N] [--runs R] [CORPUS ...]

For each corpus of ../shared/corpora (default: tinyshakespeare, Russian, Chinese), the
first N lines: a model trained by sentencepiece with its defaults (``nmt_nfkc``) gives the map;
``Charsmap.normalize`` is timed against ``SentencePieceProcessor.normalize`` and
``Charsmap.normalize_graphemes`` against ``tokenizers``' ``Precompiled.normalize_str``, each
pair interleaved, R rounds; printed: CPU seconds and the median ratio (bpestore / library).
The outputs are compared after timing."""

from __future__ import annotations

import argparse
import functools
import io
import statistics
import time

from bench.common import REPO

CORPORA = ["tinyshakespeare.txt", "russian_1M.txt", "chinese_1M.txt"]


def _cpu(fn, lines):  # noqa: ANN001, ANN202
    start = time.process_time()
    out = [fn(line) for line in lines]
    return time.process_time() - start, out


def main(argv: list[str] | None = None) -> None:
    import sentencepiece as spm
    from tokenizers import normalizers

    from bpestore.charsmap import Charsmap
    from bpestore.formats.sentencepiece import parse_model

    parser = argparse.ArgumentParser(prog="python -m bench.spm_normalize", description=__doc__)
    parser.add_argument("corpora", nargs="*", default=CORPORA)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    for name in args.corpora:
        lines = (REPO.parent / "shared" / "corpora" / name).read_text(encoding="utf-8").split("\n")[:args.lines]
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter([line for line in lines[:3000] if line.strip()]),
                                       model_writer=model, model_type="bpe", vocab_size=3000,
                                       character_coverage=0.9995, minloglevel=2)
        blob = parse_model(model.getvalue()).normalizer[2]
        sp, hf, ours = (spm.SentencePieceProcessor(model_proto=model.getvalue()), normalizers.Precompiled(blob),
                        Charsmap(blob))

        rows = {"sentencepiece normalize": [], "tokenizers Precompiled": []}
        for _ in range(args.runs):
            longest = functools.partial(ours.normalize, dummy_prefix=True, remove_extra_whitespaces=True)
            for label, mine, theirs in (("sentencepiece normalize", longest, sp.normalize),
                                        ("tokenizers Precompiled", ours.normalize_graphemes, hf.normalize_str)):
                (t_mine, got), (t_theirs, want) = _cpu(mine, lines), _cpu(theirs, lines)
                assert got == want, label
                rows[label].append((t_mine, t_theirs))
        for label, times in rows.items():
            ratio = statistics.median(a / b for a, b in times)
            print(f"{name:24} {label:24} bpestore {statistics.median(a for a, _ in times):.3f} s  library "
                  f"{statistics.median(b for _, b in times):.3f} s  ratio {ratio:.1f}x")


if __name__ == "__main__":
    main()
