# SPDX-License-Identifier: Apache-2.0
"""comfy_kitchen's own test suite with backend "c" first (issue 21: "the new ops pass
comfy_kitchen's own test suite where it reaches them with "c" first").

    python tools/ck_suite.py /path/to/comfy-kitchen [pytest arguments...]

Its tests are not on PyPI (wheels only) and not copied here: this script copies the tests/
folder of a comfy-kitchen checkout into a temporary folder and runs pytest there against the
installed comfy_kitchen and comfy_kitchen_c, with two changes:

* "c" joins the backends the suite tries: every hard-coded list of comfy_kitchen's backends
  (["cuda", "triton", "eager"]: conftest.get_capable_backends and the parametrized tests)
  gets "c" first, so each test that runs an op on each capable backend and compares it with
  eager runs it on "c" too;
* a pytest plugin activates comfy_kitchen_c (first in the registry, as ComfyUI's node does),
  turns the CPU speed rules off (they give small calls, every test's, to eager) and counts
  what the registry hands out per (op, backend), printed at the end.

The exit status is pytest's.  A test that fails only with "c" is ours to fix; one that fails
without it too is the checkout's against the installed comfy_kitchen (say which)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BACKEND_LIST = re.compile(r'\["cuda", "triton", "eager"\]')
WITH_C = '["c", "cuda", "triton", "eager"]'

PLUGIN = '''\
import os
from collections import Counter

CALLS = Counter()


def pytest_configure(config):
    import comfy_kitchen_c
    from comfy_kitchen.registry import registry
    from comfy_kitchen_c import cpu_speed

    comfy_kitchen_c.activate()
    cpu_speed.configure(mode="off")
    real = registry.get_implementation

    def get_implementation(func_name, backend=None, kwargs=None):
        impl = real(func_name, backend, kwargs)
        module = getattr(impl, "__module__", "") or ""
        name = "c" if module.startswith("comfy_kitchen_c") else (module.split(".") + ["", "", "?"])[2]
        CALLS[(func_name, name)] += 1
        return impl

    registry.get_implementation = get_implementation


def pytest_terminal_summary(terminalreporter):
    totals = Counter()
    for (op, backend), n in sorted(CALLS.items()):
        totals[backend] += n
        terminalreporter.write_line(f"registry: {op:44s} {backend:8s} {n}")
    terminalreporter.write_line(f"registry totals: {dict(totals)}")
'''


def prepare(checkout: Path, into: Path) -> int:
    """The checkout's tests/ under `into`, "c" first in its backend lists; how many lists."""
    shutil.copytree(checkout / "tests", into / "tests")
    (into / "ckc_first.py").write_text(PLUGIN)
    changed = 0
    for path in (into / "tests").rglob("*.py"):
        text = path.read_text()
        new, n = BACKEND_LIST.subn(WITH_C, text)
        if n:
            path.write_text(new)
            changed += n
    return changed


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / "tests").is_dir():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ck_suite_") as tmp:
        lists = prepare(Path(argv[0]), Path(tmp))
        print(f"ck_suite: {lists} backend lists now try \"c\" first", flush=True)
        rest = argv[1:]
        where = [] if any(a.startswith("tests") for a in rest) else ["tests"]  # test files named: those only
        cmd = [sys.executable, "-m", "pytest", "-p", "ckc_first", "-p", "no:cacheprovider", *where, *rest]
        return subprocess.call(cmd, cwd=tmp, env={**os.environ, "PYTHONPATH": tmp})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
