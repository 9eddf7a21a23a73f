#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# usage: .ci/wheel_check.sh [OUTDIR]   (default OUTDIR: build/wheel_check)
#
# The wheel ComfyUI users install, built as a release builds it: tools/build_wheels.py --ci (a clean clone of
# HEAD; the manylinux wheel with zig's clang for glibc 2.28, auditwheel repair, and `auditwheel show` checked to
# report manylinux 2.28 or older; all eight GPU architectures, as a release: their fatbins come from the editable
# install earlier in .ci/run through COMFY_KITCHEN_C_FATBIN_CACHE, so nvcc runs once per CI run).  Then: abi3, no _C_emu, and .ci/wheel_install_check.sh installs it into a fresh
# virtual environment where no compiler can be found and runs the selftest beside today's torch and
# comfy_kitchen (the system's site-packages).  The wheel stays in OUTDIR for .ci/run's next steps (the old
# torch check).
set -euo pipefail
cd "$(dirname "$0")/.."
outdir="$(realpath -m "${1:-build/wheel_check}")"
rm -rf "$outdir"
start=$SECONDS
# Warnings are errors, as in the editable install: here they are clang's (zig's) on the C, which gcc's miss.
COMFY_KITCHEN_C_WERROR=1 python3 tools/build_wheels.py --skip-windows --outdir "$outdir"
wheel="$(ls "$outdir"/*.whl)"
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB, built in $((SECONDS - start)) s"
case "$(basename "$wheel")" in
    *-cp310-abi3-manylinux_2_28_x86_64.whl) ;;
    *) echo "not an abi3 manylinux_2_28 wheel: $wheel"; exit 1 ;;
esac
if python3 -m zipfile -l "$wheel" | grep -q "_C_emu"; then echo "the wheel holds _C_emu"; exit 1; fi
# shellcheck disable=SC2046  # the two site-packages paths, no spaces in them
.ci/wheel_install_check.sh "$wheel" \
    $(python3 -c 'import sysconfig; p = sysconfig.get_paths(); print(p["purelib"], p["platlib"])')
echo "wheel check: $((SECONDS - start)) s"
