"""Persistence: the database schema, its migrations, and the Store class."""

from .store import Store
from .training import TrainOptions

__all__ = ["Store", "TrainOptions"]
