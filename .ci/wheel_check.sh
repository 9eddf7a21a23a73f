#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The wheel ComfyUI users install: built from a clean checkout with `python -m build --wheel` (abi3, the
# CUDA kernels, no _C_emu), installed into a fresh virtual environment where no compiler can be found
# (PATH holds only the environment's bin, CC/CXX are /bin/false, no CUDA_HOME), and the selftest run from
# it.  torch and comfy_kitchen come from the system's site-packages, added as plain paths in a .pth file
# (downloading torch for every CI run would cost more than the check); the .pth files there are not run, so
# the editable install of this clone (a meta-path finder) cannot stand in for what the wheel lacks.  CI builds one GPU architecture
# (COMFY_KITCHEN_C_CUDA_ARCHS, default 120: SASS for Blackwell consumer GPUs plus its PTX); the editable
# install earlier in .ci/run compiles all seven with warnings as errors, and README "Wheels" gives the
# release recipe, which builds all seven.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone --quiet . "$work/src"
start=$(date +%s)
(cd "$work/src" && COMFY_KITCHEN_C_CUDA_ARCHS="${COMFY_KITCHEN_C_CUDA_ARCHS:-120}" \
    python3 -m build --wheel --outdir "$work/dist" >"$work/build.log" 2>&1) || { tail -50 "$work/build.log"; exit 1; }
built=$(date +%s)
wheel="$(ls "$work"/dist/*.whl)"
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built in $((built - start)) s"
case "$(basename "$wheel")" in *-cp310-abi3-*) ;; *) echo "not an abi3 wheel: $wheel"; exit 1 ;; esac
if python3 -m zipfile -l "$wheel" | grep -q "_C_emu"; then echo "the wheel holds _C_emu"; exit 1; fi
python3 -m venv "$work/venv"
venv_site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"]); print(p["platlib"])' \
    >"$venv_site/system-site-packages.pth"
clean=(env -i "HOME=$HOME" "PATH=$work/venv/bin" CC=/bin/false CXX=/bin/false "TMPDIR=$work")
if "${clean[@]}" sh -c 'command -v gcc || command -v cc || command -v nvcc' >/dev/null 2>&1; then
    echo "a compiler is still on PATH"; exit 1
fi
"${clean[@]}" "$work/venv/bin/python" -m pip install --quiet --no-index --no-deps "$wheel"
cd "$work"  # not the source tree: its comfy_kitchen_c/ would shadow the installed one
"${clean[@]}" "$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
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
PY
"${clean[@]}" "$work/venv/bin/python" -m comfy_kitchen_c selftest --no-timing | tail -3
echo "wheel check: $(( $(date +%s) - start )) s"
