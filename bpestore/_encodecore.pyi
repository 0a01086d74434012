"""The optional compiled encode core (bpestore/_encodecore.c): see bpestore.encoder.core_backend."""

from array import array
from collections.abc import Callable, Sequence

class Encoder:
    def __init__(
        self,
        tokens: Sequence[bytes | None],
        merges: tuple[Sequence[int], Sequence[int], Sequence[int]] | None,
        byte_ids: Sequence[int] | None,
        *,
        mode: int = 0,
        pattern: int = -1,
        classify: Callable[[int], int] | None = None,
        chars: dict[str, int] | None = None,
        unk: int = -1,
        fallback: bool = False,
        prefix: int = -1,
        suffix: int = -1,
        whole: bool = False,
        unique: bool = False,
        backtrack_after: int = -1,
    ) -> None: ...
    def encode(self, text: str, as_bytes: bool = False) -> list[int] | bytearray | None: ...
    def encode_batch(self, texts: Sequence[str], as_bytes: bool = False,
                     workers: int = 1) -> list[list[int] | bytearray | None]: ...
    def encode_words(self, words: Sequence[str], as_bytes: bool = False) -> list[int] | bytearray | None: ...
    def table_bytes(self) -> int: ...

def read_rank_file(data: bytes) -> list[bytes | None] | None: ...
def seam_problem(lefts: Sequence[int], rights: Sequence[int], checked: int) -> int | None: ...
def token_dict(data: bytes, at: int, ids: array[int], lengths: array[int]) -> dict[int, bytes]: ...
