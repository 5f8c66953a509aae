"""Error responses: always JSON with the right status: ``{"detail": <clear message>}``, and
OpenAI's ``{"error": {...}}`` under ``/v1/`` (the gate proxy), where stock clients read it."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone
from typing import Annotated, Any, Mapping, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, JsonValue
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException as StarletteHTTPException

from jurist.errors import InputError, JuristError, MissingExtra, ModelError, NotFound, UsageError
from jurist.jsonfiles import reported_errors, unknown_field
from jurist.models.error_types import ANTHROPIC_ERROR_TYPES
from jurist.server.proxy_sse import openai_error

log = logging.getLogger("jurist.server")


def _iso_only(value: Any) -> Any:
    """Dates come as ISO text: a bare number (which pydantic reads as a Unix time) is refused."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.match(value.strip())):
        raise ValueError("expected an ISO date or date-time such as 2026-11-01 or 2026-11-01T12:00:00Z")
    return value


def _in_utc_range(value: datetime) -> datetime:
    """A date-time the store can hold: one that converts to UTC (0001-01-01T00:00+00:01 does not)."""
    if value.tzinfo is not None:
        try:
            value.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError("date-time out of range once converted to UTC") from None
    return value


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
# A date or date-time parameter or field (ISO 8601 only, within the range of UTC date-times).
IsoDateTime = Annotated[datetime, BeforeValidator(_iso_only), AfterValidator(_in_utc_range)]


class ErrorBody(BaseModel):
    """Every error response."""

    detail: str
    errors: list[dict[str, Any]] | None = None  # per-field problems, on 422 only


def error_responses(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI ``responses=`` entries for the given error statuses."""
    text = {404: "Not found", 400: "Bad request", 422: "Invalid parameters", 500: "Server error",
            501: "Needs an extra that is not installed (the detail names it)"}
    return {s: {"model": ErrorBody, "description": text.get(s, "Error")} for s in statuses}


PROXY_PREFIX = "/v1/"  # the gate proxy's routes answer errors in OpenAI's shape
MESSAGES_PATH = "/v1/messages"  # ... except Anthropic's Messages API, which answers in Anthropic's


def anthropic_error(status: int, message: str, *, extra: Mapping[str, JsonValue] | None = None,
                    jurist: dict[str, JsonValue] | None = None) -> dict[str, JsonValue]:
    """Anthropic's error shape: ``{"type": "error", "error": {"type", "message", ...}}``."""
    kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body: dict[str, JsonValue] = {"type": "error", "error": {"type": kind, "message": message, **(extra or {})}}
    if jurist is not None:
        body["jurist"] = jurist
    return body


def _body_model(request: Request) -> Any:
    """The annotation of the route's JSON body (its pydantic model), or None."""
    field = getattr(request.scope.get("route"), "body_field", None)
    return field.field_info.annotation if field is not None else None


class Problem(BaseModel):
    """One problem of a request: where (``loc``), what (``msg``), and pydantic's error ``type``."""

    model_config = ConfigDict(frozen=True)

    loc: list[str]
    msg: str
    type: str

    def text(self) -> str:
        """The problem for the detail: ``session_id: String should have at most 300 characters``;
        an unknown field's under its parent (``rubric: unknown field ...``), or alone at the top."""
        loc = self.loc[1:] or self.loc
        if self.type == "extra_forbidden":
            return f"{'.'.join(loc[:-1])}: {self.msg}" if len(loc) > 1 else self.msg
        return f"{'.'.join(loc)}: {self.msg}"


def request_problems(errors: Sequence[ErrorDetails], body_model: Any) -> list[Problem]:
    """A request's validation errors, unknown fields first: an unknown
    body field's message names the field meant (``unknown field 'contnet' (did you mean
    'content'?)``), and a missing field that such a typo explains is left out (the typo is the one
    problem). pydantic's "Value error, " before a validator's own message is dropped."""
    out: list[Problem] = []
    for e in reported_errors(errors, body_model, skip=1):  # skip: the location's "body"
        loc = list(e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and len(loc) >= 2 and loc[0] == "body":
            msg = unknown_field(e, body_model, skip=1)
        out.append(Problem(loc=[str(p) for p in loc], msg=msg, type=e["type"]))
    return out


def error_body(path: str, status: int, detail: str) -> dict[str, object]:
    """The JSON body of an error on ``path``."""
    if path == MESSAGES_PATH or path.startswith(MESSAGES_PATH + "/"):
        return {**anthropic_error(status, detail)}
    if path.startswith(PROXY_PREFIX):
        return {**openai_error(status, detail)}
    return ErrorBody(detail=detail).model_dump(exclude_none=True)


def _json(status: int, detail: str, problems: Sequence[Problem] | None = None,
          headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The error response; each problem is listed as ``{"loc", "msg"}``."""
    errors = None if problems is None else [p.model_dump(include={"loc", "msg"}) for p in problems]
    return JSONResponse(ErrorBody(detail=detail, errors=errors).model_dump(exclude_none=True), status_code=status,
                        headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _json(exc.status_code, str(exc.detail), headers=exc.headers)  # Allow, WWW-Authenticate

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = request_problems(exc.errors(), _body_model(request))
        detail = "; ".join(p.text() for p in problems)
        return _json(422, f"invalid request: {detail}", problems)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _json(404, str(exc))

    @app.exception_handler(InputError)
    async def input_error(request: Request, exc: InputError) -> JSONResponse:
        return _json(400, str(exc))

    @app.exception_handler(MissingExtra)
    async def missing_extra(request: Request, exc: MissingExtra) -> JSONResponse:
        # the server lacks an optional part (pip install "jurist[analysis]"): not the caller's mistake
        return _json(501, str(exc))

    @app.exception_handler(UsageError)
    async def usage_error(request: Request, exc: UsageError) -> JSONResponse:
        return _json(400, str(exc))

    @app.exception_handler(ModelError)
    async def model_error(request: Request, exc: ModelError) -> JSONResponse:
        log.warning("model error: %s", exc)
        return _json(502, f"a model call failed ({type(exc).__name__}); try again later")

    @app.exception_handler(JuristError)
    async def jurist_error(request: Request, exc: JuristError) -> JSONResponse:
        log.error("jurist error: %s", exc)
        return _json(500, f"internal error ({type(exc).__name__})")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette's last resort: it logs the traceback after sending this (never the internals).
        return JSONResponse(error_body(request.url.path, 500, f"internal error ({type(exc).__name__})"),
                            status_code=500)


def json_errors_in_openapi(app: FastAPI) -> None:
    """Error bodies are JSON even on HTML routes: say so in the OpenAPI schema."""
    original = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = original()
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if status[0] in "45" and "application/json" not in content:
                        for media in list(content):
                            if content[media].get("schema", {}).get("$ref", "").endswith("/ErrorBody"):
                                content["application/json"] = content.pop(media)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI documents replacing app.openapi to extend the schema
