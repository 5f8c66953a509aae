"""What one item of an experiment cost: its calls counted apart, and charged to the run's budget."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from jurist.models.cost import Cost, CostBudget


@dataclass
class ItemCost(CostBudget):
    """The budget an item's calls are charged to (:func:`~jurist.models.cost.charged_to` around
    its generation and its judging): it counts them, and passes each on to ``run``, the run's
    budget, which decides whether a call may start (``--max-cost``)."""

    run: CostBudget | None = None

    def add(self, cost: Cost) -> None:
        super().add(cost)
        if self.run is not None:
            self.run.add(cost)

    def check(self, model: str) -> None:
        if self.run is not None:
            self.run.check(model)

    def to_json(self) -> dict[str, JsonValue]:
        """The counts, as kept with an answer that is not yet judged."""
        return {"cost_usd": self.spent_usd, "calls": self.calls, "unknown": self.unknown,
                "notes": dict(self.unknown_notes)}

    def add_kept(self, data: object) -> None:
        """Count the calls of a kept answer (:meth:`to_json`), made by an earlier run (not charged again)."""
        if not isinstance(data, dict):
            return
        with self._lock:
            spent, calls, unknown, notes = (data.get(k) for k in ("cost_usd", "calls", "unknown", "notes"))
            self.spent_usd += float(spent) if isinstance(spent, (int, float)) else 0.0
            self.calls += calls if isinstance(calls, int) else 0
            self.unknown += unknown if isinstance(unknown, int) else 0
            for note, n in (notes.items() if isinstance(notes, dict) else ()):
                if isinstance(n, int):
                    self.unknown_notes[note] = self.unknown_notes.get(note, 0) + n

    @property
    def item_cost(self) -> tuple[float | None, str | None]:
        """The item's cost (the known part; None when no call had a known cost) and, when some
        call's cost is unknown, a note saying how many and why."""
        if not self.unknown:
            return round(self.spent_usd, 9), None
        why = max(self.unknown_notes, key=self.unknown_notes.__getitem__) if self.unknown_notes else "no price"
        known = self.calls - self.unknown
        note = f"{self.unknown} of {self.calls} calls of unknown cost ({why})"
        return (round(self.spent_usd, 9) if known else None), note[:500]
