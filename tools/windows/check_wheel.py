#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Windows wheel's packaging (tools/windows/wheel.py wrote it):

    python3 tools/windows/check_wheel.py dist/comfy_kitchen_c-<version>-cp310-abi3-win_amd64.whl

  name       <name>-<version from pyproject.toml>-cp310-abi3-win_amd64.whl
  WHEEL      Root-Is-Purelib: false, Tag: cp310-abi3-win_amd64
  METADATA   the name and version of pyproject.toml
  RECORD     every file with its sha256 and size, nothing unlisted, RECORD itself unhashed
  contents   every module of comfy_kitchen_c/, _C.pyd; no _C_emu (test code) and no .so
  pip        installs it (--target a scratch folder, no dependencies, no index) for
             Windows x64 as CPython 3.10 and 3.13 would (abi3: one wheel for both)"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import wheel  # noqa: E402
from setup_view import ROOT  # noqa: E402

PYTHONS = ["3.10", "3.13"]


def fields(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        out.setdefault(key, []).append(value)
    return out


def problems(path: Path) -> list[str]:
    found = []
    p = wheel.project(ROOT)
    if path.name != wheel.wheel_name(ROOT):
        found.append(f"file name {path.name}, expected {wheel.wheel_name(ROOT)}")
    dist_info = f"{wheel.normalized(p['name'])}-{p['version']}.dist-info"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        read = {n: zf.read(n) for n in names}
    if f"{dist_info}/WHEEL" not in read:
        return found + [f"no {dist_info}/WHEEL"]
    w = fields(read[f"{dist_info}/WHEEL"].decode())
    if w.get("Root-Is-Purelib") != ["false"] or w.get("Tag") != [wheel.TAG]:
        found.append(f"WHEEL: Root-Is-Purelib {w.get('Root-Is-Purelib')}, Tag {w.get('Tag')}")
    m = fields(read.get(f"{dist_info}/METADATA", b"").decode())
    if m.get("Name") != [p["name"]] or m.get("Version") != [p["version"]]:
        found.append(f"METADATA: Name {m.get('Name')}, Version {m.get('Version')}")
    record = {}
    for line in read.get(f"{dist_info}/RECORD", b"").decode().splitlines():
        name, digest, size = line.rsplit(",", 2)
        record[name] = (digest, size)
    for name in names:
        if name not in record:
            found.append(f"RECORD does not list {name}")
        elif name == f"{dist_info}/RECORD":
            if record[name] != ("", ""):
                found.append("RECORD hashes itself")
        else:
            digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(read[name]).digest()).rstrip(b"=").decode()
            if record[name] != (digest, str(len(read[name]))):
                found.append(f"RECORD: {name}: {record[name]}, the file has {digest}, {len(read[name])} bytes")
    found += [f"RECORD lists {n}, which the wheel lacks" for n in record if n not in read]
    modules = {f"{wheel.PACKAGE}/{m.name}" for m in (ROOT / wheel.PACKAGE).glob("*.py")}
    found += [f"missing {n}" for n in sorted(modules | {f"{wheel.PACKAGE}/_C.pyd"}) if n not in read]
    found += [f"holds {n}" for n in names if "_C_emu" in n or n.endswith(".so")]
    return found


def pip_installs(path: Path) -> list[str]:
    found = []
    env = {**os.environ, "PIP_ROOT_USER_ACTION": "ignore", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for version in PYTHONS:
        with tempfile.TemporaryDirectory() as target:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                "--only-binary=:all:", "--platform", "win_amd64", "--python-version", version,
                                "--target", target, str(path)], capture_output=True, text=True, env=env)
            if r.returncode != 0 or not (Path(target) / wheel.PACKAGE / "_C.pyd").exists():
                found.append(f"pip does not install it for CPython {version} on win_amd64:\n{r.stdout}{r.stderr}")
    return found


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    path = Path(args[0])
    found = problems(path)
    found += pip_installs(path) if not found else []
    for line in found:
        print(f"check_wheel: {path.name}: {line}", file=sys.stderr)
    if not found:
        print(f"check_wheel: {path.name}: WHEEL, METADATA, RECORD ({len(zipfile.ZipFile(path).namelist())} files) "
              f"correct; pip installs it for CPython {' and '.join(PYTHONS)} on win_amd64")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
