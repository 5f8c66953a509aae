"""/docs and /redoc: the pages and their assets come from this server, under a Content-Security-Policy."""

from __future__ import annotations

import re

from jurist.server.api_docs import ASSETS, assets_dir


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
            assert asset.status_code == 200
            assert asset.content == (assets_dir() / name).read_bytes() and len(asset.content) > 100_000
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
