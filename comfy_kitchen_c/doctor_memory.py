# SPDX-License-Identifier: Apache-2.0
"""``doctor``'s pinned (page-locked) host memory report: how much this process has pinned,
against physical RAM, with a warning past a stated share.

Why (docs/field-guide.md, "Pinned host memory"): public reports tie "GPU is lost" on Windows
with 64 GB of RAM, and not with 32 GB, to how much host memory ComfyUI pins.  ComfyUI caps
pins at ``MAX_PINNED_MEMORY = 0.40 * RAM`` on Windows (comfy/model_management.py); every pinned
or registered page counts against Windows' "shared GPU memory" (the WDDM non-local segment,
about half of RAM), which also holds what the driver places in system memory when VRAM runs
short.  ComfyUI PR #13221 ("pinned memory accumulation was clearly under-reporting the
shared-gpu-memory usage") lowered the ceiling to fix a Windows crash on a 32 GB machine; open
PR #15944 would take the budget from the DXGI non-local budget instead of 40 % of RAM.

The threshold, ``WARN_SHARE = 0.25`` of physical RAM on Windows: half of the shared segment
(50 % of RAM).  At ComfyUI's 40 % a pin budget takes 80 % of the segment (25.6 of ~32 GiB with
64 GB), which leaves the driver little room; a quarter keeps half of it free, and is what
``COMFY_KITCHEN_C_RAM_PROFILE=32`` gives a 64 GB machine (12.8 GiB, 20 %).  Elsewhere (Linux)
no public report ties a pinned share to a failure (no WDDM segment; ComfyUI allows up to
90 % of RAM there), so doctor reports the figures and warns only on Windows.

How pinned memory is measured: the OS does not say.  On Linux, VmLck in /proc/<pid>/status
counts mlock()ed pages only, and VmPin counts pages whose pinner charged ``mm->pinned_vm``
(RDMA does); the NVIDIA driver pins cudaHostAlloc / cudaHostRegister memory with
``pin_user_pages`` (open-gpu-kernel-modules, os_lock_user_pages) and charges neither, so
both read 0 for CUDA's pins.  Windows has no per-process counter either.  So doctor asks the
two owners of pins it can see inside its own process:

* torch's pinned-memory pool (CachingHostAllocator): ``torch.cuda.host_memory_stats()
  ["allocated_bytes.current"]`` (torch >= 2.6; read only when CUDA is already initialised,
  so that doctor itself starts nothing);
* ComfyUI, when its ``comfy.model_management`` is loaded (doctor run inside ComfyUI, or the
  node): ``TOTAL_PINNED_MEMORY`` (what it registered or pinned) and ``MAX_PINNED_MEMORY``
  (its cap; -1 or 0 when pinned memory is off).

Run as its own process (``python -m comfy_kitchen_c doctor``) doctor cannot see ComfyUI's
pins; it then judges ComfyUI's cap on this machine instead (the cap in force where ComfyUI is
loaded, else ComfyUI's formula, comfyui.max_pinned_memory): the cap is how much ComfyUI may
pin.  Never raises: what cannot be read is a note.

JSON (``doctor --json``, key ``"pinned_memory"``)::

    {"ram": int | null, "windows": bool, "warn_share": float | null,   # null: no threshold here
     "sources": {"torch_pool": int | null, "comfyui_total": int | null},  # bytes; null: not seen
     "pinned": int | null, "pinned_share": float | null,                # the larger source
     "cap": int | null, "cap_source": str, "cap_share": float | null,
     "warning": str | null, "notes": [str]}
"""
from __future__ import annotations

import sys

from . import comfyui

GIB = 1 << 30
WARN_SHARE = 0.25  # of physical RAM, on Windows (see the module doc)


def torch_pool_bytes() -> tuple[int | None, str | None]:
    """Bytes torch's pinned-memory pool holds, or (None, why not)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch is not loaded"
    try:
        if not torch.cuda.is_initialized():
            return None, "CUDA is not initialised in this process (no torch pinned pool)"
        stats = torch.cuda.memory.host_memory_stats()
    except Exception as exc:  # noqa: BLE001 - an older torch, or no CUDA
        return None, f"torch's pinned-pool statistics are unavailable ({type(exc).__name__}: {exc})"
    value = stats.get("allocated_bytes.current")
    return (int(value), None) if value is not None else (None, "torch reports no pinned-pool statistics")


def comfyui_values() -> tuple[int | None, int | None]:
    """(TOTAL_PINNED_MEMORY, MAX_PINNED_MEMORY) of a ComfyUI loaded in this process, else None."""
    mm = sys.modules.get("comfy.model_management")
    if mm is None:
        return None, None
    total, cap = getattr(mm, "TOTAL_PINNED_MEMORY", None), getattr(mm, "MAX_PINNED_MEMORY", None)
    as_int = (lambda v: int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    return as_int(total), as_int(cap)


def _share(value: int | None, ram: int | None) -> float | None:
    return value / ram if value is not None and ram else None


def pinned_memory(ram: int | None, windows: bool | None = None, swap: int = 0) -> dict:
    """The report (see the module doc for the keys)."""
    windows = sys.platform == "win32" if windows is None else windows
    notes = []
    pool, why = torch_pool_bytes()
    if why:
        notes.append(why)
    total, cap = comfyui_values()
    if total is None:
        notes.append("ComfyUI is not loaded in this process: its pins (TOTAL_PINNED_MEMORY) are not visible "
                     "from here, so its cap on this machine is judged instead")
    seen = [v for v in (pool, total) if v is not None]
    pinned = max(seen) if seen else None
    if cap is not None:
        cap_source = "MAX_PINNED_MEMORY in force (comfy.model_management)"
    elif ram:
        cap = int(comfyui.max_pinned_memory(ram, windows, swap))
        cap_source = "ComfyUI's formula: " + ("0.40 * RAM (Windows)" if windows else
                                             "max(0.40*RAM, min(0.90*RAM, RAM - 4 GiB, RAM + swap - 16 GiB))")
    else:
        cap_source = "unknown (total RAM unknown)"
    if cap is not None and cap <= 0:
        cap_source += ": pinned memory is off"
    doc = {"ram": ram, "windows": windows, "warn_share": WARN_SHARE if windows else None,
           "sources": {"torch_pool": pool, "comfyui_total": total},
           "pinned": pinned, "pinned_share": _share(pinned, ram),
           "cap": cap, "cap_source": cap_source, "cap_share": _share(cap if cap and cap > 0 else 0, ram),
           "warning": None, "notes": notes}
    doc["warning"] = warning(doc)
    return doc


def warning(doc: dict) -> str | None:
    """The warning sentence, or None (below the share, or not on Windows)."""
    share = doc["warn_share"]
    if share is None or not doc["ram"]:
        return None
    ram = doc["ram"] / GIB
    if doc["pinned_share"] is not None and doc["pinned_share"] > share:
        return (f"this process has {doc['pinned'] / GIB:.1f} GiB of host memory pinned, "
                f"{doc['pinned_share']:.0%} of {ram:.1f} GiB of RAM, past {share:.0%}: pinned memory counts "
                "against Windows' shared GPU memory (about half of RAM); see docs/field-guide.md, "
                "\"Pinned host memory\"")
    if doc["cap_share"] is not None and doc["cap_share"] > share:
        return (f"ComfyUI may pin up to {doc['cap'] / GIB:.1f} GiB, {doc['cap_share']:.0%} of {ram:.1f} GiB of RAM "
                f"({doc['cap_source']}), past {share:.0%}: the share public reports tie to \"GPU is lost\" on "
                f"Windows; cap it with COMFY_KITCHEN_C_RAM_PROFILE=32 ({0.4 * 32:.1f} GiB), --pinned-memory GB "
                "where ComfyUI has it, or --disable-pinned-memory (docs/field-guide.md, \"Pinned host memory\")")
    return None


def summary(doc: dict) -> str:
    """One line for the text report."""
    ram = f"{doc['ram'] / GIB:.1f} GiB" if doc["ram"] else "unknown"
    pinned = ("not visible from this process" if doc["pinned"] is None
              else f"{doc['pinned'] / GIB:.2f} GiB ({doc['pinned_share']:.0%} of RAM)" if doc["ram"]
              else f"{doc['pinned'] / GIB:.2f} GiB")
    cap = ("unknown" if doc["cap"] is None else "off" if doc["cap"] <= 0
           else f"{doc['cap'] / GIB:.1f} GiB" + (f" ({doc['cap_share']:.0%} of RAM)" if doc["ram"] else ""))
    limit = (f"warning past {doc['warn_share']:.0%} of RAM" if doc["warn_share"] is not None
             else "no warning off Windows")
    line = f"Pinned host memory: {pinned}; ComfyUI's cap {cap}; RAM {ram}; {limit}."
    return line + (f" WARNING: {doc['warning']}." if doc["warning"] else "")


def attach(doc: dict) -> dict:
    """Adds ``doc["pinned_memory"]`` to doctor's report, and its summary (with the warning, if
    any) first among the recommendations, which the text report prints.  Never raises."""
    try:
        env = doc.get("environment", {})
        ram = env.get("ram", {}).get("total")
        windows = sys.platform == "win32"
        part = pinned_memory(ram, windows, 0 if windows else comfyui.swap_for_pins())
        line = summary(part)
    except Exception as exc:  # noqa: BLE001 - doctor never raises
        part = {"error": f"{type(exc).__name__}: {exc}"}
        line = f"Pinned host memory: not measured ({part['error']})."
    doc["pinned_memory"] = part
    doc.setdefault("recommendations", []).insert(0, line)
    return doc
