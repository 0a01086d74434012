"""The optional compiled counting core (bpestore/_countcore.c): see bpestore.text."""

from collections.abc import Callable
from typing import Literal, overload

@overload
def count(text: str, counts: dict[bytes, int], classify: Callable[[int], int], pattern: int,
          distinct: Literal[False] = ..., /) -> int: ...
@overload
def count(text: str, counts: dict[bytes, int], classify: Callable[[int], int], pattern: int,
          distinct: Literal[True], /) -> tuple[int, int]: ...
