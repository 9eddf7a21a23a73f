# SPDX-License-Identifier: Apache-2.0
"""An explicit "c" runs "c": the parity suites with every call through comfy_kitchen's registry
under use_backend("c") (tests/forced_backend.py), the CPU speed rules on with eager faster at
every size, and every valid call counted as served by "c".  On a machine with a GPU the CUDA
suites run so too.  About a minute on 2 cores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from comfy_kitchen.registry import registry

from comfy_kitchen_c import cpu_speed

TESTS = Path(__file__).resolve().parent
# The parity suites, the fused int8 ops' and the linears' (the embedding gather, the modulated linears), and the
# CUDA suites (skipped without a GPU)
SUITES = sorted(str(p.relative_to(TESTS.parent)) for p in TESTS.glob("test_*_parity.py")) + [
    "tests/test_int8_fused.py", "tests/test_int8_linear.py", "tests/test_cuda.py", "tests/test_cuda_linear.py"]


@pytest.fixture(scope="module")
def forced_run(tmp_path_factory):
    report = tmp_path_factory.mktemp("forced") / "served.json"
    env = {**os.environ, "CKC_FORCED_BACKEND_REPORT": str(report),
           "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "forced_backend", "-p", "no:cacheprovider",
                             "-x", *SUITES], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=1800)
    return result, (json.loads(report.read_text()) if report.exists() else None)


def test_every_valid_call_of_the_parity_suites_under_use_backend_c_is_served_by_c(forced_run):
    result, report = forced_run
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert report is not None and report["elsewhere"] == []
    assert sum(report["served"].values()) > 1000


def test_the_ops_with_a_cpu_speed_rule_were_reached(forced_run):
    """Where a speed preference could have leaked into a forced call, the suites made such calls."""
    _, report = forced_run
    assert report is not None
    declared = registry._capabilities.get("c", set())
    missing = sorted(op for op in cpu_speed.PROBES if op in declared and not report["served"].get(op))
    assert missing == [], f"the parity suites call none of {missing} through comfy_kitchen_c.ops"
