# SPDX-License-Identifier: Apache-2.0
"""The license: a LICENSE file with the Apache-2.0 text that pyproject.toml declares, and the
SPDX line near the top of every source file (C-like: the first line; Python and shell: the
first line, or the second after a #! line)."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPDX = "SPDX-License-Identifier: Apache-2.0"
SOURCE_SUFFIXES = {".c", ".h", ".cu", ".cuh", ".cpp", ".py"}
FOLDERS = ("csrc/", "kernels/", "comfy_kitchen_c/", "tests/", "benchmarks/", ".ci/", "tools/")


def source_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [f for f in listed if (ROOT / f).is_file() and (f == "setup.py" or f == ".ci/run" or (
        f.startswith(FOLDERS) and Path(f).suffix in SOURCE_SUFFIXES))]


def test_license_file_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()


def test_every_source_file_has_the_spdx_line():
    files = source_files()
    assert len(files) > 100
    missing = []
    for f in files:
        lines = (ROOT / f).read_text().splitlines()[:2]
        head = lines[1:2] if lines and lines[0].startswith("#!") else lines[:1]
        if not any(SPDX in line for line in head):
            missing.append(f)
    assert missing == []
