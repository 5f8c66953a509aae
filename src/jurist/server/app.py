"""``create_app()``: the jurist HTTP server (API, dashboard, tutor, proxy) behind its guard."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

import jurist
from jurist.config import Settings
from jurist.gc_tuning import ServingGC
from jurist.runtime import Runtime
from jurist.research.evaluation import ResearchPipeline
from jurist.server import (api_analysis, api_evaluations, api_experiments, api_labels, api_prompt_tests, chat,
                           dashboard, dashboard_calibration, dashboard_experiments, dashboard_prompt_tests, health,
                           proxy, proxy_messages, proxy_responses, tutor, tutor_ws)
from jurist.server.research_live import LiveResearch
from jurist.server.research_live import install as install_live_research
from jurist.server.research_query import install as install_research_query
from jurist.server.api_docs import install as install_api_docs
from jurist.server.errors import install_error_handlers, json_errors_in_openapi
from jurist.server.auth import require_token_for_any_host
from jurist.server.guard import Guard
from jurist.server.sessions import SessionFactory
from jurist.server.state import ServerState
from jurist.store import Store

HERE = Path(__file__).parent


def create_app(
    settings: Settings | None = None,
    store: Store | None = None,
    *,
    tutor_model: str | None = None,
    judge_model: str | None = None,
    checklist_dirs: list[Path] | None = None,
    session_factory: SessionFactory | None = None,
    upstream: str | None = None,
    gate_config: Any = None,
    upstream_api_key: str | None = None,
    max_iterations: int = proxy.DEFAULT_MAX_ITERATIONS,
    runtime: Runtime | None = None,
    research_pipeline: ResearchPipeline | None = None,
    research_live: LiveResearch | None = None,
) -> FastAPI:
    """The server.

    ``runtime`` (settings, store, models) defaults to one over ``settings``
    (default: loaded from ``jurist.yaml`` and the environment) and ``store``
    (default: one on ``settings.database``, opened at start-up and closed on
    shutdown; a given store is left open). ``tutor_model`` and ``judge_model`` are model
    references or aliases (``scripted/<name>`` in tests); by default the
    tutor is the alias ``tutor`` or ``strong`` or the configured judge, and
    the checklist judge is the alias ``fast`` or the configured judge.
    ``checklist_dirs`` are searched for ``<points>.json`` before the bundled
    ``examples/checklists``. ``session_factory`` replaces the checklist
    sessions altogether (tests). With ``upstream`` (an OpenAI-compatible base
    URL) the app also serves the gate proxy, ``/v1/chat/completions`` and
    ``/v1/models``, gated by ``gate_config`` (a ``GateConfig`` or its dict;
    see :mod:`jurist.server.proxy`), and the chat page over it, ``/chat``
    (:mod:`jurist.server.chat`); ``upstream_api_key`` is used when a
    request brings no ``Authorization`` header (with an API token, for every
    request: the caller's ``Authorization`` is then the token, never sent upstream);
    ``max_iterations`` bounds the rounds of a caller's tool loop (0: no bound).
    ``research_pipeline`` lets ``POST /api/research/evaluate`` start research evaluations of
    it and ``POST /api/research/query`` run it and answer (:mod:`jurist.server.research_query`); its
    own prompts (``ResearchPipeline(prompts=...)``) are registered with the prompt lab at start-up;
    ``research_live`` is the sink whose runs the live pages show (default: a new one,
    :func:`jurist.server.research_live.live_research`); see :mod:`jurist.server.research_live`.

    While it serves, the objects built at start-up are left out of garbage collections and the
    young generation is collected less often (:class:`ServingGC`); both are undone at shutdown.

    Every request passes :class:`~jurist.server.guard.Guard` first: the host
    names of ``settings.allowed_hosts`` (besides 127.0.0.1, localhost and ::1),
    the body limits, and the API token on every write and on the tutor socket.
    """
    state = ServerState(
        runtime=runtime if runtime is not None else Runtime(settings, store),
        checklist_dirs=[Path(d) for d in checklist_dirs or []],
        tutor_model=tutor_model,
        judge_model=judge_model,
        factory_given=session_factory,
    )
    require_token_for_any_host(state.settings)  # a UsageError before anything is served

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.aopen()  # the database is opened (and migrated) before the first request
        collector = ServingGC()
        try:
            if research_pipeline is not None:  # its own prompts are in the prompt lab from the start
                await research_pipeline.register_prompts(state.store)
            collector.start()
            yield
        finally:
            collector.stop()
            await state.sessions.aclose()  # the sessions' model clients
            await live.aclose()  # research evaluations started here
            if upstream:
                await app.state.proxy.aclose()  # the gate and the upstream clients
            await state.aclose()

    app = FastAPI(
        title="jurist",
        version=jurist.__version__,
        description=("Judge LLM output with LLMs: evaluations, metrics, patterns and prompts (the dashboard at "
                     "/evaluation), the LLM call log, the checklist recall tutor and the gated chat proxy. "
                     "When the server has a token, every write (the proxy, evaluate, analyze, prompt versions) "
                     "and the tutor socket need `Authorization: Bearer <JURIST_API_TOKEN>`. Writes are "
                     "`Content-Type: application/json`. See docs/server.md, \"Security\"."),
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc: install_api_docs, their assets served here, not from a CDN
        redoc_url=None,
    )
    app.state.jurist = state
    app.state.templates = Jinja2Templates(directory=str(HERE / "templates"))
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        """The tab's icon: browsers ask for it on every page."""
        return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon",
                            headers={"Cache-Control": "public, max-age=86400"})

    install_error_handlers(app)
    app.add_middleware(Guard, settings=state.settings, router=app.router)
    app.include_router(health.router)
    install_api_docs(app)
    app.include_router(api_evaluations.router)
    app.include_router(api_analysis.router)
    app.include_router(api_labels.router)
    app.include_router(chat.router)
    app.include_router(api_prompt_tests.router)
    app.include_router(api_experiments.router)
    app.include_router(dashboard.router)
    app.include_router(dashboard_calibration.router)
    app.include_router(dashboard_prompt_tests.router)
    app.include_router(dashboard_experiments.router)
    app.include_router(tutor.router)
    app.include_router(tutor_ws.router)
    live = install_live_research(app, research_pipeline, research_live)
    install_research_query(app)  # POST /api/research/query (the same pipeline), GET /api/logs/sessions/{logId}
    if upstream:
        gate_proxy = proxy.install(app, upstream, gate_config, state.runtime, api_key=upstream_api_key,
                                   max_iterations=max_iterations)
        for api in (proxy_responses, proxy_messages):  # the Responses and Messages APIs, over gated_chat
            app.include_router(api.build_router(gate_proxy))
        proxy.routes_first(app)
        app.include_router(chat.page_router)  # /chat: a person chats through the gate
    json_errors_in_openapi(app)
    return app
