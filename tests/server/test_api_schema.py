"""The OpenAPI schema against the running app, by generated requests (schemathesis + hypothesis).

For every operation, valid and invalid requests: no 5xx ever, responses match their
documented schema and status codes, invalid input is refused (422/400), writes without
the token are 401. Two checks are left out: ``positive_data_acceptance`` (a few
schema-valid requests are refused on purpose: comparing a prompt version with itself,
``min_score`` above ``max_score``) and ``allow_header_conformance`` (Starlette's 405 on
a path served by two routes lists the methods of one of them).
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import allow_header_conformance, positive_data_acceptance

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.testing.synthetic import seed_history


def _app():
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="jurist-schema-"))
    url = f"sqlite:///{folder / 'jurist.db'}"
    with Store(url) as store:
        seed_history(store, 200)
    # With a token the writes are refused before any model is called; schemathesis names the server "testserver".
    return create_app(Settings.load(database_url=url, home=str(folder / ".jurist"), api_token="schema-test",
                                    allowed_hosts=["testserver"]))


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_keeps_its_contract(case):
    case.call_and_validate(excluded_checks=[positive_data_acceptance, allow_header_conformance])
