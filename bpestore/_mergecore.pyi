"""The optional compiled merge core (bpestore/_mergecore.c): see bpestore.trainer."""

from collections.abc import Sequence

def build_stats(words: list[list[int]], counts: list[int], pair_counts: dict[int, int],
                pair_words: dict[int, list[int]]) -> None: ...
def merge(words: list[list[int]], counts: list[int], pair_counts: dict[int, int], pair_words: dict[int, list[int]],
          indices: Sequence[int], left: int, right: int, token: int) -> set[int]: ...
