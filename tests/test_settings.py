# SPDX-License-Identifier: Apache-2.0
"""settings.py: every COMFY_KITCHEN_C_* variable parsed in one place, refused clearly when bad
(its default then applies), a misspelt name reported with the closest known one, read from the
environment or a TOML file (tomllib, or the fallback parser of Python 3.10)."""
import os
import subprocess
import sys

import pytest

import comfy_kitchen_c
from comfy_kitchen_c import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = settings.PREFIX


def run(code: str, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(P)}
    environ.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("raw, value", [(w, True) for w in ("1", "true", "TRUE", "Yes", "on", " On ")]
                         + [(w, False) for w in ("0", "false", "False", "NO", "off")])
def test_booleans_accept_the_usual_spellings(raw, value):
    assert settings.load({P + "ACTIVATE": raw}).value(P + "ACTIVATE") is value


@pytest.mark.parametrize("name, raw, accepted", [
    ("ACTIVATE", "maybe", "1/true/yes/on or 0/false/no/off"),
    ("ACTIVATE", "2", "1/true/yes/on or 0/false/no/off"),
    ("CHECK", "sometimes", "launch, boundary, op"),
    ("CPU_ISA", "sse", "baseline, avx2, avx512"),
    ("LINEAR_MEMORY_MB", "lots", "positive number of MiB"),
    ("LINEAR_MEMORY_MB", "-5", "positive number of MiB"),
    ("LINEAR_MEMORY_MB", "nan", "positive number of MiB"),
    ("HANG_MS", "1.5", "positive whole number of milliseconds"),
    ("RAM_PROFILE", "32GB", "positive number of GiB"),
    ("HUGE_PAGES", "disabled", "1/true/yes/on"),
])
def test_bad_values_name_the_variable_the_value_and_what_is_accepted(name, raw, accepted):
    loaded = settings.load({P + name: raw})
    message = str(loaded.error(P + name))
    assert message.startswith(f"{P}{name}={raw!r} (environment): ") and accepted in message
    assert loaded.value(P + name) == settings.SETTINGS[P + name].default  # refused: the default applies
    with pytest.raises(settings.SettingError, match=f"{P}{name}="):
        loaded.check()


def test_every_variable_in_the_tree_is_a_setting():
    """grep: every COMFY_KITCHEN_C_* the package or the C code reads is in SETTINGS (build-time
    variables, read by setup.py, are documented in docs/settings.md's table separately)."""
    import re
    found = set()
    for folder in ("comfy_kitchen_c", "csrc", "kernels"):
        for base, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if name.endswith((".py", ".c", ".h", ".cpp", ".cu")):
                    with open(os.path.join(base, name), encoding="utf-8") as f:
                        found |= set(re.findall(r"COMFY_KITCHEN_C_[A-Z_]*[A-Z]", f.read()))
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        build = set(re.findall(r"COMFY_KITCHEN_C_[A-Z_]*[A-Z]", f.read()))
    assert build == set(settings.BUILD_TIME), "settings.BUILD_TIME: the variables setup.py reads"
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        documented = set(re.findall(r"\| `(COMFY_KITCHEN_C_[A-Z_]*[A-Z])` \(build\) \|", f.read()))
    assert documented == build, "docs/settings.md's settings table lists the build-time variables"
    assert found - set(settings.SETTINGS) - build - {P + "CONFIG"} == set()


def test_toml_file_and_the_environment_wins(tmp_path):
    file = tmp_path / "comfy_kitchen_c.toml"
    file.write_text('# comment\ncheck = "boundary"\nlinear_memory_mb = 512\nhuge_pages = false\nhang_ms = 900\n')
    loaded = settings.load({P + "CONFIG": str(file), P + "HANG_MS": "100"})
    assert loaded.value(P + "CHECK") == "boundary" and loaded.values[P + "CHECK"].source == str(file)
    assert loaded.value(P + "LINEAR_MEMORY_MB") == 512.0
    assert loaded.value(P + "HUGE_PAGES") is False
    assert loaded.value(P + "HANG_MS") == 100 and loaded.values[P + "HANG_MS"].source == "environment"
    assert "CHECK=boundary(comfy_kitchen_c.toml)" in settings.describe(loaded)


def test_fallback_parser_reads_what_tomllib_reads(tmp_path):
    tomllib = pytest.importorskip("tomllib")
    text = ('check = "op"  # mode\nflight = true\nlinear_memory_mb = 1_024\nram_profile = 31.5\n'
            "flight_dir = '/tmp/x'\n\n# done\n")
    assert settings._fallback_toml(text) == tomllib.loads(text)
    with pytest.raises(ValueError, match="line 1: expected key = value"):
        settings._fallback_toml("[table]\n")
    with pytest.raises(ValueError, match="cannot read value"):
        settings._fallback_toml("check = [1, 2]\n")


def test_bad_file_is_refused_with_its_name(tmp_path):
    file = tmp_path / "comfy_kitchen_c.toml"
    file.write_text("check = \n")
    with pytest.raises(settings.SettingError, match="cannot read the file") as info:
        settings.load({P + "CONFIG": str(file)}).check(settings.IMPORT_TIME)
    assert str(info.value).startswith(f"{P}CONFIG={str(file)!r}")


def test_unknown_key_in_the_file_names_the_closest_and_the_rest_applies(tmp_path):
    file = tmp_path / "comfy_kitchen_c.toml"
    file.write_text('chekc = "op"\nhang_ms = 900\n')
    loaded = settings.load({P + "CONFIG": str(file)})
    assert loaded.errors() == [] and loaded.value(P + "HANG_MS") == 900
    assert loaded.problems() == [f"key 'chekc' ({file}) is not a setting of comfy-kitchen-c and is ignored; "
                                 "did you mean check?"]


@pytest.mark.parametrize("name, closest", [("CHEK", "CHECK"), ("FLIGT_DIR", "FLIGHT_DIR"),
                                           ("HANG_RAISE", "HANG_RAISE_MS"), ("CUDA_ARCH", "CUDA_ARCHS")])
def test_misspelt_name_is_reported_with_the_closest_known_one(name, closest):
    loaded = settings.load({P + name: "1", P + "CHECK": "op"})
    assert loaded.problems() == [f"{P}{name} (environment) is not a setting of comfy-kitchen-c and is ignored; "
                                 f"did you mean {P}{closest}?"]


def test_unrelated_name_and_build_time_names():
    loaded = settings.load({P + "XYZZY": "1", **{name: "1" for name in settings.BUILD_TIME}, "OTHER_CHEK": "1"})
    assert loaded.problems() == [f"{P}XYZZY (environment) is not a setting of comfy-kitchen-c and is ignored; "
                                 'no setting has a similar name (docs/settings.md lists them)']


@pytest.mark.parametrize("env, refused", [
    ({"HANG_MS": "2000", "HANG_RAISE_MS": "1800"}, {"HANG_MS", "HANG_RAISE_MS"}),
    ({"HANG_MS": "2000", "HANG_RAISE_MS": "2000"}, {"HANG_MS", "HANG_RAISE_MS"}),
    ({"HANG_MS": "6000"}, {"HANG_MS"}),             # above the default HANG_RAISE_MS, 5000
    ({"HANG_RAISE_MS": "1000"}, {"HANG_RAISE_MS"}),  # below the default HANG_MS, 1500
])
def test_hang_limits_out_of_order_are_refused_and_both_take_the_defaults(env, refused):
    loaded = settings.load({P + k: v for k, v in env.items()})
    assert {n[len(P):] for n in settings.SETTINGS if loaded.error(n)} == refused
    assert (loaded.value(P + "HANG_MS"), loaded.value(P + "HANG_RAISE_MS")) == (1500, 5000)
    if "HANG_RAISE_MS" in refused:
        assert str(loaded.error(P + "HANG_RAISE_MS")) == (
            f"{P}HANG_RAISE_MS={env['HANG_RAISE_MS']!r} (environment): expected a whole number of milliseconds "
            f"above {P}HANG_MS, which is {env.get('HANG_MS', '1500 (default)').replace('2000', '2000 (environment)')}")
    assert settings.load({P + "HANG_MS": "2000", P + "HANG_RAISE_MS": "2001"}).errors() == []


def test_refused_values_reach_c_as_their_defaults():
    values = settings.for_c(settings.load({P + "HANG_MS": "6000", P + "HUGE_PAGES": "off"}), {})
    assert values["hang_ms"] == 1500 and values["hang_raise_ms"] == 5000  # HANG_MS refused (above HANG_RAISE_MS)
    assert values["huge_pages"] is False and values["cuda_home"] is None


def test_c_takes_the_settings_in_one_call_and_the_environment_is_never_written(monkeypatch):
    from comfy_kitchen_c import _C

    before = dict(os.environ)
    monkeypatch.setenv(P + "HANG_MS", " 700 ")
    monkeypatch.setenv(P + "HUGE_PAGES", "Off")
    monkeypatch.setenv(P + "CPU_THREADS", "pool")
    try:
        settings.reload()
        in_force = _C.settings()
        assert (in_force["hang_ms"], in_force["huge_pages"], in_force["cpu_threads_pool"]) == (700, False, True)
        assert os.environ[P + "HANG_MS"] == " 700 " and os.environ[P + "HUGE_PAGES"] == "Off"  # as the user wrote
    finally:
        monkeypatch.undo()
        settings.reload()
    assert dict(os.environ) == before
    assert _C.settings() == _as_c_holds(settings.current())


def _as_c_holds(loaded) -> dict:
    """What _C.settings() reads back after apply(loaded): the struct's fields, '' for None."""
    return {k: ("" if v is None else v) for k, v in settings.for_c(loaded).items() if not k.startswith("emu_")}


def test_configure_refuses_what_it_does_not_know_and_changes_nothing():
    from comfy_kitchen_c import _C

    in_force = _C.settings()
    for bad, words in (({"hang_ms": 0}, "key 'hang_ms': expected a whole number of milliseconds"),
                       ({"huge_pages": 1}, "key 'huge_pages': expected True or False"),
                       ({"gemm_cache": "x" * 5000}, "key 'gemm_cache': too long"),
                       ({"hang_mss": 10}, "key 'hang_mss': not a setting of the C side")):
        with pytest.raises(_C.ArgumentError, match=f"configure: argument 'settings': {words}"):
            _C.configure({**settings.for_c(settings.current()), **bad})
        assert _C.settings() == in_force


def test_flight_folder_that_cannot_be_written_is_refused(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    folder = str(blocker / "flight")
    loaded = settings.load({P + "FLIGHT_DIR": folder})
    assert str(loaded.error(P + "FLIGHT_DIR")) == (
        f"{P}FLIGHT_DIR={folder!r} (environment): expected a folder this process can create and write "
        f"(the flight record is on), but {blocker} is not a folder")
    assert loaded.value(P + "FLIGHT_DIR") is None  # the default: the user's cache folder
    assert settings.load({P + "FLIGHT_DIR": folder, P + "FLIGHT": "0"}).errors() == []  # unused when off
    assert settings.load({P + "FLIGHT_DIR": str(tmp_path / "new" / "deeper")}).errors() == []


def test_bad_settings_are_warned_once_at_import_and_c_goes_on_with_the_defaults(tmp_path):
    """Several bad settings at once: each one SettingWarning at import, the defaults apply, the
    ops run, "c" is registered (a ComfyUI server with a typo in its settings still starts)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run("""
import os, warnings, torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import comfy_kitchen_c as c
for w in caught:
    print(w.category.__name__, "|", w.message)
from comfy_kitchen.registry import registry
print(c.check_mode(), c.linear_memory_limit(), c._C.cpu_isa() == c._C.cpu_isas()[0], "c" in registry.list_backends())
print(os.environ.get("COMFY_KITCHEN_C_HANG_MS"), c._C.settings()["hang_ms"], repr(c._C.settings()["cpu_isa"]))
q, s = c.ops.quantize_int8_rowwise(torch.randn(2, 64))
print(tuple(q.shape), q.dtype)
""", COMFY_KITCHEN_C_CHECK="sometimes", COMFY_KITCHEN_C_LINEAR_MEMORY_MB="lots", COMFY_KITCHEN_C_CPU_ISA="avx9000",
                 COMFY_KITCHEN_C_HANG_MS="9000", COMFY_KITCHEN_C_CHEK="op", COMFY_KITCHEN_C_FLIGHT_DIR=str(blocker / "x"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    warned = [line.split(" | ", 1)[1] for line in lines if line.startswith("SettingWarning | ")]
    assert [w.split("=", 1)[0].split(" ", 1)[0] for w in warned] == [
        P + "CHECK", P + "LINEAR_MEMORY_MB", P + "CPU_ISA", P + "FLIGHT_DIR", P + "HANG_MS", P + "CHEK"], warned
    assert warned[0] == (f"{P}CHECK='sometimes' (environment): expected one of launch, boundary, op; "
                         "the default is used (launch)")
    # the environment as the user wrote it; C on the defaults
    assert lines[-3:] == ["launch 268435456 True True", "9000 1500 ''", "(2, 64) torch.int8"]


def test_cpu_isa_this_cpu_lacks_is_refused_and_the_best_is_used(monkeypatch):
    loaded = settings.load({P + "CPU_ISA": "avx2"})
    with pytest.warns(settings.SettingWarning, match=f"{P}CPU_ISA='avx2' \\(environment\\): this CPU and build "
                                                    "run only baseline; baseline is used; the default is used"):
        settings.refuse(loaded, P + "CPU_ISA", "this CPU and build run only baseline; baseline is used")
    assert loaded.value(P + "CPU_ISA") is None


def test_linear_memory_setting_from_the_environment():
    result = run("import comfy_kitchen_c; print(comfy_kitchen_c.linear_memory_limit())",
                 COMFY_KITCHEN_C_LINEAR_MEMORY_MB="1.5")
    assert result.stdout.strip() == str(int(1.5 * 2**20))


def test_setting_error_is_exported():
    assert comfy_kitchen_c.SettingError is settings.SettingError and issubclass(settings.SettingError, ValueError)
    assert comfy_kitchen_c.SettingWarning is settings.SettingWarning
    assert issubclass(settings.SettingWarning, UserWarning)


def test_the_readme_table_lists_every_setting():
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        table = f.read()
    for name, setting in settings.SETTINGS.items():
        assert f"| `{name}` | {setting.accepted} | {setting.default_text} |" in table, name


def test_the_c_side_reads_no_environment():
    """C takes its settings from _C.configure alone (csrc/platform/settings.h): a getenv in csrc/
    would be a second way in, one the settings' checks and doctor never see."""
    import re
    from pathlib import Path

    csrc = Path(__file__).resolve().parents[1] / "csrc"
    found = [f"{p.relative_to(csrc)}:{n}" for p in sorted(csrc.rglob("*")) if p.suffix in (".c", ".h", ".cpp")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b(getenv|_wgetenv|GetEnvironmentVariable\w*|setenv|putenv|_putenv)\s*\(", line)]
    assert found == []
