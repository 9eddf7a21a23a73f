# SPDX-License-Identifier: Apache-2.0
"""The README is one screen a new user reads (issue 23 item 1): what it is, what it needs, the two
commands, how to put "c" into ComfyUI and see that it is used, all in its first 80 lines; every
other topic lives in one file of docs/, linked from the README's table, and no file there is an
orphan.  And the two commands are the ones CI runs, so that what the README promises is what is
checked on a fresh machine."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_SCREEN = "\n".join(README.split("\n")[:80])

SET_UP = 'python -m pip install -e ".[test]" && python -m comfy_kitchen_c selftest'
RUN_TESTS = "python -m pytest tests -q"


def test_the_first_screen_holds_what_a_new_user_needs():
    for needed in ("## What it needs", SET_UP, RUN_TESTS, "install-comfyui PATH_TO_COMFYUI",
                   "uninstall-comfyui", "python -m comfy_kitchen_c doctor", "download.pytorch.org/whl/cpu"):
        assert needed in FIRST_SCREEN, f"README's first 80 lines lack {needed!r}"


def test_every_docs_file_is_linked_from_the_readme_and_every_link_exists():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    present = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert linked - present == set(), "README links docs that are not there"
    assert present - linked == set(), "docs not linked from README's table"


def test_links_between_docs_resolve():
    for page in (ROOT / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([\w.-]+\.md)(?:#[\w-]+)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / target).is_file(), f"{page.name} links {target}, which is not in docs/"


def test_ci_runs_the_readme_commands():
    """.ci/run runs the set-up (with its CI-only environment before it) and the test command as written."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install, selftest = (part.strip() for part in SET_UP.replace("python ", "python3 ").split("&&"))
    assert re.search(re.escape(install) + r"\s*$|" + re.escape(install.replace("install", "install --quiet")), ci, re.M)
    assert selftest in ci and RUN_TESTS.replace("python ", "python3 ") in ci


def test_the_test_extra_does_not_force_a_cuda_torch():
    """README: installing the CPU torch first keeps a CPU-only set-up CPU-only.  That holds only while
    the extra asks for torch by a plain lower bound (no CUDA local version, no index of its own)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["test"]
    torch = [r for r in extra if re.match(r"torch\b", r)]
    assert torch and all(re.fullmatch(r"torch(>=[\d.]+)?", r) for r in torch), torch
