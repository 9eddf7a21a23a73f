#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# usage: .ci/old_torch_check.sh WHEEL
#
# The wheel beside the oldest torch and comfy-kitchen the project supports: comfy-kitchen 0.2.31 (the floor
# in pyproject.toml) and the oldest torch that imports it, a CUDA 12 build from PyPI with its nvidia-*
# packages, as `pip install` gives a user.  torch 2.5.1 (cu124) and 2.6.0 (cu124) cannot import
# comfy-kitchen 0.2.31 at all (their torch.library.infer_schema rejects its `list[int]` annotations, a
# ValueError at `import comfy_kitchen`), so neither can run comfy_kitchen_c; torch 2.7.1 (cu126) is the
# oldest that does.  comfy-kitchen 0.2.31 imports `packaging` without declaring it, and torch warns without
# numpy: every ComfyUI environment has both, so they are installed too.  triton (torch's dependency) is
# removed: triton 3.3's autotuner looks for a GPU driver when comfy-kitchen 0.2.31's triton backend is
# imported, which raises on this GPU-less machine (a GPU user's has one); without triton comfy-kitchen skips
# that backend, and the selftest compares against its eager one.  Then .ci/wheel_install_check.sh installs
# the wheel into a fresh, compiler-free environment beside them and runs the CPU selftest.
#
# The pair is ~3 GB to download and ~5 GB installed: 80-140 s on CI's machine.  CKC_OLD_TORCH_ENV=DIR keeps
# the environment in DIR and reuses it on later runs (a development machine); without it the environment is
# made afresh, in a temporary folder, and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ]; then echo "usage: $0 WHEEL" >&2; exit 2; fi
TORCH="${CKC_OLD_TORCH:-2.7.1}"
KITCHEN="${CKC_OLD_KITCHEN:-0.2.31}"
if [ -n "${CKC_OLD_TORCH_ENV:-}" ]; then
    env_dir="$CKC_OLD_TORCH_ENV"
else
    env_dir="$(mktemp -d)/old-torch"
    trap 'rm -rf "$(dirname "$env_dir")"' EXIT
fi
requirements=("torch==$TORCH" "comfy-kitchen==$KITCHEN" packaging numpy)
stamp="$env_dir/installed.txt"  # what a reused environment holds
if [ "$(cat "$stamp" 2>/dev/null)" != "${requirements[*]} -triton" ]; then
    rm -rf "$env_dir"
    python3 -m venv "$env_dir"
    start=$SECONDS
    "$env_dir/bin/python" -m pip install --quiet "${requirements[@]}"
    "$env_dir/bin/python" -m pip uninstall --quiet --yes triton
    echo "old torch: ${requirements[*]} installed in $((SECONDS - start)) s ($(du -sh "$env_dir" | cut -f1))"
    echo "${requirements[*]} -triton" >"$stamp"
fi
# A CUDA 12 build, or the check would not be what it claims.
"$env_dir/bin/python" - <<'PY'
import torch
cuda = torch.version.cuda or "none"
if not cuda.startswith("12."):
    raise SystemExit(f"old torch: torch {torch.__version__} is built for CUDA {cuda}, not CUDA 12")
PY
site="$("$env_dir/bin/python" -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"])' \
    | tr ' ' '\n' | sort -u)"
# shellcheck disable=SC2086  # one path per line, none with spaces (a venv's site-packages)
.ci/wheel_install_check.sh "$1" $site
