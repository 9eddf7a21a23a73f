# SPDX-License-Identifier: Apache-2.0
"""The Windows wheel's METADATA (tools/windows/wheel.py writes it by hand) must say what
pyproject.toml says, in a form pip parses: every Requires-Dist a valid requirement whose
marker holds exactly under its extra and its own platform condition."""

import importlib.util
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _wheel_module():
    spec = importlib.util.spec_from_file_location("ckc_windows_wheel", ROOT / "tools/windows/wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _requires(text):
    return [line.split(": ", 1)[1] for line in text.split("\n\n", 1)[0].splitlines()
            if line.startswith("Requires-Dist: ")]


def test_every_requirement_parses_and_keeps_its_own_marker():
    wheel = _wheel_module()
    p = wheel.project(ROOT)
    requires = _requires(wheel.metadata(ROOT, p))
    wanted = [d for deps in p.get("optional-dependencies", {}).values() for d in deps]
    assert len(requires) == len(p.get("dependencies", [])) + len(wanted)
    for line in requires:
        req = Requirement(line)  # raises InvalidRequirement on what pip refuses
        if req.name != "nvidia-cuda-nvcc-cu12":
            continue
        env = {"platform_machine": "AMD64", "extra": "test"}
        assert req.marker.evaluate(env)
        assert not req.marker.evaluate({"platform_machine": "AMD64", "extra": ""})
        assert not req.marker.evaluate({"platform_machine": "armv7l", "extra": "test"})


def test_a_marker_with_or_is_parenthesized_before_the_extra():
    wheel = _wheel_module()
    line = wheel.extra_requirement("a>=1; x == '1' or y == '2'", "test")
    assert line == "a>=1; (x == '1' or y == '2') and extra == \"test\""
    assert wheel.extra_requirement("b", "test") == 'b; extra == "test"'
