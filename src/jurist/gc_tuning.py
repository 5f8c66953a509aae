"""Garbage collection for work that allocates much and keeps little.

A judge call, a proxied request or an experiment item allocates thousands of
short-lived objects (requests, replies, records, rows). At Python's default the
youngest generation is collected every 700 allocations: several times a call,
about a sixth of the CPU of benchmarks/experiment_throughput.py, and every full
collection walked all of a long-lived process's objects while every request in
flight waited. Three settings, one per kind of process:

* :func:`fewer_collections`: a block of work (an experiment run) collects the young
  generation every ``GC_YOUNG`` allocations, and puts back what was set after it;
* :class:`ServingGC`: a server, while it serves, also leaves what it built at start-up
  out of every later collection (``gc.freeze``), undone when the last server stops;
* :func:`tune_gc`: a worker process that does nothing but score (the Ray engine's), for good.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

#: Allocations between two collections of the youngest generation (Python's default: 700).
GC_YOUNG = 10_000


@contextmanager
def fewer_collections(threshold: int = GC_YOUNG) -> Iterator[None]:
    """Collect the youngest generation every ``threshold`` allocations while the block runs (older
    generations as they were), then put back what was set, unless something else changed it
    meanwhile. A threshold as high already in force is left as it is (a run inside another)."""
    before = gc.get_threshold()
    if not gc.isenabled() or before[0] >= threshold:
        yield
        return
    ours = (threshold, *before[1:])
    gc.set_threshold(*ours)
    try:
        yield
    finally:
        if gc.get_threshold() == ours:
            gc.set_threshold(*before)


class ServingGC:
    """Garbage collection while a server serves: what is built by then (modules, routes, the
    store, templates) lives as long as the server, so it is frozen out of every later collection
    (``gc.freeze``), and a request allocates thousands of short-lived objects, so the young
    generation is collected every ``GC_YOUNG`` allocations rather than every 700. With Python's
    defaults every full collection walked all of the server's objects (tens of milliseconds while
    every request waited) and young collections ran several times a request. When the last server
    of the process stops, the thresholds are put back and what was frozen is unfrozen."""

    _lock = threading.Lock()
    _serving = 0  # servers of this process between start and stop
    _saved: tuple[int, int, int] | None = None  # the thresholds before the first of them started

    def __init__(self) -> None:
        self._started = False

    def start(self) -> None:
        with ServingGC._lock:
            if ServingGC._serving == 0:
                ServingGC._saved = young, older, oldest = gc.get_threshold()
                gc.set_threshold(max(young, GC_YOUNG), older, oldest)
            ServingGC._serving += 1
            self._started = True
            gc.freeze()

    def stop(self) -> None:
        with ServingGC._lock:
            if not self._started:
                return
            self._started = False
            ServingGC._serving -= 1
            if ServingGC._serving == 0:
                if ServingGC._saved is not None:
                    gc.set_threshold(*ServingGC._saved)
                gc.unfreeze()


def tune_gc() -> None:
    """Garbage collection for a worker process, which does nothing but score.

    What the worker has built by now (modules, store, judge) lives as long as
    the process, so it is frozen out of every later collection; and each
    judge call allocates thousands of short-lived objects, so the young
    generation is collected every ``GC_YOUNG`` allocations, not every 700.
    With Python's defaults every full collection walked all of Ray's and
    jurist's objects while every request in flight waited.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG, older, oldest)
