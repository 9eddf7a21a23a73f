"""``python -m comfy_kitchen_c doctor``: this machine, the backend of every op, and what the GPU did last.

Three parts, printed as text or (``--json``) as one JSON document:

1. The environment: OS (Windows build and the TDR note there), Python, torch and the CUDA
   version it was built with, comfy_kitchen and comfy-kitchen-c versions, the CUDA driver
   and runtime versions, the GPUs, the CPU instruction set of our kernels, the total RAM,
   and the settings ComfyUI derives from that RAM (``comfyui_settings()``), which decide
   how weights are staged to the GPU.
2. The backend table: comfy_kitchen's backends in priority order, whether "c" is
   registered and active, and per op served by "c" which backend comfy_kitchen picks for a
   CPU tensor and for a CUDA tensor.
3. The analysis of a flight record (the newest in ``flight.default_dir()``, or
   ``--record PATH``, e.g. one copied from the computer where the GPU was lost): the last
   op the GPU completed, the first it did not, faults and hangs with their parameters, a
   verdict in plain words, and the last records as a table.

Nothing here needs a GPU, CUDA or comfy_kitchen; what is missing is reported as "none".
Exit status: 0 when the report was made (also with no flight record), 1 when the record
named by ``--record`` cannot be read.

JSON document (``--json``).  Keys are stable; sizes in bytes, times in Unix seconds::

    {
      "doctor_version": 1,
      "environment": {
        "os": {"system", "release", "version", "machine": str,
               "windows_build": int | null, "note": str | null},       # note: the Windows TDR note
        "python": {"version", "implementation", "executable": str},
        "torch": {"version": str, "cuda": str | null},                 # cuda: torch.version.cuda
        "comfy_kitchen": {"version": str | null},                      # null: not installed
        "comfy_kitchen_c": {"version": str, "path": str},
        "cuda": {"driver": str | null,                                 # null: no driver / no CUDA build
                 "runtime_torch": str | null, "runtime_extension": str | null,
                 "extension_has_cuda": bool, "error": str | null},          # error: the driver query failed
        "gpus": [{"index": int, "name": str, "compute_capability": "9.0",
                  "total_memory": int, "multiprocessors": int}],
        "gpu_error": str | null,                                       # why GPUs could not be listed
        "cpu_isa": {"in_use": str, "available": [str]},
        "ram": {"total": int | null, "swap": int | null, "source": str},
        "variables": {name: value}                                     # those of VARIABLES that are set
      },
      "comfyui_settings": null | {                                     # null: total RAM unknown
        "total_ram_gib", "cache_ram_gib", "cache_ram_inactive_gib", "max_pinned_memory_gib": float,
        "windows": bool,
        "formulas": {"cache_ram", "cache_ram_inactive", "max_pinned_memory": str},
        "notes": {"cache_ram", "cache_ram_inactive", "max_pinned_memory": str}     # what each means for staging
      },
      "backends": {
        "installed": bool, "error": str | null,                        # comfy_kitchen importable?
        "priority": [str],                                             # registry order, then the rest
        "c_registered": bool, "c_active": bool,                        # active: first enabled in priority
        "backends": [{"name": str, "in_priority": bool, "available": bool, "disabled": bool,
                      "unavailable_reason": str | null, "ops": int}],
        "ops": [{"op": str, "cpu": str | null, "cuda": str | null}]    # null: no backend serves it
      },
      "flight": {
        "status": "ok" | "none" | "unavailable" | "error",
        "directory": str | null, "path": str | null, "message": str,
        "verdict": [str],                                              # plain-language sentences
        "record": null | <flight.load(path), unchanged: see flight.py>
      }
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

from . import _C

HELP = "report the environment, the backend of each op, and the newest flight record"

DOCTOR_VERSION = 1
GIB = 1 << 30
LAST_RECORDS = 10  # rows of the flight-record table by default

# Environment variables that change how work reaches the GPU or how faults are reported
# (ours, and the diagnostic switches of root-cause-notes §4); the report lists those set.
VARIABLES = ("COMFY_KITCHEN_C_CHECK", "COMFY_KITCHEN_C_HANG_MS", "COMFY_KITCHEN_C_FLIGHT",
             "COMFY_KITCHEN_C_FLIGHT_DIR", "COMFY_KITCHEN_C_ACTIVATE", "COMFY_KITCHEN_C_CPU_ISA",
             "COMFY_KITCHEN_DISABLE_CUTLASS", "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES",
             "PYTORCH_CUDA_ALLOC_CONF")

# Windows' display driver model resets a GPU whose work does not finish within TdrDelay.
WDDM_NOTE = ("Windows display driver model (WDDM): a GPU that does not finish a piece of work within "
             "TdrDelay (default 2 s) is reset (TDR, 'GPU is lost'); the flight record's watchdog writes "
             "its hang record at 1500 ms, before that.")


# ---- RAM and the ComfyUI settings it implies --------------------------------------------------

def comfyui_settings(total_ram: int, windows: bool, swap: int = 0) -> dict:
    """The ComfyUI settings that scale with total RAM (bytes), per
    /work/shared/docs/root-cause-notes.md §2 "Where total RAM ... changes behaviour":

    - ``cache_ram = min(10, max(2, total_ram*0.10/1024))`` GiB (total_ram in MiB): ComfyUI
      main.py prompt_worker -> execution.set_ram_cache_release_state -> RAM_CACHE_HEADROOM.
    - ``cache_ram_inactive = min(128, total_ram/1024)`` GiB: main.py.
    - ``MAX_PINNED_MEMORY = ram * 0.40`` on Windows: comfy/model_management.py.  The notes
      give the Windows value only; elsewhere the same file (H3-era ComfyUI) sets
      ``max(ram*0.40, min(ram*0.90, ram - 4 GiB, ram + swap - 16 GiB))``, swap being the
      disk swap (0 under a cgroup memory limit).  Both apply unless pinned memory is
      disabled (``--disable-pinned-memory``: -1) or the GPU is neither NVIDIA nor AMD.
    """
    ram_gib = total_ram / GIB
    if windows:
        max_pinned = total_ram * 0.40
        pinned_formula = "0.40 * RAM (Windows)"
    else:
        max_pinned = max(total_ram * 0.40, min(total_ram * 0.90, total_ram - 4 * GIB, total_ram + swap - 16 * GIB))
        pinned_formula = "max(0.40*RAM, min(0.90*RAM, RAM - 4 GiB, RAM + swap - 16 GiB)) (not Windows)"
    return {
        "total_ram_gib": ram_gib,
        "cache_ram_gib": min(10.0, max(2.0, ram_gib * 0.10)),
        "cache_ram_inactive_gib": min(128.0, ram_gib),
        "max_pinned_memory_gib": max_pinned / GIB,
        "windows": windows,
        "formulas": {"cache_ram": "min(10, max(2, 0.10 * RAM)) GiB", "cache_ram_inactive": "min(128, RAM) GiB",
                     "max_pinned_memory": pinned_formula},
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


def _windows_memory() -> tuple[int, int]:
    """(physical RAM, page file) from GlobalMemoryStatusEx."""
    import ctypes

    class MemoryStatusEx(ctypes.Structure):
        _fields_ = [("dwLength", ctypes.c_uint32), ("dwMemoryLoad", ctypes.c_uint32),
                    ("ullTotalPhys", ctypes.c_uint64), ("ullAvailPhys", ctypes.c_uint64),
                    ("ullTotalPageFile", ctypes.c_uint64), ("ullAvailPageFile", ctypes.c_uint64),
                    ("ullTotalVirtual", ctypes.c_uint64), ("ullAvailVirtual", ctypes.c_uint64),
                    ("ullAvailExtendedVirtual", ctypes.c_uint64)]

    status = MemoryStatusEx()
    status.dwLength = ctypes.sizeof(status)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        raise OSError("GlobalMemoryStatusEx failed")
    return status.ullTotalPhys, status.ullTotalPageFile - status.ullTotalPhys


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
    return {"driver": _cuda_version(driver) if driver else None,
            "runtime_torch": torch.version.cuda,
            "runtime_extension": _cuda_version(runtime) if runtime else None,
            "extension_has_cuda": bool(_C.HAS_CUDA), "error": error}


def _gpus() -> tuple[list[dict], str | None]:
    """The GPUs torch sees, or why it sees none (after a lost GPU, CUDA itself may fail)."""
    try:
        if not torch.cuda.is_available():
            return [], None
        gpus = []
        for index in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(index)
            gpus.append({"index": index, "name": p.name, "compute_capability": f"{p.major}.{p.minor}",
                         "total_memory": int(p.total_memory), "multiprocessors": int(p.multi_processor_count)})
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
        "gpus": gpus,
        "gpu_error": gpu_error,
        "cpu_isa": {"in_use": _C.cpu_isa(), "available": list(_C.cpu_isas())},
        "ram": total_ram(),
        "variables": {name: os.environ[name] for name in VARIABLES if name in os.environ},
    }


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
    for name in registry._priority:  # no public getter; backend.activate() reads it too
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
                "c_registered": False, "c_active": False, "backends": [], "ops": []}
    from .backend import BACKEND_NAME, capabilities

    listing = registry.list_backends()
    priority = list(registry._priority)
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
        "installed": True, "error": None, "priority": order,
        "c_registered": registered, "c_active": first == BACKEND_NAME,
        "backends": backends,
        "ops": [{"op": op, "cpu": pick_backend(registry, op, "cpu", cc, listing),
                 "cuda": pick_backend(registry, op, "cuda", cc, listing)} for op in ops],
    }


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


def details(record: dict) -> list[str]:
    """Every parameter of one record, one per line."""
    graph = ""
    if record.get("capture"):
        graph = (f", captured into the CUDA graph of capture {record['capture']}"
                 + (f" (last completed in replay #{record['replay']})" if record["replay"] else " (never completed)"))
    lines = [f"seq {record['seq']} {describe(record)}: {record['state']}{graph}",
             f"  device cuda:{record['device']}, stream {record['stream']:#x}",
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


def _replay_verdict(replay: dict | None) -> list[str]:
    """The latest replay of a captured CUDA graph: which of its ops completed in it."""
    if replay is None:
        return []
    graph = (f"replay #{replay['number']} of the CUDA graph of capture {replay['capture']} (captured "
             f"{_when(replay['captured_unix'])}, {replay['ops']} recorded ops)")
    first, last = replay["first_incomplete"], replay["last_completed"]
    if first is None:
        return [f"The latest CUDA-graph replay, {graph}, completed all of its recorded ops."]
    done = (f"the last captured op it completed in that replay was seq {last['seq']} ({describe(last)})"
            if last is not None else "it completed none of that graph's recorded ops in that replay")
    return [f"The GPU stopped during {graph}: it did not complete seq {first['seq']} ({describe(first)}) in that "
            f"replay; {done}."]


def verdict(data: dict) -> list[str]:
    """What the record says, in plain words (one sentence per finding)."""
    last, first = data["last_completed"], data["first_incomplete"]
    sentences = _replay_verdict(data.get("replay"))
    if first is not None:
        head = f"The GPU stopped completing work at seq {first['seq']} ({describe(first)})"
        if last is None:
            sentences.append(head + "; it had completed none of the recorded work.")
        elif last["seq"] < first["seq"]:
            sentences.append(head + f"; it had completed seq {last['seq']} ({describe(last)}).")
        else:
            sentences.append(head + f"; work on other streams completed later, up to seq {last['seq']} "
                             f"({describe(last)}, stream {last['stream']:#x}).")
    elif last is not None:
        outside = " outside CUDA graphs" if data.get("captured") else ""
        sentences.append(f"The GPU completed all recorded work{outside}, up to seq {last['seq']} ({describe(last)}).")
    elif not data.get("captured"):
        sentences.append("The record holds no completed or pending work.")
    for hang in data["hangs"]:
        written = f", state written {_when(hang['completed_unix'])}" if hang["completed_unix"] else ""
        sentences.append(f"A hang record was written for seq {hang['seq']} ({describe(hang)}, queued "
                         f"{_when(hang['queued_unix'])}{written}): "
                         f"{hang['error'] or 'it was still running when the watchdog fired'}.")
    for fault in data["faults"]:
        sentences.append(f"seq {fault['seq']} ({describe(fault)}) failed: {fault['error'] or 'no error text'}.")
    replay = data.get("replay")
    if replay is not None and replay["first_incomplete"] is not None:
        first = replay["first_incomplete"]
    if first is not None and not data["hangs"] and not data["faults"]:
        sentences.append("No fault or hang was recorded: the process ended (or the device was lost) "
                         f"while seq {first['seq']} was queued or running.")
    elif first is None and not data["hangs"] and not data["faults"]:
        sentences.append("No fault or hang was recorded.")
    return sentences


def flight_report(record_path: str | None = None) -> dict:
    """Loads and analyses the flight record at record_path, or the newest in the default folder."""
    report = {"status": "none", "directory": None, "path": record_path, "message": "", "verdict": [],
              "record": None}
    try:
        from . import flight
    except ImportError as exc:
        report.update(status="unavailable", message=f"flight records are not available in this build ({exc})")
        return report
    if record_path is None:
        report["directory"] = flight.default_dir()
        record_path = flight.newest_record(report["directory"])
        if record_path is None:
            report["message"] = f"no flight record found in {report['directory']}"
            return report
        report["path"] = record_path
    try:
        data = flight.load(record_path)
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file is reported, not a crash
        report.update(status="error", message=f"cannot read flight record {record_path}: {exc}")
        return report
    report.update(status="ok", message=f"flight record {record_path}", verdict=verdict(data), record=data)
    return report


# ---- text output ------------------------------------------------------------------------------

def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


def _table(rows: list[tuple], out: TextIO) -> None:
    widths = [max(len(str(row[k])) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)


def print_environment(env: dict, settings: dict | None, out: TextIO) -> None:
    print("== Environment ==", file=out)
    o, cuda = env["os"], env["cuda"]
    build = f", build {o['windows_build']}" if o["windows_build"] is not None else ""
    rows = [
        ("OS", f"{o['system']} {o['release']} ({o['version']}{build}), {o['machine']}"),
        ("Python", f"{env['python']['version']} ({env['python']['implementation']}) {env['python']['executable']}"),
        ("torch", f"{env['torch']['version']} (CUDA {env['torch']['cuda'] or 'none'})"),
        ("comfy_kitchen", env["comfy_kitchen"]["version"] or "not installed"),
        ("comfy-kitchen-c", f"{env['comfy_kitchen_c']['version']} ({env['comfy_kitchen_c']['path']})"),
        ("CUDA driver", cuda["driver"] or ("none" + (f" ({cuda['error']})" if cuda["error"] else ""))),
        ("CUDA runtime", f"torch {cuda['runtime_torch'] or 'none'}; comfy_kitchen_c._C "
                         f"{cuda['runtime_extension'] or 'none'}"
                         f"{'' if cuda['extension_has_cuda'] else ' (built without CUDA)'}"),
    ]
    if env["gpus"]:
        rows += [(f"GPU {g['index']}", f"{g['name']}, compute capability {g['compute_capability']}, "
                                       f"{_gib(g['total_memory'])}, {g['multiprocessors']} SMs") for g in env["gpus"]]
    else:
        rows.append(("GPUs", "none" + (f" ({env['gpu_error']})" if env["gpu_error"] else "")))
    rows += [("CPU ISA", f"{env['cpu_isa']['in_use']} (available: {', '.join(env['cpu_isa']['available'])})"),
             ("RAM", f"{_gib(env['ram']['total'])} ({env['ram']['source']})"),
             ("Variables", ", ".join(f"{k}={v}" for k, v in env["variables"].items()) or "none of interest set")]
    _table(rows, out)
    if o["note"]:
        print(f"  Note: {o['note']}", file=out)
    if settings is None:
        print("\nComfyUI settings derived from RAM: unknown (total RAM unknown)", file=out)
        return
    print("\nComfyUI settings derived from this RAM (main.py, comfy/model_management.py):", file=out)
    for key, name in (("cache_ram", "cache_ram"), ("cache_ram_inactive", "cache_ram_inactive"),
                      ("max_pinned_memory", "MAX_PINNED_MEMORY")):
        print(f"  {name:<19} {settings[key + '_gib']:6.1f} GiB  = {settings['formulas'][key]}", file=out)
        for line in textwrap.wrap(settings["notes"][key], 88):
            print(f"      {line}", file=out)


def print_backends(table: dict, out: TextIO) -> None:
    print("\n== Backends ==", file=out)
    if not table["installed"]:
        print(f"  {table['error']}: ops run only when called as comfy_kitchen_c.ops.<name>", file=out)
        return
    c = next((b for b in table["backends"] if b["name"] == "c"), None)
    if table["c_active"]:
        state = "registered and active (first available in priority)"
    elif not table["c_registered"]:
        state = "not registered"
    elif c["disabled"]:
        state = "registered but disabled"
    elif c["in_priority"]:
        state = "registered, behind other backends in priority"
    else:
        state = "registered but not in the priority list, so never picked (comfy_kitchen_c.activate() puts it first)"
    print(f"  priority: {', '.join(table['priority'])}; \"c\" is {state}", file=out)
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


def print_flight(report: dict, last: int, out: TextIO) -> None:
    print("\n== Flight record ==", file=out)
    print(f"  {report['message']}", file=out)
    data = report["record"]
    if data is None:
        return
    p = data["process"]
    print(f"  process {p['pid']} on {p['host']}, started {_when(p['started_unix'])}, Python {p['python']}, "
          f"comfy-kitchen-c {p['package_version']}; format {data['format_version']}, "
          f"{data['written']} records written, the ring keeps the last {data['capacity']}", file=out)
    print("\n  Verdict:", file=out)
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
            rows.append((r["seq"], r["kind"], op, r["state"], r["device"], f"{r['stream']:#x}",
                         f"{r['queued_unix'] - start:.3f}", "-" if ms is None else f"{ms:.3f}", r["bytes"],
                         r["tensors"]))
        _table(rows, out)


# ---- command line -----------------------------------------------------------------------------

def report(record_path: str | None = None) -> dict:
    """The whole report as the JSON document described in the module docstring."""
    env = environment()
    ram = env["ram"]
    settings = (comfyui_settings(ram["total"], sys.platform == "win32", ram["swap"] or 0)
                if ram["total"] else None)
    return {"doctor_version": DOCTOR_VERSION, "environment": env, "comfyui_settings": settings,
            "backends": backend_table(), "flight": flight_report(record_path)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document (keys: see the module doc)")
    parser.add_argument("--record", metavar="PATH",
                        help="analyse this flight record (e.g. copied from another computer) "
                             "instead of the newest in the flight folder")
    parser.add_argument("--last", type=int, default=LAST_RECORDS, metavar="N",
                        help=f"flight records to list in the table (default {LAST_RECORDS})")


def main(args: argparse.Namespace) -> int:
    """0 when the report was made, 1 when --record names a record that cannot be read."""
    doc = report(args.record)
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        out = sys.stdout
        print("comfy-kitchen-c doctor\n", file=out)
        print_environment(doc["environment"], doc["comfyui_settings"], out)
        print_backends(doc["backends"], out)
        print_flight(doc["flight"], args.last, out)
    return 1 if args.record is not None and doc["flight"]["status"] != "ok" else 0
