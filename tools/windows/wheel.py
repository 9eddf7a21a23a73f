# SPDX-License-Identifier: Apache-2.0
"""Packs the Windows wheel: the package's modules, the cross-built _C.pyd and a
.dist-info (METADATA from pyproject.toml, WHEEL, RECORD with sha256), as
setuptools' bdist_wheel would on Windows (which cannot run here: it would build for
this platform).  The package is pure Python besides _C, so the wheel is platlib
(Root-Is-Purelib: false) with the abi3 tag setup.py asks bdist_wheel for.

Deterministic: entries sorted, every timestamp the same (SOURCE_DATE_EPOCH, else
1980-01-01), so the same inputs give the same bytes."""
from __future__ import annotations

import base64
import hashlib
import os
import re
import time
import zipfile
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

TAG = "cp310-abi3-win_amd64"
PACKAGE = "comfy_kitchen_c"
GENERATOR = "comfy_kitchen_c tools/windows/build.py"


def project(root: Path) -> dict:
    if tomllib is None:
        raise SystemExit("reading pyproject.toml needs Python >= 3.11 (tomllib)")
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def wheel_name(root: Path) -> str:
    p = project(root)
    return f"{normalized(p['name'])}-{p['version']}-{TAG}.whl"


def normalized(name: str) -> str:
    """The distribution's name as wheel file names and .dist-info folders spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def metadata(root: Path, p: dict) -> str:
    """Core metadata 2.4 (License-Expression, License-File), what setuptools >= 77
    writes for this pyproject.toml."""
    lines = ["Metadata-Version: 2.4", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}"]
    if "license" in p:
        lines.append(f"License-Expression: {p['license']}")
    lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {extra_requirement(d, extra)}" for d in deps]
    lines += ["License-File: LICENSE", "Description-Content-Type: text/markdown"]
    return "\n".join(lines) + "\n\n" + (root / p["readme"]).read_text()


def extra_requirement(requirement: str, extra: str) -> str:
    """The requirement as it reads under its extra. A requirement's own marker is
    parenthesized, as setuptools writes it: `a; x or y; extra == "e"` is not a
    specifier pip can parse, and `a; x or y and extra == "e"` would bind `and` first."""
    name, _, marker = requirement.partition(";")
    if not marker.strip():
        return f'{name.strip()}; extra == "{extra}"'
    return f'{name.strip()}; ({marker.strip()}) and extra == "{extra}"'


def wheel_file() -> str:
    return f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: false\nTag: {TAG}\n"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def pack(root: Path, pyd: Path, outdir: Path) -> Path:
    """Writes the wheel into outdir and returns its path."""
    p = project(root)
    dist_info = f"{normalized(p['name'])}-{p['version']}.dist-info"
    files = {f"{PACKAGE}/{m.name}": m.read_bytes() for m in sorted((root / PACKAGE).glob("*.py"))}
    files[f"{PACKAGE}/_C.pyd"] = pyd.read_bytes()
    files[f"{dist_info}/METADATA"] = metadata(root, p).encode()
    files[f"{dist_info}/WHEEL"] = wheel_file().encode()
    files[f"{dist_info}/licenses/LICENSE"] = (root / "LICENSE").read_bytes()
    record = "".join(record_line(n, d) + "\n" for n, d in files.items()) + f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    when = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))[:6]
    outdir.mkdir(parents=True, exist_ok=True)
    out = outdir / wheel_name(root)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():  # modules first, RECORD last, as installers expect
            info = zipfile.ZipInfo(name, when)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return out
