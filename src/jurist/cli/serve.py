"""`jurist serve`: the HTTP server (API, dashboard, checklist tutor page) on uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, console, handle_errors, load_settings, print_access,
                               print_store)
from jurist.cli.proxy import (AccessLogOpt, EvaluatorOpt, FeedbackOpt, RetriesOpt, StrategyOpt, ThresholdOpt,
                              UpstreamLimitOpt)


def register(app: typer.Typer) -> None:
    @app.command("serve")
    @handle_errors
    def serve_cmd(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
        port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
        checklists: Optional[List[Path]] = typer.Option(
            None, "--checklists", help="A folder of <name>.json checklists (repeatable), searched before the bundled ones."
        ),
        tutor: Optional[str] = typer.Option(
            None, "--tutor", help="Tutor model (default: alias 'tutor', then alias 'strong', then the judge)."),
        judge: Optional[str] = typer.Option(
            None, "--judge", help="The judge of the checklist and, with --upstream, of the gate (default: alias "
                                  "'fast', then the judge, then local/minilm)."),
        tutor_progress: Optional[bool] = typer.Option(
            None, "--tutor-progress/--no-tutor-progress",
            help="Show the learner on /tutor how many points they recalled (default: tutor_progress in "
                 "jurist.yaml, else off: the conversation only)."),
        upstream: Optional[str] = typer.Option(
            None, "--upstream", help="Also serve the gate proxy (/v1/chat/completions) and its chat page (/chat) in "
                                     "front of this OpenAI-compatible URL, gated as `jurist proxy` gates it."
        ),
        api_key: Optional[str] = typer.Option(
            None, "--api-key", help="With --upstream, the upstream key: for requests without an Authorization header; "
                                    "with JURIST_API_TOKEN, for every request (as `jurist proxy --api-key`)."),
        strategy: Optional[str] = StrategyOpt,
        evaluator: Optional[str] = EvaluatorOpt,
        threshold: Optional[float] = ThresholdOpt,
        feedback: Optional[bool] = FeedbackOpt,
        max_evaluation_retries: Optional[int] = RetriesOpt,
        upstream_max_concurrency: Optional[int] = UpstreamLimitOpt,
        allowed_host: Optional[List[str]] = typer.Option(
            None, "--allowed-host", help="Also answer to this host name (repeatable; '*': any, only with an API token). "
                                         "Always: 127.0.0.1, localhost, ::1 and --host."),
        access_log: bool = AccessLogOpt,
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Serve the dashboard (/evaluation), the API (/docs) and the tutor pages (/tutor).

        Without JURIST_API_TOKEN it listens on loopback only; with it, every write, the proxy and the
        tutor socket need 'Authorization: Bearer <token>' (docs/server.md, "Security")."""
        import uvicorn

        from jurist.cli.proxy import (check_gate, describe_gate, describe_limits, gate_config_from, proxy_gate_config,
                                      proxy_settings)
        from jurist.errors import UsageError
        from jurist.server import create_app
        from jurist.server.auth import listen_settings, require_free_port

        proxy_only = {"--api-key": api_key, "--strategy": strategy, "--evaluator": evaluator, "--threshold": threshold,
                      "--feedback/--no-feedback": feedback, "--max-evaluation-retries": max_evaluation_retries,
                      "--upstream-max-concurrency": upstream_max_concurrency}
        given = [name for name, value in proxy_only.items() if value is not None]
        if given and not upstream:
            raise UsageError(f"{', '.join(given)}: {'is an option' if len(given) == 1 else 'are options'} of the "
                             "gate proxy: add --upstream URL (the OpenAI-compatible server to gate)")
        settings = listen_settings(load_settings(config, db=db, tutor_progress=tutor_progress,
                                                 upstream_max_concurrency=upstream_max_concurrency), host,
                                   allowed_host or [])
        require_free_port(host, port)
        gate_config, judge_name = None, None
        if upstream:  # the gate as `jurist proxy` builds it, checked before the server listens
            settings = proxy_settings(settings)
            retries = max_evaluation_retries if max_evaluation_retries is not None else settings.max_evaluation_retries
            gate_config = proxy_gate_config(gate_config_from(strategy, evaluator, judge, feedback, threshold), retries)
            judge_name = check_gate(gate_config, settings)
        server = create_app(settings, tutor_model=tutor, judge_model=judge, checklist_dirs=list(checklists or []),
                            upstream=upstream, gate_config=gate_config, upstream_api_key=api_key)
        console.print(escape(f"jurist serving on http://{host}:{port}/  (dashboard: /evaluation, API: /docs, "
                             "tutor: /tutor)"), highlight=False)
        print_store(settings)
        console.print("tutor page: " + ("the conversation and the learner's progress count" if settings.tutor_progress
                                        else "the conversation only (--tutor-progress shows the progress count)"),
                      highlight=False, markup=False)
        if gate_config is not None:  # with --upstream
            console.print(escape(f"gate proxy: http://{host}:{port}/v1 -> {upstream}  "
                                 f"(gate: {describe_gate(gate_config)}; chat page: /chat)"), highlight=False)
            console.print(escape(describe_limits(settings, judge_name)), highlight=False, soft_wrap=True)
        print_access(settings)
        uvicorn.run(server, host=host, port=port, log_level="info", ws_max_size=settings.max_body_bytes,
                    access_log=access_log)
