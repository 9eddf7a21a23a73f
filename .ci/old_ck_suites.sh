#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# usage: .ci/old_ck_suites.sh ENV
#
# The parity and registration suites against the oldest comfy-kitchen the README supports (0.2.31, beside
# torch 2.7.1): ENV is the environment .ci/old_torch_check.sh made (CKC_OLD_TORCH_ENV=ENV keeps it), and the
# code under test is this checkout's in-place build (the editable install's _C and _C_emu, on PYTHONPATH; the
# venv does not see the CI python's editable install).  What 0.2.31 lacks skips with the feature named
# (tests/conftest.py, ck_lacks); the same files run against the newest comfy-kitchen in the main test step.
#
# _C is built on the limited API (abi3, setup.py: Python 3.10 and newer), so the build of CI's python loads in any
# CPython from 3.10 on; ENV is a venv of that same python3 (old_torch_check.sh), and the check below says so,
# or stops here, naming both versions, where it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then echo "usage: $0 ENV" >&2; exit 2; fi
py="$1/bin/python"
"$py" -m pip install --quiet pytest
PYTHONPATH="$PWD" "$py" - "$(python3 -c 'import platform; print(platform.python_version())')" <<'PY'
import platform
import sys
from importlib.metadata import version

built_by, here = sys.argv[1], platform.python_version()
if sys.version_info < (3, 10):
    raise SystemExit(f"old comfy-kitchen suites: python {here} is older than _C's abi3 floor (3.10)")

import torch  # noqa: E402

import comfy_kitchen_c  # noqa: E402,F401 - the in-place _C, loaded by the old environment's python
from comfy_kitchen_c import _C  # noqa: E402
print(f"old comfy-kitchen suites: comfy-kitchen {version('comfy-kitchen')}, torch {torch.__version__}, "
      f"python {here} (the build's: {built_by}, abi3 from 3.10), _C from {_C.__file__}")
PY
PYTHONPATH="$PWD" "$py" -m pytest -q -rs -p no:cacheprovider \
    tests/test_registration.py tests/test_version_skew.py tests/test_op_list.py tests/test_int8_parity.py \
    tests/test_nvfp4_parity.py tests/test_int8_linear.py tests/test_int8_fused.py tests/test_scaled_mm_nvfp4.py \
    tests/fuzz/test_fuzz.py
