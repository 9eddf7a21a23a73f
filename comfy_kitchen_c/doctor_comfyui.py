# SPDX-License-Identifier: Apache-2.0
"""doctor's ComfyUI part: the memory settings ComfyUI derives from this machine (formula and
source of every number, comfyui.py), the switches in force where they can be read, and the
settings recommended for the field report's symptom (docs/field-guide.md explains each).

Where the switches come from, first found wins:
1. this process, when it is ComfyUI (``comfy.cli_args`` is loaded: ``args``);
2. a running ComfyUI (a process whose command line runs a ``main.py`` next to a
   ``comfy/cli_args.py``; psutil's process list, else /proc): its command line, parsed by that
   ComfyUI's own ``comfy/cli_args.py`` parser in a child interpreter;
3. none: the defaults are shown, marked as such.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from . import comfyui

GIB = 1 << 30
# Switches of comfy/cli_args.py that change how weights are staged or how the GPU is driven.
RELEVANT = ("cache_ram", "cache_classic", "cache_lru", "cache_none", "high_ram", "reserve_vram", "vram_headroom",
            "disable_pinned_memory", "pinned_memory", "async_offload", "disable_async_offload",
            "disable_dynamic_vram", "enable_dynamic_vram", "disable_cuda_graphs", "disable_comfy_compiler",
            "fast_disk", "disable_fast_disk", "enable_triton_backend", "disable_triton_backend",
            "disable_nvml_pressure", "highvram", "gpu_only", "novram", "cpu", "disable_smart_memory")

_PARSE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import comfy.cli_args as c
given, _ = c.parser.parse_known_args(json.loads(sys.argv[2]))
defaults = c.parser.parse_args([])
print(json.dumps({k: getattr(given, k) for k in json.loads(sys.argv[3])
                  if hasattr(given, k) and getattr(given, k) != getattr(defaults, k)}, default=str))
"""


def _command_lines() -> list[tuple[int, list[str], str | None]]:
    """(pid, argv, cwd) of the processes this user can see."""
    try:
        import psutil
    except ImportError:
        psutil = None
    found = []
    if psutil is not None:
        for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
            info = p.info
            if info.get("cmdline"):
                found.append((info["pid"], info["cmdline"], info.get("cwd")))
        return found
    if not os.path.isdir("/proc"):
        return found
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if argv:
            found.append((int(entry), argv, cwd))
    return found


def running_comfyui() -> dict | None:
    """{"pid", "dir", "argv"} of a running ComfyUI, or None."""
    for pid, argv, cwd in _command_lines():
        if pid == os.getpid():
            continue
        for k, arg in enumerate(argv[:3]):
            if os.path.basename(arg) != "main.py":
                continue
            main = arg if os.path.isabs(arg) or cwd is None else os.path.join(cwd, arg)
            folder = os.path.dirname(os.path.abspath(main))
            if os.path.isfile(os.path.join(folder, "comfy", "cli_args.py")):
                return {"pid": pid, "dir": folder, "argv": argv[k + 1:]}
    return None


def flags_in_force() -> dict:
    """{"source": str, "flags": {dest: value} given (not defaults) | None, "error": str | None}."""
    cli_args = sys.modules.get("comfy.cli_args")
    if cli_args is not None:
        defaults = cli_args.parser.parse_args([])
        flags = {k: getattr(cli_args.args, k) for k in RELEVANT
                 if hasattr(cli_args.args, k) and getattr(cli_args.args, k) != getattr(defaults, k)}
        return {"source": "this process (comfy.cli_args.args)", "flags": flags, "error": None}
    process = running_comfyui()
    if process is None:
        return {"source": "no running ComfyUI found; ComfyUI's defaults assumed", "flags": None, "error": None}
    source = f"ComfyUI process {process['pid']} ({process['dir']}), parsed by its comfy/cli_args.py"
    try:
        out = subprocess.run([sys.executable, "-c", _PARSE, process["dir"], json.dumps(process["argv"]),
                              json.dumps(RELEVANT)], capture_output=True, text=True, timeout=60, check=True)
        return {"source": source, "flags": json.loads(out.stdout.strip().splitlines()[-1]), "error": None}
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return {"source": source, "flags": None, "error": f"could not parse its command line: {detail.strip()[-300:]}"}


def memory_settings(ram: int, windows: bool, swap: float, vram: int | None, flags: dict | None) -> dict:
    """The values ComfyUI derives from this machine, each with formula, source and the value in
    force given the switches (flags None: ComfyUI's defaults)."""
    flags = flags or {}
    active, inactive = comfyui.cache_ram(ram)
    pinned = comfyui.max_pinned_memory(ram, windows, swap)
    reserve = comfyui.extra_reserved_vram(windows, vram)
    cache_kind = next((f"--{k.replace('_', '-')}" for k in ("cache_classic", "cache_none", "high_ram")
                       if flags.get(k)), None) or ("--cache-lru" if (flags.get("cache_lru") or 0) > 0 else None)
    given = flags.get("cache_ram") or []
    rows = {
        "cache_ram": {"derived_gib": active, "formula": comfyui.FORMULAS["cache_ram"], "source": comfyui.SOURCES["cache_ram"],
                      "in_force": (f"none: {cache_kind} (no RAM-pressure cache)" if cache_kind else
                                   f"{given[0]:g} GiB (--cache-ram)" if given else f"{active:.2f} GiB (derived)")},
        "cache_ram_inactive": {"derived_gib": inactive, "formula": comfyui.FORMULAS["cache_ram_inactive"],
                               "source": comfyui.SOURCES["cache_ram_inactive"],
                               "in_force": (f"none: {cache_kind}" if cache_kind else
                                            f"{given[1]:g} GiB (--cache-ram)" if len(given) > 1 else
                                            f"{inactive:.2f} GiB (derived)")},
        "max_pinned_memory": {"derived_gib": pinned / GIB,
                              "formula": comfyui.FORMULAS["max_pinned_memory_windows" if windows else "max_pinned_memory"],
                              "source": comfyui.SOURCES["max_pinned_memory"],
                              "in_force": ("none: --disable-pinned-memory" if flags.get("disable_pinned_memory") else
                                           f"{flags['pinned_memory']:g} GiB (--pinned-memory)"
                                           if flags.get("pinned_memory") is not None else
                                           f"{pinned / GIB:.2f} GiB (derived)")},
        "extra_reserved_vram": {"derived_gib": reserve / GIB, "formula": comfyui.FORMULAS["extra_reserved_vram"],
                                "source": comfyui.SOURCES["extra_reserved_vram"],
                                "in_force": (f"{flags['reserve_vram']:g} GiB (--reserve-vram)"
                                             if flags.get("reserve_vram") is not None else
                                             f"{reserve / GIB:.2f} GiB (default)")},
    }
    return {"ram_gib": ram / GIB, "swap_gib": swap / GIB, "windows": windows, "values": rows}


def recommendations(env: dict, backends: dict, ram: int | None, flags: dict | None) -> list[str]:
    """The settings recommended today for "GPU lost" with int8 ConvRot under DynamicVRAM, for
    this machine (docs/field-guide.md, "Recommended configuration", says why)."""
    flags = flags or {}
    windows = env["os"]["windows_build"] is not None
    lines = ["Keep the flight record on (COMFY_KITCHEN_C_FLIGHT, default on); after a lost GPU run "
             "`python -m comfy_kitchen_c doctor` before anything else touches the folder."]
    if not backends.get("c_active"):
        lines.append('Put "c" first: `python -m comfy_kitchen_c install-comfyui <ComfyUI>` (or '
                     "COMFY_KITCHEN_C_ACTIVATE=1): its int8_linear uses cuBLASLt without split-K or stream-K, "
                     "so no kernel of it spin-waits on another (hypothesis H1).")
    cuda_pick = next((r["cuda"] for r in backends.get("ops", []) if r["op"] == "int8_linear"), None)
    if cuda_pick == "cuda" and env["variables"].get("COMFY_KITCHEN_DISABLE_CUTLASS") != "1":
        lines.append("comfy_kitchen's cuda backend serves int8_linear here: COMFY_KITCHEN_DISABLE_CUTLASS=1 "
                     "keeps its CUTLASS stream-K GEMM out (H1).")
    lines.append("To localize a failure: COMFY_KITCHEN_C_CHECK=boundary (slower; a fault is then raised at "
                 "the copy or op it happened in).")
    if not flags.get("disable_cuda_graphs"):
        lines.append("Try --disable-cuda-graphs once: it rules CUDA-graph replay of staged blocks in or out (H8).")
    if windows:
        lines.append('NVIDIA Control Panel > Manage 3D settings > CUDA - Sysmem Fallback Policy: "Prefer No '
                     'Sysmem Fallback" for ComfyUI\'s python.exe (H4).')
    if ram is not None and ram > 33 * GIB:
        lines.append("COMFY_KITCHEN_C_RAM_PROFILE=32 gives ComfyUI the memory settings of a 32 GB machine "
                     "(--cache-ram, MAX_PINNED_MEMORY) without hiding RAM from Windows; the page cache still "
                     "holds the weights, so it separates ComfyUI's settings from the disk-paced regime (H2).")
    return lines
