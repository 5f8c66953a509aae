"""The server without the ``analysis`` extra (scipy, krippendorff, plotly): it starts, the
dashboard renders its tables with a notice where a chart or a statistic would be, and the
API routes that need statistics answer a JSON error naming the extra.

The server runs in a subprocess where those packages cannot be imported
(``tests.conftest.not_installed``), over a SQLite store filled there.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _CLEARED, REPO, not_installed

EXTRA = ("scipy", "krippendorff", "plotly")
INSTALL = 'pip install "jurist[analysis]"'

SERVER = """
import asyncio, json
from fastapi.testclient import TestClient
from jurist.analysis import create_prompt_version, prompt_version
from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.testing.synthetic import seed_history

store = Store(sys.argv[1])
seed_history(store, 80, seed=5, days=25)  # inside the overview's default 30 days

async def second_version():
    v1 = await prompt_version(store, "rubric_judge", 1)
    text = v1.text.replace("## Instructions\\n", "## Instructions\\nBe strict.\\n")
    await create_prompt_version(store, "rubric_judge", text, "strict")

asyncio.run(second_version())

# a gate that requires a calibration starts on a stored one: the look-up needs no statistics
from datetime import datetime, timezone
from jurist.gate import Gate, GateConfig
from jurist.runtime import Runtime
from jurist.store.calibrations import StoredCalibration, save_calibrations

gate = Gate(GateConfig(require_calibration={"min_kappa": 0.6}), runtime=Runtime(Settings(), store),
            judge="scripted/judge")
judge = gate.evaluator.judge
figures = dict.fromkeys(("kappa_low", "kappa_high", "agreement_low", "agreement_high", "pass_at", "threshold",
                         "threshold_fit", "threshold_agreement", "threshold_agreement_low",
                         "threshold_agreement_high", "rubric_hash"))
store.write(save_calibrations, [StoredCalibration(
    **figures, id="cal1", kind="gate", judge_model=judge.model.name, template_name=judge.template.name,
    template_hash=judge.template.hash, rubric="quality", scale="pass/fail", items=10, n=20, kappa=0.8, agreement=0.9,
    labels="labels.jsonl", figures={}, created_at=datetime.now(timezone.utc))])
asyncio.run(gate.astart())
out = {"gate started": True}

# two experiments over one dataset version: their pages need nothing more, their comparison needs the extra
from tests.experiments.compare_data import run, seed
ids = [f"q{i:02d}" for i in range(8)]
seed(store, {"a": ({}, run("a", {i: (5.0, 4.0) for i in ids})), "b": ({}, run("b", {i: (2.0, 4.0) for i in ids}))},
     ids)
with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as client:
    for url in ("/evaluation", "/evaluation/explorer", "/evaluation/patterns", "/evaluation/prompts/rubric_judge",
                "/evaluation/calibration", "/evaluation/assets/plotly.min.js", "/api/evaluation/patterns",
                "/api/evaluation/calibration", "/api/evaluation/calibrations",
                "/api/prompts/rubric_judge/compare?a=1&b=2", "/api/health", "/evaluation/datasets",
                "/evaluation/datasets/qa", "/evaluation/experiments", "/evaluation/experiments/b",
                "/evaluation/compare?a=a&b=b", "/api/experiments", "/api/experiments/a/compare/b"):
        r = client.get(url)
        out[url] = {"status": r.status_code, "type": r.headers["content-type"], "text": r.text}
    r = client.post("/api/evaluation/analyze", json={})
    out["POST /api/evaluation/analyze"] = {"status": r.status_code, "type": r.headers["content-type"], "text": r.text}
out["imported"] = sorted(m for m in sys.modules if m.split(".")[0] in EXTRA and sys.modules[m] is not None)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("no-analysis")
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["JURIST_HOME"] = str(folder / ".jurist")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)  # tests.experiments
    code = not_installed(*EXTRA) + f"EXTRA = {EXTRA!r}\n" + SERVER
    done = subprocess.run([sys.executable, "-c", code, f"sqlite:///{folder / 'jurist.db'}"], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def notices(page: str) -> list[str]:
    return [html.unescape(n) for n in re.findall(r'<p class="notice info extra-notice"[^>]*>([^<]*)</p>', page)]


def test_nothing_of_the_extra_was_imported(served):
    assert served["imported"] == []
    assert served["/api/health"]["status"] == 200


def test_the_overview_renders_its_tables_with_a_notice_for_the_charts(served):
    page = served["/evaluation"]
    assert page["status"] == 200 and page["type"].startswith("text/html")
    assert 'id="m-total">80<' in page["text"] and 'id="by-kind"' in page["text"]
    assert 'id="failure-links"' in page["text"]  # the failures' links stay, the chart gives way
    found = notices(page["text"])
    assert len(found) == 3  # distribution, failures, weekly trend
    assert all(n.startswith("Drawing charts needs the analysis extra") and n.endswith(INSTALL) for n in found)
    assert "chart-data" not in page["text"] and "plotly.min.js" not in page["text"]


def test_the_pages_that_need_statistics_say_which_extra(served):
    assert served["/evaluation/explorer"]["status"] == 200
    for url, what in (("/evaluation/patterns", "Running the analysis"), ("/evaluation/calibration", "The calibration")):
        page = served[url]
        assert page["status"] == 200, page["text"][:300]
        [notice] = notices(page["text"])
        assert notice.startswith(f"{what} needs the analysis extra") and notice.endswith(INSTALL)
    assert 'id="analyze-form"' not in served["/evaluation/patterns"]["text"]
    prompt = served["/evaluation/prompts/rubric_judge"]
    assert prompt["status"] == 200 and "Be strict." in prompt["text"]  # the diff is there
    problem = html.unescape(re.search(r'id="ab-problem">([^<]*)<', prompt["text"]).group(1))
    assert problem.startswith("The A/B comparison needs the analysis extra") and problem.endswith(INSTALL)
    compare = served["/evaluation/compare?a=a&b=b"]
    assert compare["status"] == 200, compare["text"][:300]
    problem = html.unescape(re.search(r'id="compare-problem">([^<]*)<', compare["text"]).group(1))
    assert problem.startswith("Comparing experiments needs the analysis extra") and problem.endswith(INSTALL)


def test_the_datasets_and_experiments_pages_need_nothing_more(served):
    for url in ("/evaluation/datasets", "/evaluation/datasets/qa", "/evaluation/experiments",
                "/evaluation/experiments/b"):
        page = served[url]
        assert page["status"] == 200 and not notices(page["text"]), (url, page["text"][:300])
    assert 'class="num pass-rate">0.0%<' in served["/evaluation/experiments"]["text"]  # b: every item below the bar
    listed = json.loads(served["/api/experiments"]["text"])
    assert {e["record"]["name"]: e["pass_rate"] for e in listed} == {"a": 1.0, "b": 0.0}


@pytest.mark.parametrize("route, what", [("/api/evaluation/calibration", "The calibration"),
                                         ("/api/prompts/rubric_judge/compare?a=1&b=2", "The A/B comparison"),
                                         ("POST /api/evaluation/analyze", "The failure-pattern analysis"),
                                         ("/api/experiments/a/compare/b", "Comparing experiments")])
def test_the_api_routes_that_need_statistics_answer_a_json_error(served, route, what):
    answer = served[route]
    assert answer["status"] == 501 and answer["type"] == "application/json"
    detail = json.loads(answer["text"])["detail"]
    assert detail == (f"{what} needs the analysis extra (scipy, krippendorff, plotly; missing: scipy, krippendorff, "
                      f'plotly): {INSTALL}')


def test_the_rest_of_the_api_answers(served):
    patterns = served["/api/evaluation/patterns"]
    assert patterns["status"] == 200 and json.loads(patterns["text"]) == {"run": None, "patterns": []}


def test_calibrations_are_looked_up_and_listed_without_the_extra(served):
    assert served["gate started"]  # require_calibration's look-up found the stored calibration
    listed = served["/api/evaluation/calibrations"]
    assert listed["status"] == 200 and [c["id"] for c in json.loads(listed["text"])] == ["cal1"]
    assert 'data-calibration="cal1"' in served["/evaluation/calibration"]["text"]


def test_plotly_js_is_a_json_not_found(served):
    answer = served["/evaluation/assets/plotly.min.js"]
    assert answer["status"] == 404 and answer["type"] == "application/json"
    assert json.loads(answer["text"])["detail"].endswith(INSTALL)
