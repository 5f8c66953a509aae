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
        "from jurist.models import Model, ChatRequest, limiter_for\n"
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
