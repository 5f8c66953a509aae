"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served offline under a Content-Security-Policy.

FastAPI's own pages load swagger-ui and redoc from a CDN and start Swagger UI
with an inline script. Here the assets come from the ``fastapi-offline``
package (swagger-ui-dist 5: ``swagger-ui-bundle.js``, ``swagger-ui.css``;
redoc 2: ``redoc.standalone.js``), served by jurist at ``/docs/assets/``; the
pages are jurist's templates, and Swagger UI starts from ``static/api_docs.js``,
so no script runs but this server's files. ReDoc starts itself on the page's
``<redoc spec-url>`` element.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
# Scripts from this origin only; Swagger UI and ReDoc set styles inline and draw icons as data: images,
# ReDoc's search runs in a worker made from a blob.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")

router = APIRouter(include_in_schema=False)


def assets_dir() -> Path:
    """The folder of swagger-ui's and redoc's files inside the installed fastapi-offline package."""
    return Path(str(files("fastapi_offline") / "static"))


def _page(request: Request, viewer: str) -> HTMLResponse:
    app = request.app
    response: HTMLResponse = app.state.templates.TemplateResponse(
        request, "api_docs.html", {"viewer": viewer, "title": app.title, "openapi_url": app.openapi_url,
                                   "assets": ASSETS})
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui(request: Request) -> HTMLResponse:
    """The API's interactive documentation (Swagger UI)."""
    return _page(request, "swagger")


@router.get("/redoc", response_class=HTMLResponse)
async def redoc(request: Request) -> HTMLResponse:
    """The API's reference (ReDoc)."""
    return _page(request, "redoc")


def install(app: FastAPI) -> None:
    """Serve the two pages and their assets (the app is made with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS, StaticFiles(directory=str(assets_dir())), name="api_docs_assets")
    app.include_router(router)


__all__ = ["install"]
