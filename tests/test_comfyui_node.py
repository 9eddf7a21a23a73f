# SPDX-License-Identifier: Apache-2.0
"""install-comfyui / uninstall-comfyui and the node they write, run in a fresh interpreter
against the stand-in ComfyUI (tests/comfyui_standin: ComfyUI's startup order, its switches,
MAX_PINNED_MEMORY at import, cast_to_gathered / read_tensor_file_slice_into)."""
import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from comfy_kitchen_c import comfyui, install

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STANDIN = os.path.join(ROOT, "tests", "comfyui_standin")
GIB = 1 << 30
pytest.importorskip("comfy_kitchen")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "comfy_kitchen_c", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def comfy_dir(tmp_path):
    target = tmp_path / "ComfyUI"
    shutil.copytree(STANDIN, target)
    (target / "custom_nodes").mkdir()
    return target


@pytest.fixture
def installed(comfy_dir):
    install.install(str(comfy_dir), "test")
    return comfy_dir


def start(comfy_dir, *argv, **env):
    """Runs the stand-in ComfyUI; returns (report, comfy_kitchen_c log lines, all output)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMFY_KITCHEN_C_")}
    environ.update(PYTHONPATH=ROOT, COMFY_KITCHEN_C_FLIGHT_DIR=str(comfy_dir / "flight"), **env)
    result = subprocess.run([sys.executable, "main.py", *argv], cwd=comfy_dir, env=environ, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    report = json.loads(next(line for line in out.splitlines() if line.startswith("STANDIN-REPORT "))[15:])
    ours = [line for line in out.splitlines() if "comfy_kitchen_c" in line and not line.startswith("STANDIN")]
    return report, ours, out + result.stderr


def test_install_writes_the_node_and_uninstall_removes_exactly_it(comfy_dir):
    result = cli("install-comfyui", str(comfy_dir))
    assert result.returncode == 0, result.stderr
    node = comfy_dir / "custom_nodes" / install.NODE_DIR
    assert sorted(os.listdir(node)) == sorted(["prestartup_script.py", "__init__.py", "comfy_kitchen_c.toml.example",
                                               install.MANIFEST])
    result = cli("uninstall-comfyui", str(comfy_dir))
    assert result.returncode == 0, result.stderr
    assert not node.exists()
    assert os.listdir(comfy_dir / "custom_nodes") == []


def test_uninstall_keeps_what_it_did_not_write_or_what_was_edited(installed):
    node = installed / "custom_nodes" / install.NODE_DIR
    (node / "comfy_kitchen_c.toml").write_text('check = "op"\n')
    with open(node / "__init__.py", "a") as f:
        f.write("# my edit\n")
    removed, kept = install.uninstall(str(installed))
    assert set(os.listdir(node)) == {"__init__.py", "comfy_kitchen_c.toml", install.MANIFEST}
    assert any("edited since install, kept" in line for line in kept)
    assert str(node / "prestartup_script.py") in removed
    (node / "__init__.py").unlink()  # the user drops the edited file: the rest goes, their file stays
    removed, kept = install.uninstall(str(installed))
    assert set(os.listdir(node)) == {"comfy_kitchen_c.toml"} and any("also holds" in line for line in kept)


def test_install_refuses_files_it_did_not_write_and_uninstall_refuses_without_manifest(comfy_dir):
    node = comfy_dir / "custom_nodes" / install.NODE_DIR
    node.mkdir()
    (node / "prestartup_script.py").write_text("print('someone else')\n")
    with pytest.raises(install.InstallError, match="was not written by install-comfyui"):
        install.install(str(comfy_dir), "test")
    assert (node / "prestartup_script.py").read_text() == "print('someone else')\n"
    with pytest.raises(install.InstallError, match="nothing is known to be ours"):
        install.uninstall(str(comfy_dir))
    assert (node / "prestartup_script.py").exists()


def test_install_needs_a_comfyui_folder(tmp_path):
    with pytest.raises(install.InstallError, match="does not look like ComfyUI"):
        install.install(str(tmp_path), "test")


def test_reinstall_replaces_its_own_files(installed):
    install.install(str(installed), "test")


@pytest.mark.parametrize("present, missing", [
    (("main.py",), "comfy/ and custom_nodes/"), (("main.py", "comfy"), "custom_nodes/"),
    (("comfy", "custom_nodes"), "main.py"), ((), "main.py, comfy/ and custom_nodes/")])
def test_install_names_what_the_folder_lacks(tmp_path, present, missing):
    """A folder with main.py but no comfy/ was said to have "no main.py and comfy/ folder"."""
    for name in present:
        (tmp_path / name).write_text("") if name.endswith(".py") else (tmp_path / name).mkdir()
    result = cli("install-comfyui", str(tmp_path))
    assert result.returncode == 1
    assert f"does not look like ComfyUI: it has no {missing} (the ComfyUI folder holds main.py, comfy/ and " \
           "custom_nodes/" in result.stderr, result.stderr


def test_a_second_install_says_unchanged(comfy_dir):
    first = cli("install-comfyui", str(comfy_dir))
    assert first.returncode == 0 and first.stdout.count("wrote ") == 4, first.stdout
    again = cli("install-comfyui", str(comfy_dir))
    assert again.returncode == 0, again.stderr
    assert "wrote " not in again.stdout and again.stdout.count("unchanged ") == 4, again.stdout
    assert "nothing changed" in again.stdout and "Restart ComfyUI" not in again.stdout


def test_uninstall_says_where_the_cache_folder_is(installed, tmp_path):
    """pip uninstall leaves the user's cache folder (flight records, CPU speed measurements): the
    uninstall command names it."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "LOCALAPPDATA": str(tmp_path / "cache")}
    (tmp_path / "cache" / "comfy_kitchen_c" / "flight").mkdir(parents=True)
    result = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "uninstall-comfyui", str(installed)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    folder = os.path.join(str(tmp_path / "cache"), "comfy_kitchen_c")
    assert f"comfy-kitchen-c's cache folder {folder} (flight) stays: neither this command nor pip uninstall" \
           in result.stdout, result.stdout


def test_the_node_on_a_cpu_only_comfyui_announces_no_gpu_machinery(installed):
    """ComfyUI with --cpu: no checking mode, flight record or staging hooks in the line (none is
    used), and no hooks installed."""
    report, ours, out = start(installed, "--cpu")
    assert report["priority"][0] == "c" and len(ours) == 1, out
    line = ours[0]
    assert "the CPU's kernels only (ComfyUI runs with --cpu): no GPU checking, flight record or staging hooks" in line
    for part in ("checking mode", "flight record in", "staging hooks on"):
        assert part not in line, (part, line)
    assert not report["read_hooked"]


def test_node_starts_with_one_log_line(installed):
    report, ours, out = start(installed)
    assert report["torch_imported_by_prestartup"] is False, out
    assert report["priority"][0] == "c"
    assert report["read_hooked"] and report["gather_hooked"]
    assert len(ours) == 1, out
    line = ours[0]
    assert line.startswith("INFO comfy_kitchen_c ")
    for part in ('"c" first in priority', "checking mode launch", "flight record in",
                 "comfy.memory_management.read_tensor_file_slice_into",
                 "comfy.model_management.cast_to_gathered", "BaseLayoutParams.copy_from",
                 "QuantizedTensor.copy_", "settings: FLIGHT_DIR="):
        assert part in line, (part, line)
    # nothing changed in ComfyUI without a RAM profile
    assert report["cache_ram"] == [] and report["reserve_vram"] is None


def test_activate_off_and_hooks_off(installed):
    report, ours, _ = start(installed, COMFY_KITCHEN_C_ACTIVATE="Off", COMFY_KITCHEN_C_HOOKS="no")
    assert report["priority"][0] != "c"
    assert not report["read_hooked"]
    assert "not activated" in ours[0] and "staging hooks off" in ours[0]
    assert "ACTIVATE=Off(env)" in ours[0] and "HOOKS=no(env)" in ours[0]


def test_bad_setting_is_refused_clearly_and_c_goes_on_with_the_default(installed):
    report, ours, _ = start(installed, COMFY_KITCHEN_C_ACTIVATE="maybe", COMFY_KITCHEN_C_HOKS="0")
    assert report["priority"][0] == "c"  # the node's default: "c" first
    assert any("COMFY_KITCHEN_C_ACTIVATE='maybe' (environment): expected one of 1/true/yes/on or "
               "0/false/no/off (any case); the default is used" in line for line in ours), ours
    assert "ACTIVATE=maybe(env, refused)" in ours[0]
    assert any("COMFY_KITCHEN_C_HOKS (environment) is not a setting of comfy-kitchen-c and is ignored; "
               "did you mean COMFY_KITCHEN_C_HOOKS?" in line for line in ours), ours


def test_ram_profile_through_comfyuis_switches(installed):
    report, ours, _ = start(installed, COMFY_KITCHEN_C_RAM_PROFILE="4", COMFY_KITCHEN_C_RESERVE_VRAM="1.5")
    active, inactive = comfyui.cache_ram(4 * GIB)
    assert report["cache_ram"] == [active, inactive] == [2.0, 4.0]
    assert report["prompt_worker_cache"] == [2.0, 4.0]
    assert report["reserve_vram"] == 1.5
    expected = comfyui.max_pinned_memory(4 * GIB, sys.platform == "win32", comfyui.swap_for_pins())
    assert report["max_pinned_memory"] == pytest.approx(expected)
    assert "--cache-ram 2 4" in ours[0] and "--reserve-vram 1.5" in ours[0]
    assert "MAX_PINNED_MEMORY" in ours[0] and "set directly: this ComfyUI has no switch for it" in ours[0]


def test_ram_profile_uses_the_pinned_memory_switch_where_comfyui_has_it(installed):
    report, ours, _ = start(installed, COMFY_KITCHEN_C_RAM_PROFILE="4", STANDIN_PINNED_SWITCH="1")
    expected = comfyui.max_pinned_memory(4 * GIB, sys.platform == "win32", comfyui.swap_for_pins())
    assert report["max_pinned_memory"] == pytest.approx(round(expected / GIB, 3) * GIB, rel=1e-3)
    assert "--pinned-memory" in ours[0] and "set directly" not in ours[0]


@pytest.mark.parametrize("argv, kept", [(["--cache-ram", "5"], "started with --cache-ram 5.0"),
                                        (["--cache-classic"], "started with --cache-classic"),
                                        (["--reserve-vram", "3"], "started with --reserve-vram 3.0")])
def test_the_users_own_switches_are_kept(installed, argv, kept):
    report, ours, _ = start(installed, *argv, COMFY_KITCHEN_C_RAM_PROFILE="4", COMFY_KITCHEN_C_RESERVE_VRAM="1")
    assert kept in ours[0]
    if argv[0] == "--cache-ram":
        assert report["cache_ram"] == [5.0]
    if argv[0] == "--cache-classic":
        assert report["cache_ram"] == [] and report["prompt_worker_cache"] is None
    if argv[0] == "--reserve-vram":
        assert report["reserve_vram"] == 3.0


def test_ram_profile_larger_than_the_machine_is_refused(installed):
    huge = (comfyui.total_ram() // GIB) * 4
    report, ours, _ = start(installed, COMFY_KITCHEN_C_RAM_PROFILE=str(huge))
    assert report["cache_ram"] == []
    assert any("larger than this machine's" in line for line in ours)


def test_settings_file_next_to_the_node_and_the_environment_wins(installed):
    node = installed / "custom_nodes" / install.NODE_DIR
    (node / "comfy_kitchen_c.toml").write_text('check = "boundary"\nram_profile = 4\nhooks = true\n')
    report, ours, _ = start(installed)
    assert "checking mode boundary" in ours[0] and "CHECK=boundary(comfy_kitchen_c.toml)" in ours[0]
    assert report["cache_ram"] == [2.0, 4.0]
    report, ours, _ = start(installed, COMFY_KITCHEN_C_CHECK="op")
    assert "checking mode op" in ours[0] and "CHECK=op(env)" in ours[0]
    (node / "comfy_kitchen_c.toml").write_text('chekc = "op"\n')
    _, ours, _ = start(installed)
    assert any("key 'chekc' (" in line and "is not a setting of comfy-kitchen-c and is ignored; did you mean check?"
               in line for line in ours), ours


# ---- "c" in ComfyUI's own listing of comfy_kitchen backends (comfyui_listing.py); install and
# uninstall idempotent and reversible -------------------------------------------------------------

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


def test_install_twice_is_install_once_and_uninstall_restores(comfy_dir):
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


def test_uninstall_when_not_installed_is_clean(comfy_dir, capsys):
    before = tree(comfy_dir)
    assert install.uninstall(str(comfy_dir)) == ([], [])
    assert install.main_uninstall(argparse.Namespace(comfyui=str(comfy_dir))) == 0  # the command's own code
    out, err = capsys.readouterr()
    assert out.startswith("nothing to remove: ") and "not installed" in out and err == ""
    assert tree(comfy_dir) == before


def test_the_import_hook_fires_once_and_leaves_the_module_as_its_loader_made_it(tmp_path, monkeypatch):
    from comfy_kitchen_c import comfyui_listing
    (tmp_path / "ckc_fake_kitchen.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(comfyui_listing, "KITCHEN", "ckc_fake_kitchen")
    calls = []
    monkeypatch.setattr(comfyui_listing, "_register", lambda result: calls.append(sys.modules["ckc_fake_kitchen"]))
    result = comfyui_listing.register_when_kitchen_loads()
    try:
        assert importlib.util.find_spec("ckc_fake_kitchen") is not None and calls == []  # a look, no import
        import ckc_fake_kitchen
        assert calls == [ckc_fake_kitchen] and ckc_fake_kitchen.VALUE == 42  # after the module's own code
        assert type(ckc_fake_kitchen.__loader__).__name__ == "SourceFileLoader"
        assert ckc_fake_kitchen.__spec__.loader is ckc_fake_kitchen.__loader__
        assert not any(isinstance(f, comfyui_listing._Finder) for f in sys.meta_path)
        assert result.error is None
    finally:
        comfyui_listing.remove_hook()
        sys.modules.pop("ckc_fake_kitchen", None)


def test_a_failing_registration_is_kept_not_raised(monkeypatch):
    from comfy_kitchen_c import comfyui_listing
    monkeypatch.setitem(sys.modules, "comfy_kitchen_c", None)  # its import now raises ImportError
    result = comfyui_listing.EarlyRegistration()
    comfyui_listing._register(result)
    assert result.registered is False and result.error.startswith("ModuleNotFoundError: import of comfy_kitchen_c")
