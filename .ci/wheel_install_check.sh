#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# usage: .ci/wheel_install_check.sh WHEEL SITE_PACKAGES...
#
# Installs WHEEL into a fresh virtual environment where no compiler can be found (PATH holds only the
# environment's bin, CC/CXX are /bin/false, no CUDA_HOME), checks that comfy_kitchen_c and its _C load
# from there (and that _C_emu, test code, is absent), and runs the selftest on the CPU from it.
# torch and comfy_kitchen come from SITE_PACKAGES (today's: the system's site-packages; the oldest the
# project supports: .ci/old_torch_env.sh's), added as plain paths in a .pth file: the .pth files in them
# are not run, so an editable install of a clone there (a meta-path finder) cannot stand in for what the
# wheel lacks.  Prints the torch, CUDA and comfy-kitchen versions it ran with.
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 WHEEL SITE_PACKAGES..." >&2; exit 2; fi
wheel="$(realpath "$1")"
shift
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
venv_site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n' "$@" >"$venv_site/site-packages-under-test.pth"
clean=(env -i "HOME=$HOME" "PATH=$work/venv/bin" CC=/bin/false CXX=/bin/false "TMPDIR=$work")
if "${clean[@]}" sh -c 'command -v gcc || command -v cc || command -v nvcc' >/dev/null 2>&1; then
    echo "a compiler is still on PATH"; exit 1
fi
"${clean[@]}" "$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
cd "$work"  # not a source tree: its comfy_kitchen_c/ would shadow the installed one
"${clean[@]}" "$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
from importlib.metadata import version
import torch
import comfy_kitchen_c
from comfy_kitchen_c import _C
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(comfy_kitchen_c.__file__).startswith(venv), comfy_kitchen_c.__file__
try:
    import comfy_kitchen_c._C_emu  # noqa: F401
    raise SystemExit("_C_emu is installed")
except ImportError:
    pass
print(f"installed from the wheel: {os.path.dirname(comfy_kitchen_c.__file__)}; CUDA kernels: {bool(_C.HAS_CUDA)}")
print(f"beside torch {torch.__version__} (CUDA {torch.version.cuda}) from {os.path.dirname(torch.__file__)}, "
      f"comfy-kitchen {version('comfy-kitchen')}")
PY
# The verdicts only (the table is long): the count, any FAIL, and what was not checked and why.
"${clean[@]}" "$work/venv/bin/python" -m comfy_kitchen_c selftest --no-timing \
    | grep -E '^([0-9]+ checks:|FAIL|not checked)'
