"""What an experiment run would do, with no call made: ``jurist experiment run --dry-run``.

The run is set up as for real (the dataset, the target imported, the judge resolved) and
each item it would do goes through it within :func:`~jurist.models.cost.expecting`:
``Model`` counts each call (its tokens, the most it can cost) and makes none. The target's
answer is not known before it is generated, so each item is judged with a stand-in as long
as the target may answer (``max_tokens``; a function target: 1,024 tokens): the judge calls'
input tokens are then an upper bound.
An answer kept from a run that stopped is judged as it is. Nothing is written: no record,
no item row, no file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import JsonValue

from jurist.config import Settings
from jurist.errors import ModelError
from jurist.experiments.datasets import session_of
from jurist.experiments.records import DatasetItem
from jurist.experiments.run import ExperimentSpec, Prepared, prepared, todo_items
from jurist.experiments.targets import Generation
from jurist.ids import new_id
from jurist.models.cost import DryRun, expecting
from jurist.runtime import Runtime
from jurist.store import experiments as q

STAND_IN = "answer "  # about one token: the stand-in answer is max_tokens of them
FUNCTION_ANSWER_TOKENS = 1024  # the stand-in's length for a function target, which has no max_tokens


@dataclass
class ExperimentDryRun:
    dry: DryRun  # the calls counted, per model
    todo: int  # items the run would do
    done_before: int  # items done by an earlier run of the same name


async def expect_experiment(spec: ExperimentSpec, *, settings: Settings | None = None,
                            runtime: Runtime | None = None) -> ExperimentDryRun:
    """Count the calls ``spec``'s run would make (see the module docstring)."""
    dry = DryRun()
    async with prepared(spec, settings, runtime) as p:
        states = await p.store.aread(q.item_states, spec.name)
        todo, done = todo_items(p.items, states, spec.retry_failed)
        stand_in = STAND_IN * (p.target.max_tokens or FUNCTION_ANSWER_TOKENS)
        queue = iter(todo)

        async def worker() -> None:
            for item, kept in queue:
                await _one(p, item, kept, stand_in)

        with expecting(dry):
            await asyncio.gather(*(worker() for _ in range(min(spec.parallel, len(todo)))))
    return ExperimentDryRun(dry, len(todo), len(done))


async def _one(p: Prepared, item: DatasetItem, kept: dict[str, JsonValue] | None, stand_in: str) -> None:
    if kept is not None:
        turns = Generation.from_json(kept).turns
    else:
        try:
            await p.target.generate(item, new_id())  # counted, not made (DryRunCall)
        except ModelError:
            pass
        turns = [{"role": "assistant", "content": stand_in}]
    await p.evaluator.score(session_of(item, turns))  # each judge call counted, none made
