# SPDX-License-Identifier: Apache-2.0
"""Every COMFY_KITCHEN_C_* setting, parsed in one place.

A setting comes from the environment or, when ``COMFY_KITCHEN_C_CONFIG`` names one (the
ComfyUI node sets it to the ``comfy_kitchen_c.toml`` next to it), from a TOML file; the
environment wins.  Keys in the file are the variable names without the prefix, in lower
case (``check = "boundary"``, ``linear_memory_mb = 512``).  ``SETTINGS`` is the table the
README lists.

A value that does not parse is never silently ignored: ``value(name)`` raises
``SettingError`` naming the variable, where it came from and what it accepts.  When that
happens is part of each setting: ``import comfy_kitchen_c`` checks the settings that take
effect at import (``IMPORT_TIME``); ``COMFY_KITCHEN_C_LINEAR_MEMORY_MB`` is checked where it
is used (the first ``int8_linear`` or ``linear_memory_limit()``), so a typo there cannot make
the package, and with it ``doctor``, unimportable; the node's settings are checked by the
node, which logs the error and leaves ComfyUI running.

Stdlib only, no relative imports: the node's prestartup script loads this file by path
before ComfyUI imports torch (ComfyUI warns when torch is imported that early).
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Callable

PREFIX = "COMFY_KITCHEN_C_"
CONFIG = PREFIX + "CONFIG"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
CHECK_MODES = ("launch", "boundary", "op")
CPU_ISAS = ("baseline", "avx2", "avx512")  # csrc/cpu/kernels_*.c: the names _C.cpu_isas() can return
CPU_GEMMS = ("library", "ours")  # comfy_kitchen_c/linear.py: _library_gemm


class SettingError(ValueError):
    """A COMFY_KITCHEN_C_* setting with a value it does not accept."""


# ---- value parsers: (raw text) -> value; raise ValueError with what is accepted ----------------

def boolean(raw: str) -> bool:
    text = raw.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ValueError(f"expected one of {'/'.join(TRUE)} or {'/'.join(FALSE)} (any case)")


def choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = raw.strip().lower()
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return text
    return parse


def positive_number(unit: str, integer: bool = False) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            number = int(raw.strip()) if integer else float(raw.strip())
        except ValueError:
            raise ValueError(f"expected a positive {'whole ' if integer else ''}number of {unit}") from None
        if not number > 0 or number != number or number == float("inf"):
            raise ValueError(f"expected a positive {'whole ' if integer else ''}number of {unit}")
        return number
    return parse


def schedule(raw: str) -> str:
    text = raw.strip()
    seed = text[len("shuffle:"):] if text.startswith("shuffle:") else "0"
    if text not in ("order", "shuffle") and not (text.startswith("shuffle:") and seed.isdigit()):
        raise ValueError("expected order, shuffle or shuffle:<seed> (a whole number)")
    return text


def path(raw: str) -> str:
    text = raw.strip()
    if not text:
        raise ValueError("expected a path")
    return os.path.expanduser(text)


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], object]
    default: object
    accepted: str       # what the README table says it accepts
    default_text: str
    effect: str         # what it does (README table)
    scope: str          # "package" | "node" | "test"
    read_by_c: bool = False  # the C side reads it from the environment (kept canonical there)


def _s(name, parse, default, accepted, default_text, effect, scope="package", read_by_c=False) -> Setting:
    return Setting(PREFIX + name, parse, default, accepted, default_text, effect, scope, read_by_c)


_BOOL = "1/true/yes/on or 0/false/no/off"
SETTINGS = {s.name: s for s in (
    _s("ACTIVATE", boolean, None, _BOOL, "off on import; on in the ComfyUI node",
       'put "c" first in comfy_kitchen\'s backend priority'),
    _s("CHECK", choice(CHECK_MODES), "launch", ", ".join(CHECK_MODES), "launch",
       "checking mode of ops and staged copies (README \"Faults\")"),
    _s("LINEAR_MEMORY_MB", positive_number("MiB"), 256.0, "a positive number (MiB)", "256",
       "bound on the extra memory of one int8_linear call (checked at its first use)"),
    _s("CPU_GEMM", choice(CPU_GEMMS), "library", ", ".join(CPU_GEMMS), "library",
       "GEMM of CPU int8_linear from 16 rows: torch._int_mm (oneDNN) or ours (README \"The linear ops\")"),
    _s("CPU_ISA", choice(CPU_ISAS), None, ", ".join(CPU_ISAS) + " (one this CPU runs)", "the best one",
       "instruction set of the CPU kernels", read_by_c=True),
    _s("HUGE_PAGES", boolean, True, _BOOL, "on", "transparent-huge-page hint on large CPU outputs (Linux)",
       read_by_c=True),
    _s("CUDA_DRIVER", path, None, "a library file", "the OS's (libcuda.so.1, nvcuda.dll)",
       "the CUDA driver library the GPU kernels are launched through", read_by_c=True),
    _s("FLIGHT", boolean, True, _BOOL, "on", "write the flight record file"),
    _s("FLIGHT_DIR", path, None, "a folder", "the user's cache folder", "where flight records go"),
    _s("HANG_MS", positive_number("milliseconds", integer=True), 1500, "a positive whole number (ms)", "1500",
       "no progress this long at a fence: the hang record is written", read_by_c=True),
    _s("HANG_RAISE_MS", positive_number("milliseconds", integer=True), 5000, "a positive whole number (ms)", "5000",
       "no progress this long at a fence: HangSuspected is raised", read_by_c=True),
    _s("CONFIG", path, None, "a TOML file", "none (the node: its comfy_kitchen_c.toml, if present)",
       "file to read the other settings from (the environment wins)"),
    _s("HOOKS", boolean, True, _BOOL, "on", "staging hooks on ComfyUI's weight copies (README \"ComfyUI\")",
       scope="node"),
    _s("RAM_PROFILE", positive_number("GiB"), None, "a positive number (GiB)", "none",
       "make ComfyUI use the memory settings it derives for this much RAM", scope="node"),
    _s("RESERVE_VRAM", positive_number("GiB"), None, "a positive number (GiB)", "none",
       "pass --reserve-vram to ComfyUI", scope="node"),
    _s("EMU_REFUSE_HOST_MAPPING", boolean, False, _BOOL, "off",
       "the emulated device refuses to map the flight record", scope="test", read_by_c=True),
    _s("EMU_SCHEDULE", schedule, "order", "order, shuffle, shuffle:<seed>", "order",
       "order in which the emulated device runs a block's threads (README \"Reliability\")", scope="test",
       read_by_c=True),
)}
# Checked by `import comfy_kitchen_c` (they take effect there); LINEAR_MEMORY_MB where used.
IMPORT_TIME = tuple(name for name, s in SETTINGS.items()
                    if s.scope == "package" and name != PREFIX + "LINEAR_MEMORY_MB") + (
    PREFIX + "EMU_REFUSE_HOST_MAPPING",)


# ---- the TOML file -----------------------------------------------------------------------------

_BARE = re.compile(r"^([A-Za-z0-9_]+)\s*=\s*(.*)$")


def _fallback_toml(text: str) -> dict:
    """The subset of TOML this file uses, for Python 3.10 without tomli: ``key = value`` lines
    with a string, a number or a boolean, comments and blank lines."""
    result = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _BARE.match(stripped)
        if not match:
            raise ValueError(f"line {number}: expected key = value (tables and arrays need Python 3.11+ or tomli)")
        key, rest = match.groups()
        if rest.startswith(('"', "'")):
            quote = rest[0]
            end = rest.find(quote, 1)
            tail = rest[end + 1:].strip() if end > 0 else None
            if tail is None or (tail and not tail.startswith("#")):
                raise ValueError(f"line {number}: expected one quoted string")
            result[key] = rest[1:end]
            continue
        token = rest.split("#", 1)[0].strip()
        if token in ("true", "false"):
            result[key] = token == "true"
        elif re.fullmatch(r"[+-]?\d+", token.replace("_", "")):
            result[key] = int(token.replace("_", ""))
        elif re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", token.replace("_", "")):
            result[key] = float(token.replace("_", ""))
        else:
            raise ValueError(f"line {number}: cannot read value {token!r} (a string, number or true/false)")
    return result


def read_toml(file: str) -> dict:
    """The file's keys and values: tomllib (3.11+), else tomli, else the fallback above."""
    with open(file, "rb") as f:
        data = f.read()
    try:
        import tomllib as parser
    except ImportError:
        try:
            import tomli as parser
        except ImportError:
            parser = None
    if parser is None:
        return _fallback_toml(data.decode("utf-8"))
    return parser.loads(data.decode("utf-8"))


def _toml_text(value) -> str:
    """A TOML value as the text an environment variable would hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ValueError(f"expected a string, number or boolean, got {type(value).__name__}")


# ---- loading -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Value:
    value: object
    source: str              # "environment", "<file>", "default"
    raw: str | None
    error: SettingError | None


class Settings:
    """The settings as loaded from one environment (and file)."""

    def __init__(self, values: dict[str, Value], config_file: str | None):
        self.values = values
        self.config_file = config_file

    def value(self, name: str):
        """The parsed value; raises SettingError when it did not parse."""
        v = self.values[name]
        if v.error is not None:
            raise v.error
        return v.value

    def errors(self, names=None) -> list[SettingError]:
        return [v.error for n, v in self.values.items() if v.error is not None and (names is None or n in names)]

    def check(self, names) -> None:
        """Raises one SettingError listing every bad setting among names."""
        errors = self.errors(names)
        if errors:
            raise SettingError("\n".join(str(e) for e in errors)) from errors[0]

    def given(self) -> dict[str, Value]:
        """The settings that were set (not defaults)."""
        return {n: v for n, v in self.values.items() if v.source != "default"}


def _error(name: str, raw: str, source: str, why: str) -> SettingError:
    return SettingError(f"{name}={raw!r} ({source}): {why}")


def load(environ=None) -> Settings:
    """Parses every setting from environ (default os.environ) and the file it names."""
    environ = os.environ if environ is None else environ
    raws: dict[str, tuple[str, str]] = {}
    file_error = None
    config = environ.get(CONFIG)
    if config:
        try:
            entries = read_toml(os.path.expanduser(config))
        except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
            file_error = _error(CONFIG, config, "environment", f"cannot read the file: {exc}")
            entries = {}
        for key, value in entries.items():
            name = PREFIX + str(key).upper()
            if name not in SETTINGS or name == CONFIG:
                file_error = file_error or _error(CONFIG, config, "environment",
                                                  f"unknown key {key!r} (known: "
                                                  f"{', '.join(n[len(PREFIX):].lower() for n in SETTINGS if n != CONFIG)})")
                continue
            try:
                raws[name] = (_toml_text(value), config)
            except ValueError as exc:
                file_error = file_error or _error(name, repr(value), config, str(exc))
    for name in SETTINGS:
        if environ.get(name, "") != "":
            raws[name] = (environ[name], "environment")
    values = {}
    for name, setting in SETTINGS.items():
        if name not in raws:
            values[name] = Value(setting.default, "default", None, None)
            continue
        raw, source = raws[name]
        try:
            values[name] = Value(setting.parse(raw), source, raw, None)
        except ValueError as exc:
            values[name] = Value(setting.default, source, raw, _error(name, raw, source, str(exc)))
    if file_error is not None:
        values[CONFIG] = Value(config, "environment", config, file_error)
    return Settings(values, config)


_current: Settings | None = None


def current() -> Settings:
    """The settings of this process, loaded at the first call."""
    global _current
    if _current is None:
        _current = load()
    return _current


def reload() -> Settings:
    """Loads them again (tests, and the node after it set COMFY_KITCHEN_C_CONFIG)."""
    global _current
    _current = load()
    return _current


def value(name: str):
    return current().value(name)


def export_to_c(settings: Settings, environ=None) -> None:
    """The C side reads some settings with getenv: give it the canonical text of those that
    parsed (a file's value, or "off" as "0"), so C and Python never disagree."""
    environ = os.environ if environ is None else environ
    for name, setting in SETTINGS.items():
        v = settings.values[name]
        if not setting.read_by_c or v.error is not None or v.source == "default":
            continue
        environ[name] = ("1" if v.value else "0") if isinstance(v.value, bool) else str(v.value)


def describe(settings: Settings) -> str:
    """"NAME=value (source), ..." for the settings that were given, for the node's log line."""
    given = settings.given()
    if not given:
        return "all defaults"
    parts = []
    for name, v in given.items():
        where = "env" if v.source == "environment" else os.path.basename(v.source)
        parts.append(f"{name[len(PREFIX):]}={v.raw}({where})")
    return ", ".join(parts)


if __name__ == "__main__":  # pragma: no cover - a quick look: python comfy_kitchen_c/settings.py
    for n, v in load().values.items():
        print(n, v, file=sys.stdout)
