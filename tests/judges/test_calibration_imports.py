"""require_calibration's look-up is store reads only: the capabilities that make it import no
statistics (scipy, krippendorff, jurist.analysis), which the calibration itself needs."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import jurist.gate.gate, jurist.judges.panel, jurist.research.evaluation, jurist.rubrics.api, jurist.rubrics.ray_engine
import jurist.cli.evaluate
loaded = sorted(m for m in sys.modules
                if m.split(".")[0] in ("scipy", "krippendorff") or m.startswith("jurist.analysis"))
print(",".join(loaded))
"""


def test_the_capabilities_checking_calibrations_import_no_statistics():
    run = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ""
