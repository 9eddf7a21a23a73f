# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's start-up listing of comfy_kitchen backends names "c" (comfyui_listing.py), and
install-comfyui / uninstall-comfyui are idempotent and reversible, against the stand-in
ComfyUI (its comfy/quant_ops.py lists the backends as ComfyUI does, before custom nodes load)."""
import hashlib
import os

import pytest

from comfy_kitchen_c import install
from test_comfyui_node import cli, comfy_dir, installed, start  # noqa: F401 - fixtures

pytest.importorskip("comfy_kitchen")
FOUND = "Found comfy_kitchen backend "


def found_lines(out):
    return [line for line in out.splitlines() if FOUND in line]


def test_comfyuis_own_listing_has_c_and_the_node_says_where(installed):
    report, ours, out = start(installed)
    lines = found_lines(out)
    names = [line.split(FOUND, 1)[1].split(":", 1)[0] for line in lines]
    assert "c" in names and "eager" in names, out
    c_line = next(line for line in lines if line.split(FOUND, 1)[1].startswith("c:"))
    assert "'available': True" in c_line and "'int8_linear'" in c_line, c_line
    # ComfyUI's list comes before custom nodes load: "c" is in it only because it registered early
    assert out.index(c_line) < out.index(ours[0])
    assert len(ours) == 1 and "in ComfyUI's listing above" in ours[0], ours
    assert '"c" first in priority (c, ' in ours[0] and report["priority"][0] == "c"
    assert report["torch_imported_by_prestartup"] is False, out


def test_without_prestartup_the_node_logs_the_listing_line_itself(installed):
    report, ours, out = start(installed, "--disable-all-custom-nodes")
    lines = found_lines(out)
    comfy = [line for line in lines if "logged by the comfy_kitchen_c" not in line]
    assert not any(line.split(FOUND, 1)[1].startswith("c:") for line in comfy), out
    node = [line for line in lines if "logged by the comfy_kitchen_c" in line]
    assert len(node) == 1 and node[0].startswith("INFO " + FOUND + "c: {'available': True"), out
    assert "'int8_linear'" in node[0]
    assert "listed by this node (not in ComfyUI's listing: prestartup scripts did not run)" in ours[-1]
    assert out.index(node[0]) < out.index(ours[-1])
    assert report["priority"][0] == "c"


def test_a_failing_early_import_leaves_comfy_kitchen_and_comfyui_running(installed):
    # A bad setting makes comfy_kitchen_c's import raise inside comfy_kitchen's: the hook keeps it
    report, ours, out = start(installed, COMFY_KITCHEN_C_ACTIVATE="maybe")
    assert any(line.split(FOUND, 1)[1].startswith("eager:") for line in found_lines(out)), out
    assert not any(line.split(FOUND, 1)[1].startswith("c:") for line in found_lines(out)), out
    assert report["priority"] is not None and report["priority"][0] != "c"
    assert any("comfy_kitchen_c not started: SettingError" in line for line in ours), ours


def tree(path):
    """{relative path: sha256 or "dir"} of everything under path."""
    result = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            result[os.path.relpath(os.path.join(root, d), path)] = "dir"
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                result[os.path.relpath(os.path.join(root, f), path)] = hashlib.sha256(fh.read()).hexdigest()
    return result


def test_install_twice_is_install_once_and_uninstall_restores(comfy_dir):  # noqa: F811
    other = comfy_dir / "custom_nodes" / "someone-elses-node"
    other.mkdir()
    (other / "__init__.py").write_text("NODE_CLASS_MAPPINGS = {}\n")
    before = tree(comfy_dir / "custom_nodes")
    install.install(str(comfy_dir), "test")
    once = tree(comfy_dir / "custom_nodes")
    install.install(str(comfy_dir), "test")
    assert tree(comfy_dir / "custom_nodes") == once
    node = comfy_dir / "custom_nodes" / install.NODE_DIR
    pycache = node / "__pycache__"  # what ComfyUI's run of the node leaves: compiled copies of its scripts
    pycache.mkdir()
    for name in ("__init__.cpython-311.pyc", "prestartup_script.cpython-311.pyc"):
        (pycache / name).write_bytes(b"compiled")
    removed, kept = install.uninstall(str(comfy_dir))
    assert kept == [] and str(node) in removed
    assert tree(comfy_dir / "custom_nodes") == before


def test_uninstall_when_not_installed_is_clean(comfy_dir):  # noqa: F811
    before = tree(comfy_dir)
    assert install.uninstall(str(comfy_dir)) == ([], [])
    result = cli("uninstall-comfyui", str(comfy_dir))
    assert result.returncode == 0, result.stderr
    assert "nothing to remove" in result.stdout and result.stderr == ""
    assert tree(comfy_dir) == before
