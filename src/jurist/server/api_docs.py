"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served offline under a Content-Security-Policy.

FastAPI's own pages load swagger-ui and redoc from a CDN and start Swagger UI
with an inline script. Here the assets come from the ``fastapi-offline``
package (swagger-ui-dist 5: ``swagger-ui-bundle.js``, ``swagger-ui.css``;
redoc 2: ``redoc.standalone.js``), served by jurist at ``/docs/assets/``; the
pages are jurist's templates, and Swagger UI starts from ``static/api_docs.js``,
so no script runs but this server's files. ReDoc starts itself on the page's
``<redoc spec-url>`` element. Its footer would show Redocly's logo from
``cdn.redoc.ly``, which the CSP refuses: the script is served with a blank
``data:`` image in its place, so the page asks nothing of another host.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
# Scripts from this origin only; Swagger UI and ReDoc set styles inline and draw icons as data: images,
# ReDoc's search runs in a worker made from a blob.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")

REDOC_SCRIPT = f"{ASSETS}/redoc.standalone.js"
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"  # the footer's "API docs by Redocly" logo
BLANK_IMAGE = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"  # 1×1, transparent

router = APIRouter(include_in_schema=False)


def assets_dir() -> Path:
    """The folder of swagger-ui's and redoc's files inside the installed fastapi-offline package."""
    return Path(str(files("fastapi_offline") / "static"))


@lru_cache(maxsize=1)
def redoc_script() -> bytes:
    """``redoc.standalone.js`` with its footer's logo, fetched from Redocly's CDN, replaced by a
    blank ``data:`` image."""
    text = (assets_dir() / "redoc.standalone.js").read_text(encoding="utf-8")
    return text.replace(REDOC_LOGO, BLANK_IMAGE).encode("utf-8")


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


@router.get(REDOC_SCRIPT)
async def redoc_standalone() -> Response:
    """ReDoc's script, asking no other host for its logo (before the assets' mount, which has the original)."""
    return Response(redoc_script(), media_type="text/javascript; charset=utf-8",
                    headers={"Cache-Control": "public, max-age=3600"})


def install(app: FastAPI) -> None:
    """Serve the two pages and their assets (the app is made with ``docs_url=None, redoc_url=None``)."""
    app.include_router(router)  # first: its REDOC_SCRIPT wins over the mount's file of that name
    app.mount(ASSETS, StaticFiles(directory=str(assets_dir())), name="api_docs_assets")


__all__ = ["install"]
