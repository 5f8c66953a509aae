"""/docs and /redoc: the pages and their assets come from this server, under a Content-Security-Policy."""

from __future__ import annotations

import re

from jurist.server.api_docs import ASSETS, BLANK_IMAGE, REDOC_LOGO, assets_dir


def test_docs_pages_load_their_assets_from_this_server(client):
    for path, assets in (("/docs", ["swagger-ui-bundle.js", "swagger-ui.css"]), ("/redoc", ["redoc.standalone.js"])):
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "default-src 'none'" in csp and "connect-src 'self'" in csp
        page = r.text
        assert "http://" not in page and "https://" not in page  # no CDN, no fonts from elsewhere
        assert not re.search(r"<script>(?!</script>)", page)  # no inline script: the CSP would refuse it
        for name in assets:
            assert f'"{ASSETS}/{name}"' in page
            asset = client.get(f"{ASSETS}/{name}")
            assert asset.status_code == 200 and len(asset.content) > 100_000
            if name != "redoc.standalone.js":  # that one is served without its CDN logo (below)
                assert asset.content == (assets_dir() / name).read_bytes()
    swagger = client.get("/docs").text
    assert 'data-openapi-url="/openapi.json"' in swagger and '"/static/api_docs.js"' in swagger
    assert '<redoc spec-url="/openapi.json"></redoc>' in client.get("/redoc").text
    init = client.get("/static/api_docs.js")
    assert init.status_code == 200 and "SwaggerUIBundle(" in init.text and "validatorUrl: null" in init.text


def test_the_docs_pages_are_not_in_the_schema_and_the_schema_is_served(client):
    spec = client.get("/openapi.json").json()
    assert not {"/docs", "/redoc"} & set(spec["paths"])
    assert not [p for p in spec["paths"] if p.startswith(ASSETS)]
    assert client.get(f"{ASSETS}/nothing.js").status_code == 404


def test_redoc_asks_no_other_host_for_its_logo(client):
    """ReDoc's footer loaded Redocly's logo from cdn.redoc.ly, which the CSP refused: the script
    is served with a blank data: image in its place, and is otherwise the package's file."""
    original = (assets_dir() / "redoc.standalone.js").read_text(encoding="utf-8")
    assert REDOC_LOGO in original  # what is replaced is there to replace
    r = client.get(f"{ASSETS}/redoc.standalone.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "cdn.redoc.ly" not in r.text and BLANK_IMAGE in r.text
    assert r.text == original.replace(REDOC_LOGO, BLANK_IMAGE)
    assert "img-src 'self' data:" in client.get("/redoc").headers["content-security-policy"]


def test_favicon_answers(client):
    r = client.get("/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"] == "image/x-icon"
    assert r.content[:4] == b"\x00\x00\x01\x00" and 100 < len(r.content) < 5_000  # an icon file, small
    assert "/favicon.ico" not in client.get("/openapi.json").json()["paths"]
