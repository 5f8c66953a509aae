"""Spaced repetition with FSRS: each checklist point is one card per learner.

A point recalled in a session is reviewed with a rating derived from the
judge's confidence (:func:`rating_for`); a point never recalled in a finished
session is reviewed as ``Again``. Cards (and so their due dates) live in the
store, keyed by learner, deck (the checklist title) and point id.

Confidence -> rating:

==================  =======
confidence          rating
==================  =======
>= 0.9              Easy
>= 0.7              Good
< 0.7 (recalled)    Hard
not recalled        Again
==================  =======
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import cast

from fsrs import Card, Rating, Scheduler
from fsrs.card import CardDict

from jurist.store import Store
from jurist.store.checklist_rows import FsrsCardRow

EASY_AT = 0.9
GOOD_AT = 0.7


def rating_for(confidence: float | None, recalled: bool = True) -> Rating:
    """The FSRS rating of one review (see the table in this module's docstring)."""
    if not recalled:
        return Rating.Again
    c = 0.5 if confidence is None else confidence
    if c >= EASY_AT:
        return Rating.Easy
    if c >= GOOD_AT:
        return Rating.Good
    return Rating.Hard


def default_scheduler() -> Scheduler:
    """FSRS with its default parameters; fuzzing off so due dates are reproducible."""
    return Scheduler(enable_fuzzing=False)


@dataclass(frozen=True)
class DuePoint:
    """A point's card: what to study next and when."""

    learner: str
    deck: str
    point_id: str
    text: str
    due: datetime
    state: str
    reviews: int
    last_rating: str | None


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


class PointScheduler:
    """Reviews cards and keeps them in the store."""

    def __init__(self, store: Store, scheduler: Scheduler | None = None) -> None:
        self.store = store
        self.scheduler = scheduler or default_scheduler()

    async def card(self, learner: str, deck: str, point_id: str) -> Card | None:
        row = await self.store.fsrs_card(learner, deck, point_id)
        return _card(row.card) if row else None

    async def review(
        self, learner: str, deck: str, point_id: str, text: str, rating: Rating, now: datetime | None = None
    ) -> Card:
        """Review one point's card (a new card on first sight) and store it."""
        now = _aware(now or datetime.now(timezone.utc))
        row = await self.store.fsrs_card(learner, deck, point_id)
        card = _card(row.card) if row else Card(due=now)
        reviews = (row.reviews if row else 0) + 1
        card, _log = self.scheduler.review_card(card, rating, review_datetime=now)
        await self.store.save_fsrs_card(
            learner=learner, deck=deck, point_id=point_id, text=text, card=card.to_dict(),
            due=_aware(card.due), state=card.state.name, reviews=reviews, last_rating=rating.name,
            last_review=now,
        )
        return card

    async def due_points(self, learner: str, now: datetime | None = None, deck: str | None = None) -> list[DuePoint]:
        """Cards due at ``now`` (default: now), earliest first."""
        now = _aware(now or datetime.now(timezone.utc))
        rows = await self.store.fsrs_cards(learner, due_before=now, deck=deck)
        return [_due(r) for r in rows]

    async def all_points(self, learner: str, deck: str | None = None) -> list[DuePoint]:
        """Every card of the learner, earliest due first."""
        return [_due(r) for r in await self.store.fsrs_cards(learner, deck=deck)]


def _card(stored: Mapping[str, object]) -> Card:
    """A card from its JSON column, which holds what ``Card.to_dict()`` gave (fsrs's own format)."""
    return Card.from_dict(cast(CardDict, stored))


def _due(r: FsrsCardRow) -> DuePoint:
    return DuePoint(learner=r.learner, deck=r.deck, point_id=r.point_id, text=r.text, due=_aware(r.due),
                    state=r.state, reviews=r.reviews, last_rating=r.last_rating)


async def due_points(store: Store, learner: str, now: datetime | None = None) -> list[DuePoint]:
    """What ``learner`` should study next: the points due at ``now``, earliest first."""
    return await PointScheduler(store).due_points(learner, now)
