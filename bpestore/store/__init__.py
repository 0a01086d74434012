"""Persistence: the database schema, its migrations, and the Store class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .store import Store

if TYPE_CHECKING:
    from .training import TrainOptions


def __getattr__(name: str) -> Any:
    # TrainOptions lives with the trainer, which a query does not import.
    if name == "TrainOptions":
        from .training import TrainOptions

        return TrainOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Store", "TrainOptions"]
