# SPDX-License-Identifier: Apache-2.0
"""docs/architecture.md's "Adding an op" names every production file a new op touches.  Held
against a real op, rms_gated_residual (family residual): each file whose code (not a comment)
names it must be on the list, and each file on the list must exist and name the op or its family
(its kernel instance list, its math)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OP, FAMILY = "rms_gated_residual", "residual"
PRODUCTION = ("csrc", "kernels", "comfy_kitchen_c", "setup.py")


def listed() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding an op", 1)[1].split("\n## ", 1)[0]
    steps = section.split("A new op of family", 1)[1].split("8. **Its tests**", 1)[0]
    paths = re.findall(r"`((?:csrc|kernels|comfy_kitchen_c)/[\w<>/.]+\.(?:h|c|cu|py))`", steps)
    return {p.replace("<family>", FAMILY).replace("<name>", OP) for p in paths}


def code_of(path: Path) -> str:
    """The file without its comments (C: /* */ and //; Python: # lines and docstrings)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        text = re.sub(r'"""(?:.|\n)*?"""', "", text)
        return "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    text = re.sub(r"/\*(?:.|\n)*?\*/", "", text)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def naming() -> set[str]:
    try:
        files = subprocess.run(["git", "ls-files", *PRODUCTION], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs a git checkout")
    return {f for f in files if Path(f).suffix in (".h", ".c", ".cu", ".py")
            and OP in code_of(ROOT / f)}


def test_every_file_the_op_touches_is_on_the_list():
    assert sorted(naming() - listed()) == []


def test_every_file_on_the_list_exists_and_names_the_op_or_its_family():
    missing = sorted(p for p in listed() if not (ROOT / p).is_file())
    assert missing == []
    silent = sorted(p for p in listed() if FAMILY not in code_of(ROOT / p).lower())
    assert silent == []
