"""Subprocess side of ``common.run_once``: set up a case, time it, report as JSON.

Usage: ``python -m bench.child '{"func": "bench.cases:NAME", ...Params}'``. The
case function does its untimed set-up and returns the callable to time; the
last stdout line is ``{"seconds", "maxrss_kb", "digest"}``, plus ``"details"``
when the callable returns a dict (measures it took itself).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import resource
import sys
import time
from array import array

from bench.common import Params


def _digest(value: object) -> str:
    """A short fingerprint of a list of token ids (to check peers agree), else ''."""
    if not isinstance(value, list) or (value and not isinstance(value[0], int)):
        return ""
    return f"{len(value)}:{hashlib.sha256(array('q', value).tobytes()).hexdigest()[:12]}"


def peak_rss_kb() -> int:
    """This process's peak RSS in KiB.

    Linux's ``ru_maxrss`` of a child starts at the RSS of the parent it was
    spawned from (vfork + exec), so it is read from VmHWM, which belongs to the
    address space this process got at exec.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    module, name = spec.pop("func").split(":")
    timed = getattr(importlib.import_module(module), name)(Params(**spec))
    start = time.perf_counter()
    value = timed()
    seconds = time.perf_counter() - start
    report = {"seconds": seconds, "maxrss_kb": peak_rss_kb(), "digest": _digest(value)}
    if isinstance(value, dict):
        report["details"] = value
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
