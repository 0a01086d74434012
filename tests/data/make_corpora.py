"""Builds tests/data/corpora: the stand-ins the tests use where ../shared/corpora is absent.

Each file has the name of the shared file it stands for, compressed with xz (``NAME.xz``; a shared
``.xz`` keeps its one suffix). Small reference files are whole; the GPT-2 vocabulary and merges are
whole; a rank file is its first RANKS lines (a prefix of a tiktoken rank file is itself a rank table:
both parts of every token have lower ranks); a text corpus is its first CHARS characters, cut at
the last line end. Dracula is not here: the package ships it (bpestore.sample_path()).

Run from the repository root:  python tests/data/make_corpora.py ../shared/corpora
"""
import lzma
import sys
from pathlib import Path

WHOLE = ["address.txt", "german.txt", "corpus.en", "tinystories_sample.txt", "train-bpe-reference-merges.txt",
         "train-bpe-reference-vocab.json", "gpt2_vocab.json", "gpt2_merges.txt"]
RANKS = {"cl100k_base.tiktoken": 6000, "o200k_base.tiktoken": 6000}
CHARS = {"tinyshakespeare.txt": 300_000, "taylorswift.txt": 60_000, "german_1M.txt": 50_000,
         "russian_1M.txt": 160_000, "japanese_1M.txt": 160_000, "chinese_1M.txt": 25_000, "hindi_1M.txt": 160_000,
         "code_python_5M.txt.xz": 60_000, "english_medium.txt.xz": 60_000, "english_100M.txt.xz": 60_000}


def read(path: Path) -> str:
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def write(out: Path, name: str, text: str) -> None:
    target = out / (name if name.endswith(".xz") else name + ".xz")
    target.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))


def main(corpora: Path) -> None:
    out = Path(__file__).resolve().parent / "corpora"
    out.mkdir(exist_ok=True)
    for name in WHOLE:
        write(out, name, read(corpora / name))
    for name, n in RANKS.items():
        write(out, name, "".join(read(corpora / name).splitlines(keepends=True)[:n]))
    for name, n in CHARS.items():
        text = read(corpora / name)[:n]
        write(out, name, text[: text.rfind("\n") + 1])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
