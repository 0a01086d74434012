"""Process-wide helpers shared by ingest, training and the encoder: how many
cores to use, worker processes that die with their parent, pausing garbage collection."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def default_workers() -> int:
    """The number of cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def die_with_parent() -> None:
    """On Linux, the kernel kills this worker the moment its parent dies
    (PR_SET_PDEATHSIG), even while a long regex holds the GIL and no thread of its own can run."""
    if sys.platform != "linux":
        return
    import ctypes  # here: an encoding that starts no worker does not pay for it
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside: building tables of 50,000 merges makes
    tuples and dicts that hold no cycles, and collecting while they grow cost
    as much again as building them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
