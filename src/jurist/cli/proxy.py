"""`jurist proxy`: an OpenAI-compatible endpoint that gates an upstream's answers (uvicorn)."""

from __future__ import annotations

from typing import Any, List, Optional

import typer

from jurist.cli.common import console, handle_errors, load_settings

STRATEGIES = ("blocking", "revision", "parallel")
EVALUATORS = ("quality", "comprehensiveness")


def gate_config_from(strategy: str | None, evaluator: str | None, judge: str | None,
                     feedback: bool | None) -> dict[str, Any]:
    """The GateConfig fields the options set (the rest keep the gate's defaults)."""
    from jurist.errors import UsageError

    if strategy is not None and strategy not in STRATEGIES:
        raise UsageError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if evaluator is not None and evaluator not in EVALUATORS:
        raise UsageError(f"--evaluator must be one of {', '.join(EVALUATORS)}, not {evaluator!r}")
    values = {"strategy": strategy, "evaluator": evaluator, "judge": judge, "evaluate_feedback_enabled": feedback}
    return {k: v for k, v in values.items() if v is not None}


def register(app: typer.Typer) -> None:
    @app.command("proxy")
    @handle_errors
    def proxy_cmd(
        upstream: str = typer.Option(..., "--upstream", help="OpenAI-compatible base URL to gate, e.g. http://localhost:11434/v1."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
        port: int = typer.Option(8001, "--port", min=1, max=65535, help="Port to listen on."),
        strategy: Optional[str] = typer.Option(None, "--strategy", help="blocking | revision | parallel (default: blocking)."),
        evaluator: Optional[str] = typer.Option(None, "--evaluator", help="quality | comprehensiveness (default: quality)."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model reference or alias (default: alias fast, then the judge)."),
        feedback: Optional[bool] = typer.Option(None, "--feedback/--no-feedback",
                                                help="Regenerate with the judge's feedback below the threshold (default: off, score only)."),
        api_key: Optional[str] = typer.Option(
            None, "--api-key", help="Upstream key: for requests without an Authorization header; with "
                                    "JURIST_API_TOKEN, for every request (the caller's Authorization is the token)."),
        max_iterations: int = typer.Option(
            25, "--max-iterations", min=0, help="Rounds of tool calls a client's loop may run per user message "
                                                 "(MAX_ITERATIONS; 0: no limit)."),
        allowed_host: Optional[List[str]] = typer.Option(
            None, "--allowed-host", help="Also answer to this host name (repeatable; '*': any). Always: 127.0.0.1, "
                                         "localhost, ::1 and --host."),
        config: Optional[str] = typer.Option(None, "--config", help="Settings file."),
    ) -> None:
        """Serve /v1/chat/completions: answers from --upstream, judged (and regenerated) before they are sent.

        Without JURIST_API_TOKEN it listens on loopback only; with it, callers send the token as their
        OpenAI key and the upstream key comes from --api-key (docs/proxy.md, "Exposing the proxy")."""
        import uvicorn

        from jurist.cli.serve import print_access
        from jurist.server import create_app
        from jurist.server.auth import listen_settings

        gate_config = gate_config_from(strategy, evaluator, judge, feedback)
        settings = listen_settings(load_settings(config), host, allowed_host or [])
        server = create_app(settings, upstream=upstream, gate_config=gate_config, upstream_api_key=api_key,
                            max_iterations=max_iterations)
        console.print(f"jurist proxy on http://{host}:{port}/v1 -> {upstream}  (gate: {gate_config or 'defaults'})")
        if settings.api_token and not api_key:
            console.print("[yellow]no --api-key: with an API token the callers' Authorization is the token, so the "
                          "upstream gets no key (right for a local upstream such as Ollama)[/]")
        print_access(settings)
        uvicorn.run(server, host=host, port=port, log_level="info", ws_max_size=settings.max_body_bytes)
