"""HTTP routes: health, the tutor page, JSON errors, the OpenAPI schema."""

from __future__ import annotations

import re

import jurist
from jurist.config import Settings
from jurist.server import create_app
from jurist.server.checklists import bundled_dir
from fastapi.testclient import TestClient


def test_health(client):
    r = client.get("/api/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "version": jurist.__version__}


def test_tutor_page_shows_title_escaped_and_progress(client):
    r = client.get("/tutor", params={"points": "caffeine", "learner": "ada"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "Caffeine &lt;b&gt;basics&lt;/b&gt;" in html and "<b>basics</b>" not in html
    assert '<span id="recalled">0</span> / <span id="total">3</span> points' in html
    assert 'data-points="caffeine"' in html and 'data-learner="ada"' in html
    assert "/static/tutor.js" in html and "http" not in html.split("<body>")[1]  # no CDN
    assert "script-src 'self'" in r.headers["content-security-policy"]


def test_static_assets_are_served(client):
    js = client.get("/static/tutor.js")
    assert js.status_code == 200 and "textContent" in js.text and "innerHTML" not in js.text
    assert client.get("/static/tutor.css").status_code == 200


def test_unknown_points_is_404_json(client):
    r = client.get("/tutor", params={"points": "nope", "learner": "ada"})
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json"
    assert "no checklist named 'nope'" in r.json()["detail"] and "caffeine" in r.json()["detail"]


def test_path_traversal_is_404_json(client, tmp_path):
    (tmp_path / "secret.json").write_text('{"title": "secret", "points": [{"id": "a", "text": "b"}]}')
    for name in ("../secret", "..%2Fsecret", "/etc/passwd", "caffeine.json", ".hidden", "a/b"):
        r = client.get("/tutor", params={"points": name, "learner": "ada"})
        assert r.status_code == 404, name
        assert "secret" not in r.text.replace(name, "")


def test_invalid_checklist_file_is_400_json(client):
    r = client.get("/tutor", params={"points": "broken", "learner": "ada"})
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["detail"]


def test_bad_learner_is_422_json(client):
    r = client.get("/tutor", params={"points": "caffeine", "learner": "<script>"})
    assert r.status_code == 422 and "learner" in r.json()["detail"]


def test_tutor_without_parameters_lists_the_checklists_and_explains_them(client, checklist_dir):
    r = client.get("/tutor")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    assert re.findall(r'<tr data-name="([^"]+)">', page) == ["caffeine"]  # the readable ones
    assert "<td>Caffeine &lt;b&gt;basics&lt;/b&gt;</td>" in page and "<b>basics</b>" not in page
    assert '<td class="num">3</td>' in page
    assert '<option value="caffeine">' in page  # the form that starts the tutor
    assert 'form class="start" method="get" action="/tutor"' in page
    for param in ("<code>points</code> (required)", "<code>learner</code> (required)",
                  "<code>session_id</code> (optional)"):
        assert param in page
    assert "<code>broken</code>: " in page and "not valid JSON" in page  # a file that is not a checklist
    assert str(checklist_dir) in page  # where the names come from
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "form-action 'self'" in csp
    assert "http" not in page.split("<body>")[1].replace('href="/api/checklists"', "")

    # one of the two given: the page, with what was given kept
    page = client.get("/tutor", params={"points": "caffeine"}).text
    assert '<option value="caffeine" selected>' in page
    page = client.get("/tutor", params={"learner": "ada"}).text
    assert 'value="ada"' in page and 'id="unknown-points"' not in page
    page = client.get("/tutor", params={"points": "nope"}).text
    assert "There is no checklist named <code>nope</code>" in page
    assert client.get("/tutor", params={"learner": "<script>"}).status_code == 422


def test_unknown_route_is_404_json(client):
    r = client.get("/nothing-here")
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


def test_checklist_list_includes_configured_and_bundled(client):
    names = client.get("/api/checklists").json()["checklists"]
    assert "caffeine" in names and "broken" in names


def test_bundled_files_that_are_not_checklists_are_not_listed():
    # examples/checklists also ships the demo's scripted learner, which is no checklist
    assert (bundled_dir() / "caffeine_learner.json").is_file()
    with TestClient(create_app(Settings()), base_url="http://localhost") as c:
        assert c.get("/api/checklists").json()["checklists"] == ["caffeine"]
        page = c.get("/tutor").text
    assert "caffeine_learner" not in page and "not a checklist" not in page


def test_openapi_schema_describes_the_routes(client):
    spec = client.get("/openapi.json").json()
    assert spec["info"]["version"] == jurist.__version__
    paths = spec["paths"]
    assert set(paths) >= {"/api/health", "/tutor", "/api/checklists"}
    tutor = paths["/tutor"]["get"]
    assert {p["name"] for p in tutor["parameters"]} == {"points", "learner", "session_id"}
    assert "text/html" in tutor["responses"]["200"]["content"]
    for status in ("404", "422"):
        ref = tutor["responses"][status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorBody")
    health = paths["/api/health"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert health["$ref"].endswith("/Health")


def test_bundled_checklist_is_found_without_configuration():
    with TestClient(create_app(Settings()), base_url="http://localhost") as c:
        names = c.get("/api/checklists").json()["checklists"]
        if "caffeine" in names:
            assert c.get("/tutor", params={"points": "caffeine", "learner": "ada"}).status_code == 200


def test_the_front_page_sends_a_browser_to_the_dashboard(client):
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/evaluation"
    assert client.get("/").status_code == 200  # the dashboard itself
