"""A batch's output folder: result files that agree with the store, one batch at a time.

* **One batch per folder.** A batch holds ``.jurist-batch.lock`` in the folder
  while it runs (an operating-system lock, released when the process ends,
  ``kill -9`` included); a second batch on the folder stops at once with an
  InputError naming the process that holds it.
* **Row first, then file.** A session's result is written as
  ``.<result file>.<evaluation id>.pending``; its store row (with the calls
  recorded before it) is committed; then the pending file is renamed into
  place. A result file therefore always has its row.
* **Recovery.** When a batch takes the folder, a pending file whose row is in
  the store is put in place (the batch before was killed between commit and
  rename); one without its row is removed, and the session is scored again
  (its calls already on record come from the call cache). Temporary files left
  by a killed write are removed.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from jurist.errors import InputError, StoreError
from jurist.jsonfiles import json_bytes, write_json
from jurist.rubrics.naming import RESULT_SUFFIX, result_name
from jurist.store.locks import FileLock

if TYPE_CHECKING:
    from jurist.rubrics.scoring import EvaluationSink, ScoredSession

LOCK_NAME = ".jurist-batch.lock"
_PENDING = re.compile(r"^\.(?P<name>.+" + re.escape(RESULT_SUFFIX) + r")\.(?P<id>[0-9A-Za-z]+)\.pending$")
# Temporary files of write_json (".<name>.<pid>.<random>.tmp") and of earlier versions ("<name>.json.tmp").
_TEMPORARY = re.compile(r"^(\..+\.[0-9]+\.[0-9a-f]{8}\.tmp|.+\.json\.tmp)$")


class ResultFolder:
    """The output folder of one batch; ``store`` None: result files without store rows."""

    def __init__(self, path: str | Path, store: EvaluationSink | None) -> None:
        self.path = Path(path)
        self.store = store
        self._lock = FileLock(self.path / LOCK_NAME)

    async def take(self) -> None:
        """Create the folder if need be, lock it, and finish or clear what a killed batch left."""
        await asyncio.to_thread(self._take)

    def _take(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if not self._lock.acquire(timeout=0):
            raise InputError(f"another batch is writing to this folder ({self._lock.holder()}); wait until it "
                             "ends, or give another --output-dir", file=str(self.path))
        try:
            self._recover()
        except BaseException:
            self._lock.release()
            raise

    def _recover(self) -> None:
        pending: dict[Path, tuple[str, str]] = {}
        for entry in os.scandir(self.path):
            match = _PENDING.match(entry.name)
            if match:
                pending[Path(entry.path)] = (match["name"], match["id"])
            elif _TEMPORARY.match(entry.name) and entry.is_file():
                os.unlink(entry.path)
        if not pending:
            return
        stored = self.store.evaluation_ids([i for _, i in pending.values()]) if self.store is not None else set()
        for path, (name, evaluation_id) in pending.items():
            if evaluation_id in stored:
                os.replace(path, self.path / name)
            else:
                os.unlink(path)

    async def release(self) -> None:
        await asyncio.to_thread(self._lock.release)

    async def write(self, scored: ScoredSession) -> None:
        """Save a scored session: its store row, committed, then its result file."""
        target = self.path / result_name(scored.session.session_id)
        if self.store is None:
            await asyncio.to_thread(write_json, target, scored.result)
            return
        pending = self.path / f".{target.name}.{scored.row.id}.pending"
        await asyncio.to_thread(_write_new, pending, scored.result)
        try:
            await self.store.asave_evaluation(scored.row, scored.score_rows)
        except StoreError:
            await asyncio.to_thread(pending.unlink, missing_ok=True)  # its row never will be: no file
            raise
        await asyncio.to_thread(os.replace, pending, target)


def _write_new(path: Path, data: object) -> None:
    path.write_bytes(json_bytes(data))
