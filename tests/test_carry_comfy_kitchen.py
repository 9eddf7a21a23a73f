# SPDX-License-Identifier: Apache-2.0
"""benchmarks/carry_comfy_kitchen.py: what it unpacks from a comfy-kitchen wheel for a GPU machine
without network (a synthetic wheel here; nothing is downloaded)."""
import importlib.util
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("carry_comfy_kitchen", ROOT / "benchmarks" / "carry_comfy_kitchen.py")
carry = importlib.util.module_from_spec(spec)
spec.loader.exec_module(carry)

MEMBERS = {
    "comfy_kitchen/__init__.py": b"x = 1\n",
    "comfy_kitchen/backends/cuda/_C.abi3.so": b"\x7fELF cuda",
    "comfy_kitchen/backends/triton/__init__.py": b"",
    "comfy_kitchen/backends/hip/_C.abi3.so": b"\x7fELF hip",
    "comfy_kitchen-0.2.40.dist-info/METADATA": b"Name: comfy-kitchen\n",
}


def make_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in MEMBERS.items():
            z.writestr(name, data)
    return path


def test_unpacks_the_package_without_hip_or_metadata(tmp_path):
    wheel = make_wheel(tmp_path / "comfy_kitchen-0.2.40-cp312-abi3-manylinux_2_28_x86_64.whl")
    dest = tmp_path / "devpkgs"
    written = carry.unpack(wheel, dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == ["comfy_kitchen/__init__.py", "comfy_kitchen/backends/cuda/_C.abi3.so",
                   "comfy_kitchen/backends/triton/__init__.py"]
    assert written == sum(len(MEMBERS[n]) for n in got)
    assert (dest / "comfy_kitchen/backends/cuda/_C.abi3.so").stat().st_mode & 0o111


def test_unpacking_again_replaces_the_earlier_copy(tmp_path):
    wheel = make_wheel(tmp_path / "w.whl")
    dest = tmp_path / "devpkgs"
    carry.unpack(wheel, dest)
    stale = dest / "comfy_kitchen" / "stale.py"
    stale.write_text("old")
    carry.unpack(wheel, dest)
    assert not stale.exists()
