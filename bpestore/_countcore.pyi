"""The optional compiled counting core (bpestore/_countcore.c): see bpestore.text."""

from collections.abc import Callable

def count(text: str, counts: dict[bytes, int], classify: Callable[[int], int], pattern: int, /) -> int: ...
def count_many(pieces: list[list[str]], counts: dict[bytes, int], classify: Callable[[int], int],
               pattern: int, /) -> list[tuple[int, int]]: ...
