"""Identifiers for calls, traces and evaluations.

128 random bits as 32 hex characters, like ``uuid4().hex``, drawn from a
generator seeded once from the OS: no system call per id, which matters at
thousands of judge calls per second.
"""

from __future__ import annotations

import os
import random

_rng = random.SystemRandom()
_fast = random.Random(_rng.getrandbits(128))


def new_id() -> str:
    return f"{_fast.getrandbits(128):032x}"


def _reseed() -> None:
    _fast.seed(_rng.getrandbits(128))


# A forked worker must not repeat its parent's ids.
os.register_at_fork(after_in_child=_reseed)
