"""benchmarks/research_criteria.py: its labelled plans are valid, and it runs in its quickest mode."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from jurist.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "research_criteria.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("research_criteria", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_labelled_plans_are_valid_and_cover_every_kind() -> None:
    bench = _bench()
    items = bench.load_items()
    assert len(items) >= 60
    kinds = Counter(i.kind for i in items)
    assert set(kinds) == {"aligned", *bench.KINDS}
    assert all(kinds[k] >= 5 for k in bench.KINDS), kinds
    by_query: dict[str, list[str]] = {}
    for item in items:
        by_query.setdefault(item.query, []).append(item.kind)
        assert item.plan.search_queries and item.plan.objective
    # every query has exactly one aligned plan and at least one misaligned one
    assert all(ks.count("aligned") == 1 and len(ks) >= 2 for ks in by_query.values()), by_query


def test_a_line_with_an_unknown_field_or_a_wrong_label_is_refused(tmp_path: Path) -> None:
    bench = _bench()
    good = json.loads(bench.DATA.read_text(encoding="utf-8").splitlines()[0])
    path = tmp_path / "plans.jsonl"
    path.write_text(json.dumps({**good, "kinds": "aligned"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="did you mean 'kind'"):
        bench.load_items(path)
    path.write_text(json.dumps({**good, "label": "misaligned"}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="does not go with kind 'aligned'"):
        bench.load_items(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="repeats line 1"):
        bench.load_items(path)


@pytest.mark.slow
def test_the_script_prints_the_three_figures_in_its_quickest_mode(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_"))}
    env["JURIST_HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--role-latency", "0.02", "--generation-latency", "0.04",
         "--search-latency", "0.01"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "1. Intent misalignment caught (judge: local/minilm)" in out
    assert "misaligned plans failing the plan stage:" in out and "(target > 80%:" in out
    assert "aligned plans passing the plan stage:" in out
    assert "average attempts of passing runs:" in out and "(target < 2:" in out
    assert "LLM judge: not configured, not measured" in out
    assert "3. Time added by a three-stage evaluation" in out
    assert "average added:" in out and "worst path added:" in out
    # the worst path did what it says: every attempt failed, six panels escalated, the answer was regenerated
    assert "3 plan attempt(s), passed False, meta-review yes, 6 escalation(s), answer regenerated yes" in out
    assert "skipped True" not in out
