# SPDX-License-Identifier: Apache-2.0
"""CI's sanitizer setup can fail: with the leak suppressions of .ci/lsan.supp (CPython's and
torch's exit-time "leaks"), a leak made below the interpreter, as an op of ours would make one,
is still reported.  A process imports torch and comfy_kitchen_c under AddressSanitizer, then
leaks 4242 bytes from C (libc's malloc through ctypes: its stack holds the interpreter's frames,
as our ops' do); LeakSanitizer must name exactly that leak and fail the process.  Without
.ci/lsan/sitecustomize.py (torch imported with LeakSanitizer off) it was not: torch's ~44,000
import-time objects filled LeakSanitizer's 5000 reported leaks before ours was met."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUPPRESSIONS = ROOT / ".ci" / "lsan.supp"


def _preload():
    if not sys.platform.startswith("linux") or shutil.which("gcc") is None:
        return None
    libs = [subprocess.run(["gcc", f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
            for lib in ("libasan.so", "libstdc++.so")]
    return " ".join(libs) if all(os.path.isabs(lib) for lib in libs) else None


PRELOAD = _preload()
PROGRAM = """
import ctypes, torch, comfy_kitchen_c
from comfy_kitchen_c import ops
ops.quantize_int8_rowwise(torch.randn(4, 64))
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
{leak}
print("done")
"""


def _run(leak: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LD_PRELOAD": PRELOAD, "ASAN_OPTIONS": "detect_leaks=1",
           "PYTHONPATH": str(ROOT / ".ci" / "lsan"),
           "LSAN_OPTIONS": f"suppressions={SUPPRESSIONS}:print_suppressions=0"}
    return subprocess.run([sys.executable, "-c", PROGRAM.format(leak=leak)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


@pytest.mark.skipif(PRELOAD is None, reason="needs gcc's AddressSanitizer runtime (Linux)")
def test_suppressions_leave_torch_quiet_and_report_a_leak_below_the_interpreter():
    quiet = _run("pass")
    assert quiet.returncode == 0 and "done" in quiet.stdout, quiet.stderr[-3000:]
    assert "LeakSanitizer" not in quiet.stderr and "Too many leaks" not in quiet.stderr, quiet.stderr[-3000:]
    leaky = _run("p = libc.malloc(4242); p = None")
    assert leaky.returncode != 0 and "done" in leaky.stdout
    assert "Direct leak of 4242 byte(s) in 1 object(s)" in leaky.stderr, leaky.stderr[-3000:]
