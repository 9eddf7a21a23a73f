# SPDX-License-Identifier: Apache-2.0
"""settings.py: every COMFY_KITCHEN_C_* variable parsed in one place, refused clearly when bad,
read from the environment or a TOML file (tomllib, or the fallback parser of Python 3.10)."""
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
    with pytest.raises(settings.SettingError) as info:
        loaded.value(P + name)
    message = str(info.value)
    assert message.startswith(f"{P}{name}={raw!r} (environment): ") and accepted in message


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
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        build = set(re.findall(r"\| `(COMFY_KITCHEN_C_[A-Z_]*[A-Z])` \(build\) \|", f.read()))
    assert build, "docs/settings.md's settings table lists the build-time variables"
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


@pytest.mark.parametrize("text, message", [('chekc = "op"\n', "unknown key 'chekc'"),
                                           ("check = \n", "cannot read the file")])
def test_bad_file_is_refused_with_its_name(tmp_path, text, message):
    file = tmp_path / "comfy_kitchen_c.toml"
    file.write_text(text)
    with pytest.raises(settings.SettingError, match=message) as info:
        settings.load({P + "CONFIG": str(file)}).check(settings.IMPORT_TIME)
    assert str(info.value).startswith(f"{P}CONFIG={str(file)!r}")


def test_export_to_c_writes_the_canonical_text():
    environ = {P + "HUGE_PAGES": "Off", P + "HANG_MS": " 700 "}
    settings.export_to_c(settings.load(environ), environ)
    assert environ[P + "HUGE_PAGES"] == "0" and environ[P + "HANG_MS"] == "700"


def test_bad_import_time_setting_refuses_the_import():
    result = run("import comfy_kitchen_c", COMFY_KITCHEN_C_CHECK="sometimes")
    assert result.returncode != 0
    assert "SettingError: COMFY_KITCHEN_C_CHECK='sometimes' (environment): expected one of launch, boundary, op" \
        in result.stderr


def test_bad_cpu_isa_is_refused_not_ignored():
    result = run("import comfy_kitchen_c", COMFY_KITCHEN_C_CPU_ISA="avx9000")
    assert result.returncode != 0 and "COMFY_KITCHEN_C_CPU_ISA='avx9000'" in result.stderr


def test_bad_linear_memory_setting_is_refused_where_used_not_at_import():
    result = run("""
import comfy_kitchen_c, torch
print("imported")
try:
    comfy_kitchen_c.ops.int8_linear(torch.randn(2, 64), torch.ones(8, 64, dtype=torch.int8), torch.ones(8))
except comfy_kitchen_c.SettingError as exc:
    print("refused:", exc)
""", COMFY_KITCHEN_C_LINEAR_MEMORY_MB="lots")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "imported", "refused: COMFY_KITCHEN_C_LINEAR_MEMORY_MB='lots' (environment): expected a positive number of MiB"]


def test_linear_memory_setting_from_the_environment():
    result = run("import comfy_kitchen_c; print(comfy_kitchen_c.linear_memory_limit())",
                 COMFY_KITCHEN_C_LINEAR_MEMORY_MB="1.5")
    assert result.stdout.strip() == str(int(1.5 * 2**20))


def test_setting_error_is_exported():
    assert comfy_kitchen_c.SettingError is settings.SettingError and issubclass(settings.SettingError, ValueError)


def test_the_readme_table_lists_every_setting():
    with open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8") as f:
        table = f.read()
    for name, setting in settings.SETTINGS.items():
        assert f"| `{name}` | {setting.accepted} | {setting.default_text} |" in table, name
