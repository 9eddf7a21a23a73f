# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c doctor``: this machine, the backend of every op, and what the GPU did last.

Six parts, printed as text or (``--json``) as one JSON document:

1. The environment: OS (Windows build and the TDR note there), Python, torch and the CUDA
   version it was built with, comfy_kitchen and comfy-kitchen-c versions, the CUDA driver
   and runtime versions, the GPUs, the CPU instruction set of our kernels, the total RAM,
   and the settings ComfyUI derives from that RAM (``comfyui_settings()``), which decide
   how weights are staged to the GPU.
2. ComfyUI (doctor_comfyui.py): the values ComfyUI derives from this machine with formula and
   source, the switches in force where a running ComfyUI can be read, and the settings
   recommended for the field report's symptom.
3. The backend table: comfy_kitchen's backends in priority order, whether "c" is in the
   priority and where, and per op served by "c" which backend comfy_kitchen picks for a
   CPU tensor and for a CUDA tensor.
4. The analysis of a flight record: ``--record PATH`` (e.g. one copied from the computer where
   the GPU was lost), else the newest of process ``--pid PID``, else this process's own, else
   the newest in ``flight.default_dir()``; it says whose record it is (pid, host, and whether
   that process is this one, running or ended) and lists the folder's other records as other
   processes'.  Then the last op the GPU completed, the first it did not, faults and hangs with
   their parameters, a one-sentence verdict and the findings behind it, and the last records.
5. int8_linear's GEMM (doctor_gemm.py): the cuBLASLt algorithm chosen per shape class, from
   COMFY_KITCHEN_C_GEMM_CACHE's file and this process, and whether choosing by timing is on.
6. The verdict: one sentence, "Nothing doctor checks is wrong here." or what is wrong (a
   refused setting, a name under our prefix that is no setting, a part of the report doctor
   could not make, the record asked for that it cannot show), each then on its own line.

Doctor never raises: what it cannot read is a line in its report.  Nothing here needs a GPU,
CUDA or comfy_kitchen; what is missing is reported as "none".  Exit status: 1 exactly when the
verdict names a problem, else 0 (also with no flight record, or one that records a fault: that
is the history of another run, told in its own verdict).

JSON document (``--json``).  Keys are stable; sizes in bytes, times in Unix seconds::

    {
      "doctor_version": 4,
      "environment": {
        "os": {"system", "release", "version", "machine": str,
               "windows_build": int | null, "note": str | null},       # note: the Windows TDR note
        "python": {"version", "implementation", "executable": str},
        "torch": {"version": str, "cuda": str | null},                 # cuda: torch.version.cuda
        "comfy_kitchen": {"version": str | null},                      # null: not installed
        "comfy_kitchen_c": {"version": str, "path": str},
        "cuda": {"driver": str | null,                                 # null: no driver / no CUDA build
                 "nvidia_driver": str | null,                          # "610.47", from NVML
                 "runtime_torch": str | null, "runtime_extension": str | null,
                 "extension_has_cuda": bool, "error": str | null,           # error: the driver query failed
                 "driver_problem": str | null},                       # why _C's kernels cannot run (no driver,
                                                                      # one too old, no GPU); null: they can
        "gpus": [{"index": int, "name": str, "compute_capability": "9.0",
                  "total_memory": int, "multiprocessors": int}],
        "gpu_error": str | null,                                       # why GPUs could not be listed
        "cpu_isa": {"in_use": str, "available": [str]},
        "ram": {"total": int | null, "swap": int | null, "source": str},
        "variables": {name: value},                                    # those of VARIABLES that are set
        "settings": {name: {"value", "source": str, "error": str | null}},  # every COMFY_KITCHEN_C_* (settings.py):
                                                                       # the value in force; error: the given one refused
        "unknown_settings": [str]                                      # COMFY_KITCHEN_C_* names that are no setting
      },
      "comfyui_settings": null | {                                     # null: total RAM unknown
        "total_ram_gib", "cache_ram_gib", "cache_ram_inactive_gib", "max_pinned_memory_gib": float,
        "windows": bool,
        "formulas": {"cache_ram", "cache_ram_inactive", "max_pinned_memory": str},
        "sources": {...}, "notes": {"cache_ram", "cache_ram_inactive", "max_pinned_memory": str}
      },
      "comfyui": {
        "flags": {"source": str, "flags": {dest: value} | null, "error": str | null},  # switches given
        "memory": null | {"ram_gib", "swap_gib": float, "windows": bool,
                          "values": {"cache_ram" | "cache_ram_inactive" | "max_pinned_memory" |
                                     "extra_reserved_vram": {"derived_gib": float, "formula", "source",
                                                             "in_force": str}}}
      },
      "recommendations": [str],                                        # doctor_comfyui.recommendations
      "backends": {
        "installed": bool, "error": str | null,                        # comfy_kitchen importable?
        "priority": [str],                                             # registry order, then the rest
        "in_priority": [str],                                          # the registry's priority list
        "c_registered": bool, "c_active": bool,                        # active: first enabled in priority
        "backends": [{"name": str, "in_priority": bool, "available": bool, "disabled": bool,
                      "unavailable_reason": str | null, "ops": int}],
        "ops": [{"op": str, "cpu": str | null, "cuda": str | null}]    # null: no backend serves it
      },
      "flight": {
        "status": "ok" | "none" | "unavailable" | "error",
        "directory": str | null, "path": str | null, "message": str,  # message: whose record it is
        "owner": null | {"pid": int, "host": str,
                         "state": "this process" | "running" | "ended" | "on another computer (HOST)"},
        "summary": str | null,                                         # the record's verdict, one sentence
        "verdict": [str],                                              # the findings, one sentence each
        "others": [{"path": str, "pid": int | null, "started_unix": float | null, "owner": str}],
        "record": null | <flight.load(path), unchanged: see flight.py; records have "device_kind":
                          "cuda" | "emulated">
      },
      "gemm": null | {"tuning": bool, "cache_file": str | null,        # doctor_gemm.report
               "cache": [<choice>], "cache_error": str | null, "process": [<choice>]},
               # <choice>: {"device", "m_bucket", "n", "k", "index", "candidates": int, "us": float,
               #            "source": "heuristic" | "timing" | "cache file"}; cache entries also
               #            "gpu": str, "driver", "library": int
      "cpu": null | {"features": {...}, "mode": str, "file": str, "exists": bool,   # doctor_cpu.report: the CPU,
             "environment": str, "rules": [{...}], "other_environments": int,      # the speed rules measured on
             "cache_folder": {"folder": str, "exists": bool, "holds": [str]}},     # it, the cache folder
      "problems": [{"what": str, "detail": str}],                       # what is wrong; exit status 1 if any
      "verdict": str,                                                  # one sentence (overall_verdict)
      "pinned_memory": {...}                                           # doctor_memory.pinned_memory (or "error")
    }
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import textwrap
from typing import TextIO

import torch

from . import _C, comfyui, doctor_comfyui, doctor_cpu, doctor_gemm, doctor_memory, settings

HELP = "report the environment, the backend of each op, and the newest flight record"

DOCTOR_VERSION = 4  # 2: "comfyui", "recommendations", environment.settings, records' device_kind; 3: "problems",
# "verdict", environment.unknown_settings, flight "owner", "summary", "others"; 4: "gemm"
GIB = 1 << 30
LAST_RECORDS = 10  # rows of the flight-record table by default

# Environment variables that change how work reaches the GPU or how faults are reported: ours
# (settings.SETTINGS) and the diagnostic switches of docs/field-guide.md; the report lists those set.
VARIABLES = tuple(settings.SETTINGS) + ("COMFY_KITCHEN_DISABLE_CUTLASS", "CUDA_LAUNCH_BLOCKING",
                                        "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF")

# Windows' display driver model resets a GPU whose work does not finish within TdrDelay.
WDDM_NOTE = ("Windows display driver model (WDDM): a GPU that does not finish a piece of work within "
             "TdrDelay (default 2 s) is reset (TDR, 'GPU is lost'); the flight record's watchdog writes "
             "its hang record at 1500 ms, before that.")


# ---- RAM and the ComfyUI settings it implies --------------------------------------------------

def comfyui_settings(total_ram: int, windows: bool, swap: int = 0) -> dict:
    """The ComfyUI settings that scale with total RAM (bytes): comfyui.py has the formulas and
    where in ComfyUI each one is (main.py prompt_worker; comfy/model_management.py).  swap: the
    disk swap ComfyUI counts for pins (comfyui.swap_for_pins(); 0 on Windows)."""
    ram_gib = total_ram / GIB
    active, inactive = comfyui.cache_ram(total_ram)
    return {
        "total_ram_gib": ram_gib,
        "cache_ram_gib": active,
        "cache_ram_inactive_gib": inactive,
        "max_pinned_memory_gib": comfyui.max_pinned_memory(total_ram, windows, swap) / GIB,
        "windows": windows,
        "formulas": {"cache_ram": comfyui.FORMULAS["cache_ram"],
                     "cache_ram_inactive": comfyui.FORMULAS["cache_ram_inactive"],
                     "max_pinned_memory": comfyui.FORMULAS["max_pinned_memory_windows" if windows
                                                           else "max_pinned_memory"]},
        "sources": {k: comfyui.SOURCES[k] for k in ("cache_ram", "cache_ram_inactive", "max_pinned_memory")},
        "notes": {
            "cache_ram": ("RAM kept available for new pins: each pin first evicts cached node outputs "
                          "until this much is free, and the pin budget keeps max(cache_ram/2, 2 GiB) in reserve."),
            "cache_ram_inactive": ("after each prompt, cached outputs and models of older workflows are "
                                   "released toward this target."),
            "max_pinned_memory": ("cap on host memory ComfyUI registers (cudaHostRegister) to stage weights; "
                                  "past it, pins are unregistered in 2 GiB steps while copies may be in flight "
                                  "(churn whenever the model is larger). On Windows pins also fill the WDDM "
                                  "shared segment (about half the RAM)."),
        },
    }


def _meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (Linux)."""
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


_windows_memory = comfyui.windows_memory  # (physical RAM, page file beyond it): GlobalMemoryStatusEx


def total_ram() -> dict:
    """{"total", "swap", "source"}: the RAM psutil would report, without psutil."""
    try:
        if sys.platform == "win32":
            ram, pagefile = _windows_memory()
            return {"total": ram, "swap": max(0, pagefile), "source": "GlobalMemoryStatusEx"}
        if os.path.exists("/proc/meminfo"):
            info = _meminfo()
            return {"total": info["MemTotal"], "swap": info.get("SwapTotal", 0), "source": "/proc/meminfo"}
        if sys.platform == "darwin" or "bsd" in sys.platform:
            key = "hw.memsize" if sys.platform == "darwin" else "hw.physmem"
            out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, check=True, timeout=5)
            return {"total": int(out.stdout.strip()), "swap": None, "source": f"sysctl {key}"}
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return {"total": pages * page_size, "swap": None, "source": "sysconf"}
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
        return {"total": None, "swap": None, "source": f"unknown ({exc})"}


# ---- environment ------------------------------------------------------------------------------

def _cuda_version(encoded: int) -> str:
    """CUDA's 1000*major + 10*minor as "major.minor"."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _package_version(name: str, module: str) -> str | None:
    """The installed distribution's version, else the module's __version__, else None."""
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
    try:
        return getattr(__import__(module), "__version__", "unknown")
    except ImportError:
        return None


def _os_info() -> dict:
    info = {"system": platform.system(), "release": platform.release(), "version": platform.version(),
            "machine": platform.machine(), "windows_build": None, "note": None}
    if sys.platform == "win32":
        info["windows_build"] = sys.getwindowsversion().build
        info["note"] = WDDM_NOTE
    return info


def _cuda_info() -> dict:
    error = None
    try:
        versions = getattr(_C, "cuda_versions", lambda: None)()
    except RuntimeError as exc:  # a broken driver install is a finding, not a crash
        versions, error = None, str(exc)
    driver, runtime = versions if versions is not None else (0, 0)
    from .selftest_report import nvidia_driver
    return {"driver": _cuda_version(driver) if driver else None, "nvidia_driver": nvidia_driver(),
            "runtime_torch": torch.version.cuda,
            "runtime_extension": _cuda_version(runtime) if runtime else None,
            "extension_has_cuda": bool(_C.HAS_CUDA), "error": error,
            "driver_problem": _C.cuda_driver() if _C.HAS_CUDA and hasattr(_C, "cuda_driver") else None}


def kernel_service() -> list[dict]:
    """Which GPUs this build's kernels serve, and from which CUDA driver on, read from its fatbins
    (_C.kernel_images()): one entry per (SASS or PTX, oldest driver), with its architectures."""
    groups: dict[tuple[str, int], set[int]] = {}
    for _module, kind, arch, _version, _zstd, driver in (_C.kernel_images() if _C.HAS_CUDA else ()):
        groups.setdefault((kind, driver), set()).add(arch)
    return [{"kind": kind, "driver": _cuda_version(driver), "archs": [f"{a // 10}.{a % 10}" for a in sorted(archs)]}
            for (kind, driver), archs in sorted(groups.items(), key=lambda item: (item[0][0] != "sass", item[0][1]))]


def _service_text(service: list[dict]) -> str:
    parts = [f"SASS for {', '.join(s['archs'])} (and later minors of each) on CUDA {s['driver']}+ drivers"
             if s["kind"] == "sass" else
             f"PTX of {s['archs'][-1]} for newer GPUs on CUDA {s['driver']}+ drivers" for s in service]
    return "; ".join(parts) or "none (built without CUDA)"


def _gpus() -> tuple[list[dict], str | None]:
    """The GPUs torch sees, or why it sees none (after a lost GPU, CUDA itself may fail)."""
    try:
        if not torch.cuda.is_available():
            return [], None
        gpus = []
        for index in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(index)
            need = _C.kernels_driver(10 * p.major + p.minor) if _C.HAS_CUDA else 0
            gpus.append({"index": index, "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
                         "total_memory": int(p.total_memory), "multiprocessors": int(p.multi_processor_count),
                         "kernels_need_driver": _cuda_version(need) if need else None})
        return gpus, None
    except Exception as exc:  # noqa: BLE001 - a broken CUDA setup is a finding, not a crash
        return [], f"{type(exc).__name__}: {exc}"


def environment() -> dict:
    from . import __version__
    gpus, gpu_error = _gpus()
    return {
        "os": _os_info(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable},
        "torch": {"version": torch.__version__, "cuda": torch.version.cuda},
        "comfy_kitchen": {"version": _package_version("comfy-kitchen", "comfy_kitchen")},
        "comfy_kitchen_c": {"version": __version__, "path": os.path.dirname(os.path.abspath(__file__))},
        "cuda": _cuda_info(),
        "kernels": kernel_service(),
        "gpus": gpus,
        "gpu_error": gpu_error,
        "cpu_isa": {"in_use": _C.cpu_isa(), "available": list(_C.cpu_isas())},
        "ram": total_ram(),
        "variables": {name: os.environ[name] for name in VARIABLES if name in os.environ},
        "settings": _settings(),
        "unknown_settings": list(settings.current().unknown),
    }


def _settings() -> dict:
    """Every COMFY_KITCHEN_C_* setting: the value in force, where it came from, and why the value
    given was refused (its default is then in force), as loaded at import (settings.current())."""
    loaded = settings.current()
    return {name: {"value": v.value if isinstance(v.value, (bool, int, float, str, type(None))) else str(v.value),
                   "source": v.source, "error": None if v.error is None else str(v.error)}
            for name, v in loaded.values.items()}


# ---- backends ---------------------------------------------------------------------------------

def _tensor_devices(constraints, device_type: str) -> bool:
    """Whether the op's constraints admit tensors on device_type: a parameter is a tensor
    when its dtypes are torch dtypes or it names devices; the others are Python values."""
    for param in constraints.params.values():
        is_tensor = param.devices is not None or any(isinstance(d, torch.dtype) for d in (param.dtypes or ()))
        devices = param.devices if param.devices is not None else constraints.default_devices
        if is_tensor and "*" not in devices and device_type not in devices:
            return False
    return "*" in constraints.default_devices or device_type in constraints.default_devices


def pick_backend(registry, op: str, device_type: str, compute_capability, listing: dict | None = None) -> str | None:
    """The backend comfy_kitchen's registry picks for op on device_type: the first in
    priority that is available, implements op, admits the device and, on CUDA, the
    compute capability.  Rules that look at a call's values (shapes, group sizes) can
    still pass a particular call on to the next backend.  listing: registry.list_backends()."""
    listing = registry.list_backends() if listing is None else listing
    from .backend import priority

    for name in priority(registry):
        if not registry.is_available(name) or op not in listing.get(name, {}).get("capabilities", ()):
            continue
        constraints = registry.get_constraints(name, op)
        if constraints is None:
            return name
        if device_type == "cuda" and constraints.min_compute_capability is not None:
            if compute_capability is None or tuple(compute_capability) < constraints.min_compute_capability:
                continue
        if _tensor_devices(constraints, device_type):
            return name
    return None


def _current_compute_capability():
    try:
        return torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    except Exception:  # noqa: BLE001 - no usable GPU: no compute capability
        return None


def backend_table() -> dict:
    try:
        from comfy_kitchen.registry import registry
    except ImportError as exc:
        return {"installed": False, "error": f"comfy_kitchen is not installed ({exc})", "priority": [],
                "in_priority": [],
                "c_registered": False, "c_active": False, "backends": [], "ops": []}
    from .backend import BACKEND_NAME, capabilities, priority as read_priority

    listing = registry.list_backends()
    priority = read_priority(registry)
    order = priority + sorted(name for name in listing if name not in priority)
    backends = [{"name": name, "in_priority": name in priority,
                 "available": registry.is_available(name), "disabled": listing[name]["disabled"],
                 "unavailable_reason": listing[name]["unavailable_reason"],
                 "ops": len(listing[name]["capabilities"])} for name in order if name in listing]
    registered = listing.get(BACKEND_NAME, {}).get("available", False)  # registered, maybe disabled
    first = next((name for name in priority if registry.is_available(name)), None)
    ops = listing[BACKEND_NAME]["capabilities"] if registered else sorted(capabilities())
    cc = _current_compute_capability()
    return {
        "installed": True, "error": None, "priority": order, "in_priority": priority,
        "c_registered": registered, "c_active": first == BACKEND_NAME,
        "backends": backends,
        "ops": [{"op": op, "cpu": pick_backend(registry, op, "cpu", cc, listing),
                 "cuda": pick_backend(registry, op, "cuda", cc, listing)} for op in ops],
    }


def priority_sentence(table: dict) -> str:
    """Whether "c" is in comfy_kitchen's priority list and where, in plain words."""
    c = next((b for b in table["backends"] if b["name"] == "c"), None)
    priority = table["in_priority"]
    if c is None or not table["c_registered"]:
        return '"c" is not registered (import comfy_kitchen_c registers it), so comfy_kitchen never picks it.'
    if "c" not in priority:
        return ('"c" is registered but NOT in the priority list, so comfy_kitchen never picks it '
                "(comfy_kitchen_c.activate(), COMFY_KITCHEN_C_ACTIVATE=1 or the ComfyUI node put it first).")
    where = f'"c" is in the priority list at position {priority.index("c") + 1} of {len(priority)}'
    if c["disabled"]:
        return where + ", but disabled: comfy_kitchen skips it."
    if table["c_active"]:
        return where + ": the first available backend, so comfy_kitchen tries it first for every op it serves."
    ahead = [n for n in priority[:priority.index("c")]]
    return where + f", behind {', '.join(ahead)}: those are tried first."


# ---- flight record ----------------------------------------------------------------------------

def _when(unix: float | None) -> str:
    if unix is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(unix, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def describe(record: dict) -> str:
    """"op NAME" or, for a staged copy, what was copied from where."""
    if record["kind"] == "copy":
        memory = f" from {record['host_memory']} host memory" if record["host_memory"] else ""
        return f"{record['op']}: copy of {record['bytes']} bytes{memory}"
    return f"op {record['op']}"


def _completion(record: dict) -> str:
    if record["completed_unix"] is not None:
        return f"completed {_when(record['completed_unix'])}"
    # The stream writes completion in stream order; the reader may have no time for it.
    return "completed (time not recorded)" if record["state"] == "completed" else "not completed"


def _device(record: dict) -> str:
    """"cuda:N", or the emulated device's name (format-1 records are all from a GPU)."""
    if record.get("device_kind") == "emulated":
        return f"emulated:{record['device']} (the emulated device: GPU kernels run on the CPU, no GPU involved)"
    return f"cuda:{record['device']}"


def details(record: dict) -> list[str]:
    """Every parameter of one record, one per line."""
    graph = ""
    if record.get("capture"):
        graph = (f", captured into the CUDA graph of capture {record['capture']}"
                 + (f" (last completed in replay #{record['replay']})" if record["replay"] else " (never completed)"))
    lines = [f"seq {record['seq']} {describe(record)}: {record['state']}{graph}",
             f"  device {_device(record)}, stream {record['stream']:#x}",
             f"  queued {_when(record['queued_unix'])}, " + _completion(record)]
    if record["tensors"]:
        lines.append(f"  tensors: {record['tensors']}")
    if record["params"]:
        lines.append(f"  params: {record['params']}")
    if record["kind"] == "copy" or record["host_bytes"]:
        lines.append(f"  host {record['host_ptr']:#x} ({record['host_bytes']} bytes, "
                     f"{record['host_memory'] or 'unknown'}) -> device {record['device_ptr']:#x}")
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return lines


def _replay_verdict(replay: dict | None, noun: str = "the GPU") -> list[str]:
    """The latest replay of a captured CUDA graph: which of its ops completed in it (noun: who ran it)."""
    if replay is None:
        return []
    graph = (f"replay #{replay['number']} of the CUDA graph of capture {replay['capture']} (captured "
             f"{_when(replay['captured_unix'])}, {replay['ops']} recorded ops)")
    first, last = replay["first_incomplete"], replay["last_completed"]
    if first is None:
        return [f"The latest CUDA-graph replay, {graph}, completed all of its recorded ops."]
    done = (f"the last captured op it completed in that replay was seq {last['seq']} ({describe(last)})"
            if last is not None else "it completed none of that graph's recorded ops in that replay")
    return [f"{noun[0].upper() + noun[1:]} stopped during {graph}: it did not complete seq {first['seq']} ({describe(first)}) in that "
            f"replay; {done}."]


def _device_noun(data: dict) -> str:
    """Who ran the recorded work: "the GPU", "the emulated device" (tests, no GPU) or both."""
    kinds = {r.get("device_kind", "cuda") for r in data["records"] + data.get("captured", [])}
    return "the emulated device" if kinds == {"emulated"} else "the device" if "emulated" in kinds else "the GPU"


def _end(text: str) -> str:
    """text as the end of a sentence: one full stop (a full stop, or the ellipsis of a text the
    record's writer cut, flight._message, already ends it)."""
    return text if text.endswith((".", "!", "?", "\u2026")) else text + "."


def summary(data: dict) -> str:
    """The verdict on one record in one sentence: its worst finding, named once."""
    noun, first, last = _device_noun(data), data["first_incomplete"], data["last_completed"]
    replay = data.get("replay")
    faults, hangs = data["faults"], data["hangs"]
    if faults:
        more = f" (and {len(faults) - 1} more failed)" if len(faults) > 1 else ""
        text = f"{noun} failed at seq {faults[0]['seq']} ({describe(faults[0])}){more}"
    elif hangs:
        text = f"{noun} was suspected of a hang at seq {hangs[0]['seq']} ({describe(hangs[0])})"
    elif first is not None:
        text = (f"{noun} stopped at seq {first['seq']} ({describe(first)}) with no fault or hang recorded: "
                "the process ended or the device was lost while it was queued or running")
    elif replay is not None and replay["first_incomplete"] is not None:
        text = (f"{noun} stopped in replay #{replay['number']} of a CUDA graph at seq "
                f"{replay['first_incomplete']['seq']} ({describe(replay['first_incomplete'])})")
    elif last is not None:
        text = f"{noun} completed all recorded work, up to seq {last['seq']} ({describe(last)}), with no fault or hang"
    else:
        text = "the record holds no work, and no fault or hang"
    return text[0].upper() + text[1:] + "."


def verdict(data: dict) -> list[str]:
    """What the record says, in plain words (one sentence per finding)."""
    last, first = data["last_completed"], data["first_incomplete"]
    noun = _device_noun(data)
    sentences = _replay_verdict(data.get("replay"), noun)
    if first is not None:
        head = f"{noun[0].upper() + noun[1:]} stopped completing work at seq {first['seq']} ({describe(first)})"
        if last is None:
            sentences.append(head + "; it had completed none of the recorded work.")
        elif last["seq"] < first["seq"]:
            sentences.append(head + f"; it had completed seq {last['seq']} ({describe(last)}).")
        else:
            sentences.append(head + f"; work on other streams completed later, up to seq {last['seq']} "
                             f"({describe(last)}, stream {last['stream']:#x}).")
    for fault in data["faults"]:
        sentences.append(_end(f"Seq {fault['seq']} ({describe(fault)}) failed: {fault['error'] or 'no error text'}"))
    if first is None and last is not None:
        outside = " outside CUDA graphs" if data.get("captured") else ""
        other = " other" if data["faults"] else ""  # a failed record is not completed work
        sentences.append(f"{noun[0].upper() + noun[1:]} completed all{other} recorded work{outside}, up to seq {last['seq']} "
                         f"({describe(last)}).")
    elif first is None and not data.get("captured") and not data["faults"]:
        sentences.append("The record holds no completed or pending work.")
    for hang in data["hangs"]:
        written = f", state written {_when(hang['completed_unix'])}" if hang["completed_unix"] else ""
        sentences.append(_end(f"A hang record was written for seq {hang['seq']} ({describe(hang)}, queued "
                              f"{_when(hang['queued_unix'])}{written}): "
                              f"{hang['error'] or 'it was still running when the watchdog fired'}"))
    replay = data.get("replay")
    if replay is not None and replay["first_incomplete"] is not None:
        first = replay["first_incomplete"]
    if first is not None and not data["hangs"] and not data["faults"]:
        sentences.append("No fault or hang was recorded: the process ended (or the device was lost) "
                         f"while seq {first['seq']} was queued or running.")
    elif first is None and not data["hangs"] and not data["faults"]:
        sentences.append("No fault or hang was recorded.")
    kinds = {r.get("device_kind", "cuda") for r in data["records"]}
    if kinds == {"emulated"}:
        sentences.append("Every record was written by the emulated device (tests or a stress run on the CPU): "
                         "no GPU was involved.")
    elif "emulated" in kinds:
        sentences.append("Some records were written by the emulated device (device emulated:N), the others by a GPU.")
    return sentences


def _pick_record(flight, directory: str, record_path: str | None, pid: int | None, report: dict) -> str | None:
    """The record doctor was asked about: --record, else the newest of --pid, else this
    process's own, else the newest in the folder (said to be another process's)."""
    if record_path is not None:
        return record_path
    files = flight.record_files(directory)
    if pid is not None:
        mine = [f for f in files if flight.record_pid(f) == pid]
        if not mine:
            report.update(status="error", message=f"no flight record of process {pid} in {directory}")
        return mine[-1] if mine else None
    c = sys.modules.get("comfy_kitchen_c._C")
    own = c.flight_path() if c is not None and hasattr(c, "flight_path") else None
    # this process's own record, when it is in the folder doctor reads (a record of ours written
    # elsewhere, under another FLIGHT_DIR, is not what doctor was pointed at)
    if own is not None and os.path.exists(own) and directory is not None and \
            os.path.realpath(os.path.dirname(own)) == os.path.realpath(directory):
        return own
    if not files:
        report["message"] = f"no flight record found in {directory}"
        return None
    report["newest_of_another_process"] = True
    return files[-1]


def _others(flight, directory: str, shown: str | None) -> list[dict]:
    """The folder's other records: whose, and whether that process is still running."""
    others = []
    for path in flight.record_files(directory):
        if shown is not None and os.path.realpath(path) == os.path.realpath(shown):
            continue
        try:
            process = flight.header(path)
            others.append({"path": path, "pid": process["pid"], "started_unix": process["started_unix"],
                           "owner": flight.owner(process, path)})
        except (OSError, ValueError) as exc:
            others.append({"path": path, "pid": flight.record_pid(path), "started_unix": None,
                           "owner": f"unreadable ({exc})"})
    return others


def flight_report(record_path: str | None = None, pid: int | None = None) -> dict:
    """Loads and analyses the flight record doctor is asked about (_pick_record) and says whose
    it is; the folder's other records are listed as other processes'."""
    report = {"status": "none", "directory": None, "path": record_path, "message": "", "owner": None,
              "summary": None, "verdict": [], "others": [], "record": None}
    try:
        from . import flight
    except ImportError as exc:
        report.update(status="unavailable", message=f"flight records are not available in this build ({exc})")
        return report
    report["directory"] = flight.default_dir()
    path = _pick_record(flight, report["directory"], record_path, pid, report)
    another = report.pop("newest_of_another_process", False)
    report["others"] = _others(flight, report["directory"], path)
    if path is None:
        return report
    report["path"] = path
    try:
        data = flight.load(path)
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file is reported, not a crash
        report.update(status="error", message=f"cannot read flight record {path}: {exc}")
        return report
    p = data["process"]
    owner = flight.owner(p, path)
    whose = (f"of this process ({p['pid']})" if owner == "this process"
             else f"of process {p['pid']} on {p['host'] or 'an unnamed computer'} ({owner})")
    note = (" - not this doctor process's: the newest record in the folder (--pid PID or --record FILE "
            "picks another)") if another else ""
    report.update(status="ok", message=f"flight record {path}, {whose}{note}",
                  owner={"pid": p["pid"], "host": p["host"], "state": owner}, summary=summary(data),
                  verdict=verdict(data), record=data)
    return report


# ---- text output ------------------------------------------------------------------------------

def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def _table(rows: list[tuple], out: TextIO) -> None:
    widths = [max(len(str(row[k])) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)


def print_environment(env: dict, out: TextIO) -> None:
    print("== Environment ==", file=out)
    o, cuda = env["os"], env["cuda"]
    build = f", build {o['windows_build']}" if o["windows_build"] is not None else ""
    rows = [
        ("OS", f"{o['system']} {o['release']} ({o['version']}{build}), {o['machine']}"),
        ("Python", f"{env['python']['version']} ({env['python']['implementation']}) {env['python']['executable']}"),
        ("torch", f"{env['torch']['version']} (CUDA {env['torch']['cuda'] or 'none'})"),
        ("comfy_kitchen", env["comfy_kitchen"]["version"] or "not installed"),
        ("comfy-kitchen-c", f"{env['comfy_kitchen_c']['version']} ({env['comfy_kitchen_c']['path']})"),
        ("CUDA driver", (f"{cuda['driver']} (NVIDIA driver {cuda['nvidia_driver'] or 'version unknown'})"
                         if cuda["driver"] else "none" + (f" ({cuda['error']})" if cuda["error"] else ""))),
        ("CUDA runtime", f"torch {cuda['runtime_torch'] or 'none'}; comfy_kitchen_c._C kernels built by CUDA "
                         f"{cuda['runtime_extension'] or 'none'}"
                         f"{'' if cuda['extension_has_cuda'] else ' (built without CUDA)'}"),
    ]
    rows.append(("GPU kernels", _service_text(env.get("kernels", []))))
    if cuda.get("driver_problem"):
        rows.append(("GPU kernels", f"cannot run here: {cuda['driver_problem']}"))
    if env["gpus"]:
        rows += [(f"GPU {g['index']}", f"{g['name']}, compute capability {g['compute_capability']}, "
                                       f"{_gib(g['total_memory'])}, {g['multiprocessors']} SMs; "
                                       + (f"this build's kernels need a CUDA {g['kernels_need_driver']}+ driver"
                                          if g.get("kernels_need_driver") else "this build has no code for it"))
                 for g in env["gpus"]]
    else:
        rows.append(("GPUs", "none" + (f" ({env['gpu_error']})" if env["gpu_error"] else "")))
    rows += [("CPU ISA", f"{env['cpu_isa']['in_use']} (available: {', '.join(env['cpu_isa']['available'])})"),
             ("RAM", f"{_gib(env['ram']['total'])} ({env['ram']['source']})"),
             ("Variables", ", ".join(f"{k}={v}" for k, v in env["variables"].items()) or "none of interest set")]
    _table(rows, out)
    if o["note"]:
        print(f"  Note: {o['note']}", file=out)
    given = [f"{k[len(settings.PREFIX):]}={v['value']} ({v['source']})" for k, v in env["settings"].items()
             if v["source"] != "default" and not v["error"]]
    print("  Settings: " + (", ".join(given) or "all defaults"), file=out)
    for name, v in env["settings"].items():
        if v["error"]:
            print(f"  Refused: {v['error']}; the default is used ({settings.SETTINGS[name].default_text})", file=out)
    for line in env.get("unknown_settings", ()):
        print(f"  Unknown: {line}", file=out)


def print_comfyui(doc: dict, out: TextIO) -> None:
    """ComfyUI's memory settings on this machine, the switches in force, the recommendations."""
    derived, comfy = doc["comfyui_settings"], doc["comfyui"]
    print("\n== ComfyUI ==", file=out)
    flags = comfy["flags"]
    print(f"  switches: {flags['source']}" + (f" ({flags['error']})" if flags["error"] else ""), file=out)
    if flags["flags"]:
        print("    given: " + " ".join(f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
                                       for k, v in flags["flags"].items()), file=out)
    if derived is None or comfy["memory"] is None:
        print("  settings derived from RAM: unknown (total RAM unknown)", file=out)
    else:
        memory = comfy["memory"]
        print(f"  derived from {memory['ram_gib']:.1f} GiB of RAM"
              + ("" if memory["windows"] else f" and {memory['swap_gib']:.1f} GiB of disk swap") + ":", file=out)
        for key, name in (("cache_ram", "cache_ram"), ("cache_ram_inactive", "cache_ram_inactive"),
                          ("max_pinned_memory", "MAX_PINNED_MEMORY"), ("extra_reserved_vram", "EXTRA_RESERVED_VRAM")):
            row = memory["values"][key]
            print(f"  {name:<19} {row['derived_gib']:6.2f} GiB  = {row['formula']}", file=out)
            print(f"      in force: {row['in_force']}; source: {row['source']}", file=out)
            for line in textwrap.wrap(derived["notes"].get(key, ""), 88):
                print(f"      {line}", file=out)
    print("\n  Recommended for \"GPU is lost\" with int8 ConvRot under DynamicVRAM (docs/field-guide.md):",
          file=out)
    for line in doc["recommendations"]:
        wrapped = textwrap.wrap(line, 92)
        print(f"  - {wrapped[0]}", file=out)
        for more in wrapped[1:]:
            print(f"    {more}", file=out)


def print_backends(table: dict, out: TextIO) -> None:
    print("\n== Backends ==", file=out)
    if not table["installed"]:
        print(f"  {table['error']}: ops run only when called as comfy_kitchen_c.ops.<name>", file=out)
        return
    print(f"  priority: {', '.join(table['in_priority']) or 'empty'}", file=out)
    print(f"  {priority_sentence(table)}", file=out)
    rows = [("backend", "state", "ops")]
    for b in table["backends"]:
        status = ("disabled" if b["disabled"] else "available" if b["available"]
                  else f"unavailable: {b['unavailable_reason'] or 'not registered'}")
        rows.append((b["name"], status + ("" if b["in_priority"] else " (not in priority)"), b["ops"]))
    _table(rows, out)
    print("\n  Backend comfy_kitchen picks per op (by device and compute capability; a call's "
          "shapes can still pass it on):", file=out)
    _table([("op", "CPU tensor", "CUDA tensor")]
           + [(r["op"], r["cpu"] or "none", r["cuda"] or "none") for r in table["ops"]], out)


def _print_others(report: dict, out: TextIO) -> None:
    if report.get("others"):
        print(f"  Records of other processes in {report['directory']} (--pid PID shows one):", file=out)
        for o in report["others"]:
            print(f"    process {o['pid']} ({o['owner']}), started {_when(o['started_unix'])}: {o['path']}", file=out)


def print_flight(report: dict, last: int, out: TextIO) -> None:
    print("\n== Flight record ==", file=out)
    print(f"  {report['message']}", file=out)
    data = report["record"]
    if data is None:
        _print_others(report, out)
        return
    p = data["process"]
    print(f"  process {p['pid']} on {p['host']}, started {_when(p['started_unix'])}, Python {p['python']}, "
          f"comfy-kitchen-c {p['package_version']}; format {data['format_version']}, "
          f"{data['written']} records written, the ring keeps the last {data['capacity']}", file=out)
    _print_others(report, out)
    print(f"\n  Verdict: {report['summary']}", file=out)
    print("\n  Findings:", file=out)
    for sentence in report["verdict"]:
        print(f"    {sentence}", file=out)
    shown = set()
    replay = data.get("replay") or {}
    sections = []
    if replay:
        sections = [(f"Last completed in CUDA-graph replay #{replay['number']}", [replay["last_completed"]]),
                    (f"First not completed in CUDA-graph replay #{replay['number']}", [replay["first_incomplete"]])]
    for title, records in sections + [("Last completed", [data["last_completed"]]),
                                      ("First not completed", [data["first_incomplete"]]),
                                      ("Faults", data["faults"]), ("Hangs", data["hangs"])]:
        records = [r for r in records if r is not None]
        print(f"\n  {title}:" + ("" if records else " none"), file=out)
        for r in records:
            lines = details(r) if r["seq"] not in shown else [f"seq {r['seq']} {describe(r)}: see above"]
            shown.add(r["seq"])
            for line in lines:
                print(f"    {line}", file=out)
    records = data["records"][-last:] if last > 0 else []
    if records:
        start = p["started_unix"]
        print(f"\n  Last {len(records)} records (times in seconds after the process started):", file=out)
        rows = [("seq", "kind", "op", "state", "device", "stream", "queued", "took ms", "bytes", "tensors")]
        for r in records:
            ms = ((r["completed_unix"] - r["queued_unix"]) * 1e3 if r["completed_unix"] is not None else None)
            op = f"{r['op']} ({r['host_memory']})" if r["host_memory"] else r["op"]
            device = f"{'emulated' if r.get('device_kind') == 'emulated' else 'cuda'}:{r['device']}"
            rows.append((r["seq"], r["kind"], op, r["state"], device, f"{r['stream']:#x}",
                         f"{r['queued_unix'] - start:.3f}", "-" if ms is None else f"{ms:.3f}", r["bytes"],
                         r["tensors"]))
        _table(rows, out)


# ---- command line -----------------------------------------------------------------------------

def _part(name: str, make, problems: list, fallback=None):
    """One part of the report; one that cannot be made is a problem line, never a traceback."""
    try:
        return make()
    except Exception as exc:  # noqa: BLE001 - doctor never raises: what it cannot read is reported
        problems.append({"what": f"doctor could not make its {name} part",
                         "detail": f"doctor could not make its {name} part: {type(exc).__name__}: {exc}"})
        return fallback


def _setting_problems() -> list[dict]:
    """Every refused setting and unknown name of this process (settings.current(): as loaded at import)."""
    loaded = settings.current()
    refused = [name for name, v in loaded.values.items() if v.error is not None]
    problems = [{"what": f"{name} is refused (its default is used)", "detail": line}
                for name, line in zip(refused, loaded.problems())]  # problems(): the refused ones first
    problems += [{"what": line.split(" (", 1)[0] + " is not a setting", "detail": line} for line in loaded.unknown]
    return problems


def _flight_problems(flight: dict | None, record_path: str | None, pid: int | None) -> list[dict]:
    """The record doctor was asked about (--record, --pid) that it cannot show."""
    if flight is None or (record_path is None and pid is None) or flight["status"] == "ok":
        return []
    return [{"what": "the flight record asked for cannot be shown", "detail": flight["message"]}]


def _driver_problems(env: dict | None) -> list[dict]:
    """A driver COMFY_KITCHEN_C_CUDA_DRIVER names (and settings accepted) that the GPU kernels cannot use."""
    given = settings.current().values[settings.PREFIX + "CUDA_DRIVER"]
    problem = ((env or {}).get("cuda") or {}).get("driver_problem")
    if given.source == "default" or given.error is not None or not problem:
        return []
    return [{"what": f"the CUDA driver {settings.PREFIX}CUDA_DRIVER names cannot be used",
             "detail": f"{settings.PREFIX}CUDA_DRIVER={given.raw!r} ({given.source}): {problem}"}]


def overall_verdict(problems: list[dict], flight: dict | None = None) -> str:
    """The report's verdict in one sentence; exit status 1 exactly when it names a problem.  A
    flight record shown is another run's history, not a problem here: its own verdict ends the
    sentence, so that "nothing is wrong" never reads as if the record were clean."""
    if not problems:
        text = "Nothing doctor checks is wrong here"
    else:
        whats = [p["what"] for p in problems]
        listed = whats[0] if len(whats) == 1 else ", ".join(whats[:-1]) + " and " + whats[-1]
        text = f"{len(whats)} thing{'s are' if len(whats) > 1 else ' is'} wrong here: {listed}"
    said = (flight or {}).get("summary")
    if said:
        owner = (flight.get("owner") or {}).get("pid")
        whose = f" of process {owner}" if owner is not None else ""
        text += f"; the flight record{whose} says: {said[0].lower()}{said[1:].rstrip('.')}"
    return text + "."


def report(record_path: str | None = None, pid: int | None = None) -> dict:
    """The whole report as the JSON document described in the module docstring."""
    problems: list[dict] = []
    problems += _part("settings", _setting_problems, problems, [])
    env = _part("environment", environment, problems)
    ram = env["ram"]["total"] if env else None
    windows = sys.platform == "win32"
    swap = _part("swap", lambda: 0 if windows else comfyui.swap_for_pins(), problems, 0)
    derived = _part("ComfyUI settings", lambda: comfyui_settings(ram, windows, swap) if ram else None, problems)
    flags = _part("ComfyUI switches", doctor_comfyui.flags_in_force, problems,
                  {"source": "unknown", "flags": None, "error": "doctor could not read them"})
    vram = env["gpus"][0]["total_memory"] if env and env["gpus"] else None
    memory = _part("ComfyUI memory", lambda: doctor_comfyui.memory_settings(ram, windows, swap, vram, flags["flags"])
                   if ram else None, problems)
    backends = _part("backend table", backend_table, problems)
    recommendations = _part("recommendations", lambda: doctor_comfyui.recommendations(
        env, backends, ram, flags["flags"]) if env and backends else [], problems, [])  # none without their inputs
    flight = _part("flight record", lambda: flight_report(record_path, pid), problems)
    problems += _flight_problems(flight, record_path, pid)
    gemm = _part("GEMM algorithms", doctor_gemm.report, problems)
    cpu = _part("CPU", doctor_cpu.report, problems)
    problems += _part("CUDA driver", lambda: _driver_problems(env), problems, [])
    return {"doctor_version": DOCTOR_VERSION, "environment": env, "comfyui_settings": derived,
            "comfyui": {"flags": flags, "memory": memory}, "recommendations": recommendations,
            "backends": backends, "flight": flight, "gemm": gemm, "cpu": cpu, "problems": problems,
            "verdict": overall_verdict(problems, flight)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document (keys: see the module doc)")
    parser.add_argument("--record", metavar="PATH",
                        help="analyse this flight record (e.g. copied from another computer) "
                             "instead of this process's or the newest in the flight folder")
    parser.add_argument("--pid", type=int, metavar="PID",
                        help="analyse the newest flight record of process PID in the flight folder")
    parser.add_argument("--last", type=int, default=LAST_RECORDS, metavar="N",
                        help=f"flight records to list in the table (default {LAST_RECORDS})")


def _print_part(title: str, printer, data, out: TextIO, problems: list) -> None:
    if data is None:
        print(f"\n== {title} ==\n  not available: see the verdict below", file=out)
        return
    try:
        printer(data, out)
    except Exception as exc:  # noqa: BLE001 - doctor never raises
        problems.append({"what": f"doctor could not print its {title} part",
                         "detail": f"doctor could not print its {title} part: {type(exc).__name__}: {exc}"})
        print(f"  ({problems[-1]['detail']})", file=out)


def main(args: argparse.Namespace) -> int:
    """0 when doctor found nothing wrong; 1 when its verdict names a problem (a refused or unknown
    setting, a part it could not make, the record asked for by --record or --pid not shown)."""
    doc = report(args.record, getattr(args, "pid", None))
    doctor_memory.attach(doc)  # pinned host memory vs RAM (doctor_memory.py); never raises
    if args.json:
        json.dump(doc, sys.stdout, indent=2, default=str)
        print()
        return 1 if doc["problems"] else 0
    out = sys.stdout
    problems = doc["problems"]
    print("comfy-kitchen-c doctor\n", file=out)
    _print_part("Environment", print_environment, doc["environment"], out, problems)
    _print_part("ComfyUI", lambda d, o: print_comfyui(doc, o), doc["comfyui_settings"] or doc, out, problems)
    _print_part("Backends", print_backends, doc["backends"], out, problems)
    _print_part("Flight record", lambda d, o: print_flight(d, args.last, o), doc["flight"], out, problems)
    _print_part("GEMM algorithms", doctor_gemm.print_gemm, doc["gemm"], out, problems)
    _print_part("CPU", doctor_cpu.print_cpu, doc["cpu"], out, problems)
    print(f"\n== Verdict ==\n  {overall_verdict(problems, doc['flight'])}", file=out)
    for p in problems:
        print(f"  - {p['detail']}", file=out)
    return 1 if problems else 0
