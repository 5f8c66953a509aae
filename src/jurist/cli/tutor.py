"""`jurist tutor`: a recall tutor in the terminal, on a checklist file.

Each line you type is one message. ``/end`` ends the session (points you did
not recall are scheduled as ``Again``); ``/quit`` or end of input leaves it
open, to continue with ``--session ID``. The learner sees the tutor's replies
only: which points were recalled, and when each is due again, are printed with
``--show-progress`` (the recall tutor's evaluation stays out of sight, note 000's
criterion 17).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from jurist.cli.common import ConfigOpt, DbOpt, console, handle_errors, load_settings, require_local_judge, waiting
from jurist.errors import InputError, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from jurist.checklist.evaluator import Mode
    from jurist.config import Settings

END, QUIT = "/end", "/quit"


def register(app: typer.Typer) -> None:
    @app.command("tutor")
    @handle_errors
    def tutor_cmd(
        points: Optional[Path] = typer.Option(None, "--points", help="Checklist file: {title, points: [{id, text}]}."),
        learner: str = typer.Option("default", "--learner", help="Whose FSRS cards to review and schedule."),
        mode: str = typer.Option("recall", "--mode", help="recall (specific feedback) or rabbithole (minimal)."),
        tutor: Optional[str] = typer.Option(
            None, "--tutor", help="Tutor model (default: alias 'tutor', then alias 'strong', then the judge)."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Checklist judge (default: alias 'fast', then the judge, then local/minilm)."),
        session: Optional[str] = typer.Option(None, "--session", help="Resume this session id."),
        show_progress: bool = typer.Option(
            False, "--show-progress",
            help="Also print the points recalled after each reply, and each point's next review at the end "
                 "(default: the tutor's replies only)."),
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Recall a checklist with a tutor; every message is judged against every unchecked point."""
        import asyncio

        from jurist.checklist.evaluator import is_mode

        if not is_mode(mode):
            raise InputError(f"--mode must be 'recall' or 'rabbithole', not {mode!r}")
        if points is None and session is None:
            raise InputError("give --points FILE to start a session, or --session ID to resume one")
        settings = load_settings(config, db=db)
        code = asyncio.run(_run(settings, points, learner, mode, tutor, judge, session, show_progress))
        raise typer.Exit(code)


async def _run(settings: "Settings", points: Path | None, learner: str, mode: Mode, tutor: str | None,
               judge: str | None, session_id: str | None, show_progress: bool = False) -> int:
    import asyncio

    from jurist.checklist import ChecklistSession, checklist_judge_ref, load_checklist, tutor_ref
    from jurist.checklist.scheduling import PointScheduler
    from jurist.store import Store

    store = Store(settings.database)
    try:
        if session_id:
            with waiting(f"opening session {session_id}"):
                s = await ChecklistSession.resume(session_id, store=store, tutor=tutor, judge=judge,
                                                  settings=settings)
            counts = f": {s.recalled_count}/{s.total_points} recalled" if show_progress else ""
            console.print(escape(f"resuming session {s.session_id}{counts}"), highlight=False)
        else:
            assert points is not None
            checklist = load_checklist(points)
            tutor_model = tutor_ref(settings, tutor)  # before the judge: say first what is missing
            judge_model = checklist_judge_ref(settings, judge)
            require_local_judge(judge_model)
            with waiting(f"starting a session on {points.name}"):
                s = await ChecklistSession.start(checklist, store=store, learner=learner, mode=mode,
                                                 tutor=tutor_model, judge=judge_model,
                                                 settings=settings)
        console.print(f"[bold]{escape(s.title)}[/] — session {s.session_id} (tutor {s.tutor.name}, judge "
                      f"{s.evaluator.judge_model}). Type {END} to finish, {QUIT} to stop and resume later.",
                      highlight=False)
        if not s.messages:
            console.print(f"tutor> {escape(s.opening())}", highlight=False)
        while s.active or s.awaiting_reply:
            try:
                line = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
            line = line.strip()
            if not line and not s.awaiting_reply:
                continue
            if line == QUIT:
                break
            if line == END:
                with waiting("ending the session and scheduling the reviews"):
                    await s.finish()
                break
            try:
                what = (f"judging your message ({s.evaluator.judge_model}), then the tutor ({s.tutor.name}) answers"
                        if line else f"waiting for the tutor ({s.tutor.name})")
                with waiting(what):
                    r = await (s.process_user_message(line) if line else s.reply_again())
            except ModelError as exc:
                console.print(f"[red]the tutor could not answer ({type(exc).__name__}: {escape(str(exc))}); "
                              "your message is saved and judged: press Enter to ask the tutor again[/]",
                              highlight=False)
                continue
            console.print(f"tutor> {escape(r.response)}", highlight=False)
            if show_progress:
                progress = f"{r.recalled_count}/{r.total_points} recalled" + (
                    f"; this turn: {', '.join(r.points_recalled_this_turn)}" if r.points_recalled_this_turn else "")
                judged = s.last_evaluation if line else None
                if judged is not None and judged.status == "failed":  # no point counted: say why
                    progress += f"; this message was not judged: {judged.reason}"
                elif judged is not None and judged.undecided_ids:  # still unchecked, not missed
                    progress += f"; the judge could not decide {', '.join(judged.undecided_ids)}: {judged.reason}"
                console.print(f"[dim]{escape('[' + progress + ']')}[/]", highlight=False)
        if s.active:
            console.print(f"session saved; continue with: jurist tutor --session {escape(s.session_id)}", highlight=False)
        else:
            due = await PointScheduler(store).all_points(s.learner, deck=s.title)
            if show_progress:
                console.print(escape(f"session {s.status}: {s.recalled_count}/{s.total_points} points recalled"),
                              highlight=False)
                for d in due:
                    console.print(escape(f"  next review of {d.point_id}: {d.due:%Y-%m-%d %H:%M} UTC "
                                         f"({d.last_rating})"), highlight=False)
            else:
                first = min((d.due for d in due), default=None)
                when = f"; next review {first:%Y-%m-%d %H:%M} UTC" if first else ""
                console.print(escape(f"session {s.status}{when}"), highlight=False)
        await s.aclose()
        return 0
    finally:
        await asyncio.to_thread(store.close)
