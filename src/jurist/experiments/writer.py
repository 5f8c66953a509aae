"""An experiment's item rows, written many at a time.

Hundreds of items finish a second in a large run; one transaction each (from as many
threads) would contend for the database's write lock. :class:`RowWriter` gathers the
rows put while a write is under way (or within ``linger`` seconds of the first) and writes
them in one transaction; each :meth:`~RowWriter.put` returns once its row is committed,
so what follows it (an item's result file) comes after its row, as before.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from sqlalchemy.engine import Connection

from jurist.store import Store

Write = Callable[[Connection], None]
LINGER = 0.01  # seconds a write waits for others to join it


class RowWriter:
    """Batches writes of one run into one transaction each (see the module docstring)."""

    def __init__(self, store: Store, linger: float = LINGER) -> None:
        self.store = store
        self.linger = linger
        self._pending: list[tuple[Write, asyncio.Future[None]]] = []
        self._running: asyncio.Task[None] | None = None

    async def put(self, write: Write) -> None:
        """Run ``write(conn)`` in the next transaction; return when it is committed (raise what it raised)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((write, done))
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._drain())
        await asyncio.shield(done)  # a cancelled item still has its row written (or not) with the others

    async def _drain(self) -> None:
        while self._pending:
            await asyncio.sleep(self.linger)
            batch, self._pending = self._pending, []
            try:
                await self.store.awrite(_all, [w for w, _ in batch])
            except Exception as exc:
                if len(batch) == 1:
                    _settle(batch[0][1], exc)
                    continue
                for write, done in batch:  # one bad row must not fail the others: each alone
                    try:
                        await self.store.awrite(write)
                    except Exception as one:
                        _settle(done, one)
                    else:
                        _settle(done, None)
                continue
            for _, done in batch:
                _settle(done, None)


def _all(conn: Connection, writes: list[Write]) -> None:
    for write in writes:
        write(conn)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
