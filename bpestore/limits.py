"""Limits and defaults shared by the store, the command line, ingestion and encoding."""

# The largest value the database's integer columns hold: ids, counts, option values
# (and what a uint32 id file holds).
MAX_INT = 2**31 - 1
# The most processes or threads a command starts.
MAX_WORKERS = 1024
# How often a training run writes its merges: every this many merges, or seconds.
DEFAULT_CHECKPOINT_EVERY = 1000
DEFAULT_CHECKPOINT_SECONDS = 10.0
