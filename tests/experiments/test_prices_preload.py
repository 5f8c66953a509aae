"""The price table (genai-prices) is read in a thread when a runtime is built, so an experiment's or a
batch's first recorded call does not read it on the event loop; a table that cannot be read does not
stop the runtime (a warning says so). Each case runs in a fresh interpreter: the table is read once per
process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import _CLEARED

PROGRAM = """
import json, sys, time
if sys.argv[1] == "broken":
    sys.modules["genai_prices.data"] = None  # the package's data cannot be imported
from jurist.config import Settings
from jurist.runtime import Runtime

before = "genai_prices.data" in sys.modules and sys.modules["genai_prices.data"] is not None
started = time.perf_counter()
rt = Runtime(Settings(), open_store=False)
built = time.perf_counter() - started
import threading
for reader in [t for t in threading.enumerate() if t.name == "jurist-prices"]:
    reader.join(20)
loaded = sys.modules.get("genai_prices.data") is not None
if loaded:
    from jurist.models import cost
    with_table = cost.call_cost("openai/gpt-4o-mini", "https://api.openai.com/v1", 1000, 100)
    priced = with_table.usd is not None
else:
    priced = None
second = Runtime(Settings(), open_store=False)  # a second runtime starts no second read
readers = [t.name for t in threading.enumerate() if t.name == "jurist-prices"]
print(json.dumps({"before": before, "loaded": loaded, "priced": priced, "built_s": built, "readers": readers}))
"""


def _run(tmp_path: Path, case: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env.update(JURIST_HOME=str(tmp_path / ".jurist"), XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-c", PROGRAM, case], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_runtime_reads_the_price_table_in_a_thread(tmp_path):
    out, _ = _run(tmp_path, "ok")
    assert out["before"] is False  # nothing had read it: the runtime started the read
    assert out["loaded"] is True and out["priced"] is True
    assert out["readers"] == []  # the reader ended; the second runtime started none


def test_a_table_that_cannot_be_read_does_not_stop_the_runtime(tmp_path):
    out, err = _run(tmp_path, "broken")
    assert out["loaded"] is False and out["built_s"] < 5
    assert "the price table (genai-prices) could not be read ahead" in err
