"""The checklist demo: a scripted learner against the caffeine checklist, offline.

``examples/checklists/caffeine_learner.json`` holds the learner's messages.
Each is judged by the local embedding judge (``local/minilm``, one
meaning-match of every unchecked point against the message) unless given
another judge; the tutor is the scripted ``scripted/tutor-demo`` model, which
acknowledges the evaluator's hidden observation and asks about the next
unchecked point, with no LLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from jurist.checklist.points import load_checklist
from jurist.checklist.scheduling import PointScheduler
from jurist.checklist.session import OBSERVATION_PREFIX, ChecklistSession
from jurist.config import Settings
from jurist.errors import UNDECIDED
from jurist.demo import examples_dir
from jurist.models.base import ChatRequest
from jurist.models.registry import LOCAL_JUDGE
from jurist.models.scripted import script
from jurist.runtime import Runtime

DEMO_TUTOR = "tutor-demo"


def demo_tutor(session_ref: list[ChecklistSession]) -> Any:
    """The scripted tutor's reply function: acknowledge, then ask about the next unchecked point."""

    def reply(request: ChatRequest) -> str:
        session = session_ref[0]
        observed = " ".join(m.text for m in request.messages
                            if m.role == "system" and m.text.startswith(OBSERVATION_PREFIX))
        ack = "Yes, exactly." if "was recalled" in observed else "Okay, let's dig a little deeper."
        remaining = session.unchecked_points()
        if not remaining:
            return "That's everything on the list. Well done!"
        topic = remaining[0].id.replace("_", " ")
        return f"{ack} What can you tell me about {topic}?"

    return reply


async def run_checklist_demo(console: Console, settings: Settings, output_dir: Path,
                             judge: str = LOCAL_JUDGE) -> int:
    """Run the demo with ``judge``; print turns, points recalled, completion and due dates. 0 when
    every message was judged and, with the local judge, the checklist was completed; else 1."""
    ex = examples_dir() / "checklists"
    transcript = json.loads((ex / "caffeine_learner.json").read_text(encoding="utf-8"))
    checklist = load_checklist(ex / transcript["checklist"])
    learner = transcript["learner"]
    offline = " (offline)" if judge == LOCAL_JUDGE else ""
    console.print(f"Checklist [bold]{escape(checklist.title)}[/] ({len(checklist.points)} points), learner "
                  + escape(f"{learner}; judge {judge}{offline}, tutor scripted/{DEMO_TUTOR}"), highlight=False)
    session_ref: list[ChecklistSession] = []
    script(DEMO_TUTOR, default=demo_tutor(session_ref))
    runtime = Runtime(settings)
    session: ChecklistSession | None = None
    unjudged = 0  # messages the judge gave no verdict on
    undecided = 0  # of which the offline judge said it could not decide (shown with its reason)
    partly = 0  # turns with points the offline judge could not decide (its verdicts on the others count)
    try:
        session = await ChecklistSession.start(checklist, runtime=runtime, learner=learner,
                                               tutor=f"scripted/{DEMO_TUTOR}", judge=judge)
        store = session.store
        session_ref.append(session)
        console.print(f"tutor> {escape(session.opening())}", highlight=False)
        for i, text in enumerate(transcript["messages"], start=1):
            if not session.active:
                break
            r = await session.process_user_message(text)
            console.print(f"\n[bold]turn {i}[/] learner> {escape(text)}", highlight=False)
            recalled = ", ".join(r.points_recalled_this_turn) or "none"
            console.print(f"  recalled this turn: [green]{escape(recalled)}[/]  ({r.recalled_count}/{r.total_points})",
                          highlight=False)
            judged = session.last_evaluation
            if judged is not None and judged.undecided_ids:  # a verdict on the others; these stay unchecked
                partly += 1
                console.print(f"  [yellow]the judge could not decide {escape(', '.join(judged.undecided_ids))} "
                              f"(still unchecked): {escape(judged.reason or '')}[/]", highlight=False)
            if judged is not None and judged.status != "ok":
                unjudged += 1
                undecided += (judged.reason or "").startswith(UNDECIDED)
                console.print(f"  [red]the judge gave no verdict: {escape(judged.reason or judged.turn_status)}[/]",
                              highlight=False)
            console.print(f"  tutor> {escape(r.response)}", highlight=False)
        if session.active:
            await session.finish()  # what was not recalled is reviewed as Again
        console.print(f"\nsession {session.session_id}: {session.status}, {session.recalled_count}/"
                      f"{session.total_points} points recalled", highlight=False)
        console.print("FSRS next reviews:")
        for d in await PointScheduler(store).all_points(learner, deck=checklist.title):
            console.print(escape(f"  {d.point_id:<12} due {d.due:%Y-%m-%d %H:%M} UTC  (last rating {d.last_rating}, "
                                 f"{d.reviews} review(s))"), highlight=False)
        console.print(escape(f"stored in {settings.database} (its calls: `jurist logs --trace "
                             f"{session.session_id}`)"), highlight=False)
        if judge != LOCAL_JUDGE:  # another judge's verdicts are its own: only a failure to judge fails
            return 1 if unjudged else 0
        # the offline judge's "uncertain" is a verdict the demo shows, not a fault of the run
        return 0 if session.completed or ((unjudged or partly) and undecided == unjudged) else 1
    finally:
        if session is not None:
            await session.aclose()  # its judge's and tutor's connections
        await runtime.aclose()
