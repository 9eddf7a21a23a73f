# SPDX-License-Identifier: Apache-2.0
"""What ComfyUI derives from the machine's RAM, and the node's prestartup step.

The formulas mirror ComfyUI's code (cited per value; nothing here imports ComfyUI):

* ``cache_ram`` / ``cache_ram_inactive``: main.py ``prompt_worker``: with RAM-pressure
  caching (no --cache-classic/--cache-none/--cache-lru/--high-ram),
  ``min(10, max(2, total_ram*0.10/1024))`` and ``min(128, total_ram/1024)`` GB, total_ram in
  MiB (comfy/model_management.py ``total_ram = psutil.virtual_memory().total / 2**20``);
  ``--cache-ram A [I]`` replaces them.  ``cache_ram`` becomes
  ``comfy.memory_management.RAM_CACHE_HEADROOM``: every pin first frees cached outputs down to
  it, and ``ensure_pin_budget`` keeps ``max(headroom/2, 2 GiB)`` in reserve.
* ``MAX_PINNED_MEMORY``: comfy/model_management.py, module level, when pinned memory is on and
  the GPU is NVIDIA or AMD: Windows ``ram*0.40``; elsewhere
  ``max(ram*0.40, min(ram*0.90, ram - 4 GiB, ram + swap - 16 GiB))`` where swap is
  ``get_disk_swap_total()`` (/proc/swaps without zram devices) or 0 under a cgroup memory
  limit (``comfy.system_memory.cgroup_memory_limit()``).  Older ComfyUI (e.g. the copies of
  0.30-era model_management.py we read) used ``ram*0.90`` off Windows.
  ``--disable-pinned-memory`` makes it -1; the newest ComfyUI has ``--pinned-memory GB``.
* ``EXTRA_RESERVED_VRAM``: comfy/model_management.py: 400 MiB; Windows 600 MiB, plus 100 MiB on
  GPUs over 15 GiB; ``--reserve-vram GB`` replaces it (main.py also hands it to
  ``comfy_aimdo.control.init(simple_vram_headroom=...)`` before custom nodes start).

``prestartup(node_dir)`` is what the node's prestartup_script.py runs (ComfyUI's main.py runs
those scripts after it parsed its command line and before it imports torch or
comfy.model_management): it reads the settings and, for ``COMFY_KITCHEN_C_RAM_PROFILE`` and
``COMFY_KITCHEN_C_RESERVE_VRAM``, sets the values of ComfyUI's own switches (--cache-ram,
--reserve-vram, --pinned-memory where this ComfyUI has it) in ``comfy.cli_args.args``, parsed
by ComfyUI's own parser.  Appending to sys.argv there would change nothing: main.py's
first lines already parsed it.  A value the user gave on the command line is kept.  Where no
switch exists (MAX_PINNED_MEMORY in most ComfyUI versions) the node sets the value at load
(node.py), and says so.  Nothing here hides memory from the OS.  It also arms the one-shot
hook that registers "c" as soon as comfy_kitchen is imported, so that ComfyUI's own start-up
listing of comfy_kitchen backends names it (comfyui_listing.py).

Stdlib only (loaded by path before torch); settings.py is loaded the same way.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys

GIB = 1 << 30
MIB = 1 << 20
STATE_MODULE = "comfy_kitchen_c_node_prestartup"  # sys.modules entry the node reads back


# ---- the formulas ------------------------------------------------------------------------------

def max_pinned_memory(ram: float, windows: bool, swap: float = 0) -> float:
    """ComfyUI's MAX_PINNED_MEMORY (bytes) for ram bytes (see the module doc)."""
    if windows:
        return ram * 0.40
    return max(ram * 0.40, min(ram * 0.90, ram - 4 * GIB, ram + swap - 16 * GIB))


def cache_ram(ram: float) -> tuple[float, float]:
    """(cache_ram, cache_ram_inactive) in GB as main.py prompt_worker derives them."""
    total_mib = ram / MIB
    return min(10.0, max(2.0, total_mib * 0.10 / 1024.0)), min(128.0, total_mib / 1024.0)


def extra_reserved_vram(windows: bool, vram: float | None) -> float:
    """ComfyUI's default EXTRA_RESERVED_VRAM (bytes)."""
    if not windows:
        return 400 * MIB
    return 600 * MIB + (100 * MIB if vram is not None and vram / MIB > 15 * 1024 else 0)


SOURCES = {
    "cache_ram": "ComfyUI main.py prompt_worker (RAM-pressure cache; --cache-ram A replaces it)",
    "cache_ram_inactive": "ComfyUI main.py prompt_worker (--cache-ram A I replaces it)",
    "max_pinned_memory": "ComfyUI comfy/model_management.py, module level (MAX_PINNED_MEMORY)",
    "extra_reserved_vram": "ComfyUI comfy/model_management.py (EXTRA_RESERVED_VRAM; --reserve-vram replaces it)",
}
FORMULAS = {
    "cache_ram": "min(10, max(2, 0.10 * RAM)) GiB",
    "cache_ram_inactive": "min(128, RAM) GiB",
    "max_pinned_memory_windows": "0.40 * RAM (Windows)",
    "max_pinned_memory": "max(0.40*RAM, min(0.90*RAM, RAM - 4 GiB, RAM + swap - 16 GiB)) (not Windows; "
                         "swap: /proc/swaps without zram, 0 under a cgroup memory limit)",
    "extra_reserved_vram": "400 MiB; Windows 600 MiB (+100 MiB on GPUs over 15 GiB)",
}


def disk_swap_total() -> int:
    """Swap on disk as ComfyUI's get_disk_swap_total() counts it: /proc/swaps, zram skipped."""
    try:
        with open("/proc/swaps") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return 0
    total = 0
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and not os.path.basename(fields[0]).startswith("zram"):
            total += int(fields[2]) * 1024
    return total


def cgroup_memory_limited() -> bool:
    """Whether a cgroup memory limit applies (ComfyUI then counts no swap)."""
    for file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(file) as f:
                text = f.read().strip()
        except OSError:
            continue
        return text != "max" and int(text) < (1 << 60)
    return False


def swap_for_pins() -> int:
    return 0 if cgroup_memory_limited() else disk_swap_total()


# ---- ComfyUI's switches for a RAM size ---------------------------------------------------------

def profile_switches(profile_gib: float, windows: bool, swap: float, has_pinned_switch: bool) -> dict:
    """{switch: tokens} ComfyUI would need to behave as with profile_gib of RAM."""
    ram = profile_gib * GIB
    active, inactive = cache_ram(ram)
    switches = {"--cache-ram": [f"{active:.3g}", f"{inactive:.4g}"]}
    if has_pinned_switch:
        switches["--pinned-memory"] = [f"{max_pinned_memory(ram, windows, swap) / GIB:.4g}"]
    return switches


def _has_option(parser, option: str) -> bool:
    return any(option in action.option_strings for action in parser._actions)


def _user_kept(args, switch: str) -> str | None:
    """Why a switch must not be applied: the user's own choice, or a mutually exclusive one."""
    if switch == "--cache-ram":
        for flag, given in (("--cache-classic", getattr(args, "cache_classic", False)),
                            ("--cache-none", getattr(args, "cache_none", False)),
                            ("--cache-lru", (getattr(args, "cache_lru", 0) or 0) > 0),
                            ("--high-ram", getattr(args, "high_ram", False))):
            if given:
                return f"ComfyUI was started with {flag}, which excludes --cache-ram"
        if isinstance(getattr(args, "cache_ram", None), list) and args.cache_ram:
            return f"ComfyUI was started with --cache-ram {' '.join(map(str, args.cache_ram))}"
    if switch == "--reserve-vram" and getattr(args, "reserve_vram", None) is not None:
        return f"ComfyUI was started with --reserve-vram {args.reserve_vram}"
    if switch == "--pinned-memory":
        if getattr(args, "disable_pinned_memory", False):
            return "ComfyUI was started with --disable-pinned-memory"
        if getattr(args, "pinned_memory", None) is not None:
            return f"ComfyUI was started with --pinned-memory {args.pinned_memory}"
    return None


def apply_switches(cli_args, switches: dict) -> list[str]:
    """Sets the values of switches ({"--cache-ram": ["3.2", "32"]}) in cli_args.args with
    cli_args.parser, skipping those the user set; returns what was done, one line each."""
    done = []
    args, parser = cli_args.args, cli_args.parser
    for switch, tokens in switches.items():
        why = _user_kept(args, switch)
        if why is not None:
            done.append(f"{switch} {' '.join(tokens)} not applied: {why} (kept)")
            continue
        if not _has_option(parser, switch):
            done.append(f"{switch} {' '.join(tokens)} not applied: this ComfyUI has no such switch")
            continue
        action = next(a for a in parser._actions if switch in a.option_strings)
        try:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                parsed = parser.parse_args([switch, *tokens])
        except SystemExit:
            done.append(f"{switch} {' '.join(tokens)} not applied: this ComfyUI's parser refused it "
                        f"({err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else 'error'})")
            continue
        setattr(args, action.dest, getattr(parsed, action.dest))
        done.append(f"{switch} {' '.join(tokens)}")
    return done


# ---- prestartup --------------------------------------------------------------------------------

def load_sibling(name: str, module_name: str):
    """A stdlib-only module of this package loaded by path (no package import, no torch)."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(os.path.dirname(__file__), name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


class PrestartupState:
    """What prestartup did, read back by the node at load (node.py) for its log line."""

    def __init__(self):
        self.actions: list[str] = []
        self.errors: list[str] = []
        self.pinned_profile: float | None = None  # MAX_PINNED_MEMORY to set at load (no switch)
        self.early = None  # comfyui_listing.EarlyRegistration: "c" in ComfyUI's backend listing


def config_file(node_dir: str) -> str | None:
    candidate = os.path.join(node_dir, "comfy_kitchen_c.toml")
    return candidate if os.path.isfile(candidate) else None


def prestartup(node_dir: str, environ=None) -> PrestartupState:
    """The node's prestartup step (see the module doc).  Never raises: problems go to the
    state's errors, which the node logs."""
    environ = os.environ if environ is None else environ
    state = PrestartupState()
    sys.modules[STATE_MODULE] = state  # type: ignore[assignment]
    # "c" registers right after comfy_kitchen loads, before ComfyUI lists its backends
    state.early = load_sibling("comfyui_listing.py", "comfy_kitchen_c_listing_prestartup").register_when_kitchen_loads()
    toml = config_file(node_dir)
    if toml and not environ.get("COMFY_KITCHEN_C_CONFIG"):
        environ["COMFY_KITCHEN_C_CONFIG"] = toml
    settings = load_sibling("settings.py", "comfy_kitchen_c_settings_prestartup")
    loaded = settings.load(environ)
    state.errors.extend(loaded.problems())  # refused settings (their defaults apply) and unknown names
    profile = loaded.values["COMFY_KITCHEN_C_RAM_PROFILE"]
    reserve = loaded.values["COMFY_KITCHEN_C_RESERVE_VRAM"]
    switches = {}
    windows = sys.platform == "win32"
    cli_args = sys.modules.get("comfy.cli_args")
    if profile.error is None and profile.value is not None:
        ram = total_ram()
        if ram is not None and profile.value * GIB > ram:
            state.errors.append(f"COMFY_KITCHEN_C_RAM_PROFILE={profile.raw} ({profile.source}): larger than this "
                                f"machine's {ram / GIB:.1f} GiB of RAM; not applied")
        else:
            has_pinned = cli_args is not None and _has_option(cli_args.parser, "--pinned-memory")
            switches.update(profile_switches(profile.value, windows, swap_for_pins(), has_pinned))
            if not has_pinned:
                state.pinned_profile = max_pinned_memory(profile.value * GIB, windows, swap_for_pins())
    if reserve.error is None and reserve.value is not None:
        switches["--reserve-vram"] = [f"{reserve.value:g}"]
    if switches:
        if cli_args is None:
            # A launcher that parses ComfyUI's command line later: the switches still apply.
            for switch, tokens in switches.items():
                sys.argv += [switch, *tokens]
                state.actions.append(f"{switch} {' '.join(tokens)} (added to sys.argv)")
        else:
            state.actions += apply_switches(cli_args, switches)
            if "--reserve-vram" in switches and "comfy_aimdo.control" in sys.modules:
                state.actions.append("(comfy-aimdo's VRAM headroom was set before custom nodes start: "
                                     "give --reserve-vram on ComfyUI's command line for it too)")
    return state


def windows_memory() -> tuple[int, int]:
    """(physical RAM, page file beyond it) in bytes, from GlobalMemoryStatusEx (Windows)."""
    import ctypes

    class Status(ctypes.Structure):
        _fields_ = [("length", ctypes.c_uint32), ("load", ctypes.c_uint32)] + [
            (n, ctypes.c_uint64) for n in ("phys", "avail_phys", "page", "avail_page", "virt", "avail_virt",
                                           "avail_ext")]

    status = Status()
    status.length = ctypes.sizeof(status)
    if not ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
        raise OSError("GlobalMemoryStatusEx failed")
    return int(status.phys), max(0, int(status.page) - int(status.phys))


def total_ram() -> int | None:
    """Physical RAM in bytes (psutil's "total"), without psutil."""
    try:
        if sys.platform == "win32":
            return windows_memory()[0]
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
