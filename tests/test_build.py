# SPDX-License-Identifier: Apache-2.0
"""What setup.py builds: the emulated device (_C_emu, test code) only for development
builds (in-place, editable, or COMFY_KITCHEN_C_EMULATED=1), never for a wheel or a plain
install; and the object folders of incremental builds, one per configuration.  setup.py's
own build_ext command is finalized on a setuptools Distribution: nothing is compiled."""
import runpy
import sys
from pathlib import Path

import pytest
import setuptools

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def setup_kwargs():
    """setup.py's setup() arguments, with setup() itself not run."""
    captured = {}
    saved = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    try:
        namespace = runpy.run_path(str(ROOT / "setup.py"))
    finally:
        setuptools.setup = saved
    return captured, namespace


def built_extensions(setup_kwargs, monkeypatch, env=None, inplace=False, editable=False) -> list[str]:
    captured, _ = setup_kwargs
    monkeypatch.delenv("COMFY_KITCHEN_C_EMULATED", raising=False)
    if env is not None:
        monkeypatch.setenv("COMFY_KITCHEN_C_EMULATED", env)
    dist = setuptools.Distribution({"name": "comfy-kitchen-c", "ext_modules": list(captured["ext_modules"]),
                                    "cmdclass": captured["cmdclass"]})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace, cmd.editable_mode = inplace, editable
    cmd.ensure_finalized()
    return sorted(e.name.rsplit(".", 1)[1] for e in cmd.extensions)


@pytest.mark.skipif(sys.platform == "win32", reason="Windows builds have no emulated device yet")
@pytest.mark.parametrize("env,inplace,editable,expected", [
    (None, False, False, ["_C"]),            # a wheel, `pip install .`
    (None, True, False, ["_C", "_C_emu"]),   # setup.py build_ext --inplace
    (None, False, True, ["_C", "_C_emu"]),   # pip install -e . (the README's set-up)
    ("1", False, False, ["_C", "_C_emu"]),   # asked for (CI, a wheel for tests)
    ("0", True, True, ["_C"]),               # refused even for development
])
def test_the_emulated_device_is_built_for_development_only(setup_kwargs, monkeypatch, env, inplace, editable,
                                                           expected):
    assert built_extensions(setup_kwargs, monkeypatch, env, inplace, editable) == expected


def finalized_build_ext(setup_kwargs):
    """setup.py's build_ext command, finalized on a Distribution of its extensions."""
    captured, _ = setup_kwargs
    dist = setuptools.Distribution({"name": "comfy-kitchen-c", "ext_modules": list(captured["ext_modules"]),
                                    "cmdclass": captured["cmdclass"]})
    cmd = dist.get_command_obj("build_ext")
    cmd.ensure_finalized()
    return cmd


def test_a_configuration_change_builds_into_another_object_folder(setup_kwargs):
    """Objects built under one configuration (sanitizer, warnings as errors, macros) are never
    linked into another's extension: the folder is named after the configuration's hash."""
    cmd = finalized_build_ext(setup_kwargs)
    ext = cmd.extensions[0]
    cmd.c_flags, cmd.cxx_flags, cmd.sanitizer_link = ["-O3"], ["-O3"], []
    plain = cmd.configuration(ext)
    cmd.c_flags, cmd.sanitizer_link = ["-O3", "-fsanitize=address"], ["-fsanitize=address"]
    sanitized = cmd.configuration(ext)
    cmd.c_flags, cmd.sanitizer_link = ["-O3", "-Werror"], []
    werror = cmd.configuration(ext)
    ext.define_macros = ext.define_macros + [("CKC_EXTRA", "1")]
    macros = cmd.configuration(ext)
    assert len({plain, sanitized, werror, macros}) == 4


def test_switching_back_to_a_configuration_links_its_objects_again(setup_kwargs, tmp_path, monkeypatch):
    """A -> B -> A: A's objects are older than B's link, so file times alone said "up to date"
    and left B's extension in place (an ASan build after the race build kept the race build's
    _C_emu).  The link stamp names the configuration that linked the output last."""
    cmd = finalized_build_ext(setup_kwargs)
    ext = cmd.extensions[0]
    monkeypatch.setattr(type(cmd), "link_stamp", staticmethod(lambda e: tmp_path / f"{e.name}.linked"))
    output = str(tmp_path / "_C.so")
    cmd.build_temp = "objects-A"
    assert not cmd.linked_here(ext, output)  # never linked: link
    cmd.mark_linked(ext, output)
    assert cmd.linked_here(ext, output)
    cmd.build_temp = "objects-B"
    assert not cmd.linked_here(ext, output)  # A linked it: B links
    cmd.mark_linked(ext, output)
    cmd.build_temp = "objects-A"
    assert not cmd.linked_here(ext, output)  # B linked it last: A links again
    assert not cmd.linked_here(ext, str(tmp_path / "elsewhere.so"))


def test_an_inplace_build_copies_its_extension_over_a_newer_one(setup_kwargs, monkeypatch):
    """distutils copies build/lib's extension into the package only when it is newer; the
    package's may be a newer build of another configuration (`pip install -e .` under a
    sanitizer links there directly), so the in-place copy is forced."""
    from setuptools.command.build_ext import build_ext

    cmd = finalized_build_ext(setup_kwargs)
    seen = []
    monkeypatch.setattr(build_ext, "copy_extensions_to_source", lambda self: seen.append(self.force))
    cmd.force = False
    cmd.copy_extensions_to_source()
    assert seen == [True] and cmd.force is False
