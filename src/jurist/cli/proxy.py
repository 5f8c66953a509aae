"""`jurist proxy`: an OpenAI-compatible endpoint that gates an upstream's answers (uvicorn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

import typer
from rich.markup import escape

from jurist.cli.common import (ConfigOpt, DbOpt, console, handle_errors, load_settings, print_access,
                               print_store)

if TYPE_CHECKING:
    from jurist.config import Settings
    from jurist.gate.config import GateConfig

STRATEGIES = ("blocking", "revision", "parallel")
EVALUATORS = ("quality", "comprehensiveness")
#: What the proxy is for (note 004): it self-evaluates comprehensiveness and retries an answer that is not.
PROXY_DEFAULTS: dict[str, str | bool] = {"evaluator": "comprehensiveness", "evaluate_feedback_enabled": True}


# The gate's options, shared by `jurist proxy` and `jurist serve --upstream`.
StrategyOpt = typer.Option(None, "--strategy", help="blocking | revision | parallel (default: blocking).")
EvaluatorOpt = typer.Option(None, "--evaluator", help="comprehensiveness | quality (default: comprehensiveness).")
ThresholdOpt = typer.Option(None, "--threshold", min=0.0, max=1.0,
                            help="The quality evaluator's bar: a quality_score below it fails (default: 0.4).")
FeedbackOpt = typer.Option(None, "--feedback/--no-feedback",
                           help="Regenerate an answer the judge rejects (default: on; --no-feedback: score only, "
                                "after the answer is sent).")
RetriesOpt = typer.Option(
    None, "--max-evaluation-retries", min=0,
    help="Regenerations of a rejected answer (MAX_EVALUATION_RETRIES; default: max_evaluation_retries in "
         "jurist.yaml, else 2 for comprehensiveness, 1 for quality).")
AccessLogOpt = typer.Option(
    False, "--access-log/--no-access-log",
    help="Print a line per HTTP request (uvicorn's access log; default: off). The store records every gated "
         "request either way.")
UpstreamLimitOpt = typer.Option(
    None, "--upstream-max-concurrency", min=1,
    help="Generations in flight to the upstream (default: upstream_max_concurrency in jurist.yaml, "
         "JURIST_UPSTREAM_MAX_CONCURRENCY, else 512; a configured provider's max_in_flight for that URL).")


def gate_config_from(strategy: str | None, evaluator: str | None, judge: str | None,
                     feedback: bool | None, threshold: float | None = None) -> "GateConfig":
    """A GateConfig whose set fields are the options given (the rest keep the gate's defaults)."""
    from jurist.errors import UsageError
    from jurist.gate.config import GateConfig

    if strategy is not None and strategy not in STRATEGIES:
        raise UsageError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if evaluator is not None and evaluator not in EVALUATORS:
        raise UsageError(f"--evaluator must be one of {', '.join(EVALUATORS)}, not {evaluator!r}")
    values = {"strategy": strategy, "evaluator": evaluator, "judge": judge, "evaluate_feedback_enabled": feedback,
              "threshold": threshold}
    return GateConfig.model_validate({k: v for k, v in values.items() if v is not None})


def proxy_gate_config(options: "GateConfig | None" = None, max_evaluation_retries: int | None = None, *,
                      require_calibration: float | None = None) -> "GateConfig":
    """The proxy's gate: :data:`PROXY_DEFAULTS` under the options given (the fields set in
    ``options``, see :func:`gate_config_from`); ``max_evaluation_retries`` (the flag, else
    jurist.yaml's) caps the regenerations; ``require_calibration``: the κ its judge must have."""
    from jurist.gate.config import GateConfig

    fields: dict[str, object] = {**PROXY_DEFAULTS, **(options.model_dump(exclude_unset=True) if options else {})}
    if max_evaluation_retries is not None:
        fields["max_regenerations"] = max_evaluation_retries
    if require_calibration is not None:
        fields["require_calibration"] = {"min_kappa": require_calibration}
    return GateConfig.model_validate(fields)


def describe_gate(gate: "GateConfig") -> str:
    """The gate's settings as a line of text."""
    if not gate.evaluate_feedback_enabled:
        return f"{gate.evaluator}, {gate.strategy}, score only"
    retries = gate.regenerations()
    return f"{gate.evaluator}, {gate.strategy}, up to {retries} {'retry' if retries == 1 else 'retries'}"


def describe_limits(settings: "Settings", judge: str | None) -> str:
    """The gate's judge and the bounds in flight a proxy runs with, as a line of text."""
    return (f"gate judge: {judge or 'a function'}; limits: generations {settings.upstream_max_concurrency} in "
            f"flight to the upstream (unless a provider for its URL sets max_in_flight), judge calls "
            f"{settings.max_concurrency} per endpoint (max_concurrency)")


def proxy_settings(settings: "Settings") -> "Settings":
    """The settings a gate proxy runs with: the judges' ``max_concurrency``, unless it is set
    (jurist.yaml, ``JURIST_MAX_CONCURRENCY``), is ``upstream_max_concurrency`` too. The gate makes
    one judge call per generation, on the user's way (feedback on) or right after it (off):
    a lower bound than the generations' only queues requests in front of the judge."""
    if "max_concurrency" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"max_concurrency": settings.upstream_max_concurrency})


def check_gate(config: "GateConfig", settings: "Settings") -> str | None:
    """Build the gate as the server will (``default_gate``), before it listens: a judge or alias
    that cannot be resolved, a judge without its key, the local judge without its extra, raise
    their ``ConfigError`` here (exit 2) instead of failing every request. With
    ``require_calibration``, the store must hold a good enough calibration of the judge
    (:class:`~jurist.errors.CalibrationRequired` otherwise). Returns the judge's model name."""
    import asyncio

    from jurist.cli.common import require_local_judge
    from jurist.gate.gate import Gate
    from jurist.models.registry import judge_ref
    from jurist.runtime import Runtime

    ref = config.judge or ("fast" if "fast" in settings.aliases else None)
    require_local_judge(judge_ref(settings, ref))

    async def check() -> str | None:
        runtime = Runtime(settings)
        try:
            gate = Gate(config, runtime=runtime)  # resolves the judge; opens nothing
            try:
                if config.require_calibration is not None:
                    await gate.astart()
                return gate.evaluator.model_name
            finally:
                await gate.aclose()
        finally:
            await runtime.aclose()

    return asyncio.run(check())


def check_gate_calibration(config: "GateConfig", settings: Any) -> None:
    """Raise :class:`~jurist.errors.CalibrationRequired` (or a ``ConfigError`` for a judge that
    cannot be calibrated) unless the store holds a calibration of the gate's judge that meets
    ``config``'s ``require_calibration``: checked once, before the server listens (:func:`check_gate`)."""
    check_gate(config, settings)


def register(app: typer.Typer) -> None:
    @app.command("proxy")
    @handle_errors
    def proxy_cmd(
        upstream: str = typer.Option(..., "--upstream", help="OpenAI-compatible base URL to gate, e.g. http://localhost:11434/v1."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
        port: int = typer.Option(8001, "--port", min=1, max=65535, help="Port to listen on."),
        strategy: Optional[str] = StrategyOpt,
        evaluator: Optional[str] = EvaluatorOpt,
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge model reference or alias (default: alias fast, then the judge)."),
        threshold: Optional[float] = ThresholdOpt,
        feedback: Optional[bool] = FeedbackOpt,
        max_evaluation_retries: Optional[int] = RetriesOpt,
        upstream_max_concurrency: Optional[int] = UpstreamLimitOpt,
        api_key: Optional[str] = typer.Option(
            None, "--api-key", help="Upstream key: for requests without an Authorization header; with "
                                    "JURIST_API_TOKEN, for every request (the caller's Authorization is the token)."),
        require_calibration: Optional[float] = typer.Option(
            None, "--require-calibration", min=-1.0, max=1.0, metavar="MIN_KAPPA",
            help="Before listening, require a stored calibration (jurist calibrate --gate) of the gate's judge "
                 "with κ >= MIN_KAPPA; else exit 2 naming the command that makes one."),
        max_iterations: int = typer.Option(
            25, "--max-iterations", min=0, help="Rounds of tool calls a client's loop may run per user message "
                                                 "(MAX_ITERATIONS; 0: no limit)."),
        allowed_host: Optional[List[str]] = typer.Option(
            None, "--allowed-host", help="Also answer to this host name (repeatable; '*': any, only with an API token). "
                                         "Always: 127.0.0.1, localhost, ::1 and --host."),
        access_log: bool = AccessLogOpt,
        config: Optional[str] = ConfigOpt,
        db: Optional[str] = DbOpt,
    ) -> None:
        """Serve /v1/chat/completions: answers from --upstream, judged (and regenerated) before they are sent.

        Without JURIST_API_TOKEN it listens on loopback only; with it, callers send the token as their
        OpenAI key and the upstream key comes from --api-key (docs/proxy.md, "Exposing the proxy")."""
        import uvicorn

        from jurist.server import create_app
        from jurist.server.auth import listen_settings, require_free_port

        settings = proxy_settings(listen_settings(
            load_settings(config, db=db, upstream_max_concurrency=upstream_max_concurrency), host, allowed_host or []))
        require_free_port(host, port)
        retries = max_evaluation_retries if max_evaluation_retries is not None else settings.max_evaluation_retries
        gate_config = proxy_gate_config(gate_config_from(strategy, evaluator, judge, feedback, threshold), retries,
                                        require_calibration=require_calibration)
        judge_name = check_gate(gate_config, settings)  # before it listens: exit 2 with the fix
        server = create_app(settings, upstream=upstream, gate_config=gate_config, upstream_api_key=api_key,
                            max_iterations=max_iterations)
        console.print(escape(f"jurist proxy on http://{host}:{port}/v1 -> {upstream}  "
                             f"(gate: {describe_gate(gate_config)}; chat page: /chat)"), highlight=False)
        console.print(escape(describe_limits(settings, judge_name)), highlight=False, soft_wrap=True)
        if settings.api_token and not api_key:
            console.print("[yellow]no --api-key: with an API token the callers' Authorization is the token, so the "
                          "upstream gets no key (right for a local upstream such as Ollama)[/]")
        print_store(settings)
        print_access(settings)
        uvicorn.run(server, host=host, port=port, log_level="info", ws_max_size=settings.max_body_bytes,
                    access_log=access_log)
