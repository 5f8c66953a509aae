"""The jurist server: ``create_app()`` builds the FastAPI app.

Thin: routes parse input, call a capability, render the result.
"""

from jurist.server.app import create_app
from jurist.server.sessions import SessionFactory, TurnResult, TutorSession, VisibleMessage

__all__ = ["SessionFactory", "TurnResult", "TutorSession", "VisibleMessage", "create_app"]
