# SPDX-License-Identifier: Apache-2.0
"""Every COMFY_KITCHEN_C_* setting, parsed in one place.

A setting comes from the environment or, when ``COMFY_KITCHEN_C_CONFIG`` names one (the
ComfyUI node sets it to the ``comfy_kitchen_c.toml`` next to it), from a TOML file; the
environment wins.  Keys in the file are the variable names without the prefix, in lower
case (``check = "boundary"``, ``linear_memory_mb = 512``).  ``SETTINGS`` is the
table docs/settings.md lists.

Nothing is silently ignored, and nothing makes the package unusable.  ``load()`` checks every
setting in one place: a value that does not parse, hang limits out of order and a flight folder
that cannot be written are refused (a ``SettingError`` naming the variable, the value, where it
came from and what it accepts, in ``Settings.errors()``), and the setting takes its default; a
name under our prefix that is no setting (``..._CHEK`` for ``..._CHECK``, in the environment or the
file) is reported with the closest known name.  ``import comfy_kitchen_c`` reports each of those
once as a ``SettingWarning`` (``report()``) and goes on with the defaults: a typo must not stop
a ComfyUI server from starting, nor ``doctor``, the command a user runs when something is wrong,
which lists them again.  ``warnings.simplefilter("error", SettingWarning)`` makes them errors.

Stdlib only, no relative imports: the node's prestartup script loads this file by path
before ComfyUI imports torch (ComfyUI warns when torch is imported that early).
"""
from __future__ import annotations

import difflib
import os
import re
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Callable

PREFIX = "COMFY_KITCHEN_C_"
CONFIG = PREFIX + "CONFIG"
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
CHECK_MODES = ("launch", "boundary", "op")
CPU_ISAS = ("baseline", "avx2", "avx512")  # csrc/cpu/kernels_*.c: the names _C.cpu_isas() can return
CPU_GEMMS = ("library", "ours")  # comfy_kitchen_c/linear.py: _library_gemm
CPU_THREADS = ("openmp", "pool")  # csrc/cpu/parallel.c: omp_lookup
CPU_SPEEDS = ("measure", "off")  # comfy_kitchen_c/cpu_speed.py


class SettingError(ValueError):
    """A COMFY_KITCHEN_C_* setting with a value it does not accept."""


class SettingWarning(UserWarning):
    """A refused setting (its default is used) or a COMFY_KITCHEN_C_* name that is no setting.
    Warnings, not logging: Python prints them on stderr unconfigured, ComfyUI's console and log
    show them (it captures stderr; the node also logs each in ComfyUI's format), pytest records
    them, and code can filter them by this category."""


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
    accepted: str       # what docs/settings.md's table says it accepts
    default_text: str
    effect: str         # what it does (docs/settings.md's table)
    scope: str          # "package" | "node" | "test"
    c_key: str | None = None  # the C side acts on it too, under this name: apply() hands it over


def _s(name, parse, default, accepted, default_text, effect, scope="package", c_key=None) -> Setting:
    return Setting(PREFIX + name, parse, default, accepted, default_text, effect, scope, c_key)


_BOOL = "1/true/yes/on or 0/false/no/off"
SETTINGS = {s.name: s for s in (
    _s("ACTIVATE", boolean, None, _BOOL, "off on import; on in the ComfyUI node",
       'put "c" first in comfy_kitchen\'s backend priority'),
    _s("CHECK", choice(CHECK_MODES), "launch", ", ".join(CHECK_MODES), "launch",
       "checking mode of ops and staged copies (docs/faults.md)"),
    _s("LINEAR_MEMORY_MB", positive_number("MiB"), 256.0, "a positive number (MiB)", "256",
       "bound on the extra memory of one int8_linear call"),
    _s("CPU_GEMM", choice(CPU_GEMMS), "library", ", ".join(CPU_GEMMS), "library",
       "GEMM of CPU int8_linear from 16 rows: torch._int_mm (oneDNN) or ours (docs/linear.md)"),
    _s("CPU_THREADS", choice(CPU_THREADS), "openmp", ", ".join(CPU_THREADS), "openmp",
       "who runs the CPU kernels' parallel loops: torch's OpenMP threads (where torch's libgomp is loaded: Linux) "
       "or our own pool (docs/cpu.md)", c_key="cpu_threads_pool"),
    _s("CPU_ISA", choice(CPU_ISAS), None, ", ".join(CPU_ISAS) + " (one this CPU runs)", "the best one",
       "instruction set of the CPU kernels", c_key="cpu_isa"),
    _s("CPU_SPEED", choice(CPU_SPEEDS), "measure", ", ".join(CPU_SPEEDS), "measure",
       "where eager is faster on this CPU, the registry gives it the call when it picks \"c\" by priority: "
       "measured at the first such call (off: \"c\" serves every call it can; docs/cpu.md)"),
    _s("CPU_SPEED_CACHE", path, None, "a file", "cpu_speed.json in the user's cache folder",
       "file keeping those measurements, per CPU model and versions (docs/cpu.md)"),
    _s("HUGE_PAGES", boolean, True, _BOOL, "on", "transparent-huge-page hint on large CPU outputs (Linux)",
       c_key="huge_pages"),
    _s("CUDA_DRIVER", path, None, "a library file", "the OS's (libcuda.so.1, nvcuda.dll)",
       "the CUDA driver library the GPU kernels are launched through", c_key="cuda_driver"),
    _s("CUBLASLT", path, None, "a library file", "the one torch loaded, else the search of docs/linear.md",
       "the cuBLASLt library the GPU GEMMs run on", c_key="cublaslt"),
    _s("GEMM_TUNING", boolean, True, _BOOL, "on",
       "time int8_linear's eligible cuBLASLt algorithms at a shape's first call and keep the fastest "
       "(docs/linear.md)", c_key="gemm_tuning"),
    _s("GEMM_CACHE", path, None, "a file", "none",
       "file keeping int8_linear's timed GEMM choices across restarts (docs/linear.md)", c_key="gemm_cache"),
    _s("FLIGHT", boolean, True, _BOOL, "on", "write the flight record file"),
    _s("FLIGHT_DIR", path, None, "a folder", "the user's cache folder", "where flight records go"),
    _s("HANG_MS", positive_number("milliseconds", integer=True), 1500, "a positive whole number (ms)", "1500",
       "no progress this long at a fence: the hang record is written", c_key="hang_ms"),
    _s("HANG_RAISE_MS", positive_number("milliseconds", integer=True), 5000, "a positive whole number (ms)", "5000",
       "no progress this long at a fence: HangSuspected is raised", c_key="hang_raise_ms"),
    _s("CONFIG", path, None, "a TOML file", "none (the node: its comfy_kitchen_c.toml, if present)",
       "file to read the other settings from (the environment wins)"),
    _s("HOOKS", boolean, True, _BOOL, "on", "staging hooks on ComfyUI's weight copies (docs/comfyui.md)",
       scope="node"),
    _s("RAM_PROFILE", positive_number("GiB"), None, "a positive number (GiB)", "none",
       "make ComfyUI use the memory settings it derives for this much RAM", scope="node"),
    _s("RESERVE_VRAM", positive_number("GiB"), None, "a positive number (GiB)", "none",
       "pass --reserve-vram to ComfyUI", scope="node"),
    _s("EMU_REFUSE_HOST_MAPPING", boolean, False, _BOOL, "off",
       "the emulated device refuses to map the flight record", scope="test", c_key="emu_refuse_host_mapping"),
    _s("EMU_SCHEDULE", schedule, "order", "order, shuffle, shuffle:<seed>", "order",
       "order in which the emulated device runs a block's threads (docs/testing.md)", scope="test",
       c_key="emu_schedule"),
)}
# Settings that take effect at `import comfy_kitchen_c`.
IMPORT_TIME = tuple(name for name, s in SETTINGS.items()
                    if s.scope == "package" and name != PREFIX + "LINEAR_MEMORY_MB") + (
    PREFIX + "EMU_REFUSE_HOST_MAPPING",)
# Read by setup.py when building (docs/settings.md's table, "(build)"): known names, never
# reported as misspellings when they are left set in the environment.
BUILD_TIME = tuple(PREFIX + n for n in ("WERROR", "NO_CUDA", "CUDA_ARCHS", "FATBIN_CACHE", "SANITIZE",
                                        "EMU_RACES", "EMULATED", "BUILD_JOBS", "PTXAS"))
KNOWN = tuple(SETTINGS) + BUILD_TIME


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

    def __init__(self, values: dict[str, Value], config_file: str | None, unknown: list[str] | None = None):
        self.values = values
        self.config_file = config_file
        self.unknown = list(unknown or ())  # "NAME (source) is not a setting ...; did you mean ...?"

    def value(self, name: str):
        """The value in force: the parsed one, or the default when it was refused."""
        return self.values[name].value

    def error(self, name: str) -> SettingError | None:
        """Why name's given value was refused (None: it was not)."""
        return self.values[name].error

    def errors(self, names=None) -> list[SettingError]:
        return [v.error for n, v in self.values.items() if v.error is not None and (names is None or n in names)]

    def check(self, names=None) -> None:
        """Raises one SettingError listing every refused setting among names (default: all)."""
        errors = self.errors(names)
        if errors:
            raise SettingError("\n".join(str(e) for e in errors)) from errors[0]

    def problems(self) -> list[str]:
        """One line per refused setting (with the default used instead) and per unknown name."""
        return [f"{v.error}; the default is used ({SETTINGS[n].default_text})"
                for n, v in self.values.items() if v.error is not None] + self.unknown

    def given(self) -> dict[str, Value]:
        """The settings that were set (not defaults)."""
        return {n: v for n, v in self.values.items() if v.source != "default"}


def _error(name: str, raw: str, source: str, why: str) -> SettingError:
    return SettingError(f"{name}={raw!r} ({source}): {why}")


def _unknown(shown: str, name: str, source: str, known) -> str:
    """The line for a name under our prefix that is no setting, with the closest known one
    (compared without the prefix, which every name shares)."""
    bare = {k[len(PREFIX):] if k.startswith(PREFIX) else k: k for k in known}
    close = difflib.get_close_matches(name[len(PREFIX):] if name.startswith(PREFIX) else name, bare, n=1, cutoff=0.6)
    hint = (f"did you mean {bare[close[0]]}?" if close
            else "no setting has a similar name (docs/settings.md lists them)")
    return f"{shown} ({source}) is not a setting of comfy-kitchen-c and is ignored; {hint}"


def _read_file(config: str, raws: dict, unknown: list) -> SettingError | None:
    """Puts the file's settings into raws; returns why the file itself is refused."""
    try:
        entries = read_toml(os.path.expanduser(config))
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        return _error(CONFIG, config, "environment", f"cannot read the file: {exc}")
    keys = [n[len(PREFIX):].lower() for n in SETTINGS if n != CONFIG]
    file_error = None
    for key, value in entries.items():
        name = PREFIX + str(key).upper()
        if name not in SETTINGS or name == CONFIG:
            unknown.append(_unknown(f"key {key!r}", str(key).lower(), config, keys))
            continue
        try:
            raws[name] = (_toml_text(value), config)
        except ValueError as exc:
            file_error = file_error or _error(name, repr(value), config, str(exc))
    return file_error


def _refuse(values: dict, name: str, why: str) -> None:
    """Refuses a value that parsed (it contradicts another, or cannot be used): its default applies."""
    v = values[name]
    values[name] = Value(SETTINGS[name].default, v.source, v.raw, _error(name, v.raw, v.source, why))


def _hang_order(values: dict) -> None:
    """HANG_RAISE_MS must be above HANG_MS (the hang record is written before the raise): when
    not, the given ones are refused and both take their defaults, which are in order."""
    hang, raise_ = values[PREFIX + "HANG_MS"], values[PREFIX + "HANG_RAISE_MS"]
    if hang.error is not None or raise_.error is not None or raise_.value > hang.value:
        return
    h_text = f"{hang.value} ({'default' if hang.source == 'default' else hang.source})"
    r_text = f"{raise_.value} ({'default' if raise_.source == 'default' else raise_.source})"
    if raise_.source != "default":
        _refuse(values, PREFIX + "HANG_RAISE_MS", f"expected a whole number of milliseconds above "
                f"{PREFIX}HANG_MS, which is {h_text}")
    if hang.source != "default":
        _refuse(values, PREFIX + "HANG_MS", f"expected a whole number of milliseconds below "
                f"{PREFIX}HANG_RAISE_MS, which is {r_text}")


def folder_problem(folder: str) -> str | None:
    """Why this process could not create or write files in folder (None: it could), leaving
    nothing behind: the nearest existing ancestor must be a folder in which this process can make
    a folder, tried (an empty one, removed at once).  Asking os.access is not enough: it answers
    yes to root for any folder, also where the file system refuses (/proc, a read-only mount)."""
    probe = os.path.abspath(folder)
    while not os.path.lexists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable by this process"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ckc-probe-", dir=probe))
    except OSError as exc:
        return f"a folder cannot be made in {probe} ({exc.strerror or exc})"
    return None


def _flight_folder(values: dict) -> None:
    """FLIGHT_DIR, when the flight record is on, must be a folder this process can write."""
    folder, flight = values[PREFIX + "FLIGHT_DIR"], values[PREFIX + "FLIGHT"]
    if folder.error is not None or folder.value is None or not flight.value:
        return
    problem = folder_problem(folder.value)
    if problem is not None:
        _refuse(values, PREFIX + "FLIGHT_DIR", f"expected a folder this process can create and write "
                f"(the flight record is on), but {problem}")


def load(environ=None) -> Settings:
    """Parses and checks every setting from environ (default os.environ) and the file it names."""
    environ = os.environ if environ is None else environ
    raws: dict[str, tuple[str, str]] = {}
    unknown: list[str] = []
    config = environ.get(CONFIG)
    file_error = _read_file(config, raws, unknown) if config else None
    for name in sorted(environ):
        if name.startswith(PREFIX) and name not in KNOWN:
            unknown.append(_unknown(name, name, "environment", KNOWN))
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
    _hang_order(values)
    _flight_folder(values)
    return Settings(values, config, unknown)


def refuse(loaded: Settings, name: str, why: str, stacklevel: int = 2) -> None:
    """Refuses a value that parsed but that this machine cannot use (found after load, e.g. a
    CPU_ISA this CPU lacks), like load() refuses: its default applies, one SettingWarning."""
    _refuse(loaded.values, name, why)
    warnings.warn(f"{loaded.error(name)}; the default is used ({SETTINGS[name].default_text})", SettingWarning,
                  stacklevel=stacklevel + 1)


def report(loaded: Settings, stacklevel: int = 2) -> list[str]:
    """Warns (SettingWarning) once per problem of loaded; returns the lines."""
    lines = loaded.problems()
    for line in lines:
        warnings.warn(line, SettingWarning, stacklevel=stacklevel + 1)
    return lines


_current: Settings | None = None


def current() -> Settings:
    """The settings of this process, loaded at the first call."""
    global _current
    if _current is None:
        _current = load()
    return _current


def reload() -> Settings:
    """Loads them again and puts them in force in C (tests, and the node after it set
    COMFY_KITCHEN_C_CONFIG)."""
    global _current
    _current = load()
    apply(_current)
    return _current


def value(name: str):
    return current().value(name)


def for_c(settings: Settings, environ=None) -> dict:
    """The C side's settings: each value in force (a refused one's default), under the C side's
    name, and the environment's CUDA_HOME (one of the folders cuBLASLt is searched in)."""
    environ = os.environ if environ is None else environ
    out = {}
    for name, setting in SETTINGS.items():
        if setting.c_key is not None:
            value = settings.value(name)
            out[setting.c_key] = value == "pool" if setting.c_key == "cpu_threads_pool" else value
    out["cuda_home"] = environ.get("CUDA_HOME") or None
    return out


def apply(settings: Settings | None = None, modules=None) -> None:
    """Puts settings (default: this process's) in force in C: one configure() call per extension
    module loaded (_C, and _C_emu where the tests load it).  Each module calls it for itself as it
    loads (csrc/module/configure.c); a change in a running process (reload()) comes this way too.
    C reads no environment itself, and the process's environment is never written, so ComfyUI's
    children see what the user set."""
    import sys

    settings = current() if settings is None else settings
    if modules is None:
        modules = [m for m in (sys.modules.get(f"{__package__}._C"), sys.modules.get(f"{__package__}._C_emu"))
                   if m is not None]
    values = for_c(settings)
    for module in modules:
        isa = values["cpu_isa"]
        # an ISA this CPU or build lacks is refused at import (__init__.py): the best one stays
        module.configure({**values, "cpu_isa": isa if isa in module.cpu_isas() else None})


def describe(settings: Settings) -> str:
    """"NAME=value (source), ..." for the settings that were given, for the node's log line."""
    given = settings.given()
    if not given:
        return "all defaults"
    parts = []
    for name, v in given.items():
        where = "env" if v.source == "environment" else os.path.basename(v.source)
        parts.append(f"{name[len(PREFIX):]}={v.raw}({where}{', refused' if v.error is not None else ''})")
    return ", ".join(parts)


if __name__ == "__main__":  # pragma: no cover - a quick look: python comfy_kitchen_c/settings.py
    for n, v in load().values.items():
        print(n, v, file=sys.stdout)
