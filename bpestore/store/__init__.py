"""Persistence: the database schema, its migrations, and the Store class."""

from .store import Store, TrainProgress

__all__ = ["Store", "TrainProgress"]
